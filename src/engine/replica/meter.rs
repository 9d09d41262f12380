//! How far a long loop of the engine has come (documents hashed, documents
//! written), for whoever reports progress: the loop advances a [`Meter`], from any
//! thread, and the reporter reads it on its own schedule. A relaxed atomic add per
//! document is all it costs the loop.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A shared count of work done; clones share it.
#[derive(Clone, Debug, Default)]
pub struct Meter(Arc<AtomicU64>);

impl Meter {
    pub fn new() -> Meter {
        Meter::default()
    }

    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }

    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}
