//! A filesystem without room, in the words of the command that found it
//! ([`Words`]: the replay's, the plan's, the rehearsal's), as an error and as the
//! check a plan asks for once its scan finds the oplog out of order.

use std::path::PathBuf;
use std::sync::Arc;

use crate::error::{exit, Failure, Hint};
use crate::plan::{PlanError, SortRoom};
use crate::replay::preflight::{self, Need, PreflightError};
pub(crate) use crate::replay::preflight::{Words, DUMP_OPLOG, PLAN, REHEARSE, REPLAY};

/// `e` as a failure (exit 2), a filesystem without room in `w`'s words.
pub(crate) fn failure(e: PreflightError, w: &Words) -> Failure {
    match e.in_words(w) {
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
            let (message, hint) = match e.in_words(w) {
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
