//! `pitr archive`: keeping the oplog beyond its window, in an oplog archive
//! directory ([`crate::oplog::oplog_archive`] describes the layout and the manifest).
//!
//! The archiver follows `local.oplog.rs` with a tailable, awaitData cursor (a read:
//! the same minimal role as `dump-oplog`) and writes the entries, byte for byte, into
//! compressed chunks: a new chunk every `chunk_bytes` of entries or `chunk_time`,
//! whichever comes first. A chunk is written under a temporary name, synced,
//! renamed into place, and only then recorded in the manifest.
//!
//! **Resuming** (after a restart, a failover, a dropped connection) always starts
//! with [`reconcile::check_resume`]: the last archived entry must be on the server
//! with the same bytes; reading then continues right after it, so no entry is
//! archived twice or skipped. When the oplog no longer reaches back that far, the
//! gap is recorded with both positions and reading goes on from the oldest entry
//! available; when the server's entry differs or is gone (a rollback), the chunks
//! from the divergence on are set aside. Transient errors (network, elections,
//! shutdowns) are retried with backoff; when following, without limit.
//!
//! **Stopping**: on cancellation (SIGTERM, Ctrl-C) the chunk being written is
//! completed and recorded, so a clean stop loses nothing; a SIGKILL loses at most the
//! gzip member being built (the next run keeps the rest, see [`recover`]).

mod chunk;
mod reconcile;
mod recover;
mod staging;
mod target;

use std::io;
use std::path::PathBuf;
use std::pin::Pin;
use std::time::{Duration, Instant};

use futures_core::Stream;
use mongodb::raw_batch_cursor::{RawBatch, RawBatchCursor};

use self::chunk::{wall_of, ChunkWriter};
use self::reconcile::Resume;
use self::target::Target;
use super::connect::Topology;
use super::error::{Class, DriverError, MongoError, Reached};
use super::oplog_source::{
    transient, window, Lower, OplogQuery, Progress, RetryNotice, RetryPolicy,
};
use super::readonly::ReadOnlyClient;
use crate::error::Hint;
use crate::exec::signals::Cancel;
use crate::oplog::elements::peek_ts_op;
use crate::oplog::oplog_archive::manifest::{now_text, OplogArchiveError};
use crate::oplog::oplog_archive::{ChunkRecord, GapRecord, Manifest, SetAsideRecord};
use crate::oplog::{ReadError, Ts};
use crate::storage::Location;

/// Default `--chunk-size`: entries (BSON bytes, before compression) per chunk.
pub const DEFAULT_CHUNK_BYTES: u64 = 64 << 20;
/// Default `--chunk-time`.
pub const DEFAULT_CHUNK_TIME: Duration = Duration::from_secs(600);
/// How long a `getMore` waits for new entries (`maxTimeMS` of the awaitData cursor).
pub const DEFAULT_AWAIT: Duration = Duration::from_secs(1);
/// How often the chunk being written is handed to the OS.
const FLUSH_EVERY: Duration = Duration::from_millis(500);

/// What the user asked for.
#[derive(Clone, Debug)]
pub struct ArchiveRequest {
    /// A local directory or a bucket prefix.
    pub dir: Location,
    pub chunk_bytes: u64,
    pub chunk_time: Duration,
    /// Archive what the oplog holds now, then stop.
    pub once: bool,
    pub await_time: Duration,
    pub batch_size: Option<u32>,
    pub retry: RetryPolicy,
    /// A local archive's filesystem lasting less than this at the archive's growth
    /// is a warning ([`crate::oplog::oplog_archive::disk`]), at most once an hour.
    pub min_disk: Duration,
}

/// Where the run stands, after every batch.
#[derive(Clone, Debug, Default)]
pub struct ArchiveProgress {
    /// Entries and BSON bytes archived by this run.
    pub entries: u64,
    pub bson_bytes: u64,
    pub last: Option<Ts>,
    /// How far behind the newest entry: the age of the last entry archived (by its
    /// wall clock), or zero when the last batch came back empty (caught up).
    pub lag: Option<Duration>,
    pub caught_up: bool,
    pub chunks: u64,
}

/// What the run starts from.
#[derive(Clone, Debug)]
pub struct ArchiveStart {
    /// The directory or URL, for messages.
    pub dir: String,
    pub chunks: usize,
    pub last: Option<Ts>,
    /// `--once`: the newest entry when the run started (it stops there).
    pub end: Option<Ts>,
}

/// Hooks for progress and warnings.
pub trait ArchiveObserver {
    fn started(&mut self, _s: &ArchiveStart) {}
    fn progress(&mut self, _p: &ArchiveProgress) {}
    fn chunk(&mut self, _c: &ChunkRecord) {}
    fn retrying(&mut self, _n: &RetryNotice<'_>) {}
    fn warning(&mut self, _msg: &str) {}
    fn note(&mut self, _msg: &str) {}
}

/// An observer that ignores everything.
pub struct Quiet;
impl ArchiveObserver for Quiet {}

/// The finished run.
#[derive(Clone, Debug)]
pub struct ArchiveOutcome {
    pub entries: u64,
    pub bson_bytes: u64,
    /// Chunks completed by this run.
    pub chunks: Vec<ChunkRecord>,
    /// Gaps recorded by this run.
    pub gaps: Vec<GapRecord>,
    /// Histories set aside by this run.
    pub set_aside: Vec<SetAsideRecord>,
    pub manifest: Manifest,
}

#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    #[error(transparent)]
    Source(#[from] MongoError),

    #[error(transparent)]
    Archive(#[from] OplogArchiveError),

    #[error("cannot {what} `{}`", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    #[error("cannot read the chunk `{}`", path.display())]
    Chunk {
        path: PathBuf,
        #[source]
        source: ReadError,
    },

    #[error("`{}` is not empty and is not an oplog archive (no manifest.json of pitr's)", dir.display())]
    NotAnArchive { dir: PathBuf },

    #[error("the oplog archive `{}` holds {}, this server is {}", dir.display(), set_phrase(recorded), set_phrase(now))]
    OtherSet {
        dir: PathBuf,
        recorded: Option<String>,
        now: Option<String>,
    },

    #[error("the oplog archive is inconsistent: {detail}")]
    Inconsistent { detail: String },

    #[error("`{target}` returned {ts} after {last}: the oplog went backwards")]
    OutOfOrder { target: String, ts: Ts, last: Ts },

    #[error(
        "cannot set the chunk `{chunk}` aside: the server rolled its entries back, and the \
         manifest already records the chunk as set aside (the next run finishes the move)"
    )]
    SetAside {
        chunk: String,
        #[source]
        source: Box<ArchiveError>,
    },

    #[error("`{target}` did not deliver the oplog up to {end}, its newest entry when `--once` started ({reached})")]
    EndNotReached {
        target: String,
        end: Ts,
        reached: Reached,
    },
}

fn set_phrase(s: &Option<String>) -> String {
    match s {
        Some(n) => format!("replica set `{n}`"),
        None => "a standalone".to_string(),
    }
}

impl Hint for ArchiveError {
    fn hint(&self) -> Option<String> {
        Some(match self {
            ArchiveError::Source(e) => return e.hint(),
            ArchiveError::Archive(e) => return e.hint(),
            ArchiveError::Io { .. } => "check free space and permissions of the archive directory".into(),
            ArchiveError::Chunk { source, .. } => return source.hint(),
            ArchiveError::SetAside { source, .. } => return source.hint(),
            ArchiveError::NotAnArchive { .. } => {
                "give an empty or new directory for a new archive (pitr never writes into a directory it did not create)".into()
            }
            ArchiveError::OtherSet { .. } => {
                "point --uri at the replica set the archive came from, or start a new archive in another --dir".into()
            }
            ArchiveError::Inconsistent { .. } => {
                "nothing was deleted; look at the archive directory (`pitr status --archive DIR`), and report this".into()
            }
            ArchiveError::OutOfOrder { .. } => "this is not a MongoDB oplog as pitr knows it; nothing after it was archived".into(),
            ArchiveError::EndNotReached { .. } => {
                "the member read lags behind, or its newest entries were rolled back; run again, or read from the primary (`readPreference=primary`)".into()
            }
        })
    }
}

/// The next batch of a cursor (None: the cursor is closed).
async fn next_batch(c: &mut RawBatchCursor) -> Option<mongodb::error::Result<RawBatch>> {
    std::future::poll_fn(|cx| Pin::new(&mut *c).poll_next(cx)).await
}

struct Archiver<'a> {
    client: &'a ReadOnlyClient,
    req: &'a ArchiveRequest,
    obs: &'a mut dyn ArchiveObserver,
    cancel: &'a Cancel,
    fresh: Manifest,
    manifest: Manifest,
    /// Where the archive lives (a directory or a bucket prefix): every write goes
    /// through it.
    target: Target,
    /// The last archived entry (in a recorded chunk or the one being written).
    last: Option<(Ts, Vec<u8>)>,
    chunk: Option<ChunkWriter>,
    next_seq: u64,
    /// A gap to record with the next chunk.
    pending_gap: Option<GapRecord>,
    progress: ArchiveProgress,
    out_chunks: Vec<ChunkRecord>,
    out_gaps: Vec<GapRecord>,
    out_set_aside: Vec<SetAsideRecord>,
    last_flush: Instant,
    /// When the disk was last found short ([`Archiver::check_disk`]).
    disk_warned: Option<Instant>,
}

/// Runs the archiver until cancelled (or, with `once`, until the newest entry at the
/// start is archived).
pub async fn run(
    client: &ReadOnlyClient,
    topology: &Topology,
    req: &ArchiveRequest,
    cancel: &Cancel,
    obs: &mut dyn ArchiveObserver,
) -> Result<ArchiveOutcome, ArchiveError> {
    let source = client.target().display.clone();
    let set = topology.set_name();
    let prepared = recover::prepare(&req.dir, &source, set)?;
    for n in &prepared.notes {
        obs.note(n);
    }
    let fresh = Manifest::new(source, set.map(str::to_string));
    let mut a = Archiver {
        client,
        req,
        obs,
        cancel,
        next_seq: prepared.manifest.next_seq,
        fresh,
        manifest: prepared.manifest,
        target: prepared.target,
        last: prepared.last,
        chunk: None,
        pending_gap: None,
        progress: ArchiveProgress::default(),
        out_chunks: Vec::new(),
        out_gaps: Vec::new(),
        out_set_aside: Vec::new(),
        last_flush: Instant::now(),
        disk_warned: None,
    };
    let result = a.follow().await;
    // Whatever ended the run, what was read is completed and recorded.
    let closed = a.close_chunk();
    result?;
    closed?;
    a.target.release()?;
    Ok(ArchiveOutcome {
        entries: a.progress.entries,
        bson_bytes: a.progress.bson_bytes,
        chunks: a.out_chunks,
        gaps: a.out_gaps,
        set_aside: a.out_set_aside,
        manifest: a.manifest,
    })
}

impl Archiver<'_> {
    fn reached(&self) -> Reached {
        Reached {
            entries: self.progress.entries,
            last: self.last.as_ref().map(|(t, _)| *t),
        }
    }

    fn last_ts(&self) -> Option<Ts> {
        self.last.as_ref().map(|(t, _)| *t)
    }

    /// Completes and records the chunk being written, if any.
    fn close_chunk(&mut self) -> Result<(), ArchiveError> {
        let Some(c) = self.chunk.take() else {
            return Ok(());
        };
        let fresh = self.fresh.clone();
        if let Some((rec, gap, m)) = c.commit(&mut self.target, || fresh)? {
            self.manifest = m;
            self.next_seq = self.next_seq.max(self.manifest.next_seq);
            self.progress.chunks += 1;
            self.obs.chunk(&rec);
            self.out_chunks.push(rec);
            self.out_gaps.extend(gap);
            self.check_disk();
        }
        Ok(())
    }

    /// After a chunk, a local archive whose filesystem lasts less than
    /// `min_disk` at the archive's growth is a warning, at most once an hour: a
    /// full disk stops this archiver, and the oplog then rolls over what it did not
    /// archive.
    fn check_disk(&mut self) {
        const EVERY: Duration = Duration::from_secs(3600);
        if self.disk_warned.is_some_and(|t| t.elapsed() < EVERY) {
            return;
        }
        let Target::Local { dir, .. } = &self.target else {
            return;
        };
        let Some(d) = crate::oplog::oplog_archive::disk::disk(dir, &self.manifest.chunks) else {
            return;
        };
        if let Some(w) = crate::oplog::oplog_archive::disk::warning(&d, dir, self.req.min_disk) {
            self.obs.warning(&w);
            self.disk_warned = Some(Instant::now());
        }
    }

    /// Archives one entry (the server's bytes, as they are).
    fn write_entry(&mut self, bytes: &[u8], ts: Ts) -> Result<(), ArchiveError> {
        if let Some(l) = self.last_ts() {
            if ts <= l {
                return Err(ArchiveError::OutOfOrder {
                    target: self.client.target().display.clone(),
                    ts,
                    last: l,
                });
            }
        }
        // A gap is recorded with the chunk that starts after it.
        if self.pending_gap.is_some() && self.chunk.is_some() {
            self.close_chunk()?;
        }
        if self.chunk.is_none() {
            let gap = self.pending_gap.take();
            self.chunk = Some(ChunkWriter::create(
                self.target.staging(),
                self.next_seq,
                gap,
            )?);
            self.next_seq += 1;
        }
        let c = self.chunk.as_mut().expect("just opened");
        c.write(bytes, ts)?;
        self.progress.entries += 1;
        self.progress.bson_bytes += bytes.len() as u64;
        self.progress.last = Some(ts);
        match &mut self.last {
            Some((t, b)) => {
                *t = ts;
                b.clear();
                b.extend_from_slice(bytes);
            }
            None => self.last = Some((ts, bytes.to_vec())),
        }
        if c.bson_bytes >= self.req.chunk_bytes {
            self.close_chunk()?;
        }
        Ok(())
    }

    /// Archives a batch; returns how many entries it held.
    fn take_batch(&mut self, batch: &RawBatch) -> Result<u64, ArchiveError> {
        let target = || self.client.target().display.clone();
        let docs = batch.doc_slices().map_err(|e| MongoError::Read {
            target: target(),
            reached: self.reached(),
            source: self.client.target().driver_error(&e),
        })?;
        let mut n = 0;
        for item in docs {
            let doc =
                item.ok()
                    .and_then(|v| v.as_document())
                    .ok_or_else(|| MongoError::NotAnEntry {
                        target: target(),
                        reached: self.reached(),
                    })?;
            let bytes = doc.as_bytes();
            let Some((ts, _)) = peek_ts_op(bytes) else {
                return Err(MongoError::NotAnEntry {
                    target: target(),
                    reached: self.reached(),
                }
                .into());
            };
            self.write_entry(bytes, ts)?;
            n += 1;
        }
        // Lag: the age of the newest entry archived, when it has a wall clock.
        if n > 0 {
            self.progress.caught_up = false;
            self.progress.lag = self.last.as_ref().and_then(|(_, b)| wall_of(b)).map(|ms| {
                let now = chrono::Utc::now().timestamp_millis();
                Duration::from_millis(now.saturating_sub(ms).max(0) as u64)
            });
        } else {
            self.progress.caught_up = true;
            self.progress.lag = Some(Duration::ZERO);
        }
        if let Some(c) = &mut self.chunk {
            if c.opened.elapsed() >= self.req.chunk_time {
                self.close_chunk()?;
            } else if self.last_flush.elapsed() >= FLUSH_EVERY {
                c.flush()?;
                self.last_flush = Instant::now();
            }
        }
        self.target.renew()?;
        self.obs.progress(&self.progress);
        Ok(n)
    }

    /// Waits before retry `failures + 1` (or gives up). Returns the new count.
    async fn retry_wait(&mut self, failures: u32, e: DriverError) -> Result<u32, ArchiveError> {
        let attempt = failures.saturating_add(1);
        let p = Progress {
            entries: self.progress.entries,
            bytes: self.progress.bson_bytes,
            last: self.last_ts(),
        };
        if attempt > self.req.retry.max_attempts {
            return Err(MongoError::RetriesExhausted {
                attempts: failures,
                reached: p.reached(),
                source: e,
            }
            .into());
        }
        let delay = self.req.retry.delay(attempt);
        // What is complete goes to the OS before a possibly long wait.
        if let Some(c) = &mut self.chunk {
            c.flush()?;
        }
        self.target.renew()?;
        self.obs.retrying(&RetryNotice {
            attempt,
            max_attempts: self.req.retry.max_attempts,
            delay,
            error: &e,
            progress: p,
        });
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = self.cancel.cancelled() => {}
        }
        Ok(attempt)
    }

    fn note_gap(&mut self, last: Ts, oldest: Ts, cause: String) -> Result<(), ArchiveError> {
        self.close_chunk()?;
        self.obs.warning(&format!(
            "GAP in the oplog archive: the oplog no longer reaches back to the last archived entry {last} ({}); \
             its oldest entry is {oldest} ({}): whatever was written in between is lost to the archive. \
             The gap is recorded in the manifest; archiving goes on from {oldest}",
            last.utc_string(),
            oldest.utc_string()
        ));
        self.pending_gap = Some(GapRecord {
            after: last,
            before: oldest,
            detected: now_text(),
            cause,
        });
        Ok(())
    }

    async fn handle_divergence(&mut self, detail: String) -> Result<(), ArchiveError> {
        self.close_chunk()?;
        let div = reconcile::find_divergence(self.client, &self.target, &self.manifest).await?;
        let (rec, m) = reconcile::set_aside(
            &mut self.target,
            &self.manifest,
            &div,
            self.next_seq,
            detail.clone(),
        )?;
        self.manifest = m;
        self.next_seq = self.next_seq.max(self.manifest.next_seq);
        self.last = match self.manifest.chunks.last() {
            Some(c) => {
                let s = chunk::scan(&self.target.inside(&c.file))?;
                Some((c.last, s.last_entry))
            }
            None => None,
        };
        self.obs.warning(&format!(
            "ROLLBACK: {detail}. The archive held entries from {} to {} that are not in the server's history \
             (rolled back after a failover); {} set aside in `{}`, never read as history. Archiving goes on after {}",
            rec.diverged_at,
            rec.through,
            crate::table::counted(rec.chunks.len() as u64, "chunk", "chunks"),
            self.target.inside(&rec.dir),
            self.last_ts().map_or_else(|| "the start".to_string(), |t| t.to_string())
        ));
        self.out_set_aside.push(rec);
        Ok(())
    }

    async fn follow(&mut self) -> Result<(), ArchiveError> {
        let client = self.client;
        let mut failures: u32 = 0;
        let mut end: Option<Ts> = None;
        let mut started = false;
        loop {
            if self.cancel.is_cancelled() {
                return Ok(());
            }
            let resume = match reconcile::check_resume(client, self.last.as_ref()).await {
                Ok(r) => r,
                Err(e) => match transient(&e) {
                    Some(d) => {
                        failures = self.retry_wait(failures, d).await?;
                        continue;
                    }
                    None => return Err(e.into()),
                },
            };
            let lower = match resume {
                Resume::Start => None,
                Resume::After(t) => Some(Lower::Exclusive(t)),
                Resume::Gap { last, oldest } => {
                    self.note_gap(
                        last,
                        oldest,
                        format!("the oplog's oldest entry was {oldest} when reading resumed after {last}"),
                    )?;
                    Some(Lower::Inclusive(oldest))
                }
                Resume::Behind { last, newest } => {
                    let e = DriverError {
                        class: Class::Transient,
                        code: None,
                        code_name: None,
                        message: format!(
                            "the server being read has no entry at or after the last archived one {last} yet (its newest is {}): \
                             it lags behind the member read before",
                            newest.map_or_else(|| "none".to_string(), |n| n.to_string())
                        ),
                    };
                    failures = self.retry_wait(failures, e).await?;
                    continue;
                }
                Resume::Diverged { detail, .. } => {
                    self.handle_divergence(detail).await?;
                    continue;
                }
            };
            if !started {
                started = true;
                if self.req.once {
                    end = window(client).await?.map(|w| w.newest.ts);
                }
                self.obs.started(&ArchiveStart {
                    dir: self.target.display(),
                    chunks: self.manifest.chunks.len(),
                    last: self.last_ts(),
                    end,
                });
            }
            if self.req.once && end.is_none_or(|e| self.last_ts().is_some_and(|l| l >= e)) {
                return Ok(());
            }
            let filter = OplogQuery::default().filter(lower);
            let mut cursor = match client
                .oplog_tail(filter, self.req.await_time, self.req.batch_size)
                .await
            {
                Ok(c) => c,
                Err(e) => {
                    failures = self.on_error(failures, e).await?;
                    continue;
                }
            };
            // The cursor is positioned: if the oldest entry is now past where it had
            // to start, entries were dropped while it was opened.
            if let Some(Lower::Exclusive(l)) = lower {
                if let Ok(Some(o)) = crate::mongo::oplog_source::oldest(client).await {
                    if o > l {
                        self.note_gap(
                            l,
                            o,
                            format!("the oplog rolled over past {l} while the cursor was opened (oldest entry {o})"),
                        )?;
                    }
                }
            }
            let mut empty_in_a_row = 0u32;
            loop {
                let next = tokio::select! {
                    b = next_batch(&mut cursor) => b,
                    _ = self.cancel.cancelled() => return Ok(()),
                };
                match next {
                    None => {
                        // The server closed the cursor (an empty oplog, or a killed
                        // cursor): open a new one after a pause.
                        tokio::select! {
                            _ = tokio::time::sleep(self.req.await_time) => {}
                            _ = self.cancel.cancelled() => return Ok(()),
                        }
                        break;
                    }
                    Some(Ok(batch)) => {
                        failures = 0;
                        let n = self.take_batch(&batch)?;
                        if let (true, Some(e)) = (self.req.once, end) {
                            if self.last_ts().is_some_and(|l| l >= e) {
                                return Ok(());
                            }
                            empty_in_a_row = if n == 0 { empty_in_a_row + 1 } else { 0 };
                            let patience = self.req.retry.max_attempts.saturating_mul(4).max(8);
                            if empty_in_a_row > patience {
                                return Err(ArchiveError::EndNotReached {
                                    target: client.target().display.clone(),
                                    end: e,
                                    reached: self.reached(),
                                });
                            }
                        }
                    }
                    Some(Err(e)) => {
                        let e = client.target().driver_error(&e);
                        if e.class == Class::CappedPositionLost {
                            self.obs.warning(&format!(
                                "the capped oplog overtook the archiver ({e}); the gap is measured and recorded next"
                            ));
                            break;
                        }
                        failures = self.on_error(failures, e).await?;
                        break;
                    }
                }
            }
        }
    }

    /// A failed `find`/`getMore`: wait and retry, or give up.
    async fn on_error(&mut self, failures: u32, e: DriverError) -> Result<u32, ArchiveError> {
        match e.class {
            Class::Transient | Class::ServerSelection | Class::CappedPositionLost => {
                self.retry_wait(failures, e).await
            }
            Class::Authentication | Class::Unauthorized => Err(self
                .client
                .target()
                .error("read `local.oplog.rs`", e)
                .into()),
            _ => Err(MongoError::Read {
                target: self.client.target().display.clone(),
                reached: self.reached(),
                source: e,
            }
            .into()),
        }
    }
}
