//! `pitr status --archive DIR [--uri URI]`: what an oplog archive covers, its gaps,
//! its size, whether an archiver writes it, and (with `--uri`) its lag behind the
//! live oplog. The archive side is [`crate::oplog::oplog_archive::status`].

use std::io::{self, Write};
use std::path::Path;

use serde::Serialize;

use crate::error::{exit, Failure};
use crate::mongo::error::human_secs;
use crate::mongo::oplog_source::{covers, window, Lower, Window};
use crate::mongo::{self as live};
use crate::oplog::oplog_archive::status::{status, ArchiveStatus};
use crate::oplog::oplog_archive::{GapRecord, SetAsideRecord};
use crate::oplog::Ts;
use crate::size::human;

/// The archive against the live oplog.
#[derive(Clone, Debug, Serialize)]
struct Live {
    server: String,
    newest: Option<Ts>,
    oldest: Option<Ts>,
    /// Seconds between the archive's last entry and the server's newest.
    lag_seconds: Option<u64>,
    /// The oplog still holds the archive's last entry (or the archive is empty):
    /// the archiver can resume without a gap.
    resumable: bool,
}

#[derive(Serialize)]
struct JsonArchive<'a> {
    dir: String,
    replica_set: Option<&'a str>,
    source: &'a str,
    first: Option<Ts>,
    last: Option<Ts>,
    entries: u64,
    chunks: usize,
    bytes: u64,
    bson_bytes: u64,
    pruned_through: Option<Ts>,
    gaps: &'a [GapRecord],
    set_aside: Vec<JsonSetAside<'a>>,
    archiver_running: bool,
    partial_bytes: u64,
    live: Option<Live>,
    warning: Option<String>,
}

#[derive(Serialize)]
struct JsonSetAside<'a> {
    dir: &'a str,
    diverged_at: Ts,
    through: Ts,
    chunks: usize,
    detected: &'a str,
    detail: &'a str,
}

pub fn run(dir: &Path, uri: Option<&str>, json: bool) -> Result<u8, Failure> {
    let st = status(dir)?;
    let last = st.manifest.last();
    let live = match uri {
        Some(u) => {
            let u = u.to_string();
            let (w, server): (Option<Window>, String) = live::block_on(async move {
                let (client, _) = live::connect(&u).await?;
                let w = window(&client).await;
                let target = client.target().display.clone();
                client.close().await;
                Ok::<_, Failure>((w?, target))
            })??;
            Some(Live {
                server,
                newest: w.map(|w| w.newest.ts),
                oldest: w.map(|w| w.oldest.ts),
                lag_seconds: match (w, last) {
                    (Some(w), Some(l)) => Some(w.newest.ts.t.saturating_sub(l.t) as u64),
                    _ => None,
                },
                resumable: match (w, last) {
                    (Some(w), Some(l)) => covers(w.oldest.ts, Lower::Exclusive(l)),
                    _ => true,
                },
            })
        }
        None => None,
    };
    let warning = live.as_ref().filter(|l| !l.resumable).map(|l| {
        format!(
            "the oplog of `{}` no longer reaches back to the archive's last entry {} ({}): its oldest entry is {} ({}); \
             entries in between are lost to the archive, and the next `pitr archive` run records that gap",
            l.server,
            last.unwrap_or_default(),
            last.unwrap_or_default().utc_string(),
            l.oldest.unwrap_or_default(),
            l.oldest.unwrap_or_default().utc_string()
        )
    });
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    if json {
        super::output::write_json(&mut out, &json_view(&st, live.clone(), warning.clone()))?;
    } else {
        render(&mut out, &st, live.as_ref())?;
    }
    out.flush()?;
    if let Some(w) = &warning {
        eprintln!("warning: {w}");
    }
    Ok(if warning.is_some() {
        exit::NOT_FOUND
    } else {
        exit::OK
    })
}

fn json_view(st: &ArchiveStatus, live: Option<Live>, warning: Option<String>) -> JsonArchive<'_> {
    let m = &st.manifest;
    JsonArchive {
        dir: st.dir.display().to_string(),
        replica_set: m.replica_set.as_deref(),
        source: &m.source,
        first: m.first(),
        last: m.last(),
        entries: m.entries(),
        chunks: m.chunks.len(),
        bytes: m.bytes(),
        bson_bytes: m.chunks.iter().map(|c| c.bson_bytes).sum(),
        pruned_through: m.pruned_through,
        gaps: &m.gaps,
        set_aside: m
            .set_aside
            .iter()
            .map(|s: &SetAsideRecord| JsonSetAside {
                dir: &s.dir,
                diverged_at: s.diverged_at,
                through: s.through,
                chunks: s.chunks.len(),
                detected: &s.detected,
                detail: &s.detail,
            })
            .collect(),
        archiver_running: st.archiver_running,
        partial_bytes: st.partial.iter().map(|(_, n)| n).sum(),
        live,
        warning,
    }
}

fn render(out: &mut impl Write, st: &ArchiveStatus, live: Option<&Live>) -> io::Result<()> {
    let m = &st.manifest;
    writeln!(
        out,
        "archive   {} (pitr oplog archive of {}, from {})",
        st.dir.display(),
        m.replica_set.as_deref().map_or_else(
            || "a standalone".to_string(),
            |n| format!("replica set `{n}`")
        ),
        m.source
    )?;
    match (m.first(), m.last()) {
        (Some(f), Some(l)) => {
            writeln!(out, "covers    {f}  {}", f.utc_string())?;
            writeln!(
                out,
                "      to  {l}  {}  ({})",
                l.utc_string(),
                human_secs(l.t.saturating_sub(f.t) as u64)
            )?;
            writeln!(
                out,
                "          {} entries in {} chunk(s), {} on disk ({} of oplog)",
                m.entries(),
                m.chunks.len(),
                human(m.bytes()),
                human(m.chunks.iter().map(|c| c.bson_bytes).sum())
            )?;
        }
        _ => writeln!(out, "covers    nothing yet (no complete chunk)")?,
    }
    if let Some(p) = m.pruned_through {
        writeln!(out, "pruned    entries up to {p} ({})", p.utc_string())?;
    }
    if m.gaps.is_empty() {
        writeln!(out, "gaps      none")?;
    }
    for g in &m.gaps {
        writeln!(
            out,
            "GAP       after {} ({}) and before {} ({}): entries in between may be missing ({})",
            g.after,
            g.after.utc_string(),
            g.before,
            g.before.utc_string(),
            g.cause
        )?;
    }
    for s in &m.set_aside {
        writeln!(
            out,
            "set aside {} chunk(s) from {} to {} in {}: {} (detected {})",
            s.chunks.len(),
            s.diverged_at,
            s.through,
            s.dir,
            s.detail,
            s.detected
        )?;
    }
    let partial: u64 = st.partial.iter().map(|(_, n)| n).sum();
    writeln!(
        out,
        "writer    {}{}",
        if st.archiver_running {
            "an archiver is writing this directory"
        } else {
            "no archiver is running"
        },
        if st.partial.is_empty() {
            String::new()
        } else {
            format!("; chunk in progress: {} compressed", human(partial))
        }
    )?;
    if let Some(l) = live {
        match l.newest {
            Some(n) => writeln!(
                out,
                "server    {}: newest entry {n} ({}); the archive is {} behind{}",
                l.server,
                n.utc_string(),
                l.lag_seconds.map_or_else(|| "?".to_string(), human_secs),
                if l.resumable {
                    "; its oplog still reaches back to the archive's last entry"
                } else {
                    "; ITS OPLOG NO LONGER REACHES BACK TO THE ARCHIVE'S LAST ENTRY"
                }
            )?,
            None => writeln!(out, "server    {}: its oplog is empty", l.server)?,
        }
    }
    Ok(())
}
