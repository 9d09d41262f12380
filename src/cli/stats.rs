//! `pitr oplog stats`: what an oplog covers and where its activity is.

use std::io::{self, Write};
use std::time::Duration;

use serde::Serialize;

use crate::error::{exit, Failure};
use crate::forensics::timeline::{auto_bucket, Counts, Stats, TooManyBuckets, MAX_BUCKETS, NICE};
use crate::forensics::{BurstRule, Finding, Scanner};
use crate::oplog::{EntryError, ReadOptions, Ts};

use super::output::counted;
use super::scan::{scan_sources, ScanStop};
use super::zone::{parse_zone, Zone};

/// Rows in the timeline when `--bucket` is not given.
const AUTO_ROWS: u64 = 60;

#[derive(Debug, clap::Args)]
pub struct StatsArgs {
    /// Oplog sources: .bson or .bson.gz files, mongodump directories, or `-` for stdin
    #[arg(required = true, value_name = "OPLOG")]
    pub sources: Vec<String>,
    /// Timeline bucket size, e.g. 10s, 1m, 5m, 1h (default: chosen for about 60 rows);
    /// a size giving more than 10000 buckets with activity is refused
    #[arg(long, value_name = "DURATION", value_parser = parse_bucket)]
    pub bucket: Option<u32>,
    /// How many of the busiest namespaces to list
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub top: usize,
    /// Machine-readable output
    #[arg(long)]
    pub json: bool,
    /// Show times in this zone (UTC, local, +01:00, Europe/Berlin)
    #[arg(long, value_name = "ZONE", default_value = "UTC", value_parser = parse_zone)]
    pub tz: Zone,
    /// Read the complete entries of a truncated file instead of failing
    #[arg(long)]
    pub allow_truncated: bool,
}

fn parse_bucket(s: &str) -> Result<u32, String> {
    let d: Duration = humantime::parse_duration(s)
        .map_err(|e| format!("`{s}` is not a duration ({e}); use e.g. `30s`, `1m`, `5m`, `1h`"))?;
    let secs = d.as_secs();
    if secs == 0 || secs > u32::MAX as u64 || d.subsec_nanos() != 0 {
        return Err(format!(
            "`{s}`: the bucket must be a whole number of seconds, at least 1s"
        ));
    }
    Ok(secs as u32)
}

#[derive(Serialize)]
struct NsRow<'a> {
    ns: &'a str,
    #[serde(flatten)]
    counts: Counts,
}

#[derive(Serialize)]
struct BucketRow {
    start_ts: Ts,
    start: String,
    /// 1 for a bucket; more for a run of empty buckets shown as one row.
    buckets: u64,
    #[serde(flatten)]
    counts: Counts,
}

#[derive(Serialize)]
struct Report<'a> {
    sources: &'a [String],
    entries: u64,
    first_ts: Option<Ts>,
    first_wall: Option<String>,
    last_ts: Option<Ts>,
    last_wall: Option<String>,
    window_secs: u64,
    out_of_order: u64,
    skipped_overlap: u64,
    by_op: Counts,
    namespaces: usize,
    top_namespaces: Vec<NsRow<'a>>,
    bucket_secs: u32,
    timeline: Vec<BucketRow>,
    findings: &'a [Finding],
}

pub fn run(a: StatsArgs) -> Result<u8, Failure> {
    // Without --bucket the size depends on the window, known only at the end: the
    // accumulator starts at 1 s and coarsens as needed, then regroups.
    let mut stats = match a.bucket {
        Some(b) => Stats::new(b),
        None => Stats::auto(),
    };
    let mut scanner = Scanner::new(BurstRule::default());
    let opts = ReadOptions {
        allow_truncated: a.allow_truncated,
    };
    let summary = scan_sources(&a.sources, opts, !a.json, |doc| {
        let raw = bson::RawDocument::from_bytes(doc).map_err(EntryError::from)?;
        let e = crate::oplog::Entry::parse(raw)?;
        stats.feed(&e);
        if let Some(over) = stats.overflow() {
            // Stop at once: the timeline asked for cannot be shown.
            return Err(ScanStop::Failed(too_many_buckets(&over)));
        }
        Ok(scanner.feed(&e)?)
    })?;
    let out_of_order = scanner.stats().out_of_order;
    let (findings, _) = scanner.finish();
    // As find-drop lists them by default: routine operations are not marked.
    let findings: Vec<Finding> = findings.into_iter().filter(|f| !f.is_routine()).collect();
    let window_secs = match (stats.first, stats.last) {
        (Some((f, _)), Some((l, _))) => (l.t - f.t) as u64,
        _ => 0,
    };
    let bucket = a
        .bucket
        .unwrap_or_else(|| auto_bucket(window_secs, AUTO_ROWS).max(stats.bucket_secs()));
    let timeline = stats.timeline(bucket);
    let wall = |w: Option<i64>| {
        w.and_then(chrono::DateTime::from_timestamp_millis)
            .map(|d| d.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
    };
    let report = Report {
        sources: &summary.names,
        entries: stats.entries,
        first_ts: stats.first.map(|f| f.0),
        first_wall: stats.first.and_then(|f| wall(f.1)),
        last_ts: stats.last.map(|l| l.0),
        last_wall: stats.last.and_then(|l| wall(l.1)),
        window_secs,
        out_of_order,
        skipped_overlap: summary.skipped_overlap,
        by_op: stats.by_op,
        namespaces: stats.by_ns.len(),
        top_namespaces: stats
            .top_namespaces(a.top)
            .into_iter()
            .map(|(ns, counts)| NsRow { ns, counts })
            .collect(),
        bucket_secs: bucket,
        timeline: timeline
            .iter()
            .map(|r| BucketRow {
                start_ts: Ts::new(r.start, 0),
                start: Ts::new(r.start, 0).utc_string(),
                buckets: r.buckets,
                counts: r.counts,
            })
            .collect(),
        findings: &findings,
    };
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    if a.json {
        super::output::write_json(&mut out, &report)?;
    } else {
        render(&mut out, &report, &a.tz, &summary.truncations)?;
    }
    out.flush()?;
    Ok(exit::OK)
}

/// `--bucket` too small for the oplog: refused, with a size that fits.
fn too_many_buckets(o: &TooManyBuckets) -> Failure {
    let span = (o.last - o.first) as u64;
    // The smallest size above the one refused that keeps even a fully busy span of
    // this length under the cap.
    let fits = NICE
        .iter()
        .copied()
        .find(|&b| b > o.bucket_secs && span / (b as u64) < MAX_BUCKETS as u64)
        .unwrap_or(NICE[NICE.len() - 1]);
    let size = bucket_text(o.bucket_secs as u64);
    Failure::new(format!(
        "`--bucket {size}` needs more than {MAX_BUCKETS} timeline buckets with activity: the oplog has \
         entries in more than {MAX_BUCKETS} different {size} buckets within its first {} ({} to {}), \
         and pitr stopped reading there",
        human_duration(span),
        Ts::new(o.first, 0).utc_string(),
        Ts::new(o.last, 0).utc_string(),
    ))
    .with_hint(format!(
        "leave --bucket out (a size is chosen for about {AUTO_ROWS} rows), or give a larger one: \
         `--bucket {}` or more (more if the oplog goes on past {})",
        bucket_text(fits as u64),
        Ts::new(o.last, 0).utc_string(),
    ))
}

fn human_duration(secs: u64) -> String {
    humantime::format_duration(Duration::from_secs(secs)).to_string()
}

/// A bucket size as `--bucket` takes it back: whole days as days (humantime's months
/// are 30.44 days, so 364 days would read `11months 29days 3h 50m 24s`).
fn bucket_text(secs: u64) -> String {
    if secs >= 86400 && secs.is_multiple_of(86400) {
        let d = secs / 86400;
        return format!("{d}{}", if d == 1 { "day" } else { "days" });
    }
    humantime::format_duration(Duration::from_secs(secs)).to_string()
}

fn render(
    out: &mut impl Write,
    r: &Report<'_>,
    tz: &Zone,
    truncations: &[crate::oplog::Truncation],
) -> io::Result<()> {
    writeln!(out, "Oplog: {}", r.sources.join(", "))?;
    writeln!(out, "  entries       {}", r.entries)?;
    if let (Some(f), Some(l)) = (r.first_ts, r.last_ts) {
        let w = |x: &Option<String>| x.clone().unwrap_or_else(|| "no wall".into());
        writeln!(
            out,
            "  first         {f:<22} {} (wall {})",
            tz.format(f.to_utc()),
            w(&r.first_wall)
        )?;
        writeln!(
            out,
            "  last          {l:<22} {} (wall {})",
            tz.format(l.to_utc()),
            w(&r.last_wall)
        )?;
        if r.window_secs == 0 {
            writeln!(
                out,
                "  window        within one second (every entry has the same t)"
            )?;
        } else {
            writeln!(
                out,
                "  window        {} ({} s)",
                human_duration(r.window_secs),
                r.window_secs
            )?;
        }
    }
    if r.out_of_order > 0 {
        writeln!(
            out,
            "  out of order  {} (not sorted by ts)",
            counted(r.out_of_order, "entry", "entries")
        )?;
    }
    if r.skipped_overlap > 0 {
        writeln!(
            out,
            "  overlap       {} skipped (already in an earlier source)",
            counted(r.skipped_overlap, "entry", "entries")
        )?;
    }
    for t in truncations {
        writeln!(out, "  truncated     {t}")?;
    }
    let o = &r.by_op;
    writeln!(
        out,
        "  by op         insert {}  update {}  delete {}  command {}  no-op {}  other {}",
        o.inserts, o.updates, o.deletes, o.commands, o.noops, o.other
    )?;
    writeln!(out)?;
    writeln!(
        out,
        "Busiest namespaces ({} of {}; applyOps expanded):",
        r.top_namespaces.len(),
        r.namespaces
    )?;
    let w = r
        .top_namespaces
        .iter()
        .map(|n| n.ns.len())
        .max()
        .unwrap_or(9)
        .max(9);
    writeln!(
        out,
        "  {:<w$}  {:>9} {:>9} {:>9} {:>9} {:>9}",
        "NAMESPACE", "TOTAL", "INSERT", "UPDATE", "DELETE", "COMMAND"
    )?;
    for n in &r.top_namespaces {
        let c = n.counts;
        writeln!(
            out,
            "  {:<w$}  {:>9} {:>9} {:>9} {:>9} {:>9}",
            n.ns, c.total, c.inserts, c.updates, c.deletes, c.commands
        )?;
    }
    writeln!(out)?;
    writeln!(
        out,
        "Activity by oplog time, {} per row (D = deletes, C = commands, ! = destructive operation; \
         a run of empty buckets is one row):",
        bucket_text(r.bucket_secs as u64)
    )?;
    let max = r
        .timeline
        .iter()
        .map(|b| b.counts.total)
        .max()
        .unwrap_or(0)
        .max(1);
    const BAR: usize = 40;
    for b in &r.timeline {
        let c = b.counts;
        if b.buckets > 1 {
            // A run of empty buckets: one row, however long (the span costs nothing).
            writeln!(
                out,
                "  {}  ... {} ({} without entries) ...",
                tz.format(b.start_ts.to_utc()).trim_end_matches(".000Z"),
                counted(b.buckets, "empty bucket", "empty buckets"),
                human_duration(b.buckets.saturating_mul(r.bucket_secs as u64))
            )?;
            continue;
        }
        let len = |n: u64| ((n as f64 / max as f64) * BAR as f64).ceil() as usize;
        let dl = len(c.deletes).min(BAR);
        let cl = len(c.commands).min(BAR - dl);
        let rest = len(c.total).min(BAR).saturating_sub(dl + cl);
        let bar = format!("{}{}{}", "D".repeat(dl), "C".repeat(cl), "#".repeat(rest));
        let end = b.start_ts.t as u64 + r.bucket_secs as u64;
        let marks: Vec<String> = r
            .findings
            .iter()
            .filter(|f| (f.ts.t as u64) >= b.start_ts.t as u64 && (f.ts.t as u64) < end)
            .map(|f| format!("{} {}", f.kind.as_str(), f.ns))
            .collect();
        let mark = if marks.is_empty() {
            String::new()
        } else {
            format!(" ! {}", marks.join(", "))
        };
        writeln!(
            out,
            "  {}  {:<BAR$} {:>8}  D {:<6} C {:<4}{}",
            tz.format(b.start_ts.to_utc()).trim_end_matches(".000Z"),
            bar,
            c.total,
            c.deletes,
            c.commands,
            mark
        )?;
    }
    Ok(())
}
