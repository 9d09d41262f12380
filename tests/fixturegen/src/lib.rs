//! pitr's test fixture generator (the `pitr-gen` binary of this test-only crate; it
//! is not part of the shipped `pitr`).
//!
//! From a seed it writes, byte for byte reproducibly, what an on-call engineer
//! would have in hand: a `mongodump --oplog` directory (`backup/`), the replica
//! set's oplog dumped a while later (`oplog.bson`, overlapping the backup's end),
//! with realistic modern (5.0-7.0) traffic and planted incidents, plus
//! `truth.json` saying exactly what was planted and what a correct restore must
//! contain (schema in [`truth`]).
//!
//! Files:
//! - [`bsonw`]: fast BSON encoding into a reused buffer;
//! - [`rng`], [`ids`]: seeded randomness, ObjectIds, UUIDs, sessions, live-id pools;
//! - [`shapes`]: what documents and updates look like;
//! - [`world`]: collections, counts, and the limits that keep normal traffic quiet;
//! - [`emit`]: entry layout, timestamps, wall clocks, the oplog files;
//! - [`traffic`]: background operations; [`mix`]: the bench's traffic mixes;
//!   [`script`]: incidents and decoys; [`routine`]: retryable writes, `$out`
//!   refreshes, TTL and time-series expiry; [`layout`]: the backup in every layout;
//! - [`scenario`]: the timeline of a run; [`dump`]: the backup directory;
//! - [`truth`]: `truth.json`; [`files`]: atomic output;
//! - [`cluster`]: a sharded cluster (`--scenario cluster`), one backup and oplog per member.

use std::path::PathBuf;
use std::time::Duration;

use pitr::error::Hint;

pub mod bsonw;
pub mod cluster;
pub mod dump;
pub mod emit;
pub mod files;
pub mod ids;
pub mod layout;
pub mod mix;
pub mod rng;
pub mod routine;
pub mod scenario;
pub mod script;
pub mod shapes;
pub mod traffic;
pub mod truth;
pub mod world;

/// What to generate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Scenario {
    /// A small oplog (a few hundred KB) with every kind of incident and decoy.
    Incident,
    /// About `--target-bytes` of heavy background traffic, the same incidents near the end.
    Bench,
    /// A sharded cluster: a config server and shards, one backup and oplog each, and
    /// `cluster.toml` (see [`cluster`]).
    Cluster,
}

impl Scenario {
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Incident => "incident",
            Scenario::Bench => "bench",
            Scenario::Cluster => "cluster",
        }
    }
}

/// Default `--start`: when the simulated backup begins.
pub const DEFAULT_START: &str = "2026-11-21T01:00:00Z";
/// [`DEFAULT_START`] in seconds since the epoch.
pub const DEFAULT_START_SECS: u32 = 1_795_222_800;
/// Default `--target-bytes` of the bench scenario (256 MiB).
pub const DEFAULT_BENCH_BYTES: u64 = 256 << 20;
/// The earliest accepted start (documents are born up to 30 days before it).
pub const MIN_START: u32 = 946_684_800; // 2000-01-01T00:00:00Z
/// The latest accepted start: leaves room for a long bench run before 2106.
pub const MAX_START: u32 = u32::MAX - 400 * 86_400;

/// Options of one run.
#[derive(Clone, Debug)]
pub struct Options {
    pub out: PathBuf,
    pub seed: u64,
    pub scenario: Scenario,
    /// Bench: approximate size of `oplog.bson` in bytes.
    pub target_bytes: u64,
    /// Seconds since the epoch when the backup starts.
    pub start: u32,
    /// Bench: the kind of background traffic (and field order).
    pub mix: mix::Mix,
}

/// What a run wrote.
#[derive(Clone, Debug)]
pub struct Summary {
    pub out: PathBuf,
    pub backup_collections: usize,
    pub backup_documents: u64,
    pub backup_oplog_entries: u64,
    pub oplog_entries: u64,
    pub oplog_bytes: u64,
    pub incidents: usize,
    pub decoys: usize,
    pub elapsed: Duration,
}

/// Why generation failed.
#[derive(Debug, thiserror::Error)]
pub enum GenError {
    #[error("`{}` exists and is not a directory", .0.display())]
    OutNotDir(PathBuf),
    #[error("refusing to write into `{}`: it holds `{entry}`, which gen-fixtures did not write", dir.display())]
    OutNotEmpty { dir: PathBuf, entry: String },
    #[error("{what} `{}`", path.display())]
    Io {
        what: String,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("internal error in the fixture generator: {0}")]
    Internal(String),
}

impl Hint for GenError {
    fn hint(&self) -> Option<String> {
        match self {
            GenError::OutNotDir(_) => {
                Some("pass a directory to --out (it is created if missing)".into())
            }
            GenError::OutNotEmpty { .. } => Some(
                "pass an empty or new directory to --out; a directory holding only a previous \
                 run's backup/, oplog.bson and truth.json is replaced"
                    .into(),
            ),
            GenError::Io { .. } => {
                Some("check the path, its permissions and the free disk space".into())
            }
            GenError::Internal(_) => {
                Some("please report this with the command line that caused it".into())
            }
        }
    }
}

/// Writes `backup/`, `oplog.bson` and `truth.json` into `opts.out` (for
/// [`Scenario::Cluster`], a cluster with the default shape: see [`cluster::generate`]).
pub fn generate(opts: &Options) -> Result<Summary, GenError> {
    if opts.scenario == Scenario::Cluster {
        let s = cluster::generate(&cluster::ClusterOptions {
            out: opts.out.clone(),
            seed: opts.seed,
            start: opts.start,
            shards: 2,
            idle_shards: 1,
            shape: cluster::ddl::DdlShape::V7,
            ddl: cluster::ddl::Ddl::Drop,
        })?;
        return Ok(Summary {
            out: s.out,
            backup_collections: 0,
            backup_documents: 0,
            backup_oplog_entries: 0,
            oplog_entries: s.entries,
            oplog_bytes: s.bytes,
            incidents: s.incidents,
            decoys: s.decoys,
            elapsed: s.elapsed,
        });
    }
    scenario::run(opts)
}
