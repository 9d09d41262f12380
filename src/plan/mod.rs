//! `pitr plan`: check that a backup and an oplog cover a restore point, compute the
//! exact limit, write the oplog slice to replay, and list every step. Pure: no
//! processes, no network; it reads files and writes one output directory.
//!
//! Files: [`inventory`] (the backup directory), [`scan`] (first pass over an
//! oplog), [`until`] (the limit), [`coverage`] (gaps), [`slice`] (writing the
//! sorted, filtered slice), [`expect`] (expected counts), [`lint`] (preflight checks), [`steps`] (the
//! commands), [`build`] (putting it together), [`error`].
//!
//! # `plan.json` (format `pitr-plan/1`)
//!
//! [`RestorePlan`] is written to `<out>/plan.json` and printed by `--json`. Every
//! oplog position is the string `"t:i"`; every limit is EXCLUSIVE (entries with
//! `ts < limit` are applied). Top-level keys:
//!
//! - `format`: `"pitr-plan/1"`; `pitr_version`;
//! - `backup`: `dir` (absolute), `gzip`, `documents` (total in collections), `namespaces` (array of
//!   `{ns, kind: collection|view|index_catalog|not_restored, documents,
//!   no_id_documents, data_file, metadata_file, capped}`), `oplog` (the backup's own
//!   oplog as an [`OplogRange`], or null), `end_ts` (`"t:i"`: what the backup's data
//!   is complete up to), `end_source` (`backup_oplog` or `flag`), `ignored_files`;
//! - `oplog`: the replay oplog as an [`OplogRange`]: `path`, `entries`, `first_ts`,
//!   `last_ts`, `out_of_order`, `duplicates`, `sorted`, `truncated` (message or null);
//! - `until`: see [`until::UntilSection`] (`limit`, `exclusive: true`,
//!   `entry_at_limit`, `explanation`, ...);
//! - `coverage`: see [`coverage::Coverage`] (`mode`: `after_backup` or
//!   `within_backup_oplog`, `backup_end`, `limit`, `oplog_first`, `oplog_last`,
//!   `oplog_needed`, `anchored`);
//! - `ns_filter`: the `--ns` globs; `skips`: array of `{ts, entry, outcome:
//!   skipped|filtered_by_ns}`;
//! - `lint`: array of [`lint::LintItem`] (`severity`, `code`, `ts`, `ns`, `count`,
//!   `message`), errors first;
//! - `slice`: [`SliceSection`]: `dir`, `oplog_file`, `entries`, `bytes`, `first_ts`,
//!   `last_ts`, `from_exclusive` (= backup end), `to_exclusive` (= limit),
//!   `reordered` (pitr sorted it), `duplicates_dropped` (identical repeats),
//!   `same_ts_kept` (different entries sharing a ts), `filtered_out`, `skipped`,
//!   `after_backup_oplog` (the slice is in `restore/oplog.bson` after the backup's
//!   own entries: the one-run layout), `kept` (false: the embedded engine applied
//!   the entries as it read them and wrote no `oplog_file`);
//! - `stake`: [`stake::Stake`]: the critical and high incidents the restore replays
//!   (`incidents`) and the writes at or after the limit it leaves out (`lost`);
//! - `expected`: array of [`expect::ExpectedNs`] (`ns`, `exists`, `documents`,
//!   `backup_documents`, `num_records`), or null with `expected_note` saying why;
//! - `versions`: [`versions::Versions`]: the mongorestore and mongod releases whose
//!   rules the lint applied (`mongorestore`, `mongod`) and where each came from
//!   (`..._source`: `flag`, `binary`, `backup`, `default`);
//! - `restore`: [`steps::RestoreSpec`], the inputs of the step commands (`combined`:
//!   `backup_dir` is the plan's `restore/` directory, restored in one run);
//! - `steps`: array of [`steps::Step`] (`number`, `title`, `commands` as argv
//!   arrays with placeholders `<PORT>`, `<DBPATH>`, `<DUMP_DIR>`, `note`).
//!
//! New keys may be added; existing ones keep their meaning within `pitr-plan/1`.

pub mod build;
pub mod coverage;
pub mod error;
pub mod expect;
pub mod filter;
pub mod glance;
pub mod history;
pub mod inventory;
pub mod lint;
pub mod onerun;
pub mod scan;
pub mod slice;
pub mod stake;
pub mod steps;
pub mod tee;
pub mod timing;
pub use crate::oplog::ts_json;
pub mod until;
pub mod versions;

use serde::{Deserialize, Serialize};

use crate::engine::replica::Meter;
use crate::oplog::Ts;
use crate::stream::ByteCounter;

pub use build::{
    build, build_with_model, load_dump, sort_peak_bytes, ContentOptions, PlanRequest, SortRoom,
    OUT_FILES,
};
pub use coverage::{Coverage, Mode};
pub use error::PlanError;
pub use expect::ExpectedNs;
pub use inventory::{BackupNs, NsKind};
pub use lint::{LintItem, LintSeverity};
pub use scan::EntryRef;
pub use steps::{CommandValues, RestoreSpec, Step};
pub use until::{parse_until, UntilSection, UntilSpec};

/// The `format` value of this version of the plan.
pub const FORMAT: &str = "pitr-plan/1";

/// Progress reporting for the long phases of a plan and of an embedded replay
/// (the CLI draws a bar on a terminal, or logs a line now and then; tests stay
/// quiet). One reporter owns the terminal: implementations write to stderr only.
///
/// `Sync`: the backup's documents are loaded on a thread of their own while the
/// main thread writes the slice, and both report their phase.
pub trait Progress: Sync {
    /// A pass over one file begins; `counter` is the bytes read so far (of `total`,
    /// when known). The returned ticker is called every few thousand entries and
    /// dropped when the pass ends.
    fn pass(&self, what: &str, counter: ByteCounter, total: Option<u64>) -> Box<dyn FnMut() + '_>;

    /// [`Progress::pass`] over bytes of which `about` is an estimate (at least
    /// them): the running lines say "of about", and ending short of it is no
    /// shortfall. By default shown without a total.
    fn pass_about(
        &self,
        what: &str,
        counter: ByteCounter,
        about: Option<u64>,
    ) -> Box<dyn FnMut() + '_> {
        let _ = about;
        self.pass(what, counter, None)
    }

    /// A source is being opened before its pass (`source` as given: a bucket's
    /// listing and first GET may take a while). The returned callback is called
    /// with whether the open succeeded.
    fn opening(&self, source: &str) -> Box<dyn FnOnce(bool) + '_> {
        let _ = source;
        Box::new(|_| {})
    }

    /// What the restore keeps and loses is known (after the oplog's passes, before
    /// anything is applied): the place to show it, with the timeline.
    fn at_stake(&self, _stake: &stake::Stake, _timeline: &glance::Points<'_>) {}

    /// A long phase that is not a pass over one file (loading the backup's
    /// documents, hashing, writing a dump): the work advances `meter`, from any
    /// thread, towards `total` `unit`s (when known). The phase ends when the
    /// returned ticker is dropped; calling it is optional.
    fn phase(
        &self,
        what: &str,
        unit: Unit,
        total: Option<u64>,
        meter: &Meter,
    ) -> Box<dyn FnMut() + '_> {
        let _ = (what, unit, total, meter);
        Box::new(|| {})
    }

    /// [`Progress::phase`] for work on another thread that runs alongside the
    /// calling thread's phases (the backup's documents loaded while the slice is
    /// written): shown the same way while it runs, but its last line, which says
    /// how long the work itself took, waits until `after` is opened, so that a log
    /// reads in the order of a sequential run whichever side finishes first.
    fn phase_alongside(
        &self,
        what: &str,
        unit: Unit,
        total: Option<u64>,
        meter: &Meter,
        after: &Gate,
    ) -> Box<dyn FnMut() + '_> {
        let _ = after;
        self.phase(what, unit, total, meter)
    }
}

/// Opened once by one thread, waited for by others ([`Progress::phase_alongside`]).
/// Clones share it.
#[derive(Clone, Debug, Default)]
pub struct Gate(std::sync::Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>);

impl Gate {
    pub fn new() -> Gate {
        Gate::default()
    }

    /// Lets every waiter (present and future) go on.
    pub fn open(&self) {
        let (open, cv) = &*self.0;
        *open.lock().unwrap_or_else(|e| e.into_inner()) = true;
        cv.notify_all();
    }

    pub fn is_open(&self) -> bool {
        *self.0 .0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Returns once the gate is open.
    pub fn wait(&self) {
        let (open, cv) = &*self.0;
        let mut g = open.lock().unwrap_or_else(|e| e.into_inner());
        while !*g {
            g = cv.wait(g).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// What a [`Progress::phase`] counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    Bytes,
    Documents,
    Entries,
}

/// No progress output.
pub struct Quiet;

impl Progress for Quiet {
    fn pass(
        &self,
        _what: &str,
        _counter: ByteCounter,
        _total: Option<u64>,
    ) -> Box<dyn FnMut() + '_> {
        Box::new(|| {})
    }
}

/// A restore plan; see the module documentation for the JSON.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestorePlan {
    pub format: String,
    pub pitr_version: String,
    pub backup: BackupSection,
    pub oplog: OplogRange,
    pub until: UntilSection,
    pub coverage: Coverage,
    pub ns_filter: Vec<String>,
    pub skips: Vec<SkipOutcome>,
    pub lint: Vec<LintItem>,
    pub slice: SliceSection,
    pub expected: Option<Vec<ExpectedNs>>,
    pub expected_note: Option<String>,
    /// What the restore keeps and loses: incidents it replays, writes after the limit.
    #[serde(default)]
    pub stake: stake::Stake,
    /// The releases of mongorestore and mongod whose rules the lint applied, and
    /// where each came from.
    #[serde(default)]
    pub versions: Option<versions::Versions>,
    pub restore: RestoreSpec,
    pub steps: Vec<Step>,
    /// A cluster member's plan ([`PlanRequest::decided`]): the prepared (cross-shard)
    /// transactions open at the limit on this member, and how each was decided.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prepared_at_limit: Vec<PreparedAtLimit>,
}

/// A prepared transaction with parts before the limit and its `commitTransaction`
/// entry on this member at or after it (or none): in the restore iff its
/// `commitTimestamp` is before the limit (rule R2 of shared/reference/sharded-pitr.md).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreparedAtLimit {
    /// `lsid <id>, txnNumber N`.
    pub txn: String,
    /// Its first part on this member (the prepare, or the first `partialTxn`).
    #[serde(deserialize_with = "ts_json::de")]
    pub first: Ts,
    /// Namespaces it writes on this member.
    pub namespaces: Vec<String>,
    /// `commit`, `abort`, or `undecided` (no participant's oplog holds a decision).
    pub decision: String,
    #[serde(default, deserialize_with = "ts_json::de_opt")]
    pub commit_timestamp: Option<Ts>,
    /// Applied by this restore (its commitTimestamp is before the limit).
    pub included: bool,
}

impl RestorePlan {
    /// The exclusive limit.
    pub fn limit(&self) -> Ts {
        self.until.limit
    }

    /// Lint items of severity error: the replay would fail or lose data.
    pub fn lint_errors(&self) -> usize {
        self.lint
            .iter()
            .filter(|l| l.severity == LintSeverity::Error)
            .count()
    }

    /// Reads a `plan.json` back (for `pitr verify --expect` and `pitr replay`).
    pub fn from_json(text: &str) -> Result<RestorePlan, serde_json::Error> {
        serde_json::from_str(text)
    }
}

/// The backup. See the module documentation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackupSection {
    pub dir: String,
    pub gzip: bool,
    pub documents: u64,
    pub namespaces: Vec<BackupNs>,
    pub oplog: Option<OplogRange>,
    #[serde(deserialize_with = "ts_json::de")]
    pub end_ts: Ts,
    pub end_utc: String,
    /// `backup_oplog` (its own oplog's last entry) or `flag` (`--backup-end`).
    pub end_source: String,
    pub ignored_files: Vec<String>,
}

/// One oplog file: range and order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OplogRange {
    pub path: String,
    pub entries: u64,
    #[serde(default, deserialize_with = "ts_json::de_opt")]
    pub first_ts: Option<Ts>,
    #[serde(default, deserialize_with = "ts_json::de_opt")]
    pub last_ts: Option<Ts>,
    /// Entries whose ts is lower than their predecessor's.
    pub out_of_order: u64,
    /// Entries whose ts equals their predecessor's.
    pub duplicates: u64,
    /// `out_of_order == 0`.
    pub sorted: bool,
    /// With --allow-truncated: what was dropped at the end.
    pub truncated: Option<String>,
}

/// What happened to one `--skip`. `outcome`: `skipped` (left out of the slice) or
/// `filtered_by_ns` (`--ns` already left it out).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkipOutcome {
    #[serde(deserialize_with = "ts_json::de")]
    pub ts: Ts,
    pub entry: EntryRef,
    pub outcome: String,
}

/// The slice written. See the module documentation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SliceSection {
    pub dir: String,
    pub oplog_file: String,
    pub entries: u64,
    pub bytes: u64,
    #[serde(default, deserialize_with = "ts_json::de_opt")]
    pub first_ts: Option<Ts>,
    #[serde(default, deserialize_with = "ts_json::de_opt")]
    pub last_ts: Option<Ts>,
    #[serde(deserialize_with = "ts_json::de")]
    pub from_exclusive: Ts,
    #[serde(deserialize_with = "ts_json::de")]
    pub to_exclusive: Ts,
    pub reordered: bool,
    pub duplicates_dropped: u64,
    pub same_ts_kept: u64,
    pub filtered_out: u64,
    pub skipped: u64,
    /// The slice follows the backup's own entries in `oplog_file` (the one-run
    /// `restore/oplog.bson`; see [`steps::RestoreSpec`]).
    #[serde(default)]
    pub after_backup_oplog: bool,
    /// `oplog_file` was written and kept. False for the embedded engine's plan
    /// without `--keep-slice` ([`super::PlanRequest::keep_slice`]): its entries were
    /// applied as they were read, and `oplog_file` names where `pitr plan` (or
    /// `--keep-slice`) would write them. Plans made before this field: true.
    #[serde(default = "kept_by_default")]
    pub kept: bool,
}

fn kept_by_default() -> bool {
    true
}
