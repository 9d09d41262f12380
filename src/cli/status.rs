//! `pitr status`: a server's version, topology and oplog window, read-only. The work
//! is in [`crate::mongo::status`]; this file parses flags and renders text or JSON.

use std::io::{self, Write};
use std::time::Duration;

use serde::Serialize;

use crate::error::{exit, Failure};
use crate::mongo::error::human_secs;
use crate::mongo::status::{gather, Member, MembersFrom, ServerStatus};
use crate::mongo::{self as live, Topology};
use crate::oplog::Ts;

use crate::size::human;

// No doc comment here: the one-line about comes from `Command::Status` in `cli/mod.rs`.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("what").required(true).multiple(true).args(["uri", "archive"])))]
#[command(after_long_help = "\
Shows the server version, the topology (replica set name and members, or a standalone \
that has an oplog), the oplog window (oldest and newest entry, ts and wall clock, hours \
covered) and the oplog's size and configured maximum (\"unknown\" when the user may not run \
collStats or the server does not report it).

The window is how far back a point-in-time restore can reach with this oplog (plus a \
backup taken inside it). A window shorter than --min-window is a warning and exit code 1, \
so `pitr status` can run from cron or a monitoring check.

Read-only: hello, buildInfo, replSetGetStatus (optional) and collStats (optional), and \
`find` on local.oplog.rs. A mongos or a standalone without an oplog is refused (exit 2).

Exit codes: 0 window at least --min-window, 1 window shorter, 2 error (with --archive: 0 \
intact, 1 a damaged or missing chunk, a recorded gap, the oplog no longer reaching back, or \
the archive's filesystem filling within --min-disk-time, 2 error).

With --archive DIR: what the oplog archive covers (first and last entry, entries, chunks, \
size), whether every chunk the manifest lists is there with its recorded size and CRC-64 \
(each chunk file is read whole; --quick checks presence and size only), its recorded gaps \
and set-aside histories, whether an archiver is writing it; with --uri as well, how far it \
lags behind the live oplog, and whether the oplog still reaches back to its last entry. \
Exit 1 names each damaged chunk and each recorded gap (a restore across them is refused), \
or says the oplog no longer reaches back (restarting the archiver would record a gap). For a \
local directory it also says how long the free space of its filesystem lasts at the \
archive's growth over its last week (before pruning), and warns (exit 1) under \
--min-disk-time (default 2d): a full disk stops the archiver, and the oplog then rolls over \
what was not archived. A \
path that is not an oplog archive is named for what it is (no such directory, a mongodump \
backup directory, a mongodump archive file, an oplog file).

Examples:
  pitr status --uri 'mongodb://monitor@db1:27017/?replicaSet=rs0&authSource=admin'
  PITR_URI='mongodb://...' pitr status --min-window 48h --json
  pitr status --archive /backup/oplog --uri 'mongodb://monitor@db1/?replicaSet=rs0'")]
pub struct StatusArgs {
    /// MongoDB connection string (password inside it, never on its own)
    // One of --uri and --archive, as a required group: with `required_unless_present`
    // clap's error named only --uri, never --archive (issue 17).
    #[arg(long, env = "PITR_URI", hide_env_values = true, value_name = "URI")]
    pub uri: Option<String>,
    /// Show an oplog archive (a directory or bucket prefix written by `pitr archive`)
    /// instead; with --uri, also its lag behind the live oplog
    #[arg(long, value_name = "DIR")]
    pub archive: Option<std::path::PathBuf>,
    /// Warn (and exit 1) when the oplog covers less than this (e.g. 24h, 90m, 2d)
    #[arg(long, value_name = "DURATION", default_value = "24h", value_parser = parse_min_window)]
    pub min_window: Duration,
    /// Machine-readable output on stdout
    #[arg(long)]
    pub json: bool,
    /// With --archive (a local directory): warn (and exit 1) when its filesystem would
    /// fill within this at the archive's growth over its last week (e.g. 2d, 36h)
    #[arg(long, value_name = "DURATION", default_value = "2d", value_parser = parse_min_window)]
    pub min_disk_time: Duration,
    /// With --archive: check only that every chunk is there with its recorded size,
    /// not its CRC-64 (which reads every chunk file whole)
    #[arg(long, requires = "archive")]
    pub quick: bool,
}

fn parse_min_window(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s)
        .map_err(|e| format!("`{s}` is not a duration ({e}); use e.g. `24h`, `90m`, `2d`"))
}

pub fn run(a: StatusArgs) -> Result<u8, Failure> {
    if let Some(dir) = &a.archive {
        let dir = crate::storage::Location::of_path(dir)?;
        return super::archive_status::run(
            &dir,
            &super::archive_status::Ask {
                uri: a.uri.as_deref(),
                json: a.json,
                quick: a.quick,
                min_disk: a.min_disk_time,
            },
        );
    }
    let Some(uri) = a.uri.clone() else {
        return Err(Failure::new(
            "nothing to show: give `--uri URI` (or PITR_URI) for a server, or `--archive DIR` for an oplog archive",
        )
        .with_hint(
            "e.g. `pitr status --uri 'mongodb://monitor@db1/?replicaSet=rs0'` or \
             `pitr status --archive /backup/oplog` (both: the archive and its lag behind the server); \
             see `pitr status --help`",
        ));
    };
    let st = live::block_on(async move {
        let (client, topology) = super::progress::connect_saying(&uri, !a.json).await?;
        let st = gather(&client, &topology).await;
        client.close().await;
        Ok::<_, Failure>(st?)
    })??;
    let short = st
        .window
        .is_some_and(|w| w.span_secs() < a.min_window.as_secs());
    let warning = short.then(|| {
        let w = st.window.expect("short implies a window");
        format!(
            "the oplog window ({}) is shorter than --min-window {}: a restore can only reach back to {} ({}); \
             take backups more often than that, or grow the oplog (`replSetResizeOplog`)",
            human_secs(w.span_secs()),
            humantime::format_duration(a.min_window),
            w.oldest.ts,
            w.oldest.ts.utc_string()
        )
    });
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    if a.json {
        super::output::write_json(&mut out, &json_view(&st, &a, warning.as_deref()))?;
        out.flush()?;
        if let Some(w) = &warning {
            eprintln!("warning: {w}");
        }
    } else {
        render(&mut out, &st)?;
        out.flush()?;
        if let Some(w) = &warning {
            eprintln!("warning: {w}");
        }
    }
    Ok(if short { exit::NOT_FOUND } else { exit::OK })
}

fn wall_text(ms: Option<i64>) -> String {
    ms.and_then(chrono::DateTime::from_timestamp_millis)
        .map(|w| w.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .unwrap_or_else(|| "no wall clock".to_string())
}

fn render(out: &mut impl Write, st: &ServerStatus) -> io::Result<()> {
    writeln!(out, "server    {}", st.target)?;
    writeln!(
        out,
        "version   {}{}",
        st.version.as_deref().unwrap_or("unknown"),
        if st.standin {
            " (pitr test stand-in)"
        } else {
            ""
        }
    )?;
    match &st.topology {
        Topology::ReplicaSet { name, primary, .. } => {
            writeln!(
                out,
                "topology  replica set `{name}`, {}",
                crate::table::counted(st.members.len() as u64, "member", "members")
            )?;
            for m in &st.members {
                writeln!(out, "            {}", member_line(m, primary.as_deref()))?;
            }
            if st.members_from == MembersFrom::Hello {
                writeln!(
                    out,
                    "            (states unknown: replSetGetStatus was not permitted)"
                )?;
            }
        }
        Topology::StandaloneWithOplog => {
            writeln!(
                out,
                "topology  standalone mongod with an oplog (not a replica set member now)"
            )?;
        }
    }
    match &st.window {
        Some(w) => {
            writeln!(
                out,
                "oplog     oldest {}  {}  ({})",
                w.oldest.ts,
                w.oldest.ts.utc_string(),
                wall_text(w.oldest.wall_ms)
            )?;
            writeln!(
                out,
                "          newest {}  {}  ({})",
                w.newest.ts,
                w.newest.ts.utc_string(),
                wall_text(w.newest.wall_ms)
            )?;
            writeln!(
                out,
                "          window {} ({:.1} hours)",
                human_secs(w.span_secs()),
                w.span_secs() as f64 / 3600.0
            )?;
        }
        None => writeln!(out, "oplog     empty")?,
    }
    let size = st.oplog_size.map_or_else(|| "unknown".to_string(), human);
    let max = st.oplog_max.map_or_else(|| "unknown".to_string(), human);
    write!(out, "          size {size} of maximum {max}")?;
    if let Some(n) = &st.size_note {
        write!(out, " ({n})")?;
    }
    writeln!(out)?;
    Ok(())
}

fn member_line(m: &Member, primary: Option<&str>) -> String {
    let state = m.state.clone().unwrap_or_else(|| {
        if primary == Some(m.name.as_str()) {
            "PRIMARY".into()
        } else {
            "?".into()
        }
    });
    let mut s = format!("{:<24} {state}", m.name);
    if let Some(o) = m.optime {
        s.push_str(&format!("  optime {o} ({})", o.utc_string()));
    }
    if m.health.is_some_and(|h| h < 1.0) {
        s.push_str("  UNHEALTHY");
    }
    s
}

#[derive(Serialize)]
struct JsonEdge {
    ts: Ts,
    utc: String,
    wall: Option<String>,
}

#[derive(Serialize)]
struct JsonWindow {
    oldest: JsonEdge,
    newest: JsonEdge,
    seconds: u64,
    hours: f64,
}

#[derive(Serialize)]
struct JsonStatus<'a> {
    server: &'a str,
    version: Option<&'a str>,
    standin: bool,
    topology: &'static str,
    replica_set: Option<&'a str>,
    members: &'a [Member],
    members_from: MembersFrom,
    oplog: Option<JsonWindow>,
    oplog_size_bytes: Option<u64>,
    oplog_max_bytes: Option<u64>,
    min_window_seconds: u64,
    warning: Option<&'a str>,
}

fn json_view<'a>(st: &'a ServerStatus, a: &StatusArgs, warning: Option<&'a str>) -> JsonStatus<'a> {
    let edge = |e: crate::mongo::oplog_source::EdgeEntry| JsonEdge {
        ts: e.ts,
        utc: e.ts.utc_string(),
        wall: e
            .wall_ms
            .and_then(chrono::DateTime::from_timestamp_millis)
            .map(|w| w.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)),
    };
    JsonStatus {
        server: &st.target,
        version: st.version.as_deref(),
        standin: st.standin,
        topology: match st.topology {
            Topology::ReplicaSet { .. } => "replicaSet",
            Topology::StandaloneWithOplog => "standalone",
        },
        replica_set: st.topology.set_name(),
        members: &st.members,
        members_from: st.members_from,
        oplog: st.window.map(|w| JsonWindow {
            oldest: edge(w.oldest),
            newest: edge(w.newest),
            seconds: w.span_secs(),
            hours: (w.span_secs() as f64 / 36.0).round() / 100.0,
        }),
        oplog_size_bytes: st.oplog_size,
        oplog_max_bytes: st.oplog_max,
        min_window_seconds: a.min_window.as_secs(),
        warning,
    }
}
