//! `pitr find-drop`: list destructive operations and the exact `--oplogLimit` that
//! restores to just before each.

use std::io::{self, Write};

use globset::{Glob, GlobSet, GlobSetBuilder};

use crate::error::{exit, Failure};
use crate::forensics::{BurstRule, Finding, Kind, Scanner, Severity};
use crate::oplog::ReadOptions;
use crate::time::{parse_time, TimeValue};

use super::scan::{scan_sources, SourcesSummary};
use super::zone::{parse_zone, Zone};

#[derive(Debug, clap::Args)]
#[command(after_long_help = "\
What it finds (--kind): drop, dropDatabase (limit at its first per-collection drop), \
renameDropTarget (renameCollection with dropTarget, incl. convertToCapped), dropIndexes, \
emptycapped, deleteBurst (>= --min-count deletes on one namespace within --window seconds, \
counting batched and transactional deletes at their commit), wipingUpdate (bursts of \
updates that leave only _id, $unset, or $v:2 diffs deleting fields).

Never reported: fromMigrate entries (chunk migrations), internal namespaces (local.*, \
config.system.sessions and other server-managed config.*, *.system.drop.*), no-ops, \
aborted transactions.

The --oplogLimit column is exclusive, as mongorestore reads it: entries with ts < limit \
are applied, so the destructive entry itself is not.

Exit codes: 0 something found, 1 nothing found, 2 error.

Examples:
  pitr find-drop fixtures/incident/oplog.bson
  pitr find-drop dump/ --ns 'shop.*' --kind drop --kind dropDatabase
  pitr find-drop oplog.bson.gz --since 2026-11-21T02:00:00Z --tz Europe/Berlin
  pitr find-drop oplog.bson --json | jq -r '.[0].oplog_limit'
  mongodump -d local -c oplog.rs --out - | pitr find-drop -")]
pub struct FindDropArgs {
    /// Oplog sources: .bson or .bson.gz files, mongodump directories, or `-` for stdin
    #[arg(required = true, value_name = "OPLOG")]
    pub sources: Vec<String>,
    /// Only namespaces matching this glob (`shop.orders`, `shop.*`, `*.orders`); repeatable
    #[arg(long = "ns", value_name = "GLOB")]
    pub ns: Vec<String>,
    /// Only findings at or after this time (t:i, epoch, RFC 3339, oid:<hex>)
    #[arg(long, value_name = "TIME", value_parser = parse_time)]
    pub since: Option<TimeValue>,
    /// Only findings before this time (exclusive; same forms as --since)
    #[arg(long, value_name = "TIME", value_parser = parse_time)]
    pub until: Option<TimeValue>,
    /// Only these kinds; repeatable
    #[arg(long, value_name = "KIND")]
    pub kind: Vec<Kind>,
    /// A JSON array of findings on stdout (schema in README.md)
    #[arg(long)]
    pub json: bool,
    /// Show wall-clock times in this zone: UTC (default), local, +01:00, Europe/Berlin
    #[arg(long, value_name = "ZONE", default_value = "UTC", value_parser = parse_zone)]
    pub tz: Zone,
    /// Burst rule: this many deletes (or wiping updates) on one namespace...
    #[arg(long, value_name = "N", default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..))]
    pub min_count: u64,
    /// ...within this many seconds
    #[arg(long, value_name = "SECS", default_value_t = 10)]
    pub window: u32,
    /// Scan the complete entries of a truncated file instead of failing
    #[arg(long)]
    pub allow_truncated: bool,
}

pub fn run(a: FindDropArgs) -> Result<u8, Failure> {
    let filter = Filter::new(&a)?;
    let rule = BurstRule {
        threshold: a.min_count,
        window_secs: a.window,
    };
    let mut scanner = Scanner::new(rule);
    let opts = ReadOptions {
        allow_truncated: a.allow_truncated,
    };
    let summary = scan_sources(&a.sources, opts, !a.json, |doc| scanner.feed_bytes(doc))?;
    let out_of_order = scanner.stats().out_of_order;
    let (findings, _stats) = scanner.finish();
    let findings: Vec<Finding> = findings.into_iter().filter(|f| filter.keep(f)).collect();

    let notes = notes(&summary, out_of_order);
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    if a.json {
        serde_json::to_writer_pretty(&mut out, &findings).map_err(io::Error::from)?;
        writeln!(out)?;
        out.flush()?;
        for n in &notes {
            eprintln!("warning: {n}");
        }
    } else {
        render_table(&mut out, &findings, &a, &summary)?;
        for n in &notes {
            writeln!(out, "note: {n}")?;
        }
        out.flush()?;
    }
    Ok(if findings.is_empty() { exit::NOT_FOUND } else { exit::OK })
}

struct Filter {
    ns: Option<GlobSet>,
    since: Option<TimeValue>,
    until: Option<TimeValue>,
    kinds: Vec<Kind>,
}

impl Filter {
    fn new(a: &FindDropArgs) -> Result<Filter, Failure> {
        let ns = if a.ns.is_empty() {
            None
        } else {
            let mut b = GlobSetBuilder::new();
            for g in &a.ns {
                let glob = Glob::new(g).map_err(|e| {
                    Failure::new(format!("`{g}` is not a valid namespace pattern"))
                        .with_hint("use `db.coll`, `db.*` or `*.coll` (`*` matches any characters, `?` one)")
                        .with_cause(e)
                })?;
                b.add(glob);
            }
            Some(b.build().map_err(|e| Failure::new("invalid --ns patterns").with_cause(e))?)
        };
        if let (Some(s), Some(u)) = (&a.since, &a.until) {
            if s.ts >= u.ts {
                return Err(Failure::new(format!(
                    "--since `{}` is not before --until `{}`",
                    s.input, u.input
                ))
                .with_hint("--since is inclusive and --until exclusive; swap them or widen the range"));
            }
        }
        Ok(Filter {
            ns,
            since: a.since.clone(),
            until: a.until.clone(),
            kinds: a.kind.clone(),
        })
    }

    fn keep(&self, f: &Finding) -> bool {
        if !self.kinds.is_empty() && !self.kinds.contains(&f.kind) {
            return false;
        }
        if self.since.as_ref().is_some_and(|s| f.ts < s.ts) || self.until.as_ref().is_some_and(|u| f.ts >= u.ts) {
            return false;
        }
        match &self.ns {
            None => true,
            Some(set) => {
                set.is_match(&f.ns)
                    || f.collections.iter().any(|c| set.is_match(c))
                    || (f.kind == Kind::DropDatabase && set.is_match(format!("{}.*", f.ns)))
            }
        }
    }
}

fn notes(summary: &SourcesSummary, out_of_order: u64) -> Vec<String> {
    let mut n = Vec::new();
    for t in &summary.truncations {
        n.push(format!("{t}; scanned the {} complete entries before it (--allow-truncated)", t.complete_entries));
    }
    if summary.skipped_overlap > 0 {
        n.push(format!(
            "skipped {} entries of later sources already covered by earlier ones (overlapping dumps)",
            summary.skipped_overlap
        ));
    }
    if out_of_order > 0 {
        n.push(format!(
            "{out_of_order} entries are out of ts order; mongorestore stops at the first entry at or past --oplogLimit, \
             so sort the oplog (pitr plan does) before replaying it"
        ));
    }
    n
}

/// The finding to restore to: the first critical one, else the first high one, else
/// the first.
pub fn restore_target(findings: &[Finding]) -> Option<&Finding> {
    findings
        .iter()
        .find(|f| f.severity == Severity::Critical)
        .or_else(|| findings.iter().find(|f| f.severity == Severity::High))
        .or_else(|| findings.first())
}

fn render_table(out: &mut impl Write, findings: &[Finding], a: &FindDropArgs, summary: &SourcesSummary) -> io::Result<()> {
    let sources = summary.names.join(", ");
    if findings.is_empty() {
        writeln!(
            out,
            "No destructive operations found in {} entries of {sources}.",
            summary.entries
        )?;
        return Ok(());
    }
    let when = format!("WHEN ({})", a.tz.label());
    let rows: Vec<[String; 7]> = findings
        .iter()
        .map(|f| {
            [
                f.wall.map(|w| a.tz.format(w)).unwrap_or_else(|| format!("{} (ts)", a.tz.format(f.ts.to_utc()))),
                f.ts.to_string(),
                f.kind.as_str().to_string(),
                f.severity.as_str().to_string(),
                f.ns.clone(),
                f.oplog_limit.to_string(),
                f.details.clone(),
            ]
        })
        .collect();
    let header = [when.as_str(), "TS", "KIND", "SEVERITY", "NAMESPACE", "--oplogLimit", "DETAILS"];
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in &rows {
        for (w, c) in widths.iter_mut().zip(r.iter()) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: Vec<&str>| -> String {
        let last = cells.len() - 1;
        cells
            .iter()
            .enumerate()
            .map(|(i, c)| if i == last { c.to_string() } else { format!("{c:<w$}", w = widths[i]) })
            .collect::<Vec<_>>()
            .join("  ")
    };
    writeln!(out, "{}", line(header.to_vec()))?;
    for r in &rows {
        writeln!(out, "{}", line(r.iter().map(|s| s.as_str()).collect()))?;
        if let Some(f) = findings.iter().find(|f| f.ts.to_string() == r[1] && f.ns == r[4]) {
            if !f.collections.is_empty() {
                writeln!(out, "    collections: {}", f.collections.join(", "))?;
            }
        }
    }
    writeln!(out)?;
    writeln!(
        out,
        "{} finding(s) in {} entries of {sources}. --oplogLimit is exclusive: entries with ts < limit are applied.",
        findings.len(),
        summary.entries
    )?;
    if let Some(t) = restore_target(findings) {
        writeln!(
            out,
            "Restore to just before the {} {} of {} at {} (ts {}):",
            t.severity.as_str(),
            t.kind.as_str(),
            t.ns,
            t.wall.map(|w| a.tz.format(w)).unwrap_or_else(|| t.ts.utc_string()),
            t.ts
        )?;
        writeln!(
            out,
            "  mongorestore --oplogReplay --oplogLimit {} <backup dir with this oplog as oplog.bson>",
            t.oplog_limit
        )?;
    }
    Ok(())
}
