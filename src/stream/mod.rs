//! Byte streams, below every format: counting what was read (for progress), gzip
//! decompression recognised by content, telling what a stream that is not BSON looks
//! like, and the largest document any MongoDB stream may hold.
//!
//! It knows nothing of oplog entries or archive namespaces: [`crate::archive`] (the
//! mongodump archive format) and [`crate::oplog`] (oplog entries) are built on it,
//! and object storage (planned, `storage/`) will hand its streams to it.

use std::io::{self, Read};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub mod gzip;
pub mod sniff;

/// The largest document a MongoDB stream holds: the 16 MiB BSON limit plus 16 KiB of
/// slack (`BSONObjMaxInternalSize`, which oplog entries may use). Anything larger is
/// corruption.
pub const MAX_DOCUMENT_BYTES: usize = 16 * 1024 * 1024 + 16 * 1024;

/// Counts bytes taken from the underlying file (before decompression), for progress.
#[derive(Clone, Default, Debug)]
pub struct ByteCounter(Arc<AtomicU64>);

impl ByteCounter {
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// A reader that adds what it reads to a [`ByteCounter`].
pub(crate) struct CountingRead<R> {
    inner: R,
    counter: ByteCounter,
}

impl<R: Read> CountingRead<R> {
    pub(crate) fn new(inner: R, counter: ByteCounter) -> Self {
        CountingRead { inner, counter }
    }
}

impl<R: Read> Read for CountingRead<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.counter.0.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}
