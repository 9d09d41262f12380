//! `pitr archive`: follow a replica set's oplog into an oplog archive directory
//! (the work is in [`crate::mongo::archiver`]), and `pitr archive prune` (in
//! [`crate::oplog::oplog_archive::prune`]). This file parses flags, shows progress
//! and renders results.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::error::{exit, Failure};
use crate::exec::signals::{listen_for_signals, Cancel};
use crate::mongo::archiver::{
    self, ArchiveObserver, ArchiveOutcome, ArchiveProgress, ArchiveRequest, ArchiveStart,
};
use crate::mongo::oplog_source::{RetryNotice, RetryPolicy};
use crate::mongo::{self as live};
use crate::oplog::oplog_archive::prune::{self, Protected, PruneOutcome};
use crate::oplog::oplog_archive::{ChunkRecord, Manifest};
use crate::oplog::{ReadOptions, Ts};
use crate::size::{human, parse_size};

use super::dump_oplog::retry_line;
use super::replay::parse_duration;

// No doc comment here: the one-line about comes from `Command::Archive` in `cli/mod.rs`.
#[derive(Debug, clap::Args)]
#[command(
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true,
    after_long_help = "\
Follows local.oplog.rs with a tailable cursor and keeps every entry, byte for byte, in DIR: \
compressed chunks (a new one every --chunk-size of oplog or --chunk-time, whichever comes \
first), each written under a temporary name, renamed into place when complete, then \
recorded in DIR/manifest.json (first and last t:i, entries, bytes, CRC-64). An archive \
directory is accepted wherever an oplog is (`--oplog DIR`, `pitr find-drop DIR`): pitr then \
reads only the chunks it needs.

Runs in the foreground until SIGTERM or Ctrl-C, then completes the chunk being written and \
exits 0 (run it as a service: docs/live-source-and-archive.md has a systemd unit). --once archives what the \
oplog holds now and exits (for cron).

Restarting continues right after the last archived entry: nothing twice, nothing skipped. \
If the oplog no longer reaches back that far, the GAP is recorded in the manifest with both \
positions and reported (a loud warning when following, exit 1 with --once) and archiving \
goes on from the oldest entry. If the server no longer has the last archived entry as \
archived (a ROLLBACK after a failover: compared by ts, term and bytes), the chunks from the \
divergence on are moved to DIR/set-aside/ and never read as history (reported likewise). \
Failovers, restarted members and dropped connections are retried (with backoff, without \
limit when following) and resumed without a gap.

Read-only: `find` on local.oplog.rs (plus hello/buildInfo), the same minimal role as \
dump-oplog (docs/live-source-and-archive.md). The read preference is the URI's, secondaryPreferred by default.

Progress: a status line on a terminal; otherwise a log line every --log-every (lag behind \
the newest entry, entries/s).

DIR may be a bucket prefix (s3://bucket/prefix, gs://, az://): complete chunks are \
uploaded, then recorded in manifest.json by conditional put; a second archiver on the \
prefix exits 2 naming the first (docs/object-storage.md).

Sharded cluster: --cluster FILE (a cluster.toml whose members have `uri`, as `pitr cluster \
discover` writes it) runs one archiver per member side by side, each following the member's \
own replica set into DIR/<member>/ (an ordinary archive: `pitr status --archive \
DIR/<member>`). A signal stops them all; a fatal error of one stops the others. Passwords: \
PITR_CLUSTER_PASSWORD (and PITR_CLUSTER_USER), never in the file.

Exit codes: 0 stopped cleanly (or --once complete); 1 --once recorded a gap or set a \
rolled-back history aside; 2 error.

Examples:
  PITR_URI='mongodb://archiver@db1,db2,db3/?replicaSet=rs0&authSource=admin' pitr archive --dir /backup/oplog
  pitr archive --dir /backup/oplog --once
  pitr archive --cluster cluster.toml --dir /backup/oplog
  pitr archive prune --dir /backup/oplog --keep 7d --backup /backup/nightly
  pitr status --archive /backup/oplog"
)]
pub struct ArchiveArgs {
    #[command(subcommand)]
    pub command: Option<ArchiveCommand>,
    /// MongoDB connection string of the replica set (password inside it, never on its own)
    #[arg(
        long,
        env = "PITR_URI",
        hide_env_values = true,
        value_name = "URI",
        required_unless_present = "cluster"
    )]
    pub uri: Option<String>,
    /// A sharded cluster's cluster.toml (members with `uri`): one archive per member,
    /// each followed from the member's own replica set, in DIR/<member>/
    #[arg(long, value_name = "FILE")]
    pub cluster: Option<PathBuf>,
    /// The archive directory (created if missing; must be empty or an archive), or a
    /// bucket prefix (s3://, gs://, az://): see docs/object-storage.md
    #[arg(long, value_name = "DIR", required = true)]
    pub dir: Option<PathBuf>,
    /// Start a new chunk after this much oplog (BSON bytes, before compression)
    #[arg(long, value_name = "SIZE", default_value = "64MiB", value_parser = parse_chunk_size)]
    pub chunk_size: u64,
    /// Start a new chunk after this long
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = parse_duration)]
    pub chunk_time: Duration,
    /// Archive what the oplog holds now, then exit
    #[arg(long)]
    pub once: bool,
    /// Warn in the log (at most once an hour) when the archive directory's filesystem
    /// would fill within this at the archive's growth over its last week
    #[arg(long, value_name = "DURATION", default_value = "2d", value_parser = parse_duration)]
    pub min_disk_time: Duration,
    /// Without a terminal, print a progress line this often
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_duration)]
    pub log_every: Duration,
    /// How long each getMore waits for new entries (maxAwaitTimeMS)
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_duration, hide = true)]
    pub await_time: Duration,
    /// Entries per server batch (default: the server's choice)
    #[arg(long, value_name = "N", hide = true, value_parser = clap::value_parser!(u32).range(1..))]
    pub batch_size: Option<u32>,
}

fn parse_chunk_size(s: &str) -> Result<u64, String> {
    let n = parse_size(s).map_err(|e| format!("{e}; e.g. `64MiB`"))?;
    if n == 0 {
        return Err(format!("`{s}`: a chunk must hold something"));
    }
    Ok(n)
}

#[derive(Debug, clap::Subcommand)]
pub enum ArchiveCommand {
    /// Delete chunks older than --keep, except what a given backup needs to reach the present
    Prune(PruneArgs),
}

#[derive(Debug, clap::Args)]
#[command(after_long_help = "\
Deletes the chunks whose newest entry is older than --keep, oldest first, but never one \
that a --backup still needs to be rolled forward to the present (every chunk from the one \
holding the backup's end on), and never the newest chunk (where the archiver resumes). A \
backup schedule plus `pitr archive` then gives a recovery window as long as --keep. Safe to \
run from cron while `pitr archive` runs (the manifest is changed under a lock).

Examples:
  pitr archive prune --dir /backup/oplog --keep 7d
  pitr archive prune --dir /backup/oplog --keep 7d --backup /backup/nightly/2026-11-20 --dry-run")]
pub struct PruneArgs {
    /// The archive directory, or a bucket prefix
    #[arg(long, value_name = "DIR")]
    pub dir: PathBuf,
    /// Keep chunks with entries from the last DURATION (e.g. 7d, 36h)
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub keep: Duration,
    /// A backup (mongodump directory or archive, with its oplog) that must stay restorable
    /// to the present; repeatable
    #[arg(long, value_name = "DIR|ARCHIVE")]
    pub backup: Vec<PathBuf>,
    /// Only say what would be deleted
    #[arg(long)]
    pub dry_run: bool,
}

pub fn run(a: ArchiveArgs) -> Result<u8, Failure> {
    match a.command {
        Some(ArchiveCommand::Prune(p)) => run_prune(p),
        None => run_follow(a),
    }
}

/// What `pitr archive` asks of every archiver: chunking, --once, retries.
pub(crate) fn request(a: &ArchiveArgs, dir: crate::storage::Location) -> ArchiveRequest {
    ArchiveRequest {
        dir,
        chunk_bytes: a.chunk_size,
        chunk_time: a.chunk_time,
        once: a.once,
        min_disk: a.min_disk_time,
        await_time: a.await_time,
        batch_size: a.batch_size,
        retry: if a.once {
            RetryPolicy::default()
        } else {
            // A service rides out outages: retry for as long as it runs.
            RetryPolicy {
                max_attempts: u32::MAX,
                first_delay: Duration::from_millis(250),
                max_delay: Duration::from_secs(10),
            }
        },
    }
}

fn run_follow(a: ArchiveArgs) -> Result<u8, Failure> {
    if let Some(file) = a.cluster.clone() {
        return super::archive_cluster::run(&file, a);
    }
    let (Some(uri), Some(dir)) = (a.uri.clone(), a.dir.clone()) else {
        return Err(Failure::new(
            "`pitr archive` needs --uri (or PITR_URI) and --dir",
        ));
    };
    let dir = crate::storage::Location::of_path(&dir)?;
    let req = request(&a, dir);
    let log_every = a.log_every;
    let outcome = live::block_on(async move {
        let cancel = Cancel::new();
        let stopping = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stopping.clone();
        listen_for_signals(
            &cancel,
            Some(Box::new(move |_sig, _level| {
                flag.store(true, std::sync::atomic::Ordering::Relaxed);
            })),
        )?;
        let (client, topology) = super::progress::connect_saying(&uri, true).await?;
        let mut obs = CliObserver::new(log_every);
        let r = archiver::run(&client, &topology, &req, &cancel, &mut obs).await;
        obs.finish();
        if stopping.load(std::sync::atomic::Ordering::Relaxed) {
            eprintln!(
                "{}stopped by signal; the chunk being written was completed",
                stamp()
            );
        }
        client.close().await;
        Ok::<_, Failure>((r?, req))
    })??;
    let (o, req) = outcome;
    render_outcome(&o, &req.dir);
    Ok(
        if a.once && (!o.gaps.is_empty() || !o.set_aside.is_empty()) {
            exit::NOT_FOUND
        } else {
            exit::OK
        },
    )
}

pub(crate) fn render_outcome(o: &ArchiveOutcome, dir: &crate::storage::Location) {
    println!(
        "archived {} ({} of BSON) into {} in {}",
        crate::table::counted(o.entries, "entry", "entries"),
        human(o.bson_bytes),
        crate::table::counted(o.chunks.len() as u64, "chunk", "chunks"),
        dir
    );
    println!("{}", coverage_line(&o.manifest));
    for g in &o.gaps {
        println!(
            "GAP recorded: entries after {} ({}) and before {} ({}) may be missing",
            g.after,
            g.after.utc_string(),
            g.before,
            g.before.utc_string()
        );
    }
    for s in &o.set_aside {
        println!(
            "ROLLBACK: entries from {} to {} set aside in {} ({})",
            s.diverged_at,
            s.through,
            dir.join(&s.dir),
            s.detail
        );
    }
}

/// `the archive covers F (utc) to L (utc): N entries in K chunks, X`
pub(crate) fn coverage_line(m: &Manifest) -> String {
    match (m.first(), m.last()) {
        (Some(f), Some(l)) => format!(
            "the archive covers {f} ({}) to {l} ({}): {} in {}, {}{}",
            f.utc_string(),
            l.utc_string(),
            crate::table::counted(m.entries(), "entry", "entries"),
            crate::table::counted(m.chunks.len() as u64, "chunk", "chunks"),
            human(m.bytes()),
            match m.gaps.len() {
                0 => String::new(),
                n => format!(", {}", crate::table::counted(n as u64, "gap", "gaps")),
            }
        ),
        _ => "the archive is empty".to_string(),
    }
}

/// `2026-11-21T03:12:00Z ` for log lines (none on a terminal).
pub(crate) fn stamp() -> String {
    if std::io::stderr().is_terminal() {
        String::new()
    } else {
        format!(
            "{} ",
            chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        )
    }
}

/// Progress on stderr: a status line on a terminal, a log line every `every`
/// otherwise; warnings and chunk completions as lines.
pub(crate) struct CliObserver {
    bar: Option<ProgressBar>,
    /// `member `shard0`: ` before every line when several archivers share stderr.
    prefix: String,
    every: Duration,
    last_line: Instant,
    since_line: (u64, Instant),
    started: Instant,
    max_lag: Duration,
    latest: ArchiveProgress,
}

impl CliObserver {
    /// One of several archivers sharing stderr: log lines only, each after `prefix`.
    pub(crate) fn prefixed(every: Duration, prefix: String) -> CliObserver {
        let mut o = CliObserver::new(every);
        if let Some(b) = o.bar.take() {
            b.finish_and_clear();
        }
        o.prefix = prefix;
        o
    }

    fn new(every: Duration) -> CliObserver {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            if let Ok(style) = ProgressStyle::with_template("{spinner} archiving {msg}") {
                bar.set_style(style);
            }
            bar.enable_steady_tick(Duration::from_millis(200));
            bar
        });
        CliObserver {
            bar,
            prefix: String::new(),
            every,
            last_line: Instant::now(),
            since_line: (0, Instant::now()),
            started: Instant::now(),
            max_lag: Duration::ZERO,
            latest: ArchiveProgress::default(),
        }
    }

    fn say(&self, line: &str) {
        match &self.bar {
            Some(b) => b.println(line),
            None => eprintln!("{}{}{line}", stamp(), self.prefix),
        }
    }

    pub(crate) fn finish(&mut self) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        } else if self.latest.entries > 0 {
            self.log_line();
        }
    }

    fn status(&self, p: &ArchiveProgress, rate: f64) -> String {
        format!(
            "{} ({}), {rate:.0} entries/s, {}; lag {}{}; {} written",
            crate::table::counted(p.entries, "entry", "entries"),
            human(p.bson_bytes),
            p.last
                .map(|l| format!("last {l} ({})", l.utc_string()))
                .unwrap_or_else(|| "nothing yet".into()),
            lag_text(p.lag),
            if p.caught_up { " (caught up)" } else { "" },
            crate::table::counted(p.chunks, "chunk", "chunks")
        )
    }

    fn log_line(&mut self) {
        let (n0, t0) = self.since_line;
        let secs = t0.elapsed().as_secs_f64().max(0.001);
        let rate = (self.latest.entries - n0) as f64 / secs;
        let line = format!(
            "archive: {}; max lag {} since the last line",
            self.status(&self.latest, rate),
            lag_text(Some(self.max_lag))
        );
        eprintln!("{}{}{line}", stamp(), self.prefix);
        self.since_line = (self.latest.entries, Instant::now());
        self.last_line = Instant::now();
        self.max_lag = Duration::ZERO;
    }
}

fn lag_text(l: Option<Duration>) -> String {
    match l {
        Some(d) => format!("{:.2} s", d.as_secs_f64()),
        None => "unknown".into(),
    }
}

impl ArchiveObserver for CliObserver {
    fn started(&mut self, s: &ArchiveStart) {
        let from = match s.last {
            Some(l) => format!("after {l} ({}), the last archived entry", l.utc_string()),
            None => "the oldest entry of the oplog (new archive)".to_string(),
        };
        let until = match s.end {
            Some(e) => format!(
                " up to {e} ({}), the newest entry now (--once)",
                e.utc_string()
            ),
            None => ", following new entries until stopped".to_string(),
        };
        self.say(&format!(
            "archiving into {} ({} so far) from {from}{until}",
            s.dir,
            crate::table::counted(s.chunks as u64, "chunk", "chunks")
        ));
    }

    fn progress(&mut self, p: &ArchiveProgress) {
        self.latest = p.clone();
        if let Some(l) = p.lag {
            self.max_lag = self.max_lag.max(l);
        }
        match &self.bar {
            Some(b) => {
                let secs = self.started.elapsed().as_secs_f64().max(0.001);
                b.set_message(self.status(p, p.entries as f64 / secs));
            }
            None => {
                if self.last_line.elapsed() >= self.every {
                    self.log_line();
                }
            }
        }
    }

    fn chunk(&mut self, c: &ChunkRecord) {
        // The final chunk is completed after the last progress report.
        self.latest.chunks += 1;
        self.say(&format!(
            "chunk {} written: {} entries from {} to {} ({}, {} compressed)",
            c.file,
            c.entries,
            c.first,
            c.last,
            human(c.bson_bytes),
            human(c.bytes)
        ));
    }

    fn retrying(&mut self, n: &RetryNotice<'_>) {
        self.say(&retry_line(n));
    }

    fn warning(&mut self, msg: &str) {
        self.say(&format!("warning: {msg}"));
    }

    fn note(&mut self, msg: &str) {
        self.say(&format!("note: {msg}"));
    }
}

// ---------------------------------------------------------------------------------
// prune

fn run_prune(a: PruneArgs) -> Result<u8, Failure> {
    let dir = crate::storage::Location::of_path(&a.dir)?;
    let mut protect = Vec::new();
    for b in &a.backup {
        protect.push(Protected {
            name: b.display().to_string(),
            end: backup_end(b)?,
        });
    }
    let now = chrono::Utc::now().timestamp().max(0) as u64;
    let cutoff_secs = now.saturating_sub(a.keep.as_secs());
    let cutoff = Ts::new(u32::try_from(cutoff_secs).unwrap_or(u32::MAX), 0);
    let o = prune::prune_at(&dir, cutoff, &protect, a.dry_run)?;
    render_prune(&o, &a, cutoff);
    Ok(exit::OK)
}

fn render_prune(o: &PruneOutcome, a: &PruneArgs, cutoff: Ts) {
    let verb = if a.dry_run { "would delete" } else { "deleted" };
    let bytes: u64 = o.deleted.iter().map(|c| c.bytes).sum();
    match (o.deleted.first(), o.deleted.last()) {
        (Some(f), Some(l)) => println!(
            "{verb} {} ({}) with entries from {} ({}) to {} ({}), older than {} ({})",
            crate::table::counted(o.deleted.len() as u64, "chunk", "chunks"),
            human(bytes),
            f.first,
            f.first.utc_string(),
            l.last,
            l.last.utc_string(),
            cutoff,
            cutoff.utc_string()
        ),
        _ => println!(
            "nothing to delete: no chunk ends before {} ({})",
            cutoff,
            cutoff.utc_string()
        ),
    }
    for (c, why) in o.kept_old.iter().take(1) {
        println!(
            "kept {} and later although older than --keep: needed by {why}",
            c.file
        );
    }
    for s in &o.deleted_set_aside {
        println!(
            "{verb} the set-aside history {} ({} to {})",
            s.dir, s.diverged_at, s.through
        );
    }
    for f in &o.leftovers {
        println!(
            "deleted {f}, a chunk file no manifest names (left by an interrupted prune, or an upload whose archiver stopped first)"
        );
    }
    for (p, first) in &o.uncovered {
        println!(
            "warning: backup `{}` ends at {} ({}), before the archive's first entry {first} ({}): \
             the archive cannot roll it forward",
            p.name,
            p.end,
            p.end.utc_string(),
            first.utc_string()
        );
    }
    if let Some(m) = &o.manifest {
        let m = if a.dry_run {
            let mut m = m.clone();
            m.chunks.drain(..o.deleted.len());
            m
        } else {
            m.clone()
        };
        println!("{}", coverage_line(&m));
    }
}

/// The end of a backup: the last entry of its own oplog (a mongodump directory's
/// `oplog.bson`, or the oplog inside a mongodump archive).
fn backup_end(path: &Path) -> Result<Ts, Failure> {
    let no_oplog = || {
        Failure::new(format!(
            "the backup `{}` has no oplog, so its end is unknown",
            path.display()
        ))
        .with_hint(
            "prune protects a backup from its end on; pass backups made with `mongodump --oplog`",
        )
    };
    let mut last: Option<Ts> = None;
    // A backup in a bucket: a prefix is a directory backup, an object an archive.
    let is_dir = match crate::storage::Location::of_path(path)? {
        crate::storage::Location::Local(p) => p.is_dir(),
        loc => matches!(
            crate::storage::global().stat(&loc)?,
            crate::storage::Found::Prefix(_)
        ),
    };
    if is_dir {
        let b = crate::backup::open(path)?;
        let Some(oplog) = b.oplog else {
            return Err(no_oplog());
        };
        let mut r = crate::oplog::open(&oplog.to_string_lossy(), ReadOptions::default())?;
        while let Some(e) = r.next_entry()? {
            last = Some(last.map_or(e.ts, |l: Ts| l.max(e.ts)));
        }
    } else {
        let mut r = crate::archive::open(
            &path.to_string_lossy(),
            crate::archive::ReadOptions::default(),
        )?;
        while let Some(ev) = r.next_event()? {
            if let crate::archive::Event::Document(d) = ev {
                if d.namespace.is_oplog() {
                    if let Some((t, _)) = crate::oplog::elements::peek_ts_op(d.bytes) {
                        last = Some(last.map_or(t, |l: Ts| l.max(t)));
                    }
                }
            }
        }
    }
    last.ok_or_else(no_oplog)
}

#[cfg(test)]
mod tests {
    use crate::cli::Cli;
    use clap::Parser;

    /// Valid and invalid command lines of `pitr archive` and `pitr status --archive`.
    #[test]
    fn command_lines() {
        let uri_in_env = std::env::var_os("PITR_URI").is_some();
        let cases: &[(&str, bool)] = &[
            ("pitr archive --uri mongodb://h/ --dir d", true),
            (
                "pitr archive --uri mongodb://h/ --dir d --once --chunk-size 16MiB --chunk-time 5m",
                true,
            ),
            (
                "pitr archive --uri mongodb://h/ --dir d --chunk-size 0",
                false,
            ),
            (
                "pitr archive --uri mongodb://h/ --dir d --chunk-size lots",
                false,
            ),
            (
                "pitr archive --uri mongodb://h/ --dir d --chunk-time 0s",
                false,
            ),
            (
                "pitr archive --uri mongodb://h/ --dir d --chunk-time soon",
                false,
            ),
            ("pitr archive --uri mongodb://h/", false),
            ("pitr archive prune --dir d --keep 7d", true),
            (
                "pitr archive prune --dir d --keep 7d --backup b1 --backup b2 --dry-run",
                true,
            ),
            ("pitr archive prune --dir d", false),
            ("pitr archive prune --keep 7d", false),
            ("pitr archive --dir d prune --dir d --keep 7d", false),
            ("pitr status --archive d", true),
            ("pitr status --archive d --uri mongodb://h/ --json", true),
        ];
        for (line, valid) in cases {
            let r = Cli::try_parse_from(line.split_whitespace());
            assert_eq!(r.is_ok(), *valid, "{line}: {r:?}");
        }
        if !uri_in_env {
            assert!(Cli::try_parse_from(["pitr", "archive", "--dir", "d"]).is_err());
        }
    }
}
