//! `pitr find-drop --cluster cluster.toml`: today's scan on every member of a sharded
//! cluster, merged into one incident per cluster operation (src/cluster/incidents.rs).

use std::io::{self, Write};

use crate::backup::{self, Layout};
use crate::cluster::incidents::{Changelog, Reshard};
use crate::cluster::{self, ClusterFile, ClusterFinding, Member, MemberScan};
use crate::error::Failure;
use crate::forensics::seen::Seen;
use crate::forensics::{BurstRule, Catalog, MetadataDelete, Scanner};
use crate::oplog::ReadOptions;
use crate::table::{counted, Columns};

use super::find_drop::{
    archive_range, check_filters_match, finding_header, finding_row, notes, when_column,
    write_findings, Filter, FindDropArgs,
};
use super::scan::scan_sources_in;

/// What the scans of all members read.
struct Scanned {
    scans: Vec<MemberScan>,
    /// Per member: its id and the sources read.
    read: Vec<(String, Vec<String>, u64)>,
    notes: Vec<String>,
}

pub fn run(a: FindDropArgs) -> Result<u8, Failure> {
    let path = a.cluster.clone().expect("called with --cluster");
    let file = cluster::file::load(&path)?;
    let filter = Filter::new(&a)?;
    let rule = BurstRule {
        threshold: a.min_count,
        window_secs: a.window,
    };
    let mut notes = check_topology(&file)?;
    let mut seen = (!a.ns.is_empty() || a.since.is_some() || a.until.is_some()).then(Seen::default);
    let scanned = scan_members(&a, &file, rule, &mut seen)?;
    notes.extend(scanned.notes);
    if let Some(s) = &seen {
        let names: Vec<String> = scanned
            .read
            .iter()
            .flat_map(|(_, n, _)| n.clone())
            .collect();
        check_filters_match(&a, s, &names)?;
    }
    let (merged, unexplained) = cluster::merge(scanned.scans, rule.window_secs);
    notes.extend(unexplained.iter().map(unexplained_note));
    let kept: Vec<ClusterFinding> = merged
        .into_iter()
        .filter(|c| filter.keep(&c.finding))
        .collect();
    let incidents = kept.iter().filter(|c| !c.finding.is_routine()).count();
    let (listed, hidden): (Vec<ClusterFinding>, Vec<ClusterFinding>) = kept
        .into_iter()
        .partition(|c| a.include_routine || !c.finding.is_routine());
    if !hidden.is_empty() && !a.json {
        notes.push(format!(
            "{} not listed (--include-routine lists them at severity info)",
            counted(
                hidden.len() as u64,
                "routine operation",
                "routine operations"
            )
        ));
    }
    write_findings(a.json, &listed, &notes, incidents, |out| {
        render(out, &a, &file, &listed, incidents, &scanned.read)
    })
}

/// The members against the config server's `config.shards` (from its backup).
fn check_topology(file: &ClusterFile) -> Result<Vec<String>, Failure> {
    let b = backup::open(&file.config.backup)
        .map_err(|e| Failure::from(e).in_context("member `config`"))?;
    match cluster::topology::config_shards(&b).map_err(|e| Failure::from(e).in_context("member `config`"))? {
        Some(ids) => {
            cluster::topology::check_members(file, &ids, &file.config.backup)?;
            Ok(Vec::new())
        }
        None => Ok(vec![format!(
            "the config server's backup `{}` has no config.shards: the shards listed in `{}` could not be checked \
             against the cluster's own list (a shard missing from the file would go unseen)",
            file.config.backup.display(),
            file.path.display()
        )]),
    }
}

/// The oplog sources of one member: its backup's own oplog (the writes made while
/// the dump ran), then its oplog dumps (overlaps are skipped by the scan).
fn member_sources(m: &Member, b: &backup::Backup) -> Vec<String> {
    let mut sources = Vec::new();
    match (b.layout, &b.oplog) {
        (Layout::Directory, Some(p)) => sources.push(p.display().to_string()),
        (Layout::Archive, Some(_)) => sources.push(m.backup.display().to_string()),
        _ => {}
    }
    sources.extend(m.oplog.iter().map(|p| p.display().to_string()));
    sources
}

fn scan_members(
    a: &FindDropArgs,
    file: &ClusterFile,
    rule: BurstRule,
    seen: &mut Option<Seen>,
) -> Result<Scanned, Failure> {
    let opts = ReadOptions {
        allow_truncated: a.allow_truncated,
    };
    let mut out = Scanned {
        scans: Vec::new(),
        read: Vec::new(),
        notes: Vec::new(),
    };
    for m in file.members() {
        let context = format!("member `{}` ({} of `{}`)", m.id, m.key, file.path.display());
        let b = backup::open(&m.backup).map_err(|e| Failure::from(e).in_context(&context))?;
        let mut scanner = Scanner::with_catalog(rule, Catalog::from_backup(&b)).cluster_member();
        let sources = member_sources(m, &b);
        let mut changelog = Changelog::default();
        let is_config = m.role == cluster::Role::Config;
        let summary = scan_sources_in(&sources, opts, !a.json, &archive_range(a), |doc| {
            if let Some(s) = seen.as_mut() {
                s.feed(doc)?;
            }
            if is_config {
                changelog.feed(doc);
            }
            scanner.feed_bytes(doc)
        })
        .map_err(|f| f.in_context(&context))?;
        let out_of_order = scanner.stats().out_of_order;
        let (findings, stats) = scanner.finish();
        // Overlapping dumps of one member are routine; other notes name the member.
        out.notes.extend(
            notes(&summary, out_of_order)
                .into_iter()
                .filter(|n| !n.starts_with("skipped "))
                .map(|n| format!("member `{}`: {n}", m.id)),
        );
        out.read
            .push((m.id.clone(), summary.names, summary.entries));
        out.scans.push(MemberScan {
            member: m.id.clone(),
            role: m.role,
            findings,
            metadata: stats.sharding_metadata,
            changelog,
        });
    }
    Ok(out)
}

/// The cluster incidents of every member as `pitr find-drop --cluster FILE --json`
/// finds them with its default rule, and the reshardings the config server logged:
/// what `plan`/`replay --cluster` take for `--until auto` and for the checks that the
/// limit is not inside a cluster DDL or after a resharding.
pub(super) fn cluster_findings(
    path: &std::path::Path,
    file: &ClusterFile,
    allow_truncated: bool,
) -> Result<(Vec<ClusterFinding>, Vec<Reshard>), Failure> {
    #[derive(clap::Parser)]
    struct Wrap {
        #[command(flatten)]
        a: FindDropArgs,
    }
    let mut argv: Vec<std::ffi::OsString> = vec![
        "find-drop".into(),
        "--cluster".into(),
        path.as_os_str().to_owned(),
        "--json".into(),
    ];
    if allow_truncated {
        argv.push("--allow-truncated".into());
    }
    let w =
        <Wrap as clap::Parser>::try_parse_from(argv).map_err(|e| Failure::new(e.to_string()))?;
    let rule = BurstRule {
        threshold: w.a.min_count,
        window_secs: w.a.window,
    };
    let scanned = scan_members(&w.a, file, rule, &mut None)?;
    let reshards: Vec<Reshard> = scanned
        .scans
        .iter()
        .flat_map(|s| s.changelog.reshards.iter().cloned())
        .collect();
    Ok((cluster::merge(scanned.scans, rule.window_secs).0, reshards))
}

fn unexplained_note(m: &MetadataDelete) -> String {
    format!(
        "the config server deleted {} {} at {} ({}), and no shard's oplog shows a matching drop: a DDL whose shard \
         entries are outside the oplogs read, or routine metadata work (a rename, a reshard)",
        m.ns,
        m.id.as_deref().map_or_else(|| counted(m.count, "document", "documents"), |id| format!("`{id}`")),
        m.ts,
        m.ts.utc_string()
    )
}

fn render(
    out: &mut impl Write,
    a: &FindDropArgs,
    file: &ClusterFile,
    listed: &[ClusterFinding],
    incidents: usize,
    read: &[(String, Vec<String>, u64)],
) -> io::Result<()> {
    let entries: u64 = read.iter().map(|(_, _, n)| n).sum();
    let members = read
        .iter()
        .map(|(id, _, n)| format!("{id} ({})", counted(*n, "entry", "entries")))
        .collect::<Vec<_>>()
        .join(", ");
    if listed.is_empty() {
        writeln!(
            out,
            "No destructive operations found in {} of the {} members of `{}`: {members}.",
            counted(entries, "entry", "entries"),
            read.len(),
            file.path.display()
        )?;
        return Ok(());
    }
    let when = when_column(&a.tz);
    let header = finding_header(&when);
    let rows: Vec<Vec<String>> = listed
        .iter()
        .map(|c| finding_row(&c.finding, &a.tz))
        .collect();
    let cols = Columns::fit(&header, &rows);
    writeln!(out, "{}", cols.line(&header))?;
    let width = crate::table::stdout_width().unwrap_or(usize::MAX);
    for (r, c) in rows.iter().zip(listed) {
        for line in cols.lines_within(r, width) {
            writeln!(out, "{line}")?;
        }
        if !c.finding.collections.is_empty() {
            writeln!(out, "    collections: {}", c.finding.collections.join(", "))?;
        }
        for p in &c.members {
            writeln!(out, "    {}", member_line(p))?;
        }
    }
    writeln!(out)?;
    writeln!(
        out,
        "{} in {} of the {} members of `{}`: {members}.",
        counted(incidents as u64, "finding", "findings"),
        counted(entries, "entry", "entries"),
        read.len(),
        file.path.display()
    )?;
    writeln!(
        out,
        "--oplogLimit is exclusive and one cluster time for every member: entries with ts < limit are applied on \
         each of them: `pitr replay --cluster FILE --until LIMIT --out DIR` restores the cluster there (docs/sharded.md)."
    )?;
    Ok(())
}

/// `config    1795223000:7  metadata  config.collections shop.orders`, or a shard's part.
fn member_line(p: &cluster::MemberPart) -> String {
    let kind = if p.from_migrate {
        format!("{} (fromMigrate)", p.kind)
    } else {
        p.kind.to_string()
    };
    let mut s = format!(
        "{:<8} {:<14} {:<18} {}",
        p.member,
        p.ts.to_string(),
        kind,
        p.ns
    );
    if let Some(id) = &p.id {
        s.push_str(&format!(" `{id}`"));
    }
    let counted_kind = matches!(p.kind, "metadata" | "deleteBurst" | "wipingUpdate");
    if counted_kind && p.count > 1 {
        s.push_str(&format!(" x{}", p.count));
    }
    if let Some(n) = p.num_records {
        s.push_str(&format!(
            " ({})",
            counted(n.max(0) as u64, "document", "documents")
        ));
    }
    s
}
