//! `pitr-gen`: writes synthetic backups and oplogs with planted incidents and their
//! ground truth (see the `pitr_fixturegen` library). A test-only tool: it is not part
//! of the shipped `pitr` binary.

use std::path::PathBuf;

use std::process::ExitCode;

use clap::Parser;
use pitr::error::Failure;
use pitr::size::parse_size;
use pitr_fixturegen::cluster::{
    self,
    ddl::{Ddl, DdlShape},
    ClusterOptions,
};
use pitr_fixturegen::layout::{self, Layout};
use pitr_fixturegen::mix::Mix;
use pitr_fixturegen::{
    self as generator, Options, Scenario, DEFAULT_BENCH_BYTES, DEFAULT_START, MAX_START, MIN_START,
};

#[derive(Debug, Parser)]
#[command(
    name = "pitr-gen",
    about = "Write realistic synthetic oplogs and mongodump directories with planted incidents (test-only)",
    after_long_help = "Writes DIR/backup/ (a mongodump --oplog directory), DIR/oplog.bson (the \
        replica set's oplog, overlapping the backup's end) and DIR/truth.json (what was planted; \
        schema in tests/fixturegen/src/truth.rs). The same seed always gives the same bytes.\n\n\
        Examples:\n  \
        pitr-gen --out fixtures/incident --seed 7 --start 2026-11-21T01:00:00Z\n  \
        pitr-gen --out bench-data/1g --scenario bench --target-bytes 1GiB\n  \
        pitr-gen --out bench-data/oltp --scenario bench --target-bytes 1GiB --mix oltp\n  \
        pitr-gen --out fixtures/cluster --scenario cluster --shards 2 --ddl-shape v7\n\n\
        --scenario cluster writes DIR/cluster.toml, DIR/<member>/backup/ and DIR/<member>/oplog.bson \
        for the config server and each shard, and DIR/truth.json (schema in \
        tests/fixturegen/src/cluster/truth.rs)."
)]
pub struct GenArgs {
    /// Output directory: created if missing; must be empty or hold a previous run's output
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Seed of the random stream
    #[arg(long, value_name = "N", default_value_t = 7)]
    pub seed: u64,
    /// What to generate
    #[arg(long, value_enum, default_value_t = Scenario::Incident)]
    pub scenario: Scenario,
    /// Bench only: approximate size of oplog.bson (bytes, or with K/M/G/KiB/MiB/GiB) [default: 256MiB]
    #[arg(long, value_name = "BYTES")]
    pub target_bytes: Option<String>,
    /// Bench only: the kind of traffic (see tests/fixturegen/src/mix.rs)
    #[arg(long, value_enum, default_value_t = Mix::Current)]
    pub mix: Mix,
    /// When the simulated backup starts (RFC 3339)
    #[arg(long, value_name = "RFC3339", default_value = DEFAULT_START)]
    pub start: String,
    /// Also write the backup in these layouts beside backup/: gzip (backup-gzip/),
    /// archive (backup.archive), archive-gzip (backup-gzip.archive)
    #[arg(long, value_enum, value_delimiter = ',', value_name = "LAYOUT")]
    pub layouts: Vec<Layout>,
    /// Cluster only: shards that own chunks
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u8).range(2..=16))]
    pub shards: Option<u8>,
    /// Cluster only: shards that own nothing (only periodic no-ops)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u8).range(0..=4))]
    pub idle_shards: Option<u8>,
    /// Cluster only: the DDL shapes to write (v7: non-primary shards drop with
    /// fromMigrate; v5: plain drops everywhere)
    #[arg(long, value_enum, value_name = "SHAPE")]
    pub ddl_shape: Option<DdlShape>,
    /// Cluster only: the destructive DDL at 200 s (drop: `shop.orders`;
    /// drop-database: `shop`, and no movePrimary after it; rename-over: `shop.events`
    /// renamed over `shop.orders`)
    #[arg(long, value_enum, value_name = "DDL")]
    pub ddl: Option<Ddl>,
}

fn parse_start(s: &str) -> Result<u32, Failure> {
    let d = chrono::DateTime::parse_from_rfc3339(s.trim()).map_err(|e| {
        Failure::new(format!("`{s}` is not an RFC 3339 time"))
            .with_hint("give --start like 2026-11-21T01:00:00Z")
            .with_cause(e)
    })?;
    let secs = d.timestamp();
    if secs < MIN_START as i64 || secs > MAX_START as i64 {
        return Err(
            Failure::new(format!("--start `{s}` is out of range")).with_hint(
                "give a time between 2000-01-01 and 2104 (oplog seconds are unsigned 32-bit)",
            ),
        );
    }
    Ok(secs as u32)
}

fn main() -> ExitCode {
    match run(GenArgs::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            eprint!("{}", f.render());
            ExitCode::from(f.exit_code())
        }
    }
}

fn run(a: GenArgs) -> Result<(), Failure> {
    let target_bytes = match (&a.target_bytes, a.scenario) {
        (Some(_), Scenario::Incident | Scenario::Cluster) => {
            return Err(
                Failure::new("--target-bytes only applies to --scenario bench")
                    .with_hint("drop --target-bytes, or add --scenario bench"),
            )
        }
        (Some(s), Scenario::Bench) => {
            let n = parse_size(s).map_err(|e| {
                Failure::new(e.to_string()).with_hint(
                    "give --target-bytes as a number of bytes, optionally with K, M, G, KiB, MiB or GiB (e.g. 1073741824 or 1GiB)",
                )
            })?;
            if n < 1 << 20 {
                return Err(Failure::new(format!("--target-bytes `{s}` is too small"))
                    .with_hint("the bench scenario needs at least 1MiB (its incidents alone take a few hundred KB)"));
            }
            n
        }
        (None, _) => DEFAULT_BENCH_BYTES,
    };
    let cluster_flags =
        a.shards.is_some() || a.idle_shards.is_some() || a.ddl_shape.is_some() || a.ddl.is_some();
    if a.scenario == Scenario::Cluster {
        if !a.layouts.is_empty() || a.mix != Mix::Current {
            return Err(
                Failure::new("--layouts and --mix do not apply to --scenario cluster")
                    .with_hint("drop them; the cluster's backups are directories"),
            );
        }
        return run_cluster(&a);
    }
    if cluster_flags {
        return Err(Failure::new(
            "--shards, --idle-shards, --ddl-shape and --ddl only apply to --scenario cluster",
        )
        .with_hint("drop them, or add --scenario cluster"));
    }
    if a.mix != Mix::Current && a.scenario != Scenario::Bench {
        return Err(Failure::new("--mix only applies to --scenario bench")
            .with_hint("drop --mix, or add --scenario bench"));
    }
    let opts = Options {
        out: a.out,
        seed: a.seed,
        scenario: a.scenario,
        target_bytes,
        start: parse_start(&a.start)?,
        mix: a.mix,
    };
    let s = generator::generate(&opts)?;
    let secs = s.elapsed.as_secs_f64();
    let mbps = if secs > 0.0 {
        s.oplog_bytes as f64 / 1e6 / secs
    } else {
        0.0
    };
    println!(
        "wrote {}: backup/ ({} collections, {} documents, {} oplog entries), oplog.bson ({} entries, {} bytes), \
         truth.json ({} incidents, {} decoys) in {:.2}s ({:.0} MB/s)",
        s.out.display(),
        s.backup_collections,
        s.backup_documents,
        s.backup_oplog_entries,
        s.oplog_entries,
        s.oplog_bytes,
        s.incidents,
        s.decoys,
        secs,
        mbps
    );
    for l in a.layouts.iter().filter(|l| **l != Layout::Dir) {
        let dest = opts.out.join(l.file_name());
        let stale = if dest.is_dir() {
            std::fs::remove_dir_all(&dest)
        } else {
            std::fs::remove_file(&dest)
        };
        match stale {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(
                    Failure::new(format!("cannot replace `{}`", dest.display())).with_cause(e)
                )
            }
        }
        layout::convert(&opts.out.join("backup"), *l, &dest)?;
        println!("wrote {} ({l:?} layout of backup/)", dest.display());
    }
    Ok(())
}

fn run_cluster(a: &GenArgs) -> Result<(), Failure> {
    let opts = ClusterOptions {
        out: a.out.clone(),
        seed: a.seed,
        start: parse_start(&a.start)?,
        shards: a.shards.unwrap_or(2) as usize,
        idle_shards: a.idle_shards.unwrap_or(1) as usize,
        shape: a.ddl_shape.unwrap_or(DdlShape::V7),
        ddl: a.ddl.unwrap_or_default(),
    };
    let s = cluster::generate(&opts)?;
    println!(
        "wrote {}: cluster.toml, {} members (backup/ and oplog.bson each, {} oplog entries, {} bytes), \
         truth.json ({} incidents, {} decoys) in {:.2}s",
        s.out.display(),
        s.members,
        s.entries,
        s.bytes,
        s.incidents,
        s.decoys,
        s.elapsed.as_secs_f64()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_start_in_seconds() {
        assert_eq!(
            parse_start(DEFAULT_START).unwrap(),
            pitr_fixturegen::DEFAULT_START_SECS
        );
    }

    #[test]
    fn starts() {
        assert_eq!(parse_start("2026-11-21T01:00:00Z").unwrap(), 1_795_222_800);
        assert!(parse_start("yesterday").is_err());
        assert!(parse_start("1969-01-01T00:00:00Z").is_err());
    }
}
