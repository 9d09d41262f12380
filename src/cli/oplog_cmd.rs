//! `pitr oplog ...`: looking inside oplog dumps.

use std::io::{self, Write};

use bson::RawBsonRef;

use crate::error::{exit, Failure};
use crate::oplog::{self, Entry, Op, ReadOptions};

use super::progress::ScanProgress;

#[derive(Debug, clap::Subcommand)]
pub enum OplogCommand {
    /// Print entries one per line: ts, wall time, op, namespace, summary
    #[command(after_long_help = "Examples:\n  \
        pitr oplog cat fixtures/incident/oplog.bson\n  \
        pitr oplog cat dump/ --limit 20            # a mongodump dir: its oplog.bson\n  \
        pitr oplog cat oplog.bson.gz --json | jq .  # extended JSON, one entry per line\n  \
        cat oplog.bson | pitr oplog cat -")]
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

fn cat(a: CatArgs) -> Result<u8, Failure> {
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let mut printed = 0u64;
    let opts = ReadOptions {
        allow_truncated: a.allow_truncated,
    };
    'sources: for src in &a.sources {
        let mut r = oplog::open(src, opts)?;
        let (counter, total) = r.progress();
        let bar = ScanProgress::new(counter, total, !a.json);
        while let Some(e) = r.next_entry()? {
            if a.limit.is_some_and(|l| printed >= l) {
                break 'sources;
            }
            if a.json {
                let doc = bson::Document::try_from(e.raw).map_err(|err| {
                    Failure::new(format!(
                        "entry {} at byte {} of `{}` cannot be converted to JSON",
                        e.index + 1,
                        e.offset,
                        r.name()
                    ))
                    .with_cause(err)
                })?;
                let json = bson::Bson::Document(doc).into_relaxed_extjson();
                writeln!(out, "{json}")?;
            } else {
                writeln!(out, "{}", summary_line(&e))?;
            }
            printed += 1;
            if printed % 4096 == 0 {
                bar.tick();
            }
        }
        bar.finish();
        if let Some(t) = r.truncation() {
            out.flush()?;
            eprintln!(
                "warning: {t}; read the {} complete entries before it (--allow-truncated)",
                t.complete_entries
            );
        }
    }
    out.flush()?;
    Ok(exit::OK)
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
