//! Signals to whole process groups, and "is it still there?" checks.
//!
//! Every child is started as the leader of its own group (pgid = its pid), so a tool
//! that starts helpers of its own (a shell wrapper, a forked worker) is stopped with
//! everything it started.

use std::io;

/// SIGTERM, SIGKILL, ... as used here.
pub use libc::{SIGINT, SIGKILL, SIGTERM};

/// Sends `signal` to every process in group `pgid`. A group that no longer exists is
/// not an error: whatever we wanted gone is gone.
pub fn signal_group(pgid: u32, signal: i32) -> io::Result<()> {
    // kill(0, ..) would signal our own group and kill(-1, ..) every process we may
    // signal: never let a bad id get that far.
    let Ok(id) = i32::try_from(pgid) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "pgid out of range",
        ));
    };
    if id <= 1 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("refusing to signal process group {id}"),
        ));
    }
    // SAFETY: kill(2) has no memory-safety preconditions.
    if unsafe { libc::kill(-id, signal) } == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::ESRCH) {
        Ok(())
    } else {
        Err(e)
    }
}

/// Whether any process (zombies included) is still in group `pgid`.
pub fn group_exists(pgid: u32) -> bool {
    match i32::try_from(pgid) {
        // SAFETY: signal 0 only checks for existence.
        Ok(id) if id > 1 => unsafe { libc::kill(-id, 0) == 0 },
        _ => false,
    }
}

/// Whether `pid` is a live process: exists and is not a zombie. Zombies count as
/// dead because a killed grandchild is re-parented to PID 1, which in a container
/// may never reap it.
pub fn is_running(pid: u32) -> bool {
    let Ok(id) = i32::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 only checks for existence.
    let exists = unsafe { libc::kill(id, 0) } == 0
        || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
    if !exists {
        return false;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesised command name, which may hold spaces.
        Ok(stat) => match stat.rfind(')') {
            Some(i) => !matches!(stat[i + 1..].trim_start().chars().next(), Some('Z' | 'X')),
            None => true,
        },
        // No /proc (not Linux): existence is all we can know.
        Err(_) => true,
    }
}

/// A signal's usual name, for messages.
pub fn signal_name(signal: i32) -> Option<&'static str> {
    Some(match signal {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_dangerous_group_ids() {
        assert!(signal_group(0, 0).is_err());
        assert!(signal_group(1, 0).is_err());
        assert!(signal_group(u32::MAX, 0).is_err());
        assert!(!group_exists(0));
        assert!(!group_exists(1));
    }

    #[test]
    fn we_are_running() {
        assert!(is_running(std::process::id()));
        assert_eq!(signal_name(libc::SIGSEGV), Some("SIGSEGV"));
        assert_eq!(signal_name(1000), None);
    }
}
