//! Finding the operations that destroyed data, and the exact restore limit for each.

pub mod burst;
pub mod finding;
pub mod namespaces;
pub mod scanner;
pub mod timeline;
pub mod updates;

pub use burst::BurstRule;
pub use finding::{Finding, Kind, Severity};
pub use scanner::{ScanStats, Scanner};
