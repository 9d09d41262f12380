//! Ctrl-C during an in-process replay: the first SIGINT or SIGTERM sets a flag that
//! every long loop of the run checks (the plan's passes over the oplog, loading the
//! backup, applying entries, hashing, writing the dumps: see [`check`] and
//! [`EVERY`]), so the run stops within a fraction of a second and unwinds
//! normally: every temporary file and directory (the on-disk store, the
//! half-written dumps, the plan's temporaries) is removed by its owner's `Drop`.
//!
//! The exit code is 128 + the signal's number (130 for SIGINT, 143 for SIGTERM), as
//! for `--engine mongod` ([`crate::exec::signals::Cancel::exit_code`]).

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use super::ReplicaError;

static INTERRUPTED: AtomicBool = AtomicBool::new(false);
static SIGNAL: AtomicI32 = AtomicI32::new(0);

/// Loops over documents or entries check the flag once every this many items:
/// cheap (one relaxed load), and a few milliseconds apart even in a debug build.
pub const EVERY: u64 = 1024;

extern "C" fn on_signal(sig: libc::c_int) {
    // Only async-signal-safe work: two atomic stores.
    SIGNAL.store(sig, Ordering::SeqCst);
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Routes SIGINT and SIGTERM to the flag (for the whole process).
pub fn install() {
    // SAFETY: `on_signal` only stores to atomics, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
    }
}

/// Whether a signal asked the run to stop.
pub fn requested() -> bool {
    INTERRUPTED.load(Ordering::Relaxed)
}

/// `Err(Interrupted)` once a signal asked the run to stop: `check()?` in a loop.
pub fn check() -> Result<(), ReplicaError> {
    if requested() {
        Err(ReplicaError::Interrupted)
    } else {
        Ok(())
    }
}

/// The exit code for the signal received (128 + n: 130 for Ctrl-C, 143 for SIGTERM).
pub fn exit_code() -> u8 {
    let s = SIGNAL.load(Ordering::SeqCst);
    if s > 0 {
        (128 + s).min(255) as u8
    } else {
        130
    }
}

/// The signal's name for messages: `Ctrl-C (SIGINT)`, `SIGTERM`.
pub fn signal_name() -> &'static str {
    match SIGNAL.load(Ordering::SeqCst) {
        libc::SIGTERM => "SIGTERM",
        _ => "Ctrl-C (SIGINT)",
    }
}

/// For tests only: `PITR_TEST_SLOW_DOCUMENTS=<duration>` (e.g. `20ms`) pauses this
/// long every [`EVERY`] documents a loop over the replica's documents reads
/// (hashing, writing the dumps: [`super::Replica::for_each_document`]) and every
/// [`EVERY`] entries applied, so that a test can send a signal during phases that
/// otherwise take milliseconds, on any machine. Read once; unset (always, outside
/// tests), it costs one load per [`EVERY`] items.
pub fn test_pause() {
    static PAUSE: OnceLock<Option<Duration>> = OnceLock::new();
    let pause = PAUSE.get_or_init(|| {
        std::env::var("PITR_TEST_SLOW_DOCUMENTS")
            .ok()
            .and_then(|v| humantime::parse_duration(v.trim()).ok())
    });
    if let Some(d) = pause {
        std::thread::sleep(*d);
    }
}
