//! A filesystem without room, in the words of the command that found it: the
//! replay's `PreflightError::NoSpace` names `--out` and `--workdir`, but `pitr
//! rehearse` has a `--work-dir` and `pitr plan` no work dir at all. [`REPLAY`]
//! gives exactly `PreflightError::NoSpace`'s text.

use std::path::PathBuf;
use std::sync::Arc;

use crate::error::{exit, Failure, Hint};
use crate::plan::{PlanError, SortRoom};
use crate::replay::preflight::{self, Need, PreflightError};

/// How a command speaks of a filesystem without room.
pub(crate) struct Words {
    /// Who writes there: "the rehearsal", "the plan".
    pub who: &'static str,
    /// The hint's way out, with what to know of the estimate.
    pub way_out: &'static str,
    /// Where an oplog out of order is sorted: "the work dir".
    pub sort_place: &'static str,
}

/// `pitr replay`'s (and `replay --cluster`'s) words, as `PreflightError::NoSpace`.
pub(crate) const REPLAY: Words = Words {
    who: "the replay",
    way_out: "put --out and --workdir on a larger filesystem; the estimate is generous (a drop makes the \
              output smaller)",
    sort_place: "the work dir",
};

/// `pitr plan`'s (and `plan --cluster`'s) words: no work dir.
pub(crate) const PLAN: Words = Words {
    who: "the plan",
    way_out: "give --out on a larger filesystem; the estimate is generous",
    sort_place: "the plan's directory",
};

/// `pitr rehearse`'s words: its flag is `--work-dir`.
pub(crate) const REHEARSE: Words = Words {
    who: "the rehearsal",
    way_out: "give --work-dir (and --out) on a larger filesystem; the estimate is generous",
    sort_place: "the work dir",
};

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
            "free some space, or {}: --no-space-check skips it",
            w.way_out
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
/// the slice is sorted.
pub(crate) fn sort_room(
    needs: impl Fn(u64) -> Vec<Need> + Send + Sync + 'static,
    w: &'static Words,
) -> SortRoom {
    let place = w.sort_place;
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

/// [`sort_room`] for a run whose own needs were checked (or not) before the plan
/// (a cluster member, a rehearsal): the sorted slice and its runs in `work`, plus
/// `store` bytes of the engine's on-disk store that the rebuild still writes
/// there, against what is free in `work` when the scan finds the oplog out of
/// order.
pub(crate) fn sort_room_in(work: PathBuf, store: u64, w: &'static Words) -> SortRoom {
    let what = match store {
        0 => "the sorted slice",
        _ => "the sorted slice and the engine's on-disk store",
    };
    sort_room(
        move |sorted| {
            vec![Need {
                dir: work.clone(),
                bytes: sorted + store,
                what: what.into(),
            }]
        },
        w,
    )
}
