//! Streaming reads: a synchronous `Read` over a GET, with bounded memory, that resumes
//! after a broken connection.
//!
//! A task on the storage runtime pulls the body and passes its chunks through a channel
//! of `read_ahead_chunks` slots to the reader, so the network and the caller's
//! decompression and parsing overlap while memory stays bounded (slots × the HTTP
//! client's chunk size, tens of KiB each). When the body breaks, the task asks again
//! from the byte reached (`Range: bytes=<pos>-<size-1>`), as wal-g's `range_reader.go`
//! does, with `If-Match` on the first response's ETag: an object replaced meanwhile
//! gives a 412 instead of someone else's bytes spliced onto ours, and the new
//! response's length and ETag are checked too. object_store's client already resumes a
//! body once or twice inside its own retry budget (`client/get.rs`, `retry_stream`);
//! this layer outlasts a longer outage (a restarting endpoint) with its own budget of
//! tries that reset whenever bytes arrive.

use std::io::{self, Read};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use object_store::path::Path;
use object_store::{GetOptions, GetRange, GetResult, ObjectStore};
use tokio::sync::mpsc;

use super::error::{Cause, StorageError};
use super::ObjectCtx;

/// A stream of an object's bytes, read synchronously.
pub struct ObjectReader {
    url: String,
    size: u64,
    pos: u64,
    cur: Bytes,
    rx: mpsc::Receiver<Result<Bytes, StorageError>>,
    resumes: Arc<AtomicU32>,
    finished: bool,
}

impl ObjectReader {
    /// Starts the pump for `first`, the response to the first GET.
    pub(crate) fn start(
        ctx: ObjectCtx,
        store: Arc<dyn ObjectStore>,
        path: Path,
        first: GetResult,
    ) -> ObjectReader {
        let size = first.meta.size;
        let etag = first.meta.e_tag.clone();
        let (tx, rx) = mpsc::channel(ctx.tuning.read_ahead_chunks.max(1));
        let resumes = Arc::new(AtomicU32::new(0));
        let url = ctx.url.clone();
        let pump = Pump {
            ctx,
            store,
            path,
            size,
            etag,
            tx,
            resumes: Arc::clone(&resumes),
        };
        super::runtime::handle().spawn(pump.run(first));
        ObjectReader {
            url,
            size,
            pos: 0,
            cur: Bytes::new(),
            rx,
            resumes,
            finished: false,
        }
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    /// How many times the read was resumed after a broken connection (for a report).
    pub fn resumes(&self) -> u32 {
        self.resumes.load(Ordering::Relaxed)
    }
}

impl std::fmt::Debug for ObjectReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ObjectReader({}, at {} of {} bytes)",
            self.url, self.pos, self.size
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
            match self.rx.blocking_recv() {
                Some(Ok(chunk)) => self.cur = chunk,
                Some(Err(e)) => {
                    self.finished = true;
                    return Err(io::Error::other(e));
                }
                None => {
                    self.finished = true;
                    // The pump ends without an error only after the last byte.
                    if self.pos != self.size {
                        return Err(io::Error::other(StorageError::ChangedWhileReading {
                            url: self.url.clone(),
                            at: self.pos,
                            size: self.size,
                            detail: "the stream ended early".into(),
                        }));
                    }
                    return Ok(0);
                }
            }
        }
    }
}

/// The task that fetches the body and resumes it.
struct Pump {
    ctx: ObjectCtx,
    store: Arc<dyn ObjectStore>,
    path: Path,
    size: u64,
    etag: Option<String>,
    tx: mpsc::Sender<Result<Bytes, StorageError>>,
    resumes: Arc<AtomicU32>,
}

impl Pump {
    async fn run(self, first: GetResult) {
        let mut pos: u64 = 0;
        let mut stream = first.into_stream();
        // Tries since bytes last arrived.
        let mut tries: u32 = 0;
        loop {
            let broken: Box<dyn std::error::Error + Send + Sync> = match stream.next().await {
                Some(Ok(chunk)) => {
                    tries = 0;
                    pos += chunk.len() as u64;
                    if pos > self.size {
                        let _ = self.tx.send(Err(self.changed(pos, "it grew"))).await;
                        return;
                    }
                    if self.tx.send(Ok(chunk)).await.is_err() {
                        return; // the reader was dropped
                    }
                    continue;
                }
                None if pos == self.size => return,
                None => format!("the body ended at byte {pos}").into(),
                Some(Err(e)) => Box::new(e),
            };
            // Resume from `pos`, as long as the budget lasts.
            let mut last: Box<dyn std::error::Error + Send + Sync> = broken;
            stream = loop {
                if tries >= self.ctx.tuning.read_resumes {
                    let _ = self
                        .tx
                        .send(Err(StorageError::ReadBroken {
                            url: self.ctx.url.clone(),
                            at: pos,
                            size: self.size,
                            attempts: tries,
                            source: Cause::of(last.as_ref()),
                        }))
                        .await;
                    return;
                }
                let wait = self
                    .ctx
                    .tuning
                    .resume_backoff
                    .saturating_mul(1 << tries.min(5))
                    .min(Duration::from_secs(10));
                tries += 1;
                tokio::time::sleep(wait).await;
                if self.tx.is_closed() {
                    return;
                }
                let opts = GetOptions {
                    range: Some(GetRange::Bounded(pos..self.size)),
                    if_match: self.etag.clone(),
                    ..GetOptions::default()
                };
                match self.store.get_opts(&self.path, opts).await {
                    Ok(r) => {
                        if r.meta.size != self.size {
                            let what = format!("its size is now {} bytes", r.meta.size);
                            let _ = self.tx.send(Err(self.changed(pos, &what))).await;
                            return;
                        }
                        if self.etag.is_some() && r.meta.e_tag != self.etag {
                            let _ = self
                                .tx
                                .send(Err(self.changed(pos, "its ETag changed")))
                                .await;
                            return;
                        }
                        if r.range.start != pos {
                            let what = format!("the store answered from byte {}", r.range.start);
                            let _ = self.tx.send(Err(self.changed(pos, &what))).await;
                            return;
                        }
                        self.resumes.fetch_add(1, Ordering::Relaxed);
                        break r.into_stream();
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
                        let _ = self.tx.send(Err(self.changed(pos, what))).await;
                        return;
                    }
                    Err(e) => last = Box::new(e),
                }
            };
        }
    }

    fn changed(&self, at: u64, detail: &str) -> StorageError {
        StorageError::ChangedWhileReading {
            url: self.ctx.url.clone(),
            at,
            size: self.size,
            detail: detail.to_string(),
        }
    }
}
