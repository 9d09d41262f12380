//! A filesystem without room, in the words of the command that found it: the
//! replay's `PreflightError::NoSpace` names `--out` and `--workdir`, but `pitr
//! rehearse` has a `--work-dir` and `pitr plan` no work dir at all.

use std::sync::Arc;

use crate::error::{exit, Failure, Hint};
use crate::plan::{PlanError, SortRoom};
use crate::replay::preflight::{self, Need, PreflightError};

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

/// The check a plan asks for once its scan finds the oplog out of order
/// ([`crate::plan::PlanRequest::sort_room`]): `needs`, given the bytes the sort
/// writes at its peak, against the disks, refused in `w`'s words and saying where
/// the slice is sorted (`place`: "the work dir").
pub(crate) fn sort_room(
    needs: impl Fn(u64) -> Vec<Need> + Send + Sync + 'static,
    place: &'static str,
    w: &'static Words,
) -> SortRoom {
    SortRoom(Arc::new(move |sorted| {
        preflight::check_space(&needs(sorted)).map_err(|e| {
            let (message, hint) = match message(e, w) {
                Ok(x) => x,
                Err(e) => (e.to_string(), e.hint().unwrap_or_default()),
            };
            PlanError::NoRoom {
                message: format!(
                    "the oplog is out of order, so its slice is sorted in {place} first: {message}"
                ),
                hint,
            }
        })
    }))
}
