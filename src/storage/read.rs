//! Streaming reads: a synchronous `Read` over an object, with bounded memory, read by
//! several ranged GETs at once, each resuming after a broken connection.
//!
//! An object is read in ranges of `read_range_size` bytes (8 MiB by default), up to
//! `read_ranges` of them in flight (4), each on its own connection; the reader hands
//! their bytes out in order. One stream per object is what one server stream delivers
//! (on loopback against s3s-fs about 180 MB/s, bound by the server); several ranges at
//! once is what S3's own guidance and the AWS SDKs' transfer managers do for large
//! objects, and what PBM's and wal-g's downloaders do (`range_reader.go`). The first
//! range is the response to the open's GET (`Range: bytes=0-<size-1>`), which also
//! tells the object's size and ETag; when the reader is done with a range, the next
//! one not yet asked for starts. So the network, the caller's decompression and its
//! parsing overlap, and memory stays bounded: each range holds at most
//! `read_ahead_bytes` (plus one HTTP chunk) ahead of the reader, so an object takes at
//! most `read_ranges` × `read_ahead_bytes` (32 MiB by default) whatever its size.
//! With `read_ranges` = 1 the object is one range: one GET streamed, as before.
//!
//! Every GET after the first carries `If-Match` with the first response's ETag, and
//! its response's size, ETag and start are checked against it: an object replaced or
//! deleted during the read is an error (`ChangedWhileReading`), never bytes of two
//! versions spliced together, and with ranges that check happens at every range, not
//! only after a break. When a range's body breaks, its task asks again from the byte
//! reached (`Range: bytes=<pos>-<end-1>`), as wal-g's `range_reader.go` does, within a
//! budget of tries that resets whenever bytes arrive. object_store's client already
//! resumes a body once or twice inside its own retry budget (`client/get.rs`,
//! `retry_stream`); this layer outlasts a longer outage (a restarting endpoint).

use std::collections::VecDeque;
use std::io::{self, Read};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::stream::BoxStream;
use futures_util::StreamExt;
use object_store::path::Path;
use object_store::{GetOptions, GetRange, GetResult, ObjectStore};
use tokio::sync::{mpsc, Semaphore};
use tokio::task::JoinHandle;

use super::error::{Cause, StorageError};
use super::ObjectCtx;

/// What one range's task sends: a piece of the body, or why the read failed.
type Piece = Result<Bytes, StorageError>;

/// What every range of one read shares.
struct Object {
    ctx: ObjectCtx,
    store: Arc<dyn ObjectStore>,
    path: Path,
    size: u64,
    etag: Option<String>,
    resumes: AtomicU32,
}

/// One range being fetched: its bytes arrive in order on `rx`.
struct InFlight {
    end: u64,
    rx: mpsc::UnboundedReceiver<Piece>,
    /// The bytes the range may still hold ahead of the reader.
    room: Arc<Semaphore>,
    task: JoinHandle<()>,
}

/// A stream of an object's bytes, read synchronously.
pub struct ObjectReader {
    obj: Arc<Object>,
    pos: u64,
    cur: Bytes,
    /// The ranges asked for, in order; the front one is being read.
    ranges: VecDeque<InFlight>,
    /// Where the next range not yet asked for starts.
    next: u64,
    finished: bool,
}

impl ObjectReader {
    /// How the open's GET should ask for the object: its first range, or all of it
    /// when the object is read as one stream.
    pub(crate) fn first_range(ctx: &ObjectCtx) -> Option<GetRange> {
        (ctx.tuning.read_ranges > 1).then(|| GetRange::Bounded(0..range_size(ctx)))
    }

    /// Starts the read; `first` is the response to the open's GET, asked for with
    /// [`first_range`](Self::first_range) (or the whole object: an empty object has
    /// no range to ask for).
    pub(crate) fn start(
        ctx: ObjectCtx,
        store: Arc<dyn ObjectStore>,
        path: Path,
        first: GetResult,
    ) -> ObjectReader {
        let obj = Arc::new(Object {
            size: first.meta.size,
            etag: first.meta.e_tag.clone(),
            ctx,
            store,
            path,
            resumes: AtomicU32::new(0),
        });
        let mut r = ObjectReader {
            obj,
            pos: 0,
            cur: Bytes::new(),
            ranges: VecDeque::new(),
            next: 0,
            finished: false,
        };
        if r.obj.size > 0 {
            // The first response covers [0, end): the whole object, or its first range.
            let end = first.range.end.min(r.obj.size);
            r.spawn(end, Some(first));
            r.fill();
        }
        r
    }

    pub fn size(&self) -> u64 {
        self.obj.size
    }

    /// How many times a GET of this read was retried after a broken connection or a
    /// failed request (for a report).
    pub fn resumes(&self) -> u32 {
        self.obj.resumes.load(Ordering::Relaxed)
    }

    /// Asks for the range from `self.next` to `end`.
    fn spawn(&mut self, end: u64, first: Option<GetResult>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let ahead = ahead_cap(&self.obj);
        let room = Arc::new(Semaphore::new(ahead));
        let fetch = Fetch {
            obj: Arc::clone(&self.obj),
            start: self.next,
            end,
            tx,
            room: Arc::clone(&room),
            ahead,
        };
        let task = super::runtime::handle().spawn(fetch.run(first));
        self.ranges.push_back(InFlight {
            end,
            rx,
            room,
            task,
        });
        self.next = end;
    }

    /// Starts ranges until `read_ranges` are in flight or the object is covered.
    fn fill(&mut self) {
        let step = range_size(&self.obj.ctx);
        while self.next < self.obj.size && self.ranges.len() < self.obj.ctx.tuning.read_ranges {
            let end = self.next.saturating_add(step).min(self.obj.size);
            self.spawn(end, None);
        }
    }

    fn changed(&self, detail: &str) -> io::Error {
        io::Error::other(self.obj.changed(self.pos, detail))
    }
}

/// The length of each ranged GET.
fn range_size(ctx: &ObjectCtx) -> u64 {
    ctx.tuning.read_range_size.max(1)
}

impl Drop for ObjectReader {
    fn drop(&mut self) {
        for r in &self.ranges {
            r.task.abort();
        }
    }
}

impl std::fmt::Debug for ObjectReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ObjectReader({}, at {} of {} bytes)",
            self.obj.ctx.url, self.pos, self.obj.size
        )
    }
}

impl Read for ObjectReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            if !self.cur.is_empty() {
                let n = buf.len().min(self.cur.len());
                buf[..n].copy_from_slice(&self.cur.split_to(n));
                self.pos += n as u64;
                return Ok(n);
            }
            if self.finished || buf.is_empty() {
                return Ok(0);
            }
            let Some(front) = self.ranges.front_mut() else {
                self.finished = true;
                if self.pos != self.obj.size {
                    return Err(self.changed("the stream ended early"));
                }
                return Ok(0);
            };
            match front.rx.blocking_recv() {
                Some(Ok(chunk)) => {
                    // The chunk now lives here: the range may fetch that much more.
                    front
                        .room
                        .add_permits(chunk.len().min(ahead_cap(&self.obj)));
                    if self.pos + chunk.len() as u64 > front.end {
                        self.finished = true;
                        return Err(self.changed("the store sent more than asked"));
                    }
                    self.cur = chunk;
                }
                Some(Err(e)) => {
                    self.finished = true;
                    return Err(io::Error::other(e));
                }
                None => {
                    // A range's task ends without an error only after its last byte.
                    if self.pos != front.end {
                        self.finished = true;
                        return Err(self.changed("the stream ended early"));
                    }
                    self.ranges.pop_front();
                    self.fill();
                }
            }
        }
    }
}

/// The most bytes one chunk takes from a range's room (a chunk larger than the whole
/// room takes all of it, so that it can still pass).
fn ahead_cap(obj: &Object) -> usize {
    obj.ctx.tuning.read_ahead_bytes.clamp(1, 1 << 30)
}

impl Object {
    fn changed(&self, at: u64, detail: &str) -> StorageError {
        StorageError::ChangedWhileReading {
            url: self.ctx.url.clone(),
            at,
            size: self.size,
            detail: detail.to_string(),
        }
    }
}

/// The task that fetches one range `[start, end)` and resumes it.
struct Fetch {
    obj: Arc<Object>,
    start: u64,
    end: u64,
    tx: mpsc::UnboundedSender<Piece>,
    room: Arc<Semaphore>,
    ahead: usize,
}

type Body = BoxStream<'static, object_store::Result<Bytes>>;
type Broken = Box<dyn std::error::Error + Send + Sync>;

impl Fetch {
    async fn run(self, first: Option<GetResult>) {
        let mut pos = self.start;
        // Tries since bytes last arrived.
        let mut tries: u32 = 0;
        let mut body = match first {
            Some(r) => r.into_stream(),
            None => match self.get(pos, &mut tries, None).await {
                Some(b) => b,
                None => return,
            },
        };
        loop {
            let broken: Broken = match body.next().await {
                Some(Ok(chunk)) => {
                    tries = 0;
                    pos += chunk.len() as u64;
                    if pos > self.end {
                        let what = if self.end == self.obj.size {
                            "it grew"
                        } else {
                            "the store sent more than asked"
                        };
                        self.fail(self.obj.changed(pos, what));
                        return;
                    }
                    // Wait for room ahead of the reader (bounded memory).
                    let take = chunk.len().min(self.ahead) as u32;
                    match self.room.acquire_many(take).await {
                        Ok(p) => p.forget(),
                        Err(_) => return,
                    }
                    if self.tx.send(Ok(chunk)).is_err() {
                        return; // the reader was dropped
                    }
                    continue;
                }
                None if pos == self.end => return,
                None => format!("the body ended at byte {pos}").into(),
                Some(Err(e)) => Box::new(e),
            };
            body = match self.get(pos, &mut tries, Some(broken)).await {
                Some(b) => b,
                None => return,
            };
        }
    }

    fn fail(&self, e: StorageError) {
        let _ = self.tx.send(Err(e));
    }

    /// GETs `[pos, end)` with `If-Match`, retrying with backoff while the budget
    /// lasts; `last` is why the previous try broke (None: this is the range's first
    /// GET). None when it gave up (the error sent to the reader) or the reader is gone.
    async fn get(&self, pos: u64, tries: &mut u32, mut last: Option<Broken>) -> Option<Body> {
        let tuning = &self.obj.ctx.tuning;
        loop {
            if let Some(why) = &last {
                if *tries >= tuning.read_resumes {
                    self.fail(StorageError::ReadBroken {
                        url: self.obj.ctx.url.clone(),
                        at: pos,
                        size: self.obj.size,
                        attempts: *tries,
                        source: Cause::of(why.as_ref()),
                    });
                    return None;
                }
                let wait = tuning
                    .resume_backoff
                    .saturating_mul(1 << (*tries).min(5))
                    .min(Duration::from_secs(10));
                *tries += 1;
                tokio::time::sleep(wait).await;
                if self.tx.is_closed() {
                    return None;
                }
            }
            let opts = GetOptions {
                range: Some(GetRange::Bounded(pos..self.end)),
                if_match: self.obj.etag.clone(),
                ..GetOptions::default()
            };
            match self.obj.store.get_opts(&self.obj.path, opts).await {
                Ok(r) => {
                    if let Err(what) = self.check(&r, pos) {
                        self.fail(self.obj.changed(pos, &what));
                        return None;
                    }
                    if last.is_some() {
                        self.obj.resumes.fetch_add(1, Ordering::Relaxed);
                    }
                    return Some(r.into_stream());
                }
                Err(
                    e @ (object_store::Error::Precondition { .. }
                    | object_store::Error::NotFound { .. }),
                ) => {
                    let what = if matches!(e, object_store::Error::NotFound { .. }) {
                        "it was deleted"
                    } else {
                        "it was replaced (its ETag no longer matches)"
                    };
                    self.fail(self.obj.changed(pos, what));
                    return None;
                }
                Err(e) => last = Some(Box::new(e)),
            }
        }
    }

    /// The response is for the same object version, from the byte asked for.
    fn check(&self, r: &GetResult, pos: u64) -> Result<(), String> {
        if r.meta.size != self.obj.size {
            return Err(format!("its size is now {} bytes", r.meta.size));
        }
        if self.obj.etag.is_some() && r.meta.e_tag != self.obj.etag {
            return Err("its ETag changed".into());
        }
        if r.range.start != pos {
            return Err(format!("the store answered from byte {}", r.range.start));
        }
        Ok(())
    }
}
