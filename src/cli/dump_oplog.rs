//! `pitr dump-oplog`: copy `local.oplog.rs` of a replica set to `DIR/oplog.bson`
//! (gzip content with `--gzip`), read-only and resumable. The work is in [`crate::mongo::dump`];
//! this file parses flags, shows progress and renders the result.
//!
//! It also holds [`TsProgress`], the progress (a bar, or log lines) over an oplog `ts` range that
//! every live read (`dump-oplog`, `find-drop --uri`) shows on stderr.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::error::{exit, Failure};
use crate::mongo::dump::{self, DumpObserver, DumpPlan, DumpRequest, DumpTo};
use crate::mongo::oplog_source::{Progress, RetryNotice, RetryPolicy};
use crate::mongo::{self as live};
use crate::oplog::Ts;
use crate::size::human;
use crate::time::{parse_time, TimeValue};

// No doc comment here: the one-line about comes from `Command::DumpOplog` in `cli/mod.rs`.
#[derive(Debug, clap::Args)]
#[command(after_long_help = "\
Writes DIR/oplog.bson, the entries of local.oplog.rs with --since <= ts < --until, in \
oplog order, byte for byte as the server stores them: ready for `mongorestore --oplogReplay \
DIR` (copy it next to a mongodump backup as oplog.bson, or pass it with --oplogFile). With \
--gzip the file holds gzip content under the same name, exactly as `mongodump --oplog --gzip` \
writes it: restore with `mongorestore --oplogReplay --gzip DIR`. Without --until the dump ends at the newest entry present \
when it starts, so it ends even on a busy server.

Read-only: pitr runs only `find` on local.oplog.rs (plus hello/buildInfo, and collStats for \
its size); the minimal role is in docs/live-source-and-archive.md. The read preference is the URI's, secondaryPreferred by default.

Safety: entries go to oplog.bson.partial (the plan to oplog.bson.partial.json) and the file \
is renamed only when the dump is complete. If the dump stops (network, Ctrl-C, a crash), run \
the same command with --resume: it keeps the complete entries of the partial file and \
continues after the last one; the result is byte-identical to an uninterrupted dump. \
Transient errors are retried (5 times in a row, backoff from 0.25 s to 8 s) before giving up. \
Before anything is read, --out's filesystem must have room for the range, estimated from the \
oplog's size and the time the range spans (not for a bucket URL, nor with --resume; \
--no-space-check skips it). With --gzip the compressed size is not known ahead: a range that \
would not fit uncompressed gets a warning saying how much smaller gzip must make it.

Object storage: with --out s3://bucket/prefix (gs://, az://; a file:// URL is a local DIR) the entries are \
streamed to PREFIX/oplog.bson as they are read (one multipart upload, with bounded \
memory), which becomes readable only once the dump is complete: an in-progress marker \
first, `.pitr-dump.json` listing the object last. Nothing is written on this machine, so \
no local room is needed. The prefix must hold nothing. Such a dump cannot be resumed: one \
that stops (an error, Ctrl-C) leaves nothing there; for a long dump over an unreliable \
link, dump to a local DIR (resumable) and upload it after. Credentials: the standard \
chains (docs/object-storage.md).

Rollover: if the oplog no longer reaches back to --since (or to where an interrupted dump \
stopped), the dump fails with both positions; --allow-gap continues with a warning. If the \
capped oplog overtakes the dump (CappedPositionLost), it stops and says where.

Time values: T:I, T, epoch seconds, RFC 3339 with Z or an offset, oid:<hex>.

Sharded cluster: --cluster FILE (a cluster.toml whose members have `uri`, as `pitr cluster \
discover` writes it) dumps every member's oplog from its own replica set, all side by \
side, into DIR/<member>/oplog.bson (each as above: temporary name, --resume, --since/--until \
for all), then writes DIR/cluster.toml: the members' backups and uris as in FILE, each \
member's oplog = [\"<member>/oplog.bson\"], ready for `plan --cluster`. With --resume, \
members already complete are kept. Passwords: PITR_CLUSTER_PASSWORD (and PITR_CLUSTER_USER), \
never in the file.

Examples:
  pitr dump-oplog --uri 'mongodb://backup@db1,db2,db3/?replicaSet=rs0&authSource=admin' --out dump/
  PITR_URI='mongodb://...' pitr dump-oplog --out dump/ --since 1795741200:1 --gzip
  pitr dump-oplog --out dump/ --resume
  pitr dump-oplog --cluster cluster.toml --out dump/")]
pub struct DumpOplogArgs {
    /// MongoDB connection string of a replica set member (password inside it, never on its own)
    #[arg(
        long,
        env = "PITR_URI",
        hide_env_values = true,
        value_name = "URI",
        required_unless_present = "cluster"
    )]
    pub uri: Option<String>,
    /// A sharded cluster's cluster.toml (members with `uri`): dump every member's oplog
    /// from its own replica set into DIR/<member>/ and write DIR/cluster.toml
    #[arg(long, value_name = "FILE")]
    pub cluster: Option<PathBuf>,
    /// Directory to write oplog.bson into (created if missing), or a bucket URL
    /// (s3://, gs://, az://) to stream it to
    #[arg(long, value_name = "DIR|URL")]
    pub out: PathBuf,
    /// First position to dump, inclusive
    #[arg(long, value_name = "TIME", value_parser = parse_time)]
    pub since: Option<TimeValue>,
    /// Stop before this position (exclusive)
    #[arg(long, value_name = "TIME", value_parser = parse_time)]
    pub until: Option<TimeValue>,
    /// Compress oplog.bson with gzip (the name stays oplog.bson, as `mongodump --oplog --gzip`)
    #[arg(long)]
    pub gzip: bool,
    /// Continue an interrupted dump in DIR after its last complete entry
    #[arg(long)]
    pub resume: bool,
    /// Continue when the oplog no longer reaches back to the start point (the dump then has a gap)
    #[arg(long)]
    pub allow_gap: bool,
    /// Skip the check that --out's filesystem has room for the dump (estimated before
    /// reading from the oplog's size and the time the range spans)
    #[arg(long)]
    pub no_space_check: bool,
    /// Entries per server batch (default: the server's choice)
    #[arg(long, value_name = "N", hide = true, value_parser = clap::value_parser!(u32).range(1..))]
    pub batch_size: Option<u32>,
}

pub fn run(a: DumpOplogArgs) -> Result<u8, Failure> {
    if let Some(file) = a.cluster.clone() {
        return super::dump_oplog_cluster::run(&file, a);
    }
    let Some(uri) = a.uri.clone() else {
        return Err(Failure::new("no --uri given")
            .with_hint("pass --uri mongodb://... (or set PITR_URI), or --cluster cluster.toml for a sharded cluster"));
    };
    let to = match crate::storage::Location::of_path(&a.out)? {
        crate::storage::Location::Local(p) => DumpTo::Dir(p),
        url => DumpTo::Bucket(url),
    };
    let req = DumpRequest {
        to,
        since: a.since.as_ref().map(|v| v.ts),
        until: a.until.as_ref().map(|v| v.ts),
        gzip: a.gzip,
        resume: a.resume,
        allow_gap: a.allow_gap,
        batch_size: a.batch_size,
        retry: RetryPolicy::default(),
    };
    dump::check_request(&req)?;
    // A dump to a bucket needs no local room: it is streamed there.
    let room_dir = match &req.to {
        DumpTo::Dir(d) => Some(crate::replay::preflight::nearest_existing(d)),
        DumpTo::Bucket(url) => {
            crate::backup::upload::check_new(url)?;
            eprintln!(
                "pitr dump-oplog: the dump is streamed to {url} as it is read, and readable there only once complete (all or nothing)"
            );
            None
        }
    };
    let check = !(a.no_space_check || a.resume);
    let result = live::block_on(async move {
        let (client, topology) = super::progress::connect_saying(&uri, true).await?;
        let room = match room_dir.filter(|_| check) {
            Some(dir) if req.gzip => {
                warn_gzip_room(&client, &req, &dir).await;
                Ok(())
            }
            Some(dir) => check_room(&client, &req, &dir).await,
            None => Ok(()),
        };
        if let Err(e) = room {
            // Closed, not dropped, on this path too (`verify::connect::close`).
            client.close().await;
            return Err(e);
        }
        let mut obs = CliObserver::default();
        let outcome = tokio::select! {
            r = dump::dump(&client, &topology, &req, &mut obs) => r.map_err(Failure::from),
            _ = tokio::signal::ctrl_c() => Err(interrupted(&req)),
        };
        obs.finish();
        drop(obs);
        client.close().await;
        outcome
    })?;
    let outcome = result?;
    let p = &outcome.plan;
    println!(
        "wrote {}: {} entries ({} of BSON{}), {}",
        outcome.at,
        outcome.entries,
        human(outcome.bson_bytes),
        if a.gzip {
            format!(", {} compressed", human(outcome.file_bytes))
        } else {
            String::new()
        },
        match (outcome.first, outcome.last) {
            (Some(f), Some(l)) =>
                format!("ts {f} ({}) to {l} ({})", f.utc_string(), l.utc_string()),
            _ => "no entries in the range".to_string(),
        }
    );
    println!(
        "range: from {}{}, up to {} (inclusive, the newest entry when the dump started)",
        p.since.map_or_else(
            || "the oldest entry".to_string(),
            |s| format!("{s} (inclusive)")
        ),
        p.until
            .map_or_else(String::new, |u| format!(" to before {u} (exclusive)")),
        p.end
    );
    if let Some(rp) = &p.resumed {
        println!(
            "resumed after {} entries already in the partial file",
            rp.entries
        );
    }
    Ok(exit::OK)
}

/// Refused before anything is read (unless `--no-space-check` or `--resume`;
/// `--gzip` gets [`warn_gzip_room`]): `dir` (where `--out` is, or its staging directory for a bucket)
/// without room for the range's entries ([`range_estimate`]). A server that does
/// not report the size (`collStats` refused) gets a note.
async fn check_room(
    client: &live::ReadOnlyClient,
    req: &DumpRequest,
    dir: &std::path::Path,
) -> Result<(), Failure> {
    match range_estimate(client, req).await {
        Some(bytes) => refuse_without_room(dir, bytes, "the oplog's entries in the range"),
        None => {
            eprintln!(
                "note: the oplog's size is not known (collStats refused or without a size): the room for the dump is not checked"
            );
            Ok(())
        }
    }
}

/// With `--gzip` the compressed size is known only once written (an oplog's
/// entries compress 3-10x, by what they hold): a warning, not a refusal, when the
/// uncompressed estimate of the range does not fit, saying how much smaller gzip
/// must make it. `--resume` continues a dump that ran out of room.
async fn warn_gzip_room(client: &live::ReadOnlyClient, req: &DumpRequest, dir: &std::path::Path) {
    let Some(bytes) = range_estimate(client, req).await else {
        return;
    };
    let Some((free, _)) = crate::storage::free_space(dir) else {
        return;
    };
    if let Some(w) = gzip_room_warning(dir, bytes, free) {
        eprintln!("{w}");
    }
}

/// The warning of [`warn_gzip_room`], if `bytes` of BSON do not fit in `free`.
fn gzip_room_warning(dir: &std::path::Path, bytes: u64, free: u64) -> Option<String> {
    (bytes > free).then(|| {
        let ratio = bytes as f64 / free.max(1) as f64;
        format!(
            "warning: the range holds about {} of entries (estimated from the oplog's size and \
             the time the range spans) and {} are free on the filesystem of `{}`: it fits only if \
             gzip makes it {ratio:.1}x smaller (an oplog's entries usually compress 3-10x); if it \
             runs out of room, free some and run the same command with `--resume`",
            human(bytes),
            human(free),
            dir.display()
        )
    })
}

/// The bytes of `req`'s range on the server, estimated before reading from the
/// oplog's size and the share of its time the range spans
/// ([`live::oplog_source::range_bytes`]).
pub(super) async fn range_estimate(
    client: &live::ReadOnlyClient,
    req: &DumpRequest,
) -> Option<u64> {
    let from = req.since.unwrap_or(Ts::new(0, 0));
    let to = req.until.unwrap_or(Ts::new(u32::MAX, u32::MAX));
    live::oplog_source::range_bytes(client, from, to).await
}

/// `dir`'s filesystem without room for `bytes` of `what` (estimated): exit 2 in
/// `dump-oplog`'s words.
pub(super) fn refuse_without_room(
    dir: &std::path::Path,
    bytes: u64,
    what: &str,
) -> Result<(), Failure> {
    use crate::replay::preflight::{check_space, Need};
    check_space(&[Need {
        dir: dir.to_path_buf(),
        bytes,
        what: format!("{what}, estimated from the oplog's size and the time the range spans"),
    }])
    .map_err(|e| super::room::failure(e, &super::room::DUMP_OPLOG))
}

fn interrupted(req: &DumpRequest) -> Failure {
    match &req.to {
        DumpTo::Dir(dir) => Failure::new(format!(
            "interrupted; the complete entries so far are in `{}`",
            dump::DumpPaths::new(dir).partial.display()
        ))
        .with_hint("run the same command again with `--resume` to continue"),
        DumpTo::Bucket(url) => Failure::new(format!(
            "interrupted; nothing was kept at {url} (a dump to a bucket is all or nothing)"
        ))
        .with_hint("run the same command again"),
    }
    .with_exit_code(130)
}

/// Progress and warnings of a dump on stderr.
#[derive(Default)]
pub(crate) struct CliObserver {
    bar: Option<TsProgress>,
    /// One of several dumps sharing stderr: no bar, every line after this.
    prefix: Option<String>,
}

impl CliObserver {
    /// One of several dumps sharing stderr: no progress bar (log lines), each line
    /// after `prefix`.
    pub(crate) fn prefixed(prefix: String) -> CliObserver {
        CliObserver {
            bar: None,
            prefix: Some(prefix),
        }
    }

    pub(crate) fn finish(&mut self) {
        if let Some(mut b) = self.bar.take() {
            b.finish();
        }
    }

    fn say(&self, line: &str) {
        match (&self.bar, &self.prefix) {
            (_, Some(p)) => eprintln!("{p}{line}"),
            (Some(b), None) => b.println(line),
            (None, None) => eprintln!("{line}"),
        }
    }
}

impl DumpObserver for CliObserver {
    fn planned(&mut self, plan: &DumpPlan) {
        let mut bar = match &self.prefix {
            Some(p) => TsProgress::lines_after(plan.from, plan.end, p),
            None => TsProgress::new(plan.from, plan.end, true),
        };
        bar.set_prefix("dumping");
        self.bar = Some(bar);
    }

    fn progress(&mut self, p: &Progress) {
        if let Some(b) = &mut self.bar {
            b.update(p);
        }
    }

    fn retrying(&mut self, n: &RetryNotice<'_>) {
        self.say(&retry_line(n));
    }

    fn warning(&mut self, msg: &str) {
        self.say(&format!("warning: {msg}"));
    }
}

/// The stderr line for a retry, shared by every live read.
pub(crate) fn retry_line(n: &RetryNotice<'_>) -> String {
    format!(
        "warning: reading the oplog failed ({}); {}; retry {}/{} in {}",
        n.error,
        n.progress.reached(),
        n.attempt,
        n.max_attempts,
        humantime::format_duration(Duration::from_millis(n.delay.as_millis() as u64))
    )
}

/// Progress over an oplog `ts` range on stderr: on a terminal a bar whose position
/// is seconds of oplog covered, with entries, bytes and rate in the message and an
/// ETA; otherwise (a log, CI) a line every
/// [`PITR_PROGRESS_INTERVAL`](super::progress::INTERVAL_VAR) with the same figures,
/// from a thread of its own: a server slow to answer a batch (a filtered read
/// scanning far) still gets its line, the figures of the last batch again.
/// Nothing when `enabled` is false.
pub(crate) struct TsProgress {
    bar: Option<ProgressBar>,
    /// Off a terminal: the lines' thread.
    lines: Option<TsLines>,
    start: u32,
    total: u64,
    started: Instant,
}

/// The log lines of a [`TsProgress`]: the thread prints `latest` each interval.
struct TsLines {
    latest: std::sync::Arc<std::sync::Mutex<Latest>>,
    /// Stops the lines when dropped.
    _ticker: super::progress::Ticker,
}

/// What the next line says: the read's verb, and the last batch's progress with
/// its share of the range (none before the first batch).
#[derive(Clone)]
struct Latest {
    doing: &'static str,
    progress: Option<(Progress, f64)>,
}

impl TsLines {
    /// Each line starts with `prefix` (a member's name when several reads share
    /// stderr). The rate is taken when the line is printed: a read held back by
    /// the server shows it falling.
    fn start(prefix: &str, started: Instant) -> TsLines {
        let every = super::progress::interval_from_env(true);
        let latest = std::sync::Arc::new(std::sync::Mutex::new(Latest {
            doing: "reading",
            progress: None,
        }));
        let ticker = {
            let latest = latest.clone();
            let prefix = prefix.to_string();
            super::progress::Ticker::start(every, move || {
                let Ok(l) = latest.lock().map(|l| l.clone()) else {
                    return;
                };
                let said = match &l.progress {
                    None => "no entry yet, waiting for the server".to_string(),
                    Some((p, pct)) => {
                        format!("{} ({pct:.0}% of the range)", figures(p, started.elapsed()))
                    }
                };
                // Not eprintln!: a closed stderr must not end the thread.
                let _ = writeln!(
                    std::io::stderr().lock(),
                    "{prefix}pitr: {} the oplog: {said}",
                    l.doing
                );
            })
        };
        TsLines {
            latest,
            _ticker: ticker,
        }
    }
}

impl TsProgress {
    pub(crate) fn new(from: Ts, end: Ts, enabled: bool) -> TsProgress {
        let terminal = std::io::stderr().is_terminal();
        let total = end.t.saturating_sub(from.t).max(1) as u64;
        let bar = (enabled && terminal).then(|| {
            let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
            if let Ok(style) = ProgressStyle::with_template(
                "{spinner} {prefix} [{bar:30}] {percent:>3}% {msg} eta {eta}",
            ) {
                bar.set_style(style.progress_chars("=> "));
            }
            bar.enable_steady_tick(Duration::from_millis(200));
            bar
        });
        let started = Instant::now();
        let lines = (enabled && !terminal).then(|| TsLines::start("", started));
        TsProgress {
            bar,
            lines,
            start: from.t,
            total,
            started,
        }
    }

    /// Lines only, each after `prefix`: one of several reads sharing stderr.
    pub(crate) fn lines_after(from: Ts, end: Ts, prefix: &str) -> TsProgress {
        let mut p = TsProgress::new(from, end, false);
        p.lines = Some(TsLines::start(prefix, p.started));
        p
    }

    /// What the read does (`dumping`, `scanning`).
    pub(crate) fn set_prefix(&mut self, p: &'static str) {
        if let Some(b) = &self.bar {
            b.set_prefix(p);
        }
        if let Some(l) = &self.lines {
            if let Ok(mut latest) = l.latest.lock() {
                latest.doing = p;
            }
        }
    }

    pub(crate) fn update(&mut self, p: &Progress) {
        let covered = p.last.map(|l| l.t.saturating_sub(self.start) as u64);
        if let Some(b) = &self.bar {
            if let Some(c) = covered {
                b.set_position(c);
            }
            b.set_message(figures(p, self.started.elapsed()));
        } else if let Some(l) = &self.lines {
            let pct = covered.map_or(0.0, |c| (c as f64 * 100.0 / self.total as f64).min(100.0));
            if let Ok(mut latest) = l.latest.lock() {
                latest.progress = Some((*p, pct));
            }
        }
    }

    /// Prints a line above the bar (or plainly when there is none).
    pub(crate) fn println(&self, line: &str) {
        match &self.bar {
            Some(b) => b.println(line),
            None => eprintln!("{line}"),
        }
    }

    pub(crate) fn finish(&mut self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
        // No line after this.
        drop(self.lines.take());
    }
}

/// `256 entries, 63.3 KiB, 1084 entries/s, at 2026-11-21T01:03:59Z`: a live
/// read's progress after `elapsed`.
fn figures(p: &Progress, elapsed: Duration) -> String {
    let secs = elapsed.as_secs_f64().max(0.001);
    format!(
        "{} entries, {}, {:.0} entries/s{}",
        p.entries,
        human(p.bytes),
        p.entries as f64 / secs,
        p.last
            .map(|l| format!(", at {}", l.utc_string()))
            .unwrap_or_default()
    )
}

impl Drop for TsProgress {
    fn drop(&mut self) {
        self.finish();
    }
}

#[cfg(test)]
mod tests {
    use crate::cli::Cli;
    use clap::Parser;

    /// A gzip dump that may not fit is warned about with the ratio it needs; one
    /// that fits even uncompressed is not.
    #[test]
    fn a_gzip_dump_that_may_not_fit_says_the_ratio_it_needs() {
        let dir = std::path::Path::new("/data");
        let w = super::gzip_room_warning(dir, 40 << 30, 10 << 30).unwrap();
        assert!(w.contains("only if gzip makes it 4.0x smaller"), "{w}");
        assert!(w.contains("`/data`") && w.contains("--resume"), "{w}");
        assert_eq!(super::gzip_room_warning(dir, 10 << 30, 10 << 30), None);
    }

    /// Valid and invalid command lines of the live-source commands.
    #[test]
    fn command_lines() {
        let uri_in_env = std::env::var_os("PITR_URI").is_some();
        let cases: &[(&str, bool)] = &[
            ("pitr dump-oplog --uri mongodb://h/ --out d", true),
            ("pitr dump-oplog --uri mongodb://h/ --out d --since 1700000000:3 --until 2026-11-21T03:12:00Z --gzip --resume --allow-gap", true),
            ("pitr dump-oplog --uri mongodb://h/", false),
            ("pitr dump-oplog --uri mongodb://h/ --out d --since yesterday", false),
            ("pitr dump-oplog --uri mongodb://h/ --out d --batch-size 0", false),
            ("pitr dump-oplog --cluster c.toml --out d --gzip --resume", true),
            ("pitr dump-oplog --cluster c.toml", false),
            ("pitr cluster discover --uri mongodb://h/", true),
            ("pitr cluster discover --uri mongodb://h/ --out c.toml", true),
            ("pitr cluster discover --uri mongodb://h/ --out", false),
            ("pitr cluster", false),
            ("pitr status --uri mongodb://h/", true),
            ("pitr status --uri mongodb://h/ --min-window 90m --json", true),
            ("pitr status --uri mongodb://h/ --min-window soon", false),
            ("pitr find-drop --uri mongodb://h/ --kind drop", true),
            ("pitr find-drop", true),
            ("pitr find-drop oplog.bson --uri mongodb://h/", false),
            ("pitr find-drop --uri mongodb://h/ --allow-truncated", false),
        ];
        for (line, valid) in cases {
            let r = Cli::try_parse_from(line.split_whitespace());
            assert_eq!(r.is_ok(), *valid, "{line}: {r:?}");
        }
        if !uri_in_env {
            assert!(Cli::try_parse_from(["pitr", "status"]).is_err());
            assert!(Cli::try_parse_from(["pitr", "dump-oplog", "--out", "d"]).is_err());
        }
    }
}
