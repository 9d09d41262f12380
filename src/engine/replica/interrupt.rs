//! Ctrl-C during an in-process replay: the first SIGINT or SIGTERM sets a flag that
//! the apply, seed and dump loops check, so the run stops at the next entry and
//! unwinds normally: every temporary file and directory (the on-disk store, the
//! half-written dump, the plan's temporaries) is removed by its owner's `Drop`.

use std::sync::atomic::{AtomicBool, Ordering};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);
static SIGNAL: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

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

/// The exit code for the signal received (128 + n; 130 for Ctrl-C).
pub fn exit_code() -> u8 {
    let s = SIGNAL.load(Ordering::SeqCst);
    if s > 0 {
        (128 + s).min(255) as u8
    } else {
        130
    }
}
