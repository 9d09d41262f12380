//! The slice applied while it is written (whole documents: the embedded engine).
//!
//! Sequentially, an embedded replay writes the slice (read from the oplog, written,
//! synced), then reads it back to apply it. Here this thread writes the slice as
//! before, and hands each entry it writes to a thread of its own
//! ([`crate::plan::tee`]), which seeds the model from the backup, applies the
//! backup's own oplog, then applies the slice's entries as they come: the same
//! bytes in the same order as the file, so the same model, lint and outcome.
//!
//! Errors come out as in the sequential order (slice, what is at stake, seeding,
//! backup oplog, slice applied): when the slice fails, its error is the plan's and
//! the apply stops (the seeding at its next check, the apply at the missing end
//! mark); when the apply fails, the slice is still written to its end (its error
//! would come first) and the apply's error is the plan's. A Ctrl-C stops both.
//!
//! The log: the loading, the backup oplog's apply and the slice's writing run at
//! once, each with its own lines; the slice's apply ends after the slice's last
//! line and what is at stake (its last line waits for them).
//!
//! Only when the oplog is in ts order (its slice is streamed, not sorted) and no
//! one-run file is written; `PITR_SLICE=file` turns it off (to measure, or to
//! compare).

use std::path::Path;

use super::*;
use crate::plan::tee::{self, SliceStream};
use crate::plan::timing::PhaseTimer;

/// What the two threads made.
pub(super) struct Streamed {
    pub slice: SliceOutcome,
    pub stake: Stake,
    pub model: Model,
    pub linter: Linter,
    pub walker: Walker,
    /// The backup oplog's first entry at or after the limit.
    pub found: Option<EntryRef>,
}

/// Whether this plan applies its slice as it is written.
pub(super) fn applies(
    req: &PlanRequest,
    oplog: &OplogScan,
    point: &Point,
    layout: &Layout,
) -> bool {
    req.content.is_some()
        && oplog.out_of_order == 0
        && point.coverage.mode == Mode::AfterBackup
        && point.coverage.oplog_needed
        && !layout.linked_one_run
        && std::env::var_os("PITR_SLICE").is_none_or(|v| v != "file")
}

/// The slice written on this thread while another seeds the model and applies both
/// oplogs. `None` when no second thread can be had: the caller goes on
/// sequentially, nothing done yet.
#[allow(clippy::too_many_arguments)]
pub(super) fn run(
    req: &PlanRequest,
    opts: ReadOptions,
    (backup, oplog): (&BackupRead, &OplogScan),
    point: &Point,
    (layout, f): (&Layout, Option<&NsFilter>),
    out: &OutDir,
    (progress, timer): (&dyn Progress, &PhaseTimer),
) -> Result<Option<Streamed>, PlanError> {
    let Some(c) = &req.content else {
        return Ok(None);
    };
    let (tee, stream) = tee::pair();
    let alongside = Alongside {
        goes_on: true,
        ..Alongside::default()
    };
    // About, and at most, the bytes the slice will hold (with --ns, more).
    let slice_bytes = oplog.sizes.between(backup.end, point.until.limit);
    let untouched = untouched(backup, oplog);
    let cold = cold_hint(backup, &untouched);
    let side = Side {
        req,
        c,
        inv: &backup.inv,
        rules: &backup.rules,
        cold,
        layout: (layout, f),
        backup_end: backup.end,
        limit: point.until.limit,
        own_oplog: backup.own_oplog_replayed(),
        // Without --ns, the progress's estimate.
        total: f.is_none().then_some(slice_bytes),
        slice_bytes,
        name: out.path.join("oplog.bson").display().to_string(),
        progress,
        alongside: &alongside,
    };
    std::thread::scope(|s| {
        let spawned = std::thread::Builder::new()
            .name("pitr-apply".into())
            .spawn_scoped(s, move || {
                let clock = ThreadClock::start();
                (side.apply(stream), clock.took())
            });
        let Ok(handle) = spawned else {
            return Ok(None);
        };
        let release = ReleaseOnDrop(&alongside);
        let sliced = slice_and_stake(
            req,
            opts,
            (backup, oplog),
            point,
            (layout, f),
            out,
            (progress, Some(tee)),
        );
        timer.mark("slice written");
        alongside.release(sliced.is_err());
        drop(release);
        let (applied, (wall, cpu)) = handle
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        timer.note(&format!(
            "the backup's documents loaded and both oplogs applied in {wall:.3} s ({cpu:.3} s cpu) on a thread of their own, alongside the slice"
        ));
        let (slice, stake) = sliced?;
        let (model, linter, walker, found) = applied?;
        // The loading thread's own malloc arena kept what it freed past the budget.
        crate::memory::give_back_freed_heap();
        Ok(Some(Streamed {
            slice,
            stake,
            model,
            linter,
            walker,
            found,
        }))
    })
}

/// What the applying thread needs.
struct Side<'a> {
    req: &'a PlanRequest,
    c: &'a ContentOptions,
    inv: &'a Inventory,
    rules: &'a Rules,
    cold: Option<ColdHint<'a>>,
    layout: (&'a Layout, Option<&'a NsFilter>),
    backup_end: Ts,
    limit: Ts,
    own_oplog: Option<&'a Path>,
    total: Option<u64>,
    /// [`Model::expect_writes`], by [`replay_backup_part`].
    slice_bytes: u64,
    /// How errors name the slice.
    name: String,
    progress: &'a dyn Progress,
    alongside: &'a Alongside,
}

type Applied = (Model, Linter, Walker, Option<EntryRef>);

impl Side<'_> {
    fn apply(self, stream: SliceStream) -> Result<Applied, PlanError> {
        let (req, progress) = (self.req, self.progress);
        let mut model = seed_content(
            req,
            self.c,
            (self.inv, self.cold),
            self.layout,
            progress,
            Some(self.alongside),
        )?;
        let mut linter = Linter::new(self.rules);
        // What `Layout::with_slice` says once the slice is written, if it holds an
        // entry (the lint reads it only for the slice's entries; set again then).
        linter.set_second_run(self.layout.0.second_run_with_slice());
        let mut walker = Walker::new(self.rules.mongorestore.clone());
        let found = replay_backup_part(
            req,
            (self.own_oplog, self.slice_bytes),
            self.limit,
            &mut walker,
            &mut linter,
            &mut model,
            progress,
        )?;
        let source = SliceSource {
            entries: oplog::OplogReader::new(self.name, stream, ReadOptions::default()),
            total: (self.total, true),
            after: Some(&self.alongside.after),
        };
        let r = slice_entries(
            source,
            self.backup_end,
            self.limit,
            &mut walker,
            &mut linter,
            &mut model,
            progress,
        );
        settled(&mut model, r)?;
        Ok((model, linter, walker, found))
    }
}
