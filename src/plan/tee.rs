//! The slice handed to the replay model while it is written (the embedded engine).
//!
//! The slice used to be written whole (read from the oplog, written, synced) and
//! then read back by the apply: two passes over the same bytes, one after the
//! other, on the critical path of every embedded replay. Now the writer also hands
//! each entry it writes, in the order it writes them, to the apply on the other
//! thread ([`pair`]): the same bytes, so the model applies exactly what the file
//! holds, without reading it back, while the rest of the slice is read and the
//! file synced.
//!
//! Memory stays bounded: the bytes travel in chunks of [`CHUNK`], at most
//! [`IN_FLIGHT`] of them in memory, and the apply gives emptied chunks back to be
//! filled again. When the apply is behind (it loads the backup's documents before
//! it reads the slice's first entry), the writer does not wait: the chunks it
//! cannot queue go to an overflow file in the work dir, and the queue carries only
//! where they are ([`Piece::Spilled`]), so the order is kept. The apply reads
//! them back from there (the page cache, mostly) and frees the file's blocks it
//! has read. Waiting there cost 1.1 s of the 7.0 s of the 1 GiB bench at
//! `--memory 64MiB` (docs/performance.md): the writer sat blocked while the apply
//! loaded the backup. Without an overflow directory (or when the file cannot be
//! written), the writer waits, as before.
//!
//! The end is said, not inferred: the writer sends an end mark once its last entry
//! is out ([`Tee::end`]). A writer that stops without it (its error, a panic) leaves
//! the reader with an error ([`SliceStream`]'s `read`), never with a stream that
//! looks complete. An apply that stops early drops its end; the writer then only
//! writes the file, to its end, so that its own outcome (and error) is the
//! sequential one.

use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;

/// Bytes per chunk handed over.
pub const CHUNK: usize = 1 << 20;
/// Chunks held in memory at most between the writer and the apply.
pub const IN_FLIGHT: usize = 8;
/// Bytes in the overflow file not read yet, at most: past them the writer waits
/// (`replay::preflight` counts them in the work dir's room). On the 1 GiB bench at
/// `--memory 64MiB` the writer is up to about 600 MB ahead; 256 MiB or no bound at
/// all gave the same times within the noise (5.7-6.3 s against 5.7-5.9 s).
pub const OVERFLOW_MAX: u64 = 512 << 20;

enum Piece {
    Bytes(Vec<u8>),
    /// A chunk written to the overflow file at `at`, `len` bytes.
    Spilled {
        file: Arc<File>,
        at: u64,
        len: usize,
    },
    End,
}

/// Where chunks go when the queue is full.
enum Overflow {
    /// Not opened yet: in this directory when needed.
    Dir(PathBuf),
    Open {
        file: Arc<File>,
        at: u64,
    },
    /// None given, or it could not be written: the writer waits.
    Wait,
}

/// The writer's side: entries go in whole, in the order written.
pub struct Tee {
    to_apply: Option<Sender<Piece>>,
    emptied: Receiver<Vec<u8>>,
    /// Chunks sent in memory and not given back yet.
    in_memory: usize,
    buf: Vec<u8>,
    overflow: Overflow,
    /// [`OVERFLOW_MAX`] (smaller in tests).
    overflow_max: u64,
    /// The overflow file's bytes the reader has read.
    read_back: Arc<AtomicU64>,
}

/// The apply's side: the slice's bytes, as a reader, ending where the writer said
/// the slice ends.
pub struct SliceStream {
    from_writer: Receiver<Piece>,
    emptied: Sender<Vec<u8>>,
    cur: Vec<u8>,
    /// Whether `cur` is a chunk sent in memory (given back when read).
    cur_sent: bool,
    pos: usize,
    ended: bool,
    /// The overflow file's bytes before this are read and their blocks freed.
    punched: u64,
    read_back: Arc<AtomicU64>,
    #[cfg(test)]
    overflow: Option<Arc<File>>,
}

/// A writer's side and the reader of what it hands over; chunks that find the
/// queue full go to an overflow file in `overflow_dir` (which must exist) when one
/// is given.
pub fn pair(overflow_dir: Option<PathBuf>) -> (Tee, SliceStream) {
    let (to_apply, from_writer) = channel();
    let (give_back, emptied) = channel();
    let read_back = Arc::new(AtomicU64::new(0));
    (
        Tee {
            to_apply: Some(to_apply),
            emptied,
            in_memory: 0,
            buf: Vec::with_capacity(CHUNK),
            overflow: overflow_dir.map_or(Overflow::Wait, Overflow::Dir),
            overflow_max: OVERFLOW_MAX,
            read_back: Arc::clone(&read_back),
        },
        SliceStream {
            from_writer,
            emptied: give_back,
            cur: Vec::new(),
            cur_sent: false,
            pos: 0,
            ended: false,
            punched: 0,
            read_back,
            #[cfg(test)]
            overflow: None,
        },
    )
}

impl Tee {
    /// One entry, as written to the file.
    pub fn put(&mut self, bytes: &[u8]) {
        if self.to_apply.is_none() {
            return;
        }
        self.buf.extend_from_slice(bytes);
        if self.buf.len() >= CHUNK {
            self.send();
        }
    }

    /// The slice's last entry is out: what is buffered goes, then the end mark.
    pub fn end(&mut self) {
        if !self.buf.is_empty() {
            self.send();
        }
        if let Some(tx) = self.to_apply.take() {
            let _ = tx.send(Piece::End);
        }
    }

    /// Takes back the chunks the apply has read; with `wait`, waits for one
    /// first. False when the apply is gone.
    fn take_back(&mut self, wait: bool) -> bool {
        if wait {
            match self.emptied.recv() {
                Ok(v) => self.reuse(v),
                Err(_) => return false,
            }
        }
        while let Ok(v) = self.emptied.try_recv() {
            self.reuse(v);
        }
        true
    }

    fn reuse(&mut self, mut v: Vec<u8>) {
        self.in_memory = self.in_memory.saturating_sub(1);
        if self.buf.capacity() < CHUNK {
            v.clear();
            self.buf = v;
        }
    }

    /// The full chunk as a piece: in memory while fewer than [`IN_FLIGHT`] are,
    /// else in the overflow file (or, without one, after waiting for room).
    fn piece(&mut self, full: Vec<u8>) -> Option<Piece> {
        self.take_back(false);
        if self.in_memory < IN_FLIGHT {
            self.in_memory += 1;
            return Some(Piece::Bytes(full));
        }
        if let Some(p) = self.spill(&full) {
            return Some(p);
        }
        if !self.take_back(true) {
            return None;
        }
        self.in_memory += 1;
        Some(Piece::Bytes(full))
    }

    /// Writes `full` to the overflow file (opened at the first use); None when
    /// there is none or it cannot be written (from then on the writer waits), or
    /// when it holds [`OVERFLOW_MAX`] bytes not read yet.
    fn spill(&mut self, full: &[u8]) -> Option<Piece> {
        if let Overflow::Dir(dir) = &self.overflow {
            // Unnamed: gone with its last handle, whatever happens.
            self.overflow = match tempfile::tempfile_in(dir) {
                Ok(f) => Overflow::Open {
                    file: Arc::new(f),
                    at: 0,
                },
                Err(_) => Overflow::Wait,
            };
        }
        let Overflow::Open { file, at } = &mut self.overflow else {
            return None;
        };
        let unread = *at - self.read_back.load(Ordering::Acquire);
        if unread + full.len() as u64 > self.overflow_max {
            return None;
        }
        if file.write_all_at(full, *at).is_err() {
            self.overflow = Overflow::Wait;
            return None;
        }
        let piece = Piece::Spilled {
            file: Arc::clone(file),
            at: *at,
            len: full.len(),
        };
        *at += full.len() as u64;
        Some(piece)
    }

    fn send(&mut self) {
        let full = std::mem::take(&mut self.buf);
        let sent = match self.piece(full) {
            Some(p) => self.to_apply.as_ref().is_some_and(|tx| tx.send(p).is_ok()),
            None => false,
        };
        if !sent {
            // The apply stopped (its error is on its side): the file alone goes on.
            self.to_apply = None;
            self.buf = Vec::new();
            return;
        }
        if self.buf.capacity() < CHUNK {
            self.buf = Vec::with_capacity(CHUNK);
        }
    }
}

/// Frees the whole blocks of an overflow file between `from` and `to` (read),
/// returning where the next hole starts (a file system that cannot punch holes
/// keeps them until the file is closed). Only whole 4 KiB blocks: the block that
/// `to` falls in also holds the next chunk's first bytes.
fn punch_hole(file: &File, from: u64, to: u64) -> u64 {
    use std::os::fd::AsRawFd;
    let end = to & !4095;
    if end > from {
        // SAFETY: a valid open descriptor; the range is within the file.
        unsafe {
            libc::fallocate(
                file.as_raw_fd(),
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                from as libc::off_t,
                (end - from) as libc::off_t,
            );
        }
        return end;
    }
    from
}

impl Read for SliceStream {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while self.pos == self.cur.len() {
            if self.ended {
                return Ok(0);
            }
            if std::mem::take(&mut self.cur_sent) {
                let _ = self.emptied.send(std::mem::take(&mut self.cur));
            }
            // A chunk read from the overflow file keeps its buffer for the next.
            self.cur.clear();
            self.pos = 0;
            match self.from_writer.recv() {
                Ok(Piece::Bytes(b)) => {
                    self.cur = b;
                    self.cur_sent = true;
                }
                Ok(Piece::Spilled { file, at, len }) => {
                    self.cur.resize(len, 0);
                    file.read_exact_at(&mut self.cur, at).map_err(|e| {
                        io::Error::new(
                            e.kind(),
                            format!("reading the slice back from its overflow file in the work dir: {e}"),
                        )
                    })?;
                    self.punched = punch_hole(&file, self.punched, at + len as u64);
                    self.read_back.store(at + len as u64, Ordering::Release);
                    #[cfg(test)]
                    {
                        self.overflow = Some(file);
                    }
                }
                Ok(Piece::End) => self.ended = true,
                Err(_) => {
                    return Err(io::Error::other(
                        "the slice's writer stopped before the slice's end (its error is reported)",
                    ))
                }
            }
        }
        let n = out.len().min(self.cur.len() - self.pos);
        out[..n].copy_from_slice(&self.cur[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(n: usize) -> Vec<Vec<u8>> {
        (0..n)
            .map(|i| {
                let len = 7 + (i * 7919) % 3000;
                (0..len).map(|j| (i + j) as u8).collect()
            })
            .collect()
    }

    #[test]
    fn what_is_put_is_read_in_order_up_to_the_end_mark() {
        let all = entries(4000);
        let expected: Vec<u8> = all.concat();
        assert!(expected.len() > 4 * CHUNK, "crosses several chunks");
        let (mut tee, mut stream) = pair(None);
        let writer = std::thread::spawn(move || {
            for e in &all {
                tee.put(e);
            }
            tee.end();
        });
        let mut got = Vec::new();
        stream.read_to_end(&mut got).unwrap();
        writer.join().unwrap();
        assert!(
            got == expected,
            "{} bytes read of {}",
            got.len(),
            expected.len()
        );
    }

    #[test]
    fn a_writer_gone_without_the_end_mark_is_an_error_not_an_end() {
        let (mut tee, mut stream) = pair(None);
        let writer = std::thread::spawn(move || {
            tee.put(&vec![1u8; CHUNK + 10]);
            tee.put(&[2u8; 10]);
            // Dropped here without `end`: the slice failed.
        });
        let mut got = Vec::new();
        let e = stream.read_to_end(&mut got).unwrap_err();
        writer.join().unwrap();
        assert!(
            e.to_string().contains("stopped before the slice's end"),
            "{e}"
        );
        // What came before is what was sent, no more.
        assert_eq!(got.len(), CHUNK + 10);
    }

    #[test]
    fn a_reader_gone_lets_the_writer_finish() {
        let dir = tempfile::tempdir().unwrap();
        for overflow in [None, Some(dir.path().to_path_buf())] {
            let (mut tee, stream) = pair(overflow);
            drop(stream);
            // Far more than the queue holds: never blocks.
            for _ in 0..(IN_FLIGHT * 4) {
                tee.put(&vec![0u8; CHUNK]);
            }
            tee.end();
        }
    }

    /// The writer ends without waiting for a reader that has not started: what
    /// the queue cannot hold goes through the overflow file, in order, and its
    /// blocks are freed as they are read.
    #[test]
    fn a_reader_behind_does_not_hold_the_writer_back() {
        let dir = tempfile::tempdir().unwrap();
        let all = entries(20_000);
        let expected: Vec<u8> = all.concat();
        assert!(expected.len() > 3 * IN_FLIGHT * CHUNK, "spills");
        let (mut tee, mut stream) = pair(Some(dir.path().to_path_buf()));
        // Joined before anything is read: a writer that waited would hang here.
        std::thread::spawn(move || {
            for e in &all {
                tee.put(e);
            }
            tee.end();
        })
        .join()
        .unwrap();
        let mut got = Vec::new();
        let mut buf = vec![0u8; 7777];
        loop {
            let n = stream.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        assert!(
            got == expected,
            "{} bytes read of {}",
            got.len(),
            expected.len()
        );
        // What was read is freed, but for the last block.
        let file = stream.overflow.as_ref().expect("spilled");
        let allocated = std::os::unix::fs::MetadataExt::blocks(&file.metadata().unwrap()) * 512;
        assert!(allocated <= 4096, "{allocated} bytes still allocated");
        // Unnamed: nothing is left in the directory.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    /// Past [`OVERFLOW_MAX`] unread bytes in the overflow file, the writer waits
    /// for the reader.
    #[test]
    fn the_overflow_file_holds_at_most_its_share() {
        let dir = tempfile::tempdir().unwrap();
        let (mut tee, mut stream) = pair(Some(dir.path().to_path_buf()));
        tee.overflow_max = 3 * CHUNK as u64;
        let chunks = IN_FLIGHT + 3 + 2;
        let writer = std::thread::spawn(move || {
            for i in 0..chunks {
                tee.put(&vec![i as u8; CHUNK]);
            }
            tee.end();
        });
        std::thread::sleep(std::time::Duration::from_millis(300));
        assert!(
            !writer.is_finished(),
            "the writer went past the overflow's share"
        );
        let mut got = Vec::new();
        stream.read_to_end(&mut got).unwrap();
        writer.join().unwrap();
        let expected: Vec<u8> = (0..chunks).flat_map(|i| vec![i as u8; CHUNK]).collect();
        assert!(
            got == expected,
            "{} bytes read of {}",
            got.len(),
            expected.len()
        );
    }

    /// Overflow and memory take turns: the reader reads slowly while the writer
    /// writes, so some chunks are queued and some spilled, in any order; the bytes
    /// come back as written. With an overflow directory that cannot be used, the
    /// writer waits instead.
    #[test]
    fn chunks_in_memory_and_in_the_overflow_file_keep_their_order() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing");
        for overflow in [Some(dir.path().to_path_buf()), Some(missing)] {
            let all = entries(12_000);
            let expected: Vec<u8> = all.concat();
            let (mut tee, mut stream) = pair(overflow);
            let writer = std::thread::spawn(move || {
                for (i, e) in all.iter().enumerate() {
                    tee.put(e);
                    if i % 1500 == 0 {
                        std::thread::sleep(std::time::Duration::from_millis(5));
                    }
                }
                tee.end();
            });
            let mut got = Vec::new();
            let mut buf = vec![0u8; 1 << 16];
            loop {
                let n = stream.read(&mut buf).unwrap();
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
                if got.len() % 5 == 0 {
                    std::thread::sleep(std::time::Duration::from_micros(200));
                }
            }
            writer.join().unwrap();
            assert!(
                got == expected,
                "{} bytes read of {}",
                got.len(),
                expected.len()
            );
        }
    }
}
