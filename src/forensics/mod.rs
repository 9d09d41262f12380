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
pub mod seen;
pub mod timeline;
pub mod updates;

pub use burst::BurstRule;
pub use catalog::Catalog;
pub use finding::{Finding, Kind, Severity};
pub use routine::Routine;
pub use scanner::{MetadataDelete, ScanStats, Scanner};

/// The hash maps on the scan's hot path (by namespace, by transaction): foldhash,
/// the hasher hashbrown itself defaults to, in place of std's SipHash, which
/// showed as 5% of a find-drop profile. Its HashDoS resistance buys nothing here:
/// the keys come from the oplog being read, not from an attacker in a loop.
pub(crate) type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
pub(crate) type FastSet<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;
