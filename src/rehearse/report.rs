//! What a rehearsal found: the verdict, the point, the chain, the timings, and every
//! difference. `--json` prints [`RehearseReport`] (format `pitr-rehearse/1`); the text
//! form is the CLI's rendering of the same value.
//!
//! JSON keys: `format`, `pitr_version`, `result` (`passed`, `differences`, `error`),
//! `exit_code` (0, 1, 2), `target` (the URI, credentials redacted), `server`
//! (`version`, `standin`, `replica_set`, `snapshot_window_secs`,
//! `snapshot_window_source`), `at` (`ts` `"t:i"`, `utc`, `how`, `majority_ts`),
//! `backup` (`path`, `end_ts`, `end_utc`, `age_secs`), `oplog` (`source`, `entries`,
//! `first_ts`, `last_ts`), `recovery_window_secs` (backup end to the point: what the
//! chain can restore), `content` (`full` or `sample`), `sample_per_side`,
//! `timing` (`total_secs`, `oplog_read_secs`, `rebuild_secs`, `compare_secs`),
//! `rebuild` (`documents`, `memory_bytes`, `peak_memory_bytes`, `spilled_to_disk`),
//! `reads` (`commands`, `documents`, `bytes`, `documents_per_sec`, `retries`,
//! `retried`),
//! `documents_compared`, `documents_compared_per_sec`, `nothing_compared`, `namespaces` (one
//! [`NsResult`] each), `differences` (at most [`MAX_REPORTED`] of
//! [`Difference`]), `differences_total`, `not_compared` ([`NotCompared`]), `error`
//! (`message`, `hint`), `out` (with `--out`: `path`, `format`, `documents`,
//! `write_secs`, `namespaces`: [`OutNamespace`]), `metrics` (with `--metrics`:
//! `path`, `written`, `error`). New keys may be added within `pitr-rehearse/1`.

use serde::Serialize;

use crate::oplog::Ts;

/// The `format` of a rehearsal report.
pub const FORMAT: &str = "pitr-rehearse/1";

/// At most this many differences are listed (all are counted).
pub const MAX_REPORTED: usize = 1000;
/// At most this many documents' differences are listed per namespace.
pub const MAX_PER_NAMESPACE: u64 = 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Everything compared matched (exit 0).
    Passed,
    /// Something differs (exit 1).
    Differences,
    /// The rehearsal could not run (exit 2).
    Error,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct ServerFacts {
    pub version: Option<String>,
    /// The server says it is pitr's test stand-in (not MongoDB).
    pub standin: bool,
    pub replica_set: Option<String>,
    pub snapshot_window_secs: u64,
    /// `getParameter`, or why the default was assumed.
    pub snapshot_window_source: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct AtPoint {
    /// Inclusive: the state after every entry with `ts <= at`.
    pub ts: Ts,
    pub utc: String,
    /// How it was chosen.
    pub how: String,
    /// The newest majority-committed write when the rehearsal started.
    pub majority_ts: Option<Ts>,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct BackupFacts {
    pub path: String,
    pub end_ts: Option<Ts>,
    pub end_utc: Option<String>,
    /// Seconds from the backup's end to when the rehearsal started.
    pub age_secs: Option<u64>,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct OplogFacts {
    /// `server` (read from `--uri`), or the path given as --oplog.
    pub source: String,
    pub entries: Option<u64>,
    pub first_ts: Option<Ts>,
    pub last_ts: Option<Ts>,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Timing {
    pub total_secs: f64,
    pub oplog_read_secs: f64,
    pub rebuild_secs: f64,
    pub compare_secs: f64,
}

/// The rebuild in the embedded engine.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RebuildFacts {
    /// Documents in the rebuilt state.
    pub documents: u64,
    /// `--memory`: bytes of documents kept in memory before they move to disk.
    pub memory_bytes: u64,
    /// The most memory the documents held (the engine's estimate).
    pub peak_memory_bytes: u64,
    /// The documents outgrew `--memory` and moved to the on-disk store in `--work-dir`.
    pub spilled_to_disk: bool,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Reads {
    /// Commands sent to read production's data and catalog (each batch a command).
    pub commands: u64,
    pub documents: u64,
    pub bytes: u64,
    pub documents_per_sec: f64,
    /// Reads repeated after a transient error (a dropped connection, an election,
    /// a lost cursor), within the history window.
    pub retries: u64,
    /// What was retried and why (the first 20).
    pub retried: Vec<String>,
}

/// One namespace: what each side holds and what was compared.
#[derive(Clone, Debug, Serialize)]
pub struct NsResult {
    pub ns: String,
    /// `collection`, `timeseries` (its buckets are counted), `view`.
    pub kind: String,
    /// Documents (buckets for a time-series collection) in the rebuild; null when
    /// the namespace is not there.
    pub rebuild_documents: Option<u64>,
    /// The same in production as of the point.
    pub production_documents: Option<u64>,
    /// Documents compared byte for byte.
    pub compared: u64,
    pub differences: u64,
    /// `match`, `differs`, `not_compared`.
    pub status: String,
}

/// What differs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DiffKind {
    /// The rebuild has the namespace, production does not.
    MissingInProduction,
    /// Production has the namespace, the rebuild does not.
    MissingInRebuild,
    /// A collection on one side, a view or time-series collection on the other.
    Kind,
    /// Collection options (`listCollections` `options`).
    Options,
    /// The collection UUID.
    Uuid,
    IndexMissingInProduction,
    IndexMissingInRebuild,
    IndexDiffers,
    ViewDefinition,
    /// Document counts as of the point.
    Count,
    DocumentMissingInProduction,
    DocumentMissingInRebuild,
    DocumentDiffers,
}

/// A value of a differing field on both sides (only with `--show-values`).
#[derive(Clone, Debug, Serialize)]
pub struct PathValues {
    pub path: String,
    pub rebuild: String,
    pub production: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct Difference {
    pub ns: String,
    pub kind: DiffKind,
    /// The document's `_id` (relaxed extended JSON), for document differences.
    pub id: Option<String>,
    /// Field paths (documents), option names, or index names that differ.
    pub paths: Vec<String>,
    /// One sentence, values left out unless `--show-values`.
    pub detail: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub values: Option<Vec<PathValues>>,
}

#[derive(Clone, Debug, Serialize)]
pub struct NotCompared {
    pub ns: String,
    pub why: String,
}

/// A namespace written to `--out`.
#[derive(Clone, Debug, Serialize)]
pub struct OutNamespace {
    /// As users know it (`db.X` for a time-series collection).
    pub ns: String,
    /// `collection`, `timeseries`, `view`.
    pub kind: &'static str,
    pub documents: u64,
    /// Where its documents are (`db.system.buckets.X` for a time-series collection;
    /// null for a view): what `dbHash` is asked about after a restore.
    pub data_ns: Option<String>,
    /// The MD5 the server's `dbHash` gives for `data_ns` once restored (null for a
    /// view, or when the engine cannot predict it: string `_id`s under a collation).
    pub dbhash: Option<String>,
}

/// `--out`: the rebuilt state written as a dump.
#[derive(Clone, Debug, Serialize)]
pub struct OutFacts {
    pub path: String,
    /// `directory`, `directory (gzip)`, `archive`, `archive (gzip)`.
    pub format: &'static str,
    pub documents: u64,
    pub write_secs: f64,
    pub namespaces: Vec<OutNamespace>,
}

/// `--metrics`: whether the textfile was written.
#[derive(Clone, Debug, Serialize)]
pub struct MetricsFacts {
    pub path: String,
    pub written: bool,
    pub error: Option<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct ErrorRecord {
    pub message: String,
    pub hint: Option<String>,
}

/// See the module documentation.
#[derive(Clone, Debug, Serialize)]
pub struct RehearseReport {
    pub format: &'static str,
    pub pitr_version: &'static str,
    pub result: Verdict,
    pub exit_code: u8,
    pub target: String,
    pub server: ServerFacts,
    pub at: Option<AtPoint>,
    pub backup: BackupFacts,
    pub oplog: OplogFacts,
    pub recovery_window_secs: Option<u64>,
    pub content: &'static str,
    pub sample_per_side: Option<u64>,
    pub timing: Timing,
    pub rebuild: RebuildFacts,
    pub reads: Reads,
    pub documents_compared: u64,
    pub documents_compared_per_sec: f64,
    /// No namespace's documents were compared (each was left out, e.g. capped, or
    /// there were none): a pass then proves little, and the text verdict says so.
    pub nothing_compared: bool,
    pub namespaces: Vec<NsResult>,
    pub differences: Vec<Difference>,
    pub differences_total: u64,
    pub not_compared: Vec<NotCompared>,
    pub error: Option<ErrorRecord>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub out: Option<OutFacts>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metrics: Option<MetricsFacts>,
}

impl RehearseReport {
    pub fn new(target: String, content: &'static str, sample_per_side: Option<u64>) -> Self {
        RehearseReport {
            format: FORMAT,
            pitr_version: env!("CARGO_PKG_VERSION"),
            result: Verdict::Error,
            exit_code: crate::error::exit::ERROR,
            target,
            server: ServerFacts::default(),
            at: None,
            backup: BackupFacts::default(),
            oplog: OplogFacts::default(),
            recovery_window_secs: None,
            content,
            sample_per_side,
            timing: Timing::default(),
            rebuild: RebuildFacts::default(),
            reads: Reads::default(),
            documents_compared: 0,
            documents_compared_per_sec: 0.0,
            nothing_compared: false,
            namespaces: Vec::new(),
            differences: Vec::new(),
            differences_total: 0,
            not_compared: Vec::new(),
            error: None,
            out: None,
            metrics: None,
        }
    }

    /// Records a difference (listed while there is room; always counted).
    pub fn differ(&mut self, d: Difference) {
        self.differences_total += 1;
        if self.differences.len() < MAX_REPORTED {
            self.differences.push(d);
        }
    }
}
