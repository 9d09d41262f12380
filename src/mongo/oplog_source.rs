//! Streaming `local.oplog.rs` from a live server: bounded by `ts`, resumable after
//! transient errors, and loud about rollover.
//!
//! - **Bounds** are server-side `ts` filters: a lower bound inclusive (`--since`) or
//!   exclusive (continuing after the last entry already read), an upper bound
//!   inclusive (the newest entry when the read was planned) and/or exclusive
//!   (`--until`). Entries come in natural order, which is `ts` order.
//! - **Transient errors** (network, elections, shutdowns, a lost cursor) are retried
//!   with exponential backoff, a bounded number of times in a row; the cursor is
//!   reopened after the last entry delivered, so nothing is delivered twice.
//! - **Rollover**: the capped oplog can drop entries a read has not reached yet. A
//!   cursor that dies with `CappedPositionLost` (code 136) is an error, never a
//!   retry; and after every open the oldest entry must still be at or before where
//!   the cursor had to start (the last entry delivered, or `--since`), otherwise
//!   entries in between may be gone. Deletion only happens at the old end, so
//!   that one check after the cursor is positioned is enough.

use std::time::Duration;

use bson::{Bson, Document, RawDocument};

use super::error::{Class, DriverError, MongoError, Reached};
use super::readonly::{Edge, ReadOnlyClient};
use crate::oplog::elements::peek_ts_op;
use crate::oplog::{Entry, Ts};

/// One end of the oplog: its position and wall clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EdgeEntry {
    pub ts: Ts,
    pub wall_ms: Option<i64>,
}

/// The range of positions the oplog holds right now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    pub oldest: EdgeEntry,
    pub newest: EdgeEntry,
}

impl Window {
    /// Seconds between the oldest and the newest entry.
    pub fn span_secs(&self) -> u64 {
        self.newest.ts.t.saturating_sub(self.oldest.ts.t) as u64
    }
}

async fn edge(client: &ReadOnlyClient, which: Edge) -> Result<Option<EdgeEntry>, MongoError> {
    let doc = client
        .oplog_edge(which)
        .await
        .map_err(|e| client.target().error("read `local.oplog.rs`", e))?;
    let Some(doc) = doc else { return Ok(None) };
    match Entry::parse(&doc) {
        Ok(e) => Ok(Some(EdgeEntry {
            ts: e.ts,
            wall_ms: e.wall_ms,
        })),
        Err(_) => Err(MongoError::NotAnEntry {
            target: client.target().display.clone(),
            reached: Reached::default(),
        }),
    }
}

/// The oplog's current window, or `None` when it is empty or missing.
pub async fn window(client: &ReadOnlyClient) -> Result<Option<Window>, MongoError> {
    let Some(oldest) = edge(client, Edge::Oldest).await? else {
        return Ok(None);
    };
    let newest = edge(client, Edge::Newest).await?.unwrap_or(oldest);
    Ok(Some(Window { oldest, newest }))
}

/// An estimate of the bytes of the entries from `from` to `to` before they are read
/// (to check a disk's room for them): the oplog's size (`collStats.size`) times the
/// range's share of the time the oplog spans ([`range_share`]). None when the
/// server does not say (`collStats` refused or without a size, an empty oplog).
pub async fn range_bytes(client: &ReadOnlyClient, from: Ts, to: Ts) -> Option<u64> {
    let w = window(client).await.ok()??;
    let stats = client
        .command(super::readonly::ReadCommand::OplogCollStats)
        .await
        .ok()?;
    let size = super::status::as_u64(stats.get("size"))?;
    Some(range_share(size, &w, from, to))
}

/// `size` bytes times the share of the window's seconds (the oldest entry's to the
/// newest's, both counted) that `from..=to` covers within it, rounded up: the
/// average rate, so a range busier than the average is underestimated. The whole
/// size for a window within one second.
pub fn range_share(size: u64, w: &Window, from: Ts, to: Ts) -> u64 {
    let lo = from.t.max(w.oldest.ts.t) as u128;
    let hi = to.t.min(w.newest.ts.t) as u128;
    if hi < lo {
        return 0;
    }
    let span = w.span_secs() as u128 + 1;
    let part = hi - lo + 1;
    (size as u128 * part).div_ceil(span).min(size as u128) as u64
}

/// The oldest entry's position, or `None` when the oplog is empty.
pub async fn oldest(client: &ReadOnlyClient) -> Result<Option<Ts>, MongoError> {
    Ok(edge(client, Edge::Oldest).await?.map(|e| e.ts))
}

/// Where a read starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lower {
    /// `ts >= t` (`--since`).
    Inclusive(Ts),
    /// `ts > t`: continuing after an entry already read.
    Exclusive(Ts),
}

impl Lower {
    /// The position the read must still be able to see, for messages.
    pub fn ts(self) -> Ts {
        match self {
            Lower::Inclusive(t) | Lower::Exclusive(t) => t,
        }
    }
}

/// Whether an oplog whose oldest entry is `oldest` still holds everything from
/// `from` on.
///
/// Inclusive `T:I`: the oldest entry must be at or before it, except that `T:0`
/// is covered by an oldest entry at `T:1` (the server's ordinals start at 1 within a
/// second, so nothing can sit at `T:0`). Exclusive `T:I` (the last entry already
/// read): that entry, or an older one, must still be there; otherwise entries right
/// after it may have been dropped, and there is no way to tell.
pub fn covers(oldest: Ts, from: Lower) -> bool {
    match from {
        Lower::Inclusive(s) => oldest <= s || (s.i == 0 && oldest == Ts::new(s.t, 1)),
        Lower::Exclusive(l) => oldest <= l,
    }
}

/// A range scan of the oplog.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OplogQuery {
    pub lower: Option<Lower>,
    /// `ts <= t`: usually the newest entry when the read was planned, so that the
    /// read ends even on a busy server.
    pub upper_inclusive: Option<Ts>,
    /// `ts < t` (`--until`).
    pub upper_exclusive: Option<Ts>,
    /// Only `op: "c"` entries (see `cli::find_drop` for when that is exact).
    pub only_commands: bool,
    /// Entries per batch; `None` leaves it to the server.
    pub batch_size: Option<u32>,
    /// Until the first entry is delivered, do not insist that the oplog still reaches
    /// back to where the read starts (the caller checked and accepted a gap there).
    /// Every later reopen is checked.
    pub allow_start_gap: bool,
    /// The read is complete only once it has delivered this entry (the newest one
    /// when the read was planned). A server that ends the cursor before it is behind
    /// the one that reported it (a lagging secondary) or has lost it (a rollback):
    /// it is waited for like a transient error, then refused, never called complete.
    pub must_reach: Option<Ts>,
}

impl OplogQuery {
    /// The `find` filter, starting at `lower`.
    pub fn filter(&self, lower: Option<Lower>) -> Document {
        let mut ts = Document::new();
        match lower {
            Some(Lower::Inclusive(t)) => {
                ts.insert("$gte", Bson::Timestamp(t.into()));
            }
            Some(Lower::Exclusive(t)) => {
                ts.insert("$gt", Bson::Timestamp(t.into()));
            }
            None => {}
        }
        if let Some(t) = self.upper_inclusive {
            ts.insert("$lte", Bson::Timestamp(t.into()));
        }
        if let Some(t) = self.upper_exclusive {
            ts.insert("$lt", Bson::Timestamp(t.into()));
        }
        let mut f = Document::new();
        if !ts.is_empty() {
            f.insert("ts", ts);
        }
        if self.only_commands {
            f.insert("op", "c");
        }
        f
    }
}

/// How often and how patiently to retry transient errors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Failures in a row (without an entry delivered in between) before giving up.
    pub max_attempts: u32,
    pub first_delay: Duration,
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 5,
            first_delay: Duration::from_millis(250),
            max_delay: Duration::from_secs(8),
        }
    }
}

impl RetryPolicy {
    /// The wait before retry `attempt` (1-based): doubling from `first_delay`, capped.
    pub fn delay(&self, attempt: u32) -> Duration {
        let factor = 1u32
            .checked_shl(attempt.saturating_sub(1))
            .unwrap_or(u32::MAX);
        self.first_delay.saturating_mul(factor).min(self.max_delay)
    }
}

/// How far a read has got.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    pub entries: u64,
    /// BSON bytes delivered.
    pub bytes: u64,
    pub last: Option<Ts>,
}

impl Progress {
    pub fn reached(&self) -> Reached {
        Reached {
            entries: self.entries,
            last: self.last,
        }
    }
}

/// A transient error about to be retried.
#[derive(Debug)]
pub struct RetryNotice<'a> {
    pub attempt: u32,
    pub max_attempts: u32,
    pub delay: Duration,
    pub error: &'a DriverError,
    pub progress: Progress,
}

/// Where the entries go.
pub trait OplogSink {
    type Error;
    /// One entry, in oplog order, with its position.
    fn entry(&mut self, doc: &RawDocument, ts: Ts) -> Result<(), Self::Error>;
    /// Called every few hundred entries and at the end.
    fn progress(&mut self, _p: &Progress) -> Result<(), Self::Error> {
        Ok(())
    }
    /// Called before waiting to retry (a writer flushes here, so that what it has
    /// is on disk if the process is stopped while it waits).
    fn retrying(&mut self, _n: &RetryNotice<'_>) -> Result<(), Self::Error> {
        Ok(())
    }
}

/// Why a read stopped: the server side, or the sink.
#[derive(Debug)]
pub enum StreamError<E> {
    Source(MongoError),
    Sink(E),
}

impl<E> From<MongoError> for StreamError<E> {
    fn from(e: MongoError) -> Self {
        StreamError::Source(e)
    }
}

/// Progress callbacks go out at most every this many entries.
const PROGRESS_EVERY: u64 = 256;

/// Reads the range `q` into `sink`. `start` carries counts already done (a resumed
/// dump); when `start.last` is set the read continues after it.
pub async fn stream<S: OplogSink>(
    client: &ReadOnlyClient,
    q: &OplogQuery,
    policy: &RetryPolicy,
    start: Progress,
    sink: &mut S,
) -> Result<Progress, StreamError<S::Error>> {
    let mut p = start;
    let mut failures: u32 = 0;
    // Whether this call has delivered an entry yet (see `allow_start_gap`).
    let mut delivered = false;
    loop {
        let lower = p.last.map(Lower::Exclusive).or(q.lower);
        let mut cursor = match client.oplog_cursor(q.filter(lower), q.batch_size).await {
            Ok(c) => c,
            Err(e) => {
                failures = on_error(client, policy, failures, e, p, sink).await?;
                continue;
            }
        };
        // The cursor is positioned now. If the oldest entry is still at or before
        // where it had to start, nothing it should return was dropped by the capped
        // oplog before it got there (deletion only happens at the old end).
        let must_cover = if q.allow_start_gap && !delivered {
            None
        } else {
            lower
        };
        if let Some(from) = must_cover {
            match oldest(client).await {
                Ok(Some(o)) if !covers(o, from) => {
                    return Err(StreamError::Source(match from {
                        Lower::Exclusive(_) => MongoError::PositionLost {
                            reached: p.reached(),
                            oldest_now: Some(o),
                            source: None,
                        },
                        Lower::Inclusive(wanted) => {
                            MongoError::SinceRolledOff { wanted, oldest: o }
                        }
                    }))
                }
                Ok(_) => {}
                Err(e) => {
                    if let Some(d) = transient(&e) {
                        failures = retry_wait(policy, failures, d, p, sink).await?;
                        continue;
                    }
                    return Err(StreamError::Source(e));
                }
            }
        }
        loop {
            match cursor.advance().await {
                Ok(true) => {
                    let doc = cursor.current();
                    let Some((ts, _)) = peek_ts_op(doc.as_bytes()) else {
                        return Err(StreamError::Source(MongoError::NotAnEntry {
                            target: client.target().display.clone(),
                            reached: p.reached(),
                        }));
                    };
                    sink.entry(doc, ts).map_err(StreamError::Sink)?;
                    p.entries += 1;
                    p.bytes += doc.as_bytes().len() as u64;
                    p.last = Some(ts);
                    delivered = true;
                    failures = 0;
                    if p.entries.is_multiple_of(PROGRESS_EVERY) {
                        sink.progress(&p).map_err(StreamError::Sink)?;
                    }
                }
                Ok(false) => {
                    sink.progress(&p).map_err(StreamError::Sink)?;
                    match q.must_reach {
                        Some(end) if p.last.is_none_or(|l| l < end) => {
                            let behind = DriverError {
                                class: Class::Transient,
                                code: None,
                                code_name: None,
                                message: format!(
                                    "the server being read has no entry after {} yet, and the read must reach {end}, \
                                     the newest entry when it was planned",
                                    p.last.map_or_else(|| "the start".to_string(), |l| l.to_string())
                                ),
                            };
                            failures = match retry_wait(policy, failures, behind, p, sink).await {
                                Ok(f) => f,
                                Err(StreamError::Source(MongoError::RetriesExhausted {
                                    reached,
                                    ..
                                })) => {
                                    return Err(StreamError::Source(MongoError::EndNotReached {
                                        target: client.target().display.clone(),
                                        end,
                                        reached,
                                    }))
                                }
                                Err(e) => return Err(e),
                            };
                            break;
                        }
                        _ => return Ok(p),
                    }
                }
                Err(e) => {
                    let e = client.target().driver_error(&e);
                    failures = on_error(client, policy, failures, e, p, sink).await?;
                    break;
                }
            }
        }
    }
}

/// The driver error inside a source error, when it is worth retrying.
pub(super) fn transient(e: &MongoError) -> Option<DriverError> {
    match e {
        MongoError::Command { source, .. }
        | MongoError::Unreachable { source, .. }
        | MongoError::Read { source, .. }
            if source.is_transient() || source.class == Class::ServerSelection =>
        {
            Some(source.clone())
        }
        _ => None,
    }
}

/// Decides what a failed `find`/`getMore` means: wait and retry, rollover, or give up.
async fn on_error<S: OplogSink>(
    client: &ReadOnlyClient,
    policy: &RetryPolicy,
    failures: u32,
    e: DriverError,
    p: Progress,
    sink: &mut S,
) -> Result<u32, StreamError<S::Error>> {
    match e.class {
        Class::CappedPositionLost => {
            let oldest_now = oldest(client).await.ok().flatten();
            Err(StreamError::Source(MongoError::PositionLost {
                reached: p.reached(),
                oldest_now,
                source: Some(e),
            }))
        }
        // A server that cannot be selected now may be back after an election.
        Class::Transient | Class::ServerSelection => retry_wait(policy, failures, e, p, sink).await,
        Class::Authentication | Class::Unauthorized => Err(StreamError::Source(
            client.target().error("read `local.oplog.rs`", e),
        )),
        _ => Err(StreamError::Source(MongoError::Read {
            target: client.target().display.clone(),
            reached: p.reached(),
            source: e,
        })),
    }
}

async fn retry_wait<S: OplogSink>(
    policy: &RetryPolicy,
    failures: u32,
    e: DriverError,
    p: Progress,
    sink: &mut S,
) -> Result<u32, StreamError<S::Error>> {
    let attempt = failures + 1;
    if attempt > policy.max_attempts {
        return Err(StreamError::Source(MongoError::RetriesExhausted {
            attempts: failures,
            reached: p.reached(),
            source: e,
        }));
    }
    let delay = policy.delay(attempt);
    sink.retrying(&RetryNotice {
        attempt,
        max_attempts: policy.max_attempts,
        delay,
        error: &e,
        progress: p,
    })
    .map_err(StreamError::Sink)?;
    tokio::time::sleep(delay).await;
    Ok(attempt)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_is_its_share_of_the_oplogs_time() {
        let edge = |t| EdgeEntry {
            ts: Ts::new(t, 1),
            wall_ms: None,
        };
        // 100 seconds (1000..=1099) holding 1,000,000 bytes.
        let w = Window {
            oldest: edge(1000),
            newest: edge(1099),
        };
        let size = 1_000_000;
        assert_eq!(
            range_share(size, &w, Ts::new(1000, 1), Ts::new(1099, 9)),
            size
        );
        assert_eq!(
            range_share(size, &w, Ts::new(1050, 1), Ts::new(1099, 1)),
            500_000
        );
        // Clipped to the window at both ends; rounded up.
        assert_eq!(range_share(size, &w, Ts::new(1, 1), Ts::new(5000, 1)), size);
        assert_eq!(range_share(3, &w, Ts::new(1099, 1), Ts::new(1099, 2)), 1);
        // Outside the window, or reversed: nothing.
        assert_eq!(range_share(size, &w, Ts::new(2000, 1), Ts::new(3000, 1)), 0);
        assert_eq!(range_share(size, &w, Ts::new(1060, 1), Ts::new(1050, 1)), 0);
        // A window within one second: the whole size.
        let one = Window {
            oldest: edge(7),
            newest: edge(7),
        };
        assert_eq!(range_share(size, &one, Ts::new(7, 1), Ts::new(7, 1)), size);
        // No overflow at the edges of u32 seconds and u64 bytes.
        let wide = Window {
            oldest: edge(0),
            newest: edge(u32::MAX),
        };
        assert_eq!(
            range_share(u64::MAX, &wide, Ts::new(0, 1), Ts::new(u32::MAX, 1)),
            u64::MAX
        );
    }

    #[test]
    fn coverage_of_inclusive_and_exclusive_starts() {
        let o = Ts::new(100, 5);
        assert!(covers(o, Lower::Inclusive(Ts::new(100, 5))));
        assert!(covers(o, Lower::Inclusive(Ts::new(101, 0))));
        assert!(!covers(o, Lower::Inclusive(Ts::new(100, 4))));
        // Ordinals start at 1: T:0 is covered by an oldest entry at T:1.
        assert!(covers(Ts::new(100, 1), Lower::Inclusive(Ts::new(100, 0))));
        assert!(!covers(Ts::new(100, 2), Lower::Inclusive(Ts::new(100, 0))));
        assert!(covers(o, Lower::Exclusive(Ts::new(100, 5))));
        assert!(!covers(o, Lower::Exclusive(Ts::new(100, 4))));
    }

    #[test]
    fn filters_carry_exact_bounds() {
        let q = OplogQuery {
            lower: Some(Lower::Inclusive(Ts::new(10, 1))),
            upper_inclusive: Some(Ts::new(20, 3)),
            upper_exclusive: Some(Ts::new(15, 0)),
            only_commands: true,
            batch_size: None,
            allow_start_gap: false,
            must_reach: None,
        };
        let f = q.filter(q.lower);
        let ts = f.get_document("ts").unwrap();
        assert_eq!(
            ts.get_timestamp("$gte").unwrap(),
            bson::Timestamp {
                time: 10,
                increment: 1
            }
        );
        assert_eq!(
            ts.get_timestamp("$lte").unwrap(),
            bson::Timestamp {
                time: 20,
                increment: 3
            }
        );
        assert_eq!(
            ts.get_timestamp("$lt").unwrap(),
            bson::Timestamp {
                time: 15,
                increment: 0
            }
        );
        assert_eq!(f.get_str("op").unwrap(), "c");
        let f = q.filter(Some(Lower::Exclusive(Ts::new(12, 7))));
        assert!(f.get_document("ts").unwrap().contains_key("$gt"));
        assert_eq!(OplogQuery::default().filter(None), Document::new());
    }

    #[test]
    fn backoff_doubles_and_is_capped() {
        let p = RetryPolicy::default();
        assert_eq!(p.delay(1), Duration::from_millis(250));
        assert_eq!(p.delay(2), Duration::from_millis(500));
        assert_eq!(p.delay(4), Duration::from_secs(2));
        assert_eq!(p.delay(10), Duration::from_secs(8));
        assert_eq!(p.delay(100), Duration::from_secs(8));
    }
}
