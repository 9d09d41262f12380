//! How failures reach the person at the terminal.
//!
//! Library modules return their own typed errors (thiserror). Each also says, through
//! [`Hint`], what the user can do about it. The CLI turns any of them into a
//! [`Failure`] and prints
//!
//! ```text
//! error: <what went wrong, with the offending value in backticks>
//! hint: <what to do about it>
//!   caused by: <the underlying error, one line per link of the chain>
//! ```

use std::error::Error as StdError;
use std::fmt;

/// Exit codes, documented in README.md and each command's --help.
pub mod exit {
    /// Success; for `find-drop`: something was found.
    pub const OK: u8 = 0;
    /// `find-drop`: nothing destructive was found (like grep); `verify`: a check failed.
    pub const NOT_FOUND: u8 = 1;
    /// Bad input, bad usage, or an operation that failed.
    pub const ERROR: u8 = 2;
}

/// What a user can do about an error. Implemented by every library error type.
pub trait Hint {
    fn hint(&self) -> Option<String> {
        None
    }
}

/// An error on its way to the terminal: message, optional hint, cause chain, exit code.
pub struct Failure {
    message: String,
    hint: Option<String>,
    cause: Option<Box<dyn StdError + Send + Sync + 'static>>,
    exit_code: u8,
}

fn is_broken_pipe(e: &(dyn StdError + 'static)) -> bool {
    let mut next = Some(e);
    while let Some(e) = next {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            if io.kind() == std::io::ErrorKind::BrokenPipe {
                return true;
            }
        }
        next = e.source();
    }
    false
}

impl Failure {
    /// A closed stdout (`pitr ... | head`) is not an error: the reader got what it wanted.
    pub fn is_broken_pipe(&self) -> bool {
        self.cause
            .as_deref()
            .is_some_and(|c| is_broken_pipe(c as &(dyn StdError + 'static)))
    }

    pub fn new(message: impl Into<String>) -> Failure {
        Failure {
            message: message.into(),
            hint: None,
            cause: None,
            exit_code: exit::ERROR,
        }
    }

    pub fn with_hint(mut self, hint: impl Into<String>) -> Failure {
        self.hint = Some(hint.into());
        self
    }

    pub fn with_cause(mut self, cause: impl StdError + Send + Sync + 'static) -> Failure {
        self.cause = Some(Box::new(cause));
        self
    }

    pub fn with_exit_code(mut self, code: u8) -> Failure {
        self.exit_code = code;
        self
    }

    /// Says where the failure happened, before its message (`member `shard1`: ...`),
    /// keeping the hint and the causes.
    pub fn in_context(mut self, context: impl fmt::Display) -> Failure {
        self.message = format!("{context}: {}", self.message);
        self
    }

    pub fn message(&self) -> &str {
        &self.message
    }

    pub fn hint(&self) -> Option<&str> {
        self.hint.as_deref()
    }

    pub fn exit_code(&self) -> u8 {
        self.exit_code
    }

    /// The causes, outermost first, as display strings.
    pub fn causes(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut next: Option<&(dyn StdError + 'static)> = self
            .cause
            .as_deref()
            .map(|e| e as &(dyn StdError + 'static));
        while let Some(e) = next {
            out.push(e.to_string());
            next = e.source();
        }
        out
    }

    /// The full text printed to stderr.
    pub fn render(&self) -> String {
        let mut s = format!("error: {}\n", self.message);
        if let Some(h) = &self.hint {
            s.push_str(&format!("hint: {h}\n"));
        }
        for c in self.causes() {
            // A link whose text the message already contains adds nothing.
            if !self.message.contains(&c) {
                s.push_str(&format!("  caused by: {c}\n"));
            }
        }
        s
    }
}

impl fmt::Debug for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render())
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// Any typed library error becomes a `Failure` carrying its hint; the error's own
/// sources become the printed cause chain.
impl<E: StdError + Hint + Send + Sync + 'static> From<E> for Failure {
    fn from(e: E) -> Failure {
        let message = e.to_string();
        let hint = e.hint();
        // Keep the error itself so its source chain is printed; `render` skips the
        // first link when it repeats the message.
        Failure {
            message,
            hint,
            cause: Some(Box::new(e)),
            exit_code: exit::ERROR,
        }
    }
}

impl Hint for std::io::Error {}
