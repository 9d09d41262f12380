//! How far a long loop of the engine has come (documents hashed, documents
//! written), for whoever reports progress: the loop advances a [`Meter`], from any
//! thread, and the reporter reads it on its own schedule. A relaxed atomic add per
//! document is all it costs the loop.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// A shared count of work done; clones share it.
#[derive(Clone, Debug, Default)]
pub struct Meter(Arc<Shared>);

#[derive(Debug, Default)]
struct Shared {
    done: AtomicU64,
    cut_short: AtomicBool,
}

impl Meter {
    pub fn new() -> Meter {
        Meter::default()
    }

    pub fn add(&self, n: u64) {
        self.0.done.fetch_add(n, Ordering::Relaxed);
    }

    pub fn get(&self) -> u64 {
        self.0.done.load(Ordering::Relaxed)
    }

    /// The loop stopped before its end (an error, said next by its caller): a
    /// reporter's last line says where it stopped, not what it did. Needed where
    /// the work has no total to fall short of.
    pub fn cut_short(&self) {
        self.0.cut_short.store(true, Ordering::Relaxed);
    }

    pub fn was_cut_short(&self) -> bool {
        self.0.cut_short.load(Ordering::Relaxed)
    }
}
