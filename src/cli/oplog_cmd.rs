//! `pitr oplog ...`: looking inside oplog dumps.

use std::collections::{BTreeSet, VecDeque};
use std::io::{self, Write};

use bson::RawBsonRef;

use crate::closest::{closest, listed};
use crate::error::{exit, Failure, Hint};
use crate::oplog::oplog_archive::ChunkRange;
use crate::oplog::reader::not_an_entry;
use crate::oplog::{self, Entry, EntryError, Op, ReadOptions, Ts};
use crate::plan::filter::{target, NsFilter, Target};
use crate::time::{parse_time, TimeValue};

use super::output::counted;
use super::progress::{while_opening, ScanProgress};

#[derive(Debug, clap::Subcommand)]
pub enum OplogCommand {
    /// Print entries one per line: ts, wall time, op, namespace, summary
    #[command(
        after_long_help = "--ns, --since and --until select entries (--since inclusive, \
        --until exclusive as --oplogLimit); --around shows the entry at a time (the first at or \
        after it, marked `>`) with -n entries before and after it. A selection that matches \
        nothing is exit 1 with an error naming the value and what the oplog holds (its range, \
        the closest namespaces). Exit codes: 0 entries printed, 1 nothing matched, 2 error.\n\n\
        Examples:\n  \
        pitr oplog cat fixtures/incident/oplog.bson\n  \
        pitr oplog cat dump/ --limit 20            # a mongodump dir: its oplog.bson\n  \
        pitr oplog cat oplog.bson --ns 'shop.*' --since 2026-11-21T01:05:00Z --until 1795223166\n  \
        pitr oplog cat oplog.bson --around 1795223165:1 -n 3   # what happened around a drop\n  \
        pitr oplog cat oplog.bson.gz --json | jq .  # extended JSON, one entry per line\n  \
        cat oplog.bson | pitr oplog cat -"
    )]
    Cat(CatArgs),
    /// Summarise oplogs: window covered, entries by op and namespace, activity timeline
    #[command(
        after_long_help = "The timeline is by oplog time (ts), one row per bucket, from the first \
        bucket with entries to the last. Gaps matter: an empty bucket between two busy ones is a row \
        of its own, and a run of empty buckets is one row saying how many (so a dump spanning years \
        costs no more than one spanning minutes). Rows holding a destructive operation (as find-drop \
        reports them) are marked with `!`.\n\n\
        Without --bucket, a size giving about 60 rows is chosen (1s ... 1day, 7days, 28days, \
        364days). At most 10000 buckets may hold entries: a --bucket that needs more is refused \
        (exit 2) with a size that fits, as soon as the scan gets there; memory stays bounded \
        whatever the oplog's time span.\n\n\
        Examples:\n  \
        pitr oplog stats fixtures/incident/oplog.bson\n  \
        pitr oplog stats oplog.bson.gz --bucket 5m --top 20\n  \
        pitr oplog stats dump/ --json | jq .window_secs"
    )]
    Stats(super::stats::StatsArgs),
}

#[derive(Debug, clap::Args)]
pub struct CatArgs {
    /// Oplog sources: a .bson or .bson.gz file, a mongodump directory, or `-` for stdin
    #[arg(required = true, value_name = "OPLOG")]
    pub sources: Vec<String>,
    /// Only entries acting on a namespace matching GLOB (repeatable), as --ns of plan
    /// and find-drop: a command counts for the collection it acts on (`drop`,
    /// `renameCollection`: both sides, `dropDatabase`: every collection of the
    /// database), applyOps and transactions for each operation inside
    #[arg(long = "ns", value_name = "GLOB")]
    pub ns: Vec<String>,
    /// Only entries at or after this time (inclusive): T:I, T, RFC 3339, oid:<hex>,
    /// Timestamp(T, I), ... (see `pitr ts --help`)
    #[arg(long, value_name = "TIME", value_parser = parse_time)]
    pub since: Option<TimeValue>,
    /// Only entries before this time (exclusive, as mongorestore --oplogLimit)
    #[arg(long, value_name = "TIME", value_parser = parse_time)]
    pub until: Option<TimeValue>,
    /// The entry at this time (the first at or after it), marked `>`, with
    /// --context entries before and after it
    #[arg(long, value_name = "TIME", value_parser = parse_time,
          conflicts_with_all = ["since", "until", "limit"])]
    pub around: Option<TimeValue>,
    /// With --around: how many entries to show before and after it (at most 10000)
    #[arg(short = 'n', long = "context", value_name = "N", default_value_t = 5,
          value_parser = clap::value_parser!(u16).range(0..=10000), requires = "around")]
    pub context: u16,
    /// Stop after this many entries
    #[arg(long, value_name = "N")]
    pub limit: Option<u64>,
    /// One relaxed extended-JSON document per line instead of a summary
    #[arg(long)]
    pub json: bool,
    /// Read the complete entries of a truncated file instead of failing (says so on stderr)
    #[arg(long)]
    pub allow_truncated: bool,
}

pub fn run(cmd: OplogCommand) -> Result<u8, Failure> {
    match cmd {
        OplogCommand::Cat(a) => cat(a),
        OplogCommand::Stats(a) => super::stats::run(a),
    }
}

/// Namespaces remembered for "closest namespaces" hints, at most (memory stays
/// bounded whatever the oplog).
const MAX_SEEN_NS: usize = 100_000;

/// What `cat` saw, for the "matched nothing" errors.
#[derive(Default)]
struct Seen {
    /// Entries read.
    entries: u64,
    /// Entries within --since/--until.
    in_range: u64,
    /// Entries printed (or, with --around, selected).
    matched: u64,
    first: Option<Ts>,
    last: Option<Ts>,
    namespaces: BTreeSet<String>,
}

impl Seen {
    fn namespace(&mut self, ns: &str) {
        if !ns.is_empty()
            && !ns.ends_with(".$cmd")
            && self.namespaces.len() < MAX_SEEN_NS
            && !self.namespaces.contains(ns)
        {
            self.namespaces.insert(ns.to_string());
        }
    }
}

/// The `--around` window: the entries before the anchor, then how many to show
/// after it.
enum Around {
    Before(VecDeque<String>),
    After(u16),
    Done,
}

fn cat(a: CatArgs) -> Result<u8, Failure> {
    let filter = NsFilter::new(&a.ns).map_err(|e| {
        let hint = e.hint();
        let f = Failure::new(e.to_string());
        match hint {
            Some(h) => f.with_hint(h),
            None => f,
        }
    })?;
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let opts = ReadOptions {
        allow_truncated: a.allow_truncated,
    };
    // An oplog archive yields only the chunks the range needs.
    let range = ChunkRange {
        from: a.since.as_ref().map(|s| s.ts),
        to: a.until.as_ref().map(|u| u.ts),
    };
    let mut seen = Seen::default();
    let mut around = a.around.as_ref().map(|_| Around::Before(VecDeque::new()));
    let mut anchor: Option<(Ts, u64)> = None;
    'sources: for src in &a.sources {
        let mut r = while_opening(src, !a.json, || oplog::open_range(src, opts, &range))?;
        let (counter, total) = r.progress();
        let name = r.name().to_string();
        let mut bar = ScanProgress::new(&format!("reading {name}"), counter, total, !a.json);
        while let Some(e) = r.next_entry()? {
            seen.entries += 1;
            if seen.entries % 4096 == 0 {
                bar.tick();
            }
            seen.first = Some(seen.first.map_or(e.ts, |f| f.min(e.ts)));
            seen.last = Some(seen.last.map_or(e.ts, |l| l.max(e.ts)));
            if a.since.as_ref().is_some_and(|s| e.ts < s.ts)
                || a.until.as_ref().is_some_and(|u| e.ts >= u.ts)
            {
                continue;
            }
            seen.in_range += 1;
            if let Some(f) = &filter {
                let hit = selects(f, &e, &mut seen)
                    .map_err(|err| not_an_entry(name.clone(), e.offset, e.index, err))?;
                if !hit {
                    continue;
                }
            }
            if a.limit.is_some_and(|l| seen.matched >= l) {
                break 'sources;
            }
            seen.matched += 1;
            let line = render_line(&e, a.json, &name)?;
            match (&mut around, &a.around) {
                (None, _) | (_, None) => writeln!(out, "{line}")?,
                (Some(Around::Before(ring)), Some(at)) => {
                    if e.ts >= at.ts {
                        let before = ring.len() as u64;
                        for l in ring.drain(..) {
                            writeln!(out, "{}{l}", if a.json { "" } else { "  " })?;
                        }
                        writeln!(out, "{}{line}", if a.json { "" } else { "> " })?;
                        anchor = Some((e.ts, before + 1));
                        around = Some(if a.context == 0 {
                            Around::Done
                        } else {
                            Around::After(a.context)
                        });
                    } else {
                        if ring.len() == a.context as usize {
                            ring.pop_front();
                        }
                        if a.context > 0 {
                            ring.push_back(line);
                        }
                    }
                }
                (Some(Around::After(k)), Some(_)) => {
                    writeln!(out, "{}{line}", if a.json { "" } else { "  " })?;
                    *k -= 1;
                    if *k == 0 {
                        around = Some(Around::Done);
                    }
                }
                (Some(Around::Done), Some(_)) => {}
            }
            if matches!(around, Some(Around::Done)) {
                break 'sources;
            }
        }
        bar.finish();
        if let Some(t) = r.truncation() {
            out.flush()?;
            eprintln!(
                "warning: {t}; read the {} before it (--allow-truncated)",
                counted(t.complete_entries, "complete entry", "complete entries")
            );
        }
    }
    out.flush()?;
    if let Some(at) = &a.around {
        return match anchor {
            Some((ts, line)) => {
                if ts != at.ts || a.json {
                    eprintln!(
                        "note: {} is the first entry at or after {}{}",
                        ts,
                        flag_value("around", at),
                        if a.json {
                            format!("; it is line {line}")
                        } else {
                            String::new()
                        }
                    );
                }
                Ok(exit::OK)
            }
            None => Err(nothing_matched(&a, &seen, NothingAt::Around(at))),
        };
    }
    if seen.entries > 0 && seen.matched == 0 {
        return Err(nothing_matched(&a, &seen, NothingAt::Filter));
    }
    Ok(exit::OK)
}

/// Whether `e` (any operation inside an applyOps too) acts on a namespace `f`
/// selects; notes the namespaces it sees.
fn selects(f: &NsFilter, e: &Entry<'_>, seen: &mut Seen) -> Result<bool, EntryError> {
    let mut hit = f.matches(e.ns);
    e.for_each_leaf(&mut |l: &Entry<'_>| -> Result<(), EntryError> {
        let target = target(l);
        match &target {
            Target::Ns(ns) => seen.namespace(ns),
            Target::Rename(x, y) => {
                seen.namespace(x);
                seen.namespace(y);
            }
            _ => seen.namespace(l.ns),
        }
        if !hit {
            hit = f.matches(l.ns)
                || match target {
                    Target::Ns(ns) => f.matches(&ns),
                    Target::Rename(x, y) => f.matches(&x) || f.matches(&y),
                    // Every collection of the database: those seen so far, or a glob
                    // naming the database.
                    Target::Database(db) => {
                        f.matches_db(&db, seen.namespaces.iter().map(String::as_str))
                            || f.globs().iter().any(|g| g.starts_with(&format!("{db}.")))
                    }
                    Target::Other => false,
                };
        }
        Ok(())
    })?;
    Ok(hit)
}

fn render_line(e: &Entry<'_>, json: bool, name: &str) -> Result<String, Failure> {
    if !json {
        return Ok(summary_line(e));
    }
    let doc = bson::Document::try_from(e.raw).map_err(|err| {
        Failure::new(format!(
            "entry {} at byte {} of `{}` cannot be converted to JSON",
            e.index + 1,
            e.offset,
            name
        ))
        .with_cause(err)
    })?;
    Ok(bson::Bson::Document(doc).into_relaxed_extjson().to_string())
}

enum NothingAt<'a> {
    Filter,
    Around(&'a TimeValue),
}

/// `` `--FLAG VALUE` (t:i, UTC) `` for messages.
fn flag_value(flag: &str, v: &TimeValue) -> String {
    format!("`--{flag} {}` ({}, {})", v.input, v.ts, v.ts.utc_string())
}

/// "--ns/--since/--until/--around matched nothing": exit 1 (nothing found), with
/// what the oplog does hold.
fn nothing_matched(a: &CatArgs, seen: &Seen, what: NothingAt<'_>) -> Failure {
    let sources = a
        .sources
        .iter()
        .map(|s| format!("`{s}`"))
        .collect::<Vec<_>>()
        .join(", ");
    let span = match (seen.first, seen.last) {
        (Some(f), Some(l)) => format!(
            "its {} run from {f} ({}) to {l} ({})",
            counted(seen.entries, "entry", "entries"),
            f.utc_string(),
            l.utc_string()
        ),
        _ => "it holds no entry".into(),
    };
    let ns_part = |f: Failure| -> Failure {
        if a.ns.is_empty() {
            return f;
        }
        let names: Vec<&str> =
            a.ns.iter()
                .flat_map(|g| closest(g, seen.namespaces.iter().map(String::as_str), 3))
                .collect::<BTreeSet<&str>>()
                .into_iter()
                .collect();
        let near = closest(&a.ns.join(" "), names.iter().copied(), 5);
        f.with_hint(if near.is_empty() {
            "the entries read act on no namespace".to_string()
        } else {
            format!(
                "closest namespaces in the oplog: {}; --ns takes globs (`shop.*`, `*.orders`)",
                listed(&near)
            )
        })
    };
    let globs =
        a.ns.iter()
            .map(|g| format!("`--ns {g}`"))
            .collect::<Vec<_>>()
            .join(", ");
    let f = match what {
        NothingAt::Around(at) => {
            let within = if a.ns.is_empty() {
                String::new()
            } else {
                format!(" matching {globs}")
            };
            let f = Failure::new(format!(
                "no entry{within} is at or after {} in {sources}: {span}",
                flag_value("around", at)
            ));
            if a.ns.is_empty() {
                f.with_hint("give a time within the oplog's range (`pitr oplog stats` shows it)")
            } else {
                ns_part(f)
            }
        }
        NothingAt::Filter if seen.in_range == 0 => {
            let bound = match (&a.since, &a.until) {
                (Some(s), Some(u)) => format!(
                    "at or after {} and before {}",
                    flag_value("since", s),
                    flag_value("until", u)
                ),
                (Some(s), None) => format!("at or after {}", flag_value("since", s)),
                (None, Some(u)) => format!("before {}", flag_value("until", u)),
                (None, None) => "in range".into(),
            };
            Failure::new(format!("no entry of {sources} is {bound}: {span}")).with_hint(
                "`pitr oplog stats` shows the oplog's range and activity; `pitr oplog cat --around TIME` \
                 the entries nearest a time",
            )
        }
        NothingAt::Filter => {
            let range = if a.since.is_some() || a.until.is_some() {
                format!(
                    " ({} within --since/--until)",
                    counted(seen.in_range, "entry", "entries")
                )
            } else {
                String::new()
            };
            ns_part(Failure::new(format!(
                "{globs} matches no entry of {sources}{range}: {span}"
            )))
        }
    };
    f.with_exit_code(exit::NOT_FOUND)
}

/// `ts  wall  op  ns  summary` for a terminal.
pub fn summary_line(e: &Entry<'_>) -> String {
    let wall = e
        .wall()
        .map(|w| w.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string())
        .unwrap_or_else(|| "-".into());
    let ns = if e.ns.is_empty() { "-" } else { e.ns };
    format!(
        "{:<22} {:<24} {:<2} {:<30} {}",
        e.ts.to_string(),
        wall,
        e.op.as_str(),
        ns,
        describe(e)
    )
}

/// A short description of what an entry does.
pub fn describe(e: &Entry<'_>) -> String {
    let id = |d: Option<&bson::RawDocument>| {
        d.and_then(|d| d.get("_id").ok().flatten())
            .map(short_value)
            .unwrap_or_else(|| "?".into())
    };
    match e.op {
        Op::Insert => format!("_id={}", id(e.o)),
        Op::Delete => format!("_id={}", id(e.o)),
        Op::Update => format!("_id={}", id(e.o2)),
        Op::Noop => {
            e.o.and_then(|o| o.get_str("msg").ok())
                .map(|m| format!("msg={m:?}"))
                .unwrap_or_default()
        }
        Op::Command => {
            let name = e.command_name().unwrap_or("?");
            match e.o.and_then(|o| o.get(name).ok().flatten()) {
                Some(RawBsonRef::Array(a)) if name == "applyOps" => {
                    format!("applyOps ({} ops)", a.into_iter().count())
                }
                Some(v) => format!("{name} {}", short_value(v)),
                None => name.to_string(),
            }
        }
        Op::Other(_) => String::new(),
    }
}

fn short_value(v: RawBsonRef<'_>) -> String {
    let s = match v {
        RawBsonRef::String(s) => s.to_string(),
        RawBsonRef::ObjectId(o) => format!("ObjectId({o})"),
        other => match other.to_raw_bson().try_into() {
            Ok(b) => {
                let b: bson::Bson = b;
                b.into_relaxed_extjson().to_string()
            }
            Err(_) => "?".into(),
        },
    };
    if s.chars().count() > 60 {
        let cut: String = s.chars().take(57).collect();
        format!("{cut}...")
    } else {
        s
    }
}
