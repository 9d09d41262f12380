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
//! [`IN_FLIGHT`] of them queued (the writer waits when the apply is behind), and
//! the apply gives emptied chunks back to be filled again.
//!
//! The end is said, not inferred: the writer sends an end mark once its last entry
//! is out ([`Tee::end`]). A writer that stops without it (its error, a panic) leaves
//! the reader with an error ([`SliceStream`]'s `read`), never with a stream that
//! looks complete. An apply that stops early drops its end; the writer then only
//! writes the file, to its end, so that its own outcome (and error) is the
//! sequential one.

use std::io::{self, Read};
use std::sync::mpsc::{channel, sync_channel, Receiver, Sender, SyncSender};

/// Bytes per chunk handed over.
pub const CHUNK: usize = 1 << 20;
/// Chunks queued at most between the writer and the apply.
pub const IN_FLIGHT: usize = 8;

enum Piece {
    Bytes(Vec<u8>),
    End,
}

/// The writer's side: entries go in whole, in the order written.
pub struct Tee {
    to_apply: Option<SyncSender<Piece>>,
    emptied: Receiver<Vec<u8>>,
    buf: Vec<u8>,
}

/// The apply's side: the slice's bytes, as a reader, ending where the writer said
/// the slice ends.
pub struct SliceStream {
    from_writer: Receiver<Piece>,
    emptied: Sender<Vec<u8>>,
    cur: Vec<u8>,
    pos: usize,
    ended: bool,
}

/// A writer's side and the reader of what it hands over.
pub fn pair() -> (Tee, SliceStream) {
    let (to_apply, from_writer) = sync_channel(IN_FLIGHT);
    let (give_back, emptied) = channel();
    (
        Tee {
            to_apply: Some(to_apply),
            emptied,
            buf: Vec::with_capacity(CHUNK),
        },
        SliceStream {
            from_writer,
            emptied: give_back,
            cur: Vec::new(),
            pos: 0,
            ended: false,
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

    fn send(&mut self) {
        let next = match self.emptied.try_recv() {
            Ok(mut v) => {
                v.clear();
                v
            }
            Err(_) => Vec::with_capacity(CHUNK),
        };
        let full = std::mem::replace(&mut self.buf, next);
        let gone = self
            .to_apply
            .as_ref()
            .is_some_and(|tx| tx.send(Piece::Bytes(full)).is_err());
        if gone {
            // The apply stopped (its error is on its side): the file alone goes on.
            self.to_apply = None;
            self.buf = Vec::new();
        }
    }
}

impl Read for SliceStream {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while self.pos == self.cur.len() {
            if self.ended {
                return Ok(0);
            }
            let done = std::mem::take(&mut self.cur);
            if done.capacity() > 0 {
                let _ = self.emptied.send(done);
            }
            self.pos = 0;
            match self.from_writer.recv() {
                Ok(Piece::Bytes(b)) => self.cur = b,
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
        let (mut tee, mut stream) = pair();
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
        let (mut tee, mut stream) = pair();
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
        let (mut tee, stream) = pair();
        drop(stream);
        // Far more than the queue holds: never blocks.
        for _ in 0..(IN_FLIGHT * 4) {
            tee.put(&vec![0u8; CHUNK]);
        }
        tee.end();
    }
}
