//! A filesystem without room, in the words of the command that found it: the
//! replay's `PreflightError::NoSpace` names `--out` and `--workdir`, but `pitr
//! rehearse` has a `--work-dir` and `pitr plan` no work dir at all.

use crate::error::{exit, Failure};
use crate::replay::preflight::PreflightError;

/// How a command speaks of a filesystem without room.
pub(crate) struct Words {
    /// Who writes there: "the rehearsal", "the plan".
    pub who: &'static str,
    /// The hint's way out: "give --work-dir (and --out) on a larger filesystem".
    pub elsewhere: &'static str,
}

/// The message and the hint of `e` when it is a filesystem without room; other
/// errors as they are.
pub(crate) fn message(e: PreflightError, w: &Words) -> Result<(String, String), PreflightError> {
    use crate::size::human;
    let PreflightError::NoSpace {
        dir,
        needed,
        free,
        what,
    } = e
    else {
        return Err(e);
    };
    Ok((
        format!(
            "not enough free space on the filesystem of `{}`: {} writes about {} there ({what}), {} are free",
            dir.display(),
            w.who,
            human(needed),
            human(free)
        ),
        format!(
            "free some space, or {}; the estimate is generous: --no-space-check skips it",
            w.elsewhere
        ),
    ))
}

/// [`message`] as a failure (exit 2).
pub(crate) fn failure(e: PreflightError, w: &Words) -> Failure {
    match message(e, w) {
        Ok((message, hint)) => Failure::new(message)
            .with_hint(hint)
            .with_exit_code(exit::ERROR),
        Err(e) => e.into(),
    }
}
