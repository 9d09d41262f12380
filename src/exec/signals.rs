//! Cancellation: the first Ctrl-C (SIGINT) or SIGTERM to pitr asks every supervised
//! child to stop (SIGTERM to its group, then the grace period, then SIGKILL); a second
//! one escalates to SIGKILL at once.
//!
//! The [`Cancel`] token is an ordinary value, so tests and callers can trigger it
//! without sending signals; [`listen_for_signals`] connects it to the real ones.

use std::io;

use tokio::sync::watch;

/// How far cancellation has gone. Only ever increases.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum CancelLevel {
    /// Nothing asked yet.
    #[default]
    Running,
    /// Stop gracefully: SIGTERM, grace period, then SIGKILL.
    Stop,
    /// Stop now: SIGKILL without waiting out the grace period.
    Kill,
}

#[derive(Clone, Copy, Debug, Default)]
struct State {
    level: CancelLevel,
    /// The first signal that raised the level, for the exit code (128 + n).
    signal: Option<i32>,
}

/// A cancellation token shared by everything that waits on a child. Cloning shares it.
#[derive(Clone, Debug)]
pub struct Cancel {
    tx: watch::Sender<State>,
}

impl Default for Cancel {
    fn default() -> Self {
        Cancel::new()
    }
}

impl Cancel {
    pub fn new() -> Cancel {
        Cancel {
            tx: watch::Sender::new(State::default()),
        }
    }

    fn raise(&self, to: CancelLevel, signal: Option<i32>) {
        self.tx.send_if_modified(|s| {
            if s.signal.is_none() && signal.is_some() {
                s.signal = signal;
            }
            if to > s.level {
                s.level = to;
                true
            } else {
                false
            }
        });
    }

    /// Ask for a graceful stop (what the first Ctrl-C does).
    pub fn cancel(&self) {
        self.raise(CancelLevel::Stop, None);
    }

    /// Ask for SIGKILL now (what the second Ctrl-C does).
    pub fn escalate(&self) {
        self.raise(CancelLevel::Kill, None);
    }

    /// One step further, as a signal to pitr does: running → stop → kill.
    /// `signal` is remembered (the first one) for the exit code.
    pub fn request(&self, signal: Option<i32>) -> CancelLevel {
        let next = match self.level() {
            CancelLevel::Running => CancelLevel::Stop,
            _ => CancelLevel::Kill,
        };
        self.raise(next, signal);
        self.level()
    }

    pub fn level(&self) -> CancelLevel {
        self.tx.borrow().level
    }

    pub fn is_cancelled(&self) -> bool {
        self.level() >= CancelLevel::Stop
    }

    pub fn is_escalated(&self) -> bool {
        self.level() >= CancelLevel::Kill
    }

    /// The signal that cancelled, if a signal did.
    pub fn signal(&self) -> Option<i32> {
        self.tx.borrow().signal
    }

    /// The exit code a shell would show for pitr ended by that signal (130 for
    /// Ctrl-C), if cancelled by one.
    pub fn exit_code(&self) -> Option<u8> {
        self.signal().and_then(|s| u8::try_from(128 + s).ok())
    }

    async fn reach(&self, level: CancelLevel) {
        let mut rx = self.tx.subscribe();
        // The sender lives in `self`, so `wait_for` cannot fail while we wait.
        let _ = rx.wait_for(|s| s.level >= level).await;
    }

    /// Resolves once a stop (or kill) has been asked for; at once if it already was.
    pub async fn cancelled(&self) {
        self.reach(CancelLevel::Stop).await
    }

    /// Resolves once a kill has been asked for; at once if it already was.
    pub async fn escalated(&self) {
        self.reach(CancelLevel::Kill).await
    }
}

/// Called after each signal with the signal number and the level it raised the token
/// to, so the reporter can say "stopping ...; press Ctrl-C again to kill now".
pub type SignalNotice = Box<dyn Fn(i32, CancelLevel) + Send + 'static>;

/// Feeds SIGINT and SIGTERM to `cancel` for the rest of the process's life. Must be
/// called inside a tokio runtime.
///
/// Once installed, these signals no longer end pitr by themselves (tokio never
/// uninstalls a handler); pitr ends when the cancelled work has cleaned up. Children
/// do not see the terminal's Ctrl-C directly: each runs in its own process group, so
/// they are stopped only by the supervisor, in order, with the grace period.
pub fn listen_for_signals(cancel: &Cancel, notice: Option<SignalNotice>) -> io::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut int = signal(SignalKind::interrupt())?;
    let mut term = signal(SignalKind::terminate())?;
    let cancel = cancel.clone();
    tokio::spawn(async move {
        loop {
            let sig = tokio::select! {
                Some(()) = int.recv() => libc::SIGINT,
                Some(()) = term.recv() => libc::SIGTERM,
                else => break,
            };
            let level = cancel.request(Some(sig));
            if let Some(n) = &notice {
                n(sig, level);
            }
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn levels_only_go_up_and_keep_the_first_signal() {
        let c = Cancel::new();
        assert_eq!(c.level(), CancelLevel::Running);
        assert_eq!(c.exit_code(), None);
        assert_eq!(c.request(Some(libc::SIGINT)), CancelLevel::Stop);
        assert!(c.is_cancelled() && !c.is_escalated());
        assert_eq!(c.request(Some(libc::SIGTERM)), CancelLevel::Kill);
        assert!(c.is_escalated());
        c.cancel();
        assert_eq!(c.level(), CancelLevel::Kill);
        assert_eq!(c.signal(), Some(libc::SIGINT));
        assert_eq!(c.exit_code(), Some(130));
    }

    #[test]
    fn clones_share_the_token() {
        let a = Cancel::new();
        let b = a.clone();
        b.escalate();
        assert!(a.is_cancelled() && a.is_escalated());
        assert_eq!(a.signal(), None);
    }

    #[tokio::test]
    async fn waiters_wake_up() {
        let c = Cancel::new();
        let c2 = c.clone();
        let waiter = tokio::spawn(async move {
            c2.cancelled().await;
            c2.escalated().await;
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished());
        c.cancel();
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished());
        c.escalate();
        tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("woke up")
            .unwrap();
        // Already reached: resolves at once.
        c.cancelled().await;
    }
}
