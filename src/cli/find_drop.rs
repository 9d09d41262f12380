//! `pitr find-drop`: list destructive operations and the exact `--oplogLimit` that
//! restores to just before each.

use std::io::{self, Write};
use std::path::PathBuf;

use globset::{Glob, GlobSet, GlobSetBuilder};

use crate::backup;
use crate::closest::closest_text;
use crate::error::{exit, Failure};
use crate::forensics::seen::Seen;
use crate::forensics::{BurstRule, Catalog, Finding, Kind, Scanner, Severity};
use crate::oplog::oplog_archive::ChunkRange;
use crate::oplog::{ReadOptions, Ts};
use crate::table::counted;
use crate::time::{parse_time, TimeValue};

use crate::table::Columns;

use super::scan::{scan_sources_in, SourcesSummary};
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

Routine operations are severity info and listed only with --include-routine (a note \
counts them otherwise); --until auto never picks them: $out and mapReduce refreshes \
(a tmp.agg_out.* or tmp.mr.* collection renamed over the target), drops of such \
temporary collections, TTL expirations and time-series bucket expiry (collections whose \
TTL is known from --backup's metadata or from createIndexes/collMod/create in the oplog), \
capped roll-over deletes. Without --backup a note names the delete bursts that could not \
be classified because their collection existed before the oplog.

The --oplogLimit column is exclusive, as mongorestore reads it: entries with ts < limit \
are applied, so the destructive entry itself is not.

Exit codes: 0 something found, 1 nothing found (routine operations alone are not \
\"something\"), 2 error.

Examples:
  pitr find-drop fixtures/incident/oplog.bson
  pitr find-drop --backup fixtures/incident/backup fixtures/incident/oplog.bson --include-routine
  pitr find-drop dump/ --ns 'shop.*' --kind drop --kind dropDatabase
  pitr find-drop oplog.bson.gz --since 2026-11-21T02:00:00Z --tz Europe/Berlin
  pitr find-drop oplog.bson --json | jq -r '.[0].oplog_limit'
  mongodump -d local -c oplog.rs --out - | pitr find-drop -
  pitr find-drop --uri 'mongodb://reader@db1,db2/?replicaSet=rs0' --since 2026-11-21T02:00:00Z
  pitr find-drop --cluster fixtures/cluster/cluster.toml

With --cluster every member of a sharded cluster (the config server and each shard, named \
in cluster.toml with their backups and oplogs; docs/sharded.md) is scanned, and what one \
operation did on several members is one finding: the drop of a sharded collection (the \
config server's metadata deletes, then each shard's drop, fromMigrate on the non-primary \
shards of 7.0+), a dropDatabase, a deleteMany through mongos fanned out to the shards. Its \
limit is its first destructive entry on any member, one cluster time for all of them; \
`members` lists each member's part; num_records is summed over the shards (orphans, if any, \
included). Migration clones and range deletions (fromMigrate CRUD) are never findings.

With --uri (or PITR_URI and no OPLOG) the oplog of a running replica set is read, read-only \
(`find` on local.oplog.rs, secondaryPreferred unless the URI says otherwise), up to its newest \
entry at the start. --since/--until also bound what is read from the server, widened by 10 \
minutes plus --window so that incidents crossing a bound are seen as on a whole file; \
--kind limited to dropIndexes/renameDropTarget/emptycapped reads command entries only.")]
pub struct FindDropArgs {
    /// Oplog sources: .bson files (gzip or not), mongodump directories, mongodump
    /// archives, oplog archive directories (`pitr archive`), or `-` for stdin
    #[arg(value_name = "OPLOG")]
    pub sources: Vec<String>,
    /// Read the oplog of a running replica set instead (read-only); PITR_URI is used when
    /// neither OPLOG nor --uri is given
    #[arg(long, value_name = "URI", conflicts_with_all = ["sources", "allow_truncated"])]
    pub uri: Option<String>,
    /// A sharded cluster (cluster.toml: the config server and every shard, each with its
    /// backup and oplog): scan every member and report one incident per cluster operation
    #[arg(long, value_name = "FILE", conflicts_with_all = ["sources", "uri", "backup"])]
    pub cluster: Option<PathBuf>,
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
    /// A JSON array of findings on stdout (schema in docs/find-drop.md)
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
    /// The backup (mongodump directory or archive) whose metadata tells TTL indexes and
    /// capped and time-series collections apart, to classify routine deletes
    #[arg(long, value_name = "DIR|ARCHIVE")]
    pub backup: Option<PathBuf>,
    /// Also list routine operations ($out refreshes, TTL expiry, capped roll-over) at
    /// severity info
    #[arg(long)]
    pub include_routine: bool,
}

pub fn run(mut a: FindDropArgs) -> Result<u8, Failure> {
    if a.cluster.is_some() {
        return super::find_drop_cluster::run(a);
    }
    if a.uri.is_none() && a.sources.is_empty() {
        // Only when no OPLOG is given: an exported PITR_URI must not turn a file scan
        // into a server read (clap's `env` would make --uri conflict with OPLOG).
        a.uri = std::env::var("PITR_URI").ok().filter(|u| !u.is_empty());
        if a.uri.is_none() {
            return Err(Failure::new("no oplog to read: give OPLOG files or directories, or --uri")
                .with_hint("e.g. `pitr find-drop dump/oplog.bson`, `pitr find-drop --uri mongodb://host/?replicaSet=rs0`, or set PITR_URI"));
        }
    }
    let filter = Filter::new(&a)?;
    let rule = BurstRule {
        threshold: a.min_count,
        window_secs: a.window,
    };
    // Read the backup's metadata before the (long) scan, so a bad path fails at once.
    let catalog = match &a.backup {
        Some(path) => Catalog::from_backup(&backup::open(path)?),
        None => Catalog::default(),
    };
    let mut scanner = Scanner::with_catalog(rule, catalog);
    let opts = ReadOptions {
        allow_truncated: a.allow_truncated,
    };
    let mut live_notes = Vec::new();
    // With a filter, what the oplog held: a filter that matches nothing is an error,
    // not "nothing happened".
    // (Files only: a server is read from --since on, and its namespaces are not
    // walked here.)
    let mut seen = (a.uri.is_none()
        && (!a.ns.is_empty() || a.since.is_some() || a.until.is_some()))
    .then(Seen::default);
    let summary = match &a.uri {
        Some(uri) => live::scan(uri, &a, &mut scanner, &mut live_notes)?,
        None => scan_sources_in(&a.sources, opts, !a.json, &archive_range(&a), |doc| {
            if let Some(s) = seen.as_mut() {
                s.feed(doc)?;
            }
            scanner.feed_bytes(doc)
        })?,
    };
    if let Some(s) = &seen {
        check_filters_match(&a, s, &summary.names)?;
    }
    let out_of_order = scanner.stats().out_of_order;
    let (findings, stats) = scanner.finish();
    let kept: Vec<Finding> = findings.into_iter().filter(|f| filter.keep(f)).collect();
    let incidents = kept.iter().filter(|f| !f.is_routine()).count();
    let (findings, hidden): (Vec<Finding>, Vec<Finding>) = kept
        .into_iter()
        .partition(|f| a.include_routine || !f.is_routine());

    let mut notes = notes(&summary, out_of_order);
    notes.extend(live_notes);
    notes.extend(classification_notes(
        &findings,
        &hidden,
        &stats.unclassified,
        a.json,
    ));
    write_findings(a.json, &findings, &notes, incidents, |out| {
        render_table(out, &findings, incidents, &a, &summary)
    })
}

/// find-drop's ending, for a replica set and a cluster alike: the findings as JSON
/// (notes as warnings on stderr) or as the table `render` writes (notes under it),
/// and the exit code. Routine operations alone are not a finding: scripts acting on
/// exit 0 must not restore because a report was refreshed.
pub(super) fn write_findings<T: serde::Serialize>(
    json: bool,
    findings: &T,
    notes: &[String],
    incidents: usize,
    render: impl FnOnce(&mut io::BufWriter<io::StdoutLock<'static>>) -> io::Result<()>,
) -> Result<u8, Failure> {
    let mut out = io::BufWriter::new(io::stdout().lock());
    if json {
        super::output::write_json(&mut out, findings)?;
        out.flush()?;
        for n in notes {
            eprintln!("warning: {n}");
        }
    } else {
        render(&mut out)?;
        for n in notes {
            writeln!(out, "note: {n}")?;
        }
        out.flush()?;
    }
    Ok(if incidents == 0 {
        exit::NOT_FOUND
    } else {
        exit::OK
    })
}

/// A `--ns`, `--since` or `--until` that matches nothing in the oplog read is an
/// error naming the value (and, for a namespace, the closest ones seen).
pub(super) fn check_filters_match(
    a: &FindDropArgs,
    s: &Seen,
    names: &[String],
) -> Result<(), Failure> {
    let input = names.join(", ");
    for g in &a.ns {
        let Ok(glob) = Glob::new(g) else { continue };
        let m = glob.compile_matcher();
        let hit = s.namespaces.iter().any(|ns| {
            m.is_match(ns)
                // A dropped database covers every collection of it.
                || ns.strip_suffix(".*").is_some_and(|db| {
                    g.split_once('.').is_some_and(|(gdb, _)| Glob::new(gdb).is_ok_and(|d| d.compile_matcher().is_match(db)))
                })
        });
        if !hit && s.more == 0 {
            return Err(Failure::new(format!(
                "--ns `{g}` matches no namespace in the {} entr{} of {input}{}",
                s.entries,
                if s.entries == 1 { "y" } else { "ies" },
                closest_text(g, s.namespaces.iter().map(String::as_str))
            ))
            .with_hint(
                "check the spelling (`pitr oplog stats` lists the namespaces an oplog writes); a filter that matches \
                 nothing is refused so that a typo cannot read as \"nothing happened\"",
            ));
        }
    }
    let range = match (s.first, s.last) {
        (Some(f), Some(l)) => format!("{f} ({}) .. {l} ({})", f.utc_string(), l.utc_string()),
        _ => "no entries".to_string(),
    };
    if let Some(since) = &a.since {
        if s.last.is_none_or(|l| l < since.ts) {
            return Err(Failure::new(format!(
                "--since `{}`{} is after the last entry of {input} (it covers {range})",
                since.input,
                as_ts(since)
            ))
            .with_hint("nothing at or after it was read: use an earlier --since, or a newer oplog dump or archive"));
        }
    }
    if let Some(until) = &a.until {
        if s.first.is_none_or(|f| f >= until.ts) {
            return Err(Failure::new(format!(
                "--until `{}`{} is not after the first entry of {input} (it covers {range})",
                until.input,
                as_ts(until)
            ))
            .with_hint("nothing before it was read: use a later --until, or an older oplog dump or archive"));
        }
    }
    Ok(())
}

/// ` (t:i)` after a time value typed in another form.
fn as_ts(v: &TimeValue) -> String {
    if v.input == v.ts.to_string() {
        String::new()
    } else {
        format!(" ({})", v.ts)
    }
}

/// Notes on routine operations (the hidden ones counted, any that deserve a look
/// spelled out) and on delete bursts that could not be classified without a backup.
/// In `--json` mode only the ones that need attention (they go to stderr as warnings).
fn classification_notes(
    listed: &[Finding],
    hidden: &[Finding],
    unclassified: &std::collections::BTreeSet<String>,
    json: bool,
) -> Vec<String> {
    let mut n = Vec::new();
    if !hidden.is_empty() && !json {
        let what: Vec<String> = hidden
            .iter()
            .map(|f| {
                format!(
                    "{} of {} ({}: {})",
                    f.routine.map_or("?", |r| r.as_str()),
                    f.ns,
                    f.kind.as_str(),
                    match f.kind {
                        Kind::DeleteBurst => format!("{} deleted", f.count),
                        _ if f.count > 1 => format!("{} times", f.count),
                        _ => format!("at {}", f.ts),
                    }
                )
            })
            .collect();
        n.push(format!(
            "{} not listed (--include-routine lists them at severity info): {}",
            counted(
                hidden.len() as u64,
                "routine operation",
                "routine operations"
            ),
            what.join(", ")
        ));
    }
    for f in hidden.iter().filter(|f| f.details.contains("CHECK")) {
        n.push(format!(
            "CHECK the routine {} of {} at {} (ts {}): {}",
            f.routine.map_or("?", |r| r.as_str()),
            f.ns,
            f.wall
                .map(|w| w.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
                .unwrap_or_else(|| f.ts.utc_string()),
            f.ts,
            f.details
        ));
    }
    let unknown: Vec<&str> = listed
        .iter()
        .filter(|f| !f.is_routine() && unclassified.contains(&f.ns))
        .map(|f| f.ns.as_str())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    if !unknown.is_empty() {
        n.push(format!(
            "without --backup, pitr cannot tell whether collections that existed before this oplog have a TTL \
             index or are capped: the delete bursts of {} are listed as incidents but may be TTL expiry or \
             capped roll-over; pass --backup DIR to classify them",
            unknown
                .iter()
                .map(|s| format!("`{s}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    n
}

pub(super) struct Filter {
    ns: Option<GlobSet>,
    since: Option<TimeValue>,
    until: Option<TimeValue>,
    kinds: Vec<Kind>,
}

impl Filter {
    pub(super) fn new(a: &FindDropArgs) -> Result<Filter, Failure> {
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
            Some(
                b.build()
                    .map_err(|e| Failure::new("invalid --ns patterns").with_cause(e))?,
            )
        };
        if let (Some(s), Some(u)) = (&a.since, &a.until) {
            if s.ts >= u.ts {
                return Err(Failure::new(format!(
                    "--since `{}` is not before --until `{}`",
                    s.input, u.input
                ))
                .with_hint(
                    "--since is inclusive and --until exclusive; swap them or widen the range",
                ));
            }
        }
        Ok(Filter {
            ns,
            since: a.since.clone(),
            until: a.until.clone(),
            kinds: a.kind.clone(),
        })
    }

    pub(super) fn keep(&self, f: &Finding) -> bool {
        if !self.kinds.is_empty() && !self.kinds.contains(&f.kind) {
            return false;
        }
        if self.since.as_ref().is_some_and(|s| f.ts < s.ts)
            || self.until.as_ref().is_some_and(|u| f.ts >= u.ts)
        {
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

/// The part of an oplog archive `--since`/`--until` need: widened by 10 minutes plus
/// `--window` on both sides, as for a server (so that incidents crossing a bound are
/// seen as on a whole file).
pub(super) fn archive_range(a: &FindDropArgs) -> ChunkRange {
    let margin = 600 + a.window;
    ChunkRange {
        from: a
            .since
            .as_ref()
            .map(|s| Ts::new(s.ts.t.saturating_sub(margin), 0)),
        to: a
            .until
            .as_ref()
            .map(|u| Ts::new(u.ts.t.saturating_add(margin), 0)),
    }
}

pub(super) fn notes(summary: &SourcesSummary, out_of_order: u64) -> Vec<String> {
    let mut n = Vec::new();
    for (src, entries) in &summary.backups_own {
        n.push(format!(
            "`{src}` is the oplog of a `mongodump --oplog` backup: its {entries} {} only what was written while the \
             dump ran; what happened after the backup is in {}, or read with `pitr find-drop --uri URI`",
            if *entries == 1 { "entry is" } else { "entries are" },
            crate::oplog::source::AFTER_THE_BACKUP
        ));
    }
    // "Nothing found" must not read as "nothing happened" when nothing was read.
    for src in &summary.empty {
        n.push(format!(
            "`{src}` holds no oplog entries: nothing was scanned there; check that it is the oplog you meant ({})",
            crate::oplog::source::NEVER_EMPTY
        ));
    }
    for (src, after, before) in &summary.gaps {
        n.push(format!(
            "the oplog archive `{src}` has a GAP after {after} ({}) and before {before} ({}): entries in it were never \
             archived, so operations there cannot be seen",
            after.utc_string(),
            before.utc_string()
        ));
    }
    for t in &summary.truncations {
        n.push(format!(
            "{t}; scanned the {} complete entries before it (--allow-truncated)",
            t.complete_entries
        ));
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
/// the first that is not routine (a routine operation is never a restore target).
pub fn restore_target(findings: &[Finding]) -> Option<&Finding> {
    findings
        .iter()
        .find(|f| f.severity == Severity::Critical)
        .or_else(|| findings.iter().find(|f| f.severity == Severity::High))
        .or_else(|| findings.iter().find(|f| !f.is_routine()))
}

fn render_table(
    out: &mut impl Write,
    findings: &[Finding],
    incidents: usize,
    a: &FindDropArgs,
    summary: &SourcesSummary,
) -> io::Result<()> {
    let sources = summary.names.join(", ");
    if incidents == 0 && findings.is_empty() {
        writeln!(
            out,
            "No destructive operations found in {} entries of {sources}.",
            summary.entries
        )?;
        return Ok(());
    }
    let rows: Vec<Vec<String>> = findings.iter().map(|f| finding_row(f, &a.tz)).collect();
    let when = when_column(&a.tz);
    let header = finding_header(&when);
    let cols = Columns::fit(&header, &rows);
    writeln!(out, "{}", cols.line(&header))?;
    // On a terminal, DETAILS wraps under itself to fit the width.
    let width = crate::table::stdout_width().unwrap_or(usize::MAX);
    for (r, f) in rows.iter().zip(findings) {
        for line in cols.lines_within(r, width) {
            writeln!(out, "{line}")?;
        }
        if !f.collections.is_empty() {
            writeln!(out, "    collections: {}", f.collections.join(", "))?;
        }
    }
    writeln!(out)?;
    let routine = findings.len() - incidents;
    writeln!(
        out,
        "{}{} in {} of {sources}. --oplogLimit is exclusive: entries with ts < limit are applied.",
        counted(incidents as u64, "finding", "findings"),
        if routine > 0 {
            format!(
                " and {}",
                counted(routine as u64, "routine operation", "routine operations")
            )
        } else {
            String::new()
        },
        counted(summary.entries, "entry", "entries")
    )?;
    if let Some(t) = restore_target(findings) {
        writeln!(
            out,
            "Restore to just before the {} {} of {} at {} (ts {}):",
            t.severity.as_str(),
            t.kind.as_str(),
            t.ns,
            t.wall
                .map(|w| a.tz.format(w))
                .unwrap_or_else(|| t.ts.utc_string()),
            t.ts
        )?;
        let oplog = match summary.names.as_slice() {
            [one] if one != "<stdin>" => crate::plan::steps::shell_line(std::slice::from_ref(one)),
            _ => "<OPLOG>".to_string(),
        };
        // The backup given with --backup, else a placeholder to fill in.
        let backup = a.backup.as_ref().map_or_else(
            || "<BACKUP_DIR>".to_string(),
            |b| crate::plan::steps::shell_line(&[b.display().to_string()]),
        );
        writeln!(
            out,
            "  pitr replay --backup {backup} --oplog {oplog} --until {} --dry-run   # check, then drop --dry-run",
            t.oplog_limit
        )?;
        // Not "put this oplog in place of the backup's oplog.bson": that loses the
        // writes made while the dump ran (the backup's own entries). `pitr plan`
        // writes `restore/`: the backup's databases and one oplog.bson holding the
        // backup's own entries, then the slice.
        writeln!(
            out,
            "  # by hand: pitr plan --backup {backup} --oplog {oplog} --until {0} --out plan, then (into a spare mongod):\n  #   mongorestore --oplogReplay --oplogLimit {0} plan/restore",
            t.oplog_limit
        )?;
    }
    Ok(())
}

/// `find-drop --uri`: the same scan over a live server's oplog.
mod live {
    use bson::RawDocument;

    use crate::error::Failure;
    use crate::forensics::{Kind, Scanner};
    use crate::mongo;
    use crate::mongo::oplog_source::{
        covers, stream, window, Lower, OplogQuery, OplogSink, Progress, RetryNotice, RetryPolicy,
        StreamError,
    };
    use crate::oplog::{EntryError, Ts};

    use super::super::dump_oplog::{retry_line, TsProgress};
    use super::super::scan::SourcesSummary;
    use super::FindDropArgs;

    /// How far beyond --since/--until the server read reaches, in seconds (plus the
    /// burst window). See [`server_query`].
    pub const MARGIN_SECS: u32 = 600;

    /// Kinds found from command entries alone, with no state carried over from other
    /// entries: for these a server-side `op: "c"` filter gives exactly the findings
    /// of a full scan.
    ///
    /// Not in the list: `deleteBurst` and `wipingUpdate` (they are `d`/`u` entries);
    /// `drop` and `dropDatabase`, because the scanner groups a run of collection
    /// drops into one dropDatabase finding only while no other entry touches that
    /// database, so an insert between a user's drops and a later dropDatabase
    /// changes the findings, and a commands-only read cannot see it.
    const COMMAND_ONLY_KINDS: [Kind; 3] =
        [Kind::RenameDropTarget, Kind::DropIndexes, Kind::Emptycapped];

    /// The server-side part of the filters.
    ///
    /// - `ts` bounds from --since/--until, widened by [`MARGIN_SECS`] plus the burst
    ///   window on each side: a burst, transaction or drop run that starts shortly
    ///   before --since is still seen to start before it (and filtered out, as on a
    ///   file), and one starting before --until is counted to its end. Only an
    ///   incident reaching across a bound by more than the margin can differ from a
    ///   scan of the whole oplog (its count or start); findings themselves are
    ///   filtered by the exact bounds afterwards, as on files.
    /// - `op: "c"` only when every requested kind is in [`COMMAND_ONLY_KINDS`].
    /// - `--ns` stays client-side: finding namespaces (`db.coll`) are not entry
    ///   namespaces (`db.$cmd`, `admin.$cmd` for transactions), and globs would need
    ///   `$regex`.
    pub fn server_query(a: &FindDropArgs) -> OplogQuery {
        let margin = MARGIN_SECS.saturating_add(a.window);
        OplogQuery {
            must_reach: None,
            lower: a
                .since
                .as_ref()
                .map(|s| Lower::Inclusive(Ts::new(s.ts.t.saturating_sub(margin), 0))),
            upper_inclusive: None,
            upper_exclusive: a
                .until
                .as_ref()
                .map(|u| Ts::new(u.ts.t.saturating_add(margin), 0)),
            only_commands: !a.kind.is_empty()
                && a.kind.iter().all(|k| COMMAND_ONLY_KINDS.contains(k)),
            batch_size: None,
            // A --since older than the oplog is a note, not an error, for find-drop.
            allow_start_gap: true,
        }
    }

    struct ScanSink<'a> {
        scanner: &'a mut Scanner,
        bar: TsProgress,
    }

    impl OplogSink for ScanSink<'_> {
        type Error = (Ts, EntryError);

        fn entry(&mut self, doc: &RawDocument, ts: Ts) -> Result<(), Self::Error> {
            self.scanner.feed_raw(doc).map_err(|e| (ts, e))
        }

        fn progress(&mut self, p: &Progress) -> Result<(), Self::Error> {
            self.bar.update(p);
            Ok(())
        }

        fn retrying(&mut self, n: &RetryNotice<'_>) -> Result<(), Self::Error> {
            self.bar.println(&retry_line(n));
            Ok(())
        }
    }

    /// Reads the server's oplog into `scanner`; notes for the user go to `notes`.
    pub fn scan(
        uri: &str,
        a: &FindDropArgs,
        scanner: &mut Scanner,
        notes: &mut Vec<String>,
    ) -> Result<SourcesSummary, Failure> {
        let mut q = server_query(a);
        let show = !a.json;
        mongo::block_on(async {
            let (client, _topology) = crate::cli::progress::connect_saying(uri, show).await?;
            let target = client.target().display.clone();
            let name = format!(
                "local.oplog.rs of {target}{}",
                if q.only_commands {
                    " (command entries only)"
                } else {
                    ""
                }
            );
            let win = match window(&client).await {
                Ok(w) => w,
                Err(e) => {
                    // Closed, not dropped, on this path too (`verify::connect::close`).
                    client.close().await;
                    return Err(e.into());
                }
            };
            let Some(win) = win else {
                client.close().await;
                return Ok(SourcesSummary {
                    names: vec![name],
                    ..Default::default()
                });
            };
            if let Some(s) = &a.since {
                if !covers(win.oldest.ts, Lower::Inclusive(s.ts)) {
                    notes.push(format!(
                        "the oplog starts at {} ({}), after --since {}: destructive operations before it cannot be seen here",
                        win.oldest.ts,
                        win.oldest.ts.utc_string(),
                        s.ts
                    ));
                }
            }
            // End at the newest entry present now, so the scan ends on a busy server.
            q.upper_inclusive = Some(win.newest.ts);
            let from = q.lower.map_or(win.oldest.ts, |l| l.ts().max(win.oldest.ts));
            let end = q
                .upper_exclusive
                .map_or(win.newest.ts, |u| u.min(win.newest.ts));
            let mut sink = ScanSink {
                scanner,
                bar: TsProgress::new(from, end, show),
            };
            sink.bar.set_prefix("scanning");
            let r = stream(
                &client,
                &q,
                &RetryPolicy::default(),
                Progress::default(),
                &mut sink,
            )
            .await;
            sink.bar.finish();
            client.close().await;
            match r {
                Ok(p) => Ok(SourcesSummary {
                    names: vec![name],
                    entries: p.entries,
                    ..Default::default()
                }),
                Err(StreamError::Source(e)) => Err(Failure::from(e)),
                Err(StreamError::Sink((ts, e))) => Err(Failure::new(format!(
                    "the entry at {ts} ({}) read from `{target}` is not an oplog entry pitr understands",
                    ts.utc_string()
                ))
                .with_cause(e)),
            }
        })?
    }

    #[cfg(test)]
    mod tests {
        use super::*;
        use crate::cli::{Cli, Command};
        use clap::Parser;

        fn args(line: &str) -> FindDropArgs {
            match Cli::try_parse_from(line.split_whitespace())
                .unwrap()
                .command
            {
                Command::FindDrop(a) => a,
                other => panic!("{other:?}"),
            }
        }

        #[test]
        fn server_side_filters_are_only_used_where_they_are_exact() {
            let q = server_query(&args("pitr find-drop --uri u"));
            assert_eq!(
                (q.lower, q.upper_exclusive, q.only_commands),
                (None, None, false)
            );
            // Commands only for kinds that need nothing but commands.
            assert!(
                server_query(&args(
                    "pitr find-drop --uri u --kind dropIndexes --kind emptycapped"
                ))
                .only_commands
            );
            assert!(!server_query(&args("pitr find-drop --uri u --kind drop")).only_commands);
            assert!(
                !server_query(&args(
                    "pitr find-drop --uri u --kind dropIndexes --kind deleteBurst"
                ))
                .only_commands
            );
            // ts bounds widened by the margin plus the burst window.
            let q = server_query(&args(
                "pitr find-drop --uri u --since 1000000:5 --until 2000000:1 --window 20",
            ));
            assert_eq!(q.lower, Some(Lower::Inclusive(Ts::new(1_000_000 - 620, 0))));
            assert_eq!(q.upper_exclusive, Some(Ts::new(2_000_000 + 620, 0)));
            let q = server_query(&args("pitr find-drop --uri u --since 5"));
            assert_eq!(q.lower, Some(Lower::Inclusive(Ts::new(0, 0))));
        }
    }
}

/// The findings table's WHEN column, in the zone the times are shown in.
pub(super) fn when_column(tz: &Zone) -> String {
    format!("WHEN ({})", tz.label())
}

/// The findings table's header (see [`finding_row`]).
pub(super) fn finding_header(when: &str) -> [&str; 7] {
    [
        when,
        "TS",
        "KIND",
        "SEVERITY",
        "NAMESPACE",
        "--oplogLimit",
        "DETAILS",
    ]
}

/// One finding as a row of the findings table (WHEN, TS, KIND, SEVERITY, NAMESPACE,
/// --oplogLimit, DETAILS): the replica set's table and the cluster's.
pub(super) fn finding_row(f: &Finding, tz: &Zone) -> Vec<String> {
    vec![
        f.wall
            .map(|w| tz.format(w))
            .unwrap_or_else(|| format!("{} (ts)", tz.format(f.ts.to_utc()))),
        f.ts.to_string(),
        f.kind.as_str().to_string(),
        f.severity.as_str().to_string(),
        f.ns.clone(),
        f.oplog_limit.to_string(),
        f.details.clone(),
    ]
}
