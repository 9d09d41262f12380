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
//! filled again. When the apply is behind, the writer does not wait: once the
//! writer says where the slice's file is ([`Tee::read_from`]), a chunk that finds
//! the queue full is only flushed to that file, and the queue carries where it is
//! ([`Piece::InFile`]), so the order is kept; the apply reads it back from there
//! (the page cache, mostly). Waiting cost 0.3-1.0 s of the 6-6.5 s of the 1 GiB
//! bench at `--memory 64MiB` (docs/performance.md): the writer sat blocked while
//! the apply, the slower side past the budget, worked. A first version wrote such
//! chunks to a file of their own: 5% slower at 4 GiB, where the disk is the
//! bottleneck and every byte went to it twice. Before [`Tee::read_from`] (or when
//! the flush fails) the writer waits, as it always did.
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
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;

/// Bytes per chunk handed over.
pub const CHUNK: usize = 1 << 20;
/// Chunks held in memory at most between the writer and the apply.
pub const IN_FLIGHT: usize = 8;

enum Piece {
    Bytes(Vec<u8>),
    /// A chunk left in the slice's file: `len` bytes at `at`.
    InFile {
        file: Arc<File>,
        at: u64,
        len: usize,
    },
    End,
}

/// Makes what the writer has written so far readable in the slice's file (its
/// buffered writer's flush).
pub type Flush<'a> = &'a mut dyn FnMut() -> io::Result<()>;

/// The writer's side: entries go in whole, in the order written.
pub struct Tee {
    to_apply: Option<Sender<Piece>>,
    emptied: Receiver<Vec<u8>>,
    /// Chunks sent in memory and not given back yet.
    in_memory: usize,
    buf: Vec<u8>,
    /// The slice's file, read by the apply, and where the next chunk starts in it.
    file: Option<(Arc<File>, u64)>,
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
    /// Chunks read from the file, for the tests.
    #[cfg(test)]
    from_file: usize,
}

/// A writer's side and the reader of what it hands over.
pub fn pair() -> (Tee, SliceStream) {
    let (to_apply, from_writer) = channel();
    let (give_back, emptied) = channel();
    (
        Tee {
            to_apply: Some(to_apply),
            emptied,
            in_memory: 0,
            buf: Vec::with_capacity(CHUNK),
            file: None,
        },
        SliceStream {
            from_writer,
            emptied: give_back,
            cur: Vec::new(),
            cur_sent: false,
            pos: 0,
            ended: false,
            #[cfg(test)]
            from_file: 0,
        },
    )
}

impl Tee {
    /// From now on a chunk that finds the queue full stays in the slice's file,
    /// `file` (a handle on it that can be read), whose next byte written is at
    /// `at` (after what came before the slice's first entry).
    pub fn read_from(&mut self, file: File, at: u64) {
        self.file = Some((Arc::new(file), at));
    }

    /// One entry, as written to the file (`flush` makes it readable there).
    pub fn put(&mut self, bytes: &[u8], flush: Flush<'_>) {
        if self.to_apply.is_none() {
            return;
        }
        self.buf.extend_from_slice(bytes);
        if self.buf.len() >= CHUNK {
            self.send(flush);
        }
    }

    /// The slice's last entry is out: what is buffered goes, then the end mark.
    pub fn end(&mut self, flush: Flush<'_>) {
        if !self.buf.is_empty() {
            self.send(flush);
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
    /// else left in the file (or, without one, after waiting for room).
    fn piece(&mut self, full: Vec<u8>, flush: Flush<'_>) -> Option<Piece> {
        self.take_back(false);
        if self.in_memory >= IN_FLIGHT {
            if let Some((file, at)) = &self.file {
                if flush().is_ok() {
                    return Some(Piece::InFile {
                        file: Arc::clone(file),
                        at: *at,
                        len: full.len(),
                    });
                }
                // Its error comes back at the slice's own flush; until then, wait.
                self.file = None;
            }
            if !self.take_back(true) {
                return None;
            }
        }
        self.in_memory += 1;
        Some(Piece::Bytes(full))
    }

    fn send(&mut self, flush: Flush<'_>) {
        let full = std::mem::take(&mut self.buf);
        let len = full.len() as u64;
        let sent = match self.piece(full, flush) {
            Some(p) => self.to_apply.as_ref().is_some_and(|tx| tx.send(p).is_ok()),
            None => false,
        };
        if let Some((_, at)) = &mut self.file {
            *at += len;
        }
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

impl Read for SliceStream {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while self.pos == self.cur.len() {
            if self.ended {
                return Ok(0);
            }
            if std::mem::take(&mut self.cur_sent) {
                let _ = self.emptied.send(std::mem::take(&mut self.cur));
            }
            // A chunk read from the file keeps its buffer for the next.
            self.cur.clear();
            self.pos = 0;
            match self.from_writer.recv() {
                Ok(Piece::Bytes(b)) => {
                    self.cur = b;
                    self.cur_sent = true;
                }
                Ok(Piece::InFile { file, at, len }) => {
                    self.cur.resize(len, 0);
                    file.read_exact_at(&mut self.cur, at).map_err(|e| {
                        io::Error::new(
                            e.kind(),
                            format!("reading the slice back from its file: {e}"),
                        )
                    })?;
                    #[cfg(test)]
                    {
                        self.from_file += 1;
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
    use std::io::{BufWriter, Write};

    use super::*;

    fn entries(n: usize) -> Vec<Vec<u8>> {
        (0..n)
            .map(|i| {
                let len = 7 + (i * 7919) % 3000;
                (0..len).map(|j| (i + j) as u8).collect()
            })
            .collect()
    }

    /// Writes `all` as the slice's writer does: to a file (after `prefix` bytes
    /// of something else) through a buffered writer, each entry teed after it.
    /// `pause` sleeps now and then, so that the reader catches up.
    fn write_slice(mut tee: Tee, all: &[Vec<u8>], in_file: bool, pause: bool) {
        let file = tempfile::tempfile().unwrap();
        let mut w = BufWriter::with_capacity(1 << 20, file.try_clone().unwrap());
        w.write_all(&[0xEE; 100]).unwrap();
        if in_file {
            tee.read_from(file, 100);
        }
        for (i, e) in all.iter().enumerate() {
            w.write_all(e).unwrap();
            tee.put(e, &mut || w.flush());
            if pause && i % 1500 == 0 {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
        }
        tee.end(&mut || w.flush());
    }

    /// Reads `stream` to its end `piece` bytes at a time, pausing now and then
    /// with `pause`.
    fn read_in_pieces(stream: &mut SliceStream, piece: usize, pause: bool) -> Vec<u8> {
        let mut got = Vec::new();
        let mut buf = vec![0u8; piece];
        loop {
            let n = stream.read(&mut buf).unwrap();
            if n == 0 {
                return got;
            }
            got.extend_from_slice(&buf[..n]);
            if pause && got.len() % 5 == 0 {
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
        }
    }

    fn assert_bytes(got: &[u8], expected: &[u8]) {
        assert!(
            got == expected,
            "{} bytes read of {}",
            got.len(),
            expected.len()
        );
    }

    #[test]
    fn what_is_put_is_read_in_order_up_to_the_end_mark() {
        let all = entries(4000);
        let expected: Vec<u8> = all.concat();
        assert!(expected.len() > 4 * CHUNK, "crosses several chunks");
        for in_file in [false, true] {
            let (tee, mut stream) = pair();
            let all = all.clone();
            let writer = std::thread::spawn(move || write_slice(tee, &all, in_file, false));
            let mut got = Vec::new();
            stream.read_to_end(&mut got).unwrap();
            writer.join().unwrap();
            assert_bytes(&got, &expected);
        }
    }

    #[test]
    fn a_writer_gone_without_the_end_mark_is_an_error_not_an_end() {
        let (mut tee, mut stream) = pair();
        let writer = std::thread::spawn(move || {
            tee.put(&vec![1u8; CHUNK + 10], &mut || Ok(()));
            tee.put(&[2u8; 10], &mut || Ok(()));
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
        for in_file in [false, true] {
            let (tee, stream) = pair();
            drop(stream);
            // Far more than the queue holds: never blocks.
            write_slice(tee, &vec![vec![0u8; CHUNK]; IN_FLIGHT * 4], in_file, false);
        }
    }

    /// With the slice's file known, the writer ends without waiting for a reader
    /// that has not started: what the queue cannot hold is read back from the
    /// file, in order.
    #[test]
    fn a_reader_behind_does_not_hold_the_writer_back() {
        let all = entries(20_000);
        let expected: Vec<u8> = all.concat();
        assert!(expected.len() > 3 * IN_FLIGHT * CHUNK, "past the queue");
        let (tee, mut stream) = pair();
        // Done before anything is read, or it waited.
        let writer = std::thread::spawn(move || write_slice(tee, &all, true, false));
        let start = std::time::Instant::now();
        while !writer.is_finished() {
            assert!(
                start.elapsed() < std::time::Duration::from_secs(30),
                "the writer waits for a reader that has not started"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        writer.join().unwrap();
        assert_bytes(&read_in_pieces(&mut stream, 7777, false), &expected);
        assert!(
            stream.from_file > 10,
            "{} chunks from the file",
            stream.from_file
        );
    }

    /// Chunks in memory and in the file take turns: the reader reads slowly while
    /// the writer writes, pausing now and then; the bytes come back as written.
    #[test]
    fn chunks_in_memory_and_in_the_file_keep_their_order() {
        let all = entries(12_000);
        let expected: Vec<u8> = all.concat();
        let (tee, mut stream) = pair();
        let writer = std::thread::spawn(move || write_slice(tee, &all, true, true));
        let got = read_in_pieces(&mut stream, 1 << 16, true);
        writer.join().unwrap();
        assert_bytes(&got, &expected);
    }

    /// A flush that fails leaves the chunk in memory (the writer waits), and
    /// nothing is read from the file after it.
    #[test]
    fn a_failed_flush_falls_back_to_waiting() {
        let (mut tee, mut stream) = pair();
        tee.read_from(tempfile::tempfile().unwrap(), 0);
        let writer = std::thread::spawn(move || {
            for i in 0..(IN_FLIGHT * 3) {
                tee.put(&vec![i as u8; CHUNK], &mut || {
                    Err(io::Error::other("disk full"))
                });
            }
            tee.end(&mut || Ok(()));
        });
        let mut got = Vec::new();
        stream.read_to_end(&mut got).unwrap();
        writer.join().unwrap();
        let expected: Vec<u8> = (0..IN_FLIGHT * 3)
            .flat_map(|i| vec![i as u8; CHUNK])
            .collect();
        assert_bytes(&got, &expected);
        assert_eq!(stream.from_file, 0);
    }
}
