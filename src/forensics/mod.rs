//! Finding the operations that destroyed data, and the exact restore limit for each.

pub mod burst;
pub mod catalog;
pub mod finding;
mod grouped;
pub mod namespaces;
pub mod routine;
#[cfg(test)]
mod routine_tests;
pub mod scanner;
pub mod timeline;
pub mod updates;

pub use burst::BurstRule;
pub use catalog::Catalog;
pub use finding::{Finding, Kind, Severity};
pub use routine::Routine;
pub use scanner::{ScanStats, Scanner};
