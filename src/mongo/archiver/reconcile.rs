//! Does the server still hold the history the archive ends with?
//!
//! Before every read (at start, and after every reconnection: a failover, a
//! restarted member, a dropped connection) the last archived entry is looked up on
//! the server:
//!
//! - there, with the same bytes (so the same `ts`, `t` and content): reading
//!   continues right after it, so nothing is archived twice or skipped;
//! - the oplog's oldest entry is newer: the capped oplog dropped entries before
//!   they were read, a **gap** (recorded with both positions);
//! - the server's newest entry is older: it lags behind the member read before
//!   (wait for it). A rolled-back primary is told from a lagging member as soon as
//!   the new primary writes past the archive's last entry, which is soon even on an
//!   idle set: a new primary logs a `{msg: "new primary"}` no-op on stepping up
//!   (mongo `src/mongo/db/repl/replication_coordinator_external_state_impl.cpp`),
//!   and a primary without writes logs a periodic no-op (`noop_writer.cpp`,
//!   `writePeriodicNoops`, every `periodicNoopIntervalSecs`);
//! - otherwise absent, or different: the server's history **diverged** from the
//!   archive (a rollback after a failover: the old primary's newest entries, which
//!   the archive got, never reached the new primary; the server itself finds the
//!   common point and truncates its oplog after it, `src/mongo/db/repl/rollback_impl.cpp`). The first archived entry the
//!   server does not have is found (walking back chunk by chunk, then entry by
//!   entry), and the chunks from there on are set aside (moved to `set-aside/`,
//!   recorded in the manifest, never read as history again); entries before it in
//!   the same chunk are kept as a new chunk.

use bson::{doc, Bson, RawDocumentBuf};

use super::chunk::{self, ChunkWriter};
use super::target::Target;
use super::ArchiveError;
use crate::mongo::error::MongoError;
use crate::mongo::oplog_source::window;
use crate::mongo::readonly::ReadOnlyClient;
use crate::oplog::elements::peek_ts_op;
use crate::oplog::oplog_archive::manifest::{now_text, ChunkRecord, Manifest, SetAsideRecord};
use crate::oplog::oplog_archive::SET_ASIDE_DIR;
use crate::oplog::Ts;

/// Where reading goes on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Resume {
    /// The archive is empty: from the oldest entry.
    Start,
    /// After this entry, which the server holds unchanged.
    After(Ts),
    /// The oplog's oldest entry is past the last archived one.
    Gap { last: Ts, oldest: Ts },
    /// The server's newest entry is before the last archived one.
    Behind { last: Ts, newest: Option<Ts> },
    /// The last archived entry is absent or different on the server.
    Diverged { last: Ts, detail: String },
}

fn at_or_after(t: Ts) -> bson::Document {
    doc! {"ts": {"$gte": Bson::Timestamp(t.into())}}
}

async fn first_from(client: &ReadOnlyClient, t: Ts) -> Result<Option<RawDocumentBuf>, MongoError> {
    client
        .oplog_find_one(at_or_after(t))
        .await
        .map_err(|e| client.target().error("read `local.oplog.rs`", e))
}

fn ts_of(doc: &RawDocumentBuf) -> Option<Ts> {
    peek_ts_op(doc.as_bytes()).map(|(t, _)| t)
}

/// What a server entry and an archived one at the same position differ in, for
/// the report.
fn difference(archived: &[u8], server: &[u8]) -> String {
    let term = |b: &[u8]| {
        bson::RawDocument::from_bytes(b)
            .ok()
            .and_then(|d| crate::oplog::Entry::parse(d).ok())
            .and_then(|e| e.term)
    };
    match (term(archived), term(server)) {
        (Some(a), Some(s)) if a != s => {
            format!("its term `t` is {s} on the server, {a} in the archive")
        }
        _ => "its bytes differ".to_string(),
    }
}

/// Checks the last archived entry against the server (see the module comment).
pub(super) async fn check_resume(
    client: &ReadOnlyClient,
    last: Option<&(Ts, Vec<u8>)>,
) -> Result<Resume, MongoError> {
    let Some((l, bytes)) = last else {
        return Ok(Resume::Start);
    };
    let l = *l;
    let Some(w) = window(client).await? else {
        return Ok(Resume::Behind {
            last: l,
            newest: None,
        });
    };
    if w.oldest.ts > l {
        // Nothing can lie between `l` and its successor: an oplog starting right
        // there continues the archive (though `l` itself can no longer be compared).
        if w.oldest.ts == l.successor() {
            return Ok(Resume::After(l));
        }
        return Ok(Resume::Gap {
            last: l,
            oldest: w.oldest.ts,
        });
    }
    if w.newest.ts < l {
        return Ok(Resume::Behind {
            last: l,
            newest: Some(w.newest.ts),
        });
    }
    let found = first_from(client, l).await?;
    match found.as_ref().and_then(|d| ts_of(d).map(|t| (t, d))) {
        Some((t, d)) if t == l && d.as_bytes() == bytes.as_slice() => Ok(Resume::After(l)),
        other => {
            // The oplog may have rolled over past `l` since the window was read.
            if let Some(o) = crate::mongo::oplog_source::oldest(client).await? {
                if o > l {
                    return Ok(Resume::Gap { last: l, oldest: o });
                }
            }
            let detail = match other {
                Some((t, d)) if t == l => format!(
                    "the server's entry at {l} is not the archived one: {}",
                    difference(bytes, d.as_bytes())
                ),
                Some((t, _)) => format!("the server has no entry at {l} (its next one is {t})"),
                None => format!("the server has no entry at or after {l}"),
            };
            Ok(Resume::Diverged { last: l, detail })
        }
    }
}

/// Where the archive and the server's history part.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Divergence {
    /// The first archived entry the server does not have (absent or different).
    pub at: Ts,
    /// Index (in the manifest's chunks) of the first chunk holding entries from `at` on.
    pub chunk: usize,
}

/// Is the entry `(t, bytes)` on the server, unchanged? `None` when the server no
/// longer reaches back that far (it cannot tell).
async fn on_server(
    client: &ReadOnlyClient,
    oldest: Ts,
    t: Ts,
    bytes: &[u8],
) -> Result<Option<bool>, MongoError> {
    if t < oldest {
        return Ok(None);
    }
    let found = first_from(client, t).await?;
    Ok(Some(found.is_some_and(|d| {
        ts_of(&d) == Some(t) && d.as_bytes() == bytes
    })))
}

/// Finds the first archived entry the server does not have.
pub(super) async fn find_divergence(
    client: &ReadOnlyClient,
    target: &Target,
    m: &Manifest,
) -> Result<Divergence, ArchiveError> {
    let src = |e: MongoError| ArchiveError::Source(e);
    let oldest = crate::mongo::oplog_source::oldest(client)
        .await
        .map_err(src)?
        .unwrap_or(Ts::MAX);
    // The newest chunk whose first entry the server has (or cannot check).
    let mut idx = None;
    for (i, c) in m.chunks.iter().enumerate().rev() {
        let Some((t, bytes)) = chunk::first_entry(&target.inside(&c.file))? else {
            continue;
        };
        match on_server(client, oldest, t, &bytes).await.map_err(src)? {
            Some(false) => continue,
            Some(true) | None => {
                idx = Some(i);
                break;
            }
        }
    }
    let Some(idx) = idx else {
        // Not even the oldest chunk's first entry is the server's.
        return Ok(Divergence {
            at: m.chunks.first().map_or(Ts::ZERO, |c| c.first),
            chunk: 0,
        });
    };
    // Entry by entry through that chunk, against the server's entries from its start.
    let c = &m.chunks[idx];
    let mut archived: Vec<(Ts, u64)> = Vec::with_capacity(c.entries as usize);
    chunk::for_each_entry(&target.inside(&c.file), |bytes, t| {
        if t >= oldest {
            archived.push((t, crc(bytes)));
        }
        Ok(true)
    })?;
    let start = c.first.max(oldest);
    let mut cursor = client
        .oplog_cursor(at_or_after(start), None)
        .await
        .map_err(|e| src(client.target().error("read `local.oplog.rs`", e)))?;
    let mut server: Option<(Ts, u64)> = None;
    let mut i = 0;
    while i < archived.len() {
        if server.is_none() {
            match cursor.advance().await {
                Ok(true) => {
                    let d = cursor.current();
                    let t = peek_ts_op(d.as_bytes()).map(|(t, _)| t).unwrap_or(Ts::ZERO);
                    server = Some((t, crc(d.as_bytes())));
                }
                Ok(false) => {
                    return Ok(Divergence {
                        at: archived[i].0,
                        chunk: idx,
                    })
                }
                Err(e) => {
                    return Err(src(client
                        .target()
                        .error("read `local.oplog.rs`", client.target().driver_error(&e))))
                }
            }
        }
        let (st, sh) = server.expect("just read");
        let (at, ah) = archived[i];
        if st == at && sh == ah {
            server = None;
            i += 1;
            continue;
        }
        // Absent (the server went past it, or has an entry the archive lacks
        // before it) or different.
        return Ok(Divergence { at, chunk: idx });
    }
    // The whole chunk is the server's: the divergence starts with the next one.
    match m.chunks.get(idx + 1) {
        Some(n) => Ok(Divergence {
            at: n.first,
            chunk: idx + 1,
        }),
        None => Err(ArchiveError::Inconsistent {
            detail: format!(
                "the archive's last entry differs from the server's, yet every entry of its last chunk `{}` matches",
                c.file
            ),
        }),
    }
}

fn crc(b: &[u8]) -> u64 {
    let mut d = crc64fast::Digest::new();
    d.write(b);
    d.sum64()
}

/// Moves the chunks from the divergence on out of the archive (keeping the entries
/// before it as a new chunk) and records the set-aside. Returns the record and the
/// manifest after the change.
pub(super) fn set_aside(
    target: &mut Target,
    m: &Manifest,
    div: &Divergence,
    next_seq: u64,
    detail: String,
) -> Result<(SetAsideRecord, Manifest), ArchiveError> {
    let moved: Vec<ChunkRecord> = m.chunks[div.chunk..].to_vec();
    let Some(first_moved) = moved.first() else {
        return Err(ArchiveError::Inconsistent {
            detail: format!("a divergence at {} with no chunk to set aside", div.at),
        });
    };
    // Entries of the first moved chunk before the divergence stay in the archive.
    let prefix = if first_moved.first < div.at {
        let mut w = ChunkWriter::create(target.staging(), next_seq, None)?;
        chunk::for_each_entry(&target.inside(&first_moved.file), |bytes, t| {
            if t >= div.at {
                return Ok(false);
            }
            w.write(bytes, t)?;
            Ok(true)
        })?;
        w.finish_file(target)?.map(|(rec, _)| rec)
    } else {
        None
    };
    let through = moved.last().map_or(div.at, |c| c.last);
    let sa_dir = format!(
        "{SET_ASIDE_DIR}/{}.{}-{}",
        div.at.t,
        div.at.i,
        chrono::Utc::now().timestamp()
    );
    let seqs: Vec<u64> = moved.iter().map(|c| c.seq).collect();
    let (after, record) = target.update(
        || m.clone(),
        |mm| {
            let tail: Vec<u64> = mm
                .chunks
                .iter()
                .map(|c| c.seq)
                .skip_while(|s| *s != seqs[0])
                .collect();
            if tail != seqs {
                return Err(ArchiveError::Inconsistent {
                detail: format!(
                    "the manifest changed while a rollback was being handled (chunks {seqs:?} expected at its end, found {tail:?})"
                ),
            });
            }
            mm.chunks.truncate(mm.chunks.len() - seqs.len());
            let (gone_gaps, kept_gaps) = mm.gaps.drain(..).partition(|g| g.before >= div.at);
            mm.gaps = kept_gaps;
            if let Some(p) = &prefix {
                mm.next_seq = mm.next_seq.max(p.seq + 1);
                mm.chunks.push(p.clone());
            }
            let rec = SetAsideRecord {
                dir: sa_dir.clone(),
                diverged_at: div.at,
                through,
                detected: now_text(),
                detail: detail.clone(),
                chunks: moved.clone(),
                gaps: gone_gaps,
            };
            mm.set_aside.push(rec.clone());
            Ok((true, rec))
        },
    )?;
    for c in &moved {
        target.move_into(&c.file, &sa_dir)?;
    }
    Ok((record, after))
}
