//! Gzip-compressed input, recognised by its bytes (`1f 8b`), never by a file name:
//! `mongodump --oplog --gzip` writes gzip content into a file still named
//! `oplog.bson` (mongo-tools `mongodump/prepare.go` names the oplog intent
//! `oplog.bson` whatever the compression), and users rename files.
//!
//! Decompression runs on threads of its own, so that it overlaps the scan: the
//! scan reads decompressed blocks while the next ones are being decompressed.
//!
//! - A gzip member that says how long it is (the `PT` extra subfield that
//!   [`write_member`] puts in every member of `pitr dump-oplog --gzip`, see
//!   [`SIZE_SUBFIELD`]) is cut out of the stream without decompressing it and
//!   decompressed whole on one of several worker threads: such files use every core.
//! - Any other member (`mongodump --gzip` writes one member for the whole file;
//!   `cat a.gz b.gz` gives several) is decompressed as a stream on one thread: its
//!   end is only known once it is decompressed.
//!
//! Either way every member is read, in order, like `gzip -dc`; data that is not a
//! gzip member after one is an error, never silently ignored. Memory stays bounded:
//! at most [`IN_FLIGHT`] members or blocks are held between the threads.
//!
//! A stream whose compressed bytes end inside a member (an interrupted `mongodump
//! --oplog --gzip`, a partial copy) delivers everything that member decompresses to,
//! then fails with a [`GzipTruncated`] (kind `UnexpectedEof`), so that the oplog
//! reader can treat it like a plain file cut short (complete entries, then
//! `--allow-truncated` or an error saying so). Only the end of the input counts as a
//! cut: a member whose data ends early while bytes follow it, or bytes that do not
//! start like a gzip member, are damage and stay errors.

use std::io::{self, BufRead, Read, Write};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread;

/// The two magic bytes every gzip member starts with (RFC 1952).
pub const MAGIC: [u8; 2] = [0x1f, 0x8b];

/// The compressed input ended inside gzip member `member` (1-based), which starts at
/// compressed byte `member_at`: the file was cut. Everything before the cut has been
/// delivered. The payload of an `io::ErrorKind::UnexpectedEof` error (see
/// [`GzipTruncated::of`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the gzip data ends inside member {member} (which starts at compressed byte {member_at}): {detail}")]
pub struct GzipTruncated {
    pub member: u64,
    pub member_at: u64,
    /// What the decompressor said (e.g. `incomplete deflate stream`).
    pub detail: String,
}

impl GzipTruncated {
    /// The truncation an I/O error carries, if it is one.
    pub fn of(e: &io::Error) -> Option<&GzipTruncated> {
        e.get_ref()?.downcast_ref()
    }

    pub fn into_io(self) -> io::Error {
        io::Error::new(io::ErrorKind::UnexpectedEof, self)
    }
}

/// True when `head` starts like a gzip stream.
pub fn is_gzip(head: &[u8]) -> bool {
    head.starts_with(&MAGIC)
}

/// The extra-field subfield (RFC 1952 section 2.3.1.1) in which pitr records a
/// member's total length in bytes (header to trailer, little-endian u32), so that
/// a reader can find the next member without decompressing this one, like BGZF's
/// `BC` subfield (whose 16-bit size is too small for members holding a 16 MB
/// entry). Readers that do not know it skip it (`gzip -dc`, Go's `compress/gzip`
/// used by mongorestore).
pub const SIZE_SUBFIELD: [u8; 2] = *b"PT";

/// Bytes of the header [`write_member`] writes: 10 fixed, XLEN, one 8-byte subfield.
const MEMBER_HEADER_BYTES: usize = 10 + 2 + 4 + 4;

/// Decompressed bytes per block of a streamed member.
const BLOCK: usize = 1 << 20;

/// Members (or blocks of a streamed member) between the threads, at most.
const IN_FLIGHT: usize = 6;

/// A member whose header or trailer claims more than this is streamed, not
/// decompressed whole (pitr's members hold 256 KiB plus at most one entry).
const MAX_WHOLE_MEMBER: usize = 64 << 20;

/// Appends `data` to `out` as one gzip member (no file name, mtime 0, so the same
/// data always gives the same bytes) carrying its own length in [`SIZE_SUBFIELD`].
pub fn write_member(out: &mut Vec<u8>, data: &[u8], level: flate2::Compression) -> io::Result<()> {
    let start = out.len();
    // ID1 ID2 CM=deflate FLG=FEXTRA MTIME=0 XFL OS=unknown, XLEN=8, then the subfield.
    let xfl = match level.level() {
        9 => 2,
        1 => 4,
        _ => 0,
    };
    out.extend_from_slice(&[0x1f, 0x8b, 8, 0x04, 0, 0, 0, 0, xfl, 255, 8, 0]);
    out.extend_from_slice(&SIZE_SUBFIELD);
    out.extend_from_slice(&[4, 0, 0, 0, 0, 0]);
    let mut enc = flate2::write::DeflateEncoder::new(std::mem::take(out), level);
    enc.write_all(data)?;
    *out = enc.finish()?;
    let mut crc = flate2::Crc::new();
    crc.update(data);
    out.extend_from_slice(&crc.sum().to_le_bytes());
    out.extend_from_slice(&(data.len() as u32).to_le_bytes());
    let total = u32::try_from(out.len() - start).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "a gzip member of 4 GiB or more cannot record its size",
        )
    })?;
    out[start + 16..start + 20].copy_from_slice(&total.to_le_bytes());
    Ok(())
}

/// The total length a member header records in [`SIZE_SUBFIELD`], when `head` holds
/// the whole extra field and it has one.
fn recorded_size(head: &[u8]) -> Option<usize> {
    if head.len() < 12 || head[0..3] != [0x1f, 0x8b, 8] || head[3] & 0x04 == 0 {
        return None;
    }
    let xlen = u16::from_le_bytes([head[10], head[11]]) as usize;
    let extra = head.get(12..12 + xlen)?;
    let mut p = 0;
    while p + 4 <= extra.len() {
        let len = u16::from_le_bytes([extra[p + 2], extra[p + 3]]) as usize;
        let data = extra.get(p + 4..p + 4 + len)?;
        if extra[p..p + 2] == SIZE_SUBFIELD && len == 4 {
            let n = u32::from_le_bytes([data[0], data[1], data[2], data[3]]) as usize;
            return (MEMBER_HEADER_BYTES + 8..=MAX_WHOLE_MEMBER)
                .contains(&n)
                .then_some(n);
        }
        p += 4 + len;
    }
    None
}

/// A reader of the decompressed bytes of `compressed` (all members), decompressed
/// on background threads (see the module documentation).
pub fn decoder(compressed: impl Read + Send + 'static) -> Box<dyn Read + Send> {
    let workers = thread::available_parallelism().map_or(1, |n| n.get());
    Box::new(ThreadedDecoder::spawn(compressed, workers))
}

/// What flows from the splitting thread to the reader, in stream order: one slot per
/// member (whole) or per streamed member, each delivering blocks then closing.
type Slot = Receiver<io::Result<Vec<u8>>>;

/// Buffers handed back by the reader for reuse (avoids faulting in fresh pages for
/// every block).
#[derive(Clone, Default)]
struct Pool(Arc<Mutex<Vec<Vec<u8>>>>);

impl Pool {
    fn get(&self, min: usize) -> Vec<u8> {
        let mut v = self
            .0
            .lock()
            .map(|mut p| p.pop())
            .ok()
            .flatten()
            .unwrap_or_default();
        v.clear();
        v.reserve(min);
        v
    }

    fn put(&self, v: Vec<u8>) {
        if let Ok(mut p) = self.0.lock() {
            if p.len() < 2 * IN_FLIGHT + 4 {
                p.push(v);
            }
        }
    }
}

struct ThreadedDecoder {
    slots: Receiver<Slot>,
    current: Option<Slot>,
    block: Vec<u8>,
    pos: usize,
    pool: Pool,
    done: bool,
}

impl ThreadedDecoder {
    fn spawn(compressed: impl Read + Send + 'static, workers: usize) -> ThreadedDecoder {
        let (slot_tx, slots) = sync_channel::<Slot>(IN_FLIGHT);
        let pool = Pool::default();
        let splitter_pool = pool.clone();
        thread::Builder::new()
            .name("gzip-split".into())
            .spawn(move || split(compressed, slot_tx, workers, splitter_pool))
            .expect("spawning the gzip thread");
        ThreadedDecoder {
            slots,
            current: None,
            block: Vec::new(),
            pos: 0,
            pool,
            done: false,
        }
    }
}

impl Read for ThreadedDecoder {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            if self.pos < self.block.len() {
                let n = buf.len().min(self.block.len() - self.pos);
                buf[..n].copy_from_slice(&self.block[self.pos..self.pos + n]);
                self.pos += n;
                return Ok(n);
            }
            if self.done || buf.is_empty() {
                return Ok(0);
            }
            let next = match &self.current {
                Some(slot) => slot.recv().ok(),
                None => None,
            };
            match next {
                Some(Ok(block)) => {
                    let old = std::mem::replace(&mut self.block, block);
                    self.pool.put(old);
                    self.pos = 0;
                }
                Some(Err(e)) => {
                    self.done = true;
                    return Err(e);
                }
                // This member is complete: on to the next one.
                None => match self.slots.recv() {
                    Ok(slot) => self.current = Some(slot),
                    Err(_) => {
                        self.done = true;
                        return Ok(0);
                    }
                },
            }
        }
    }
}

/// A member cut out of the stream, to be decompressed whole by a worker.
struct Job {
    member: Vec<u8>,
    /// Offset of the member in the compressed stream (for errors).
    at: u64,
    out: SyncSender<io::Result<Vec<u8>>>,
}

/// The compressed input, buffered so that a member header can be looked at before
/// deciding how to decompress the member.
struct Input<R> {
    inner: R,
    buf: Vec<u8>,
    pos: usize,
    filled: usize,
    eof: bool,
    /// Bytes consumed so far: the offset of `buf[pos]` in the stream.
    at: u64,
}

impl<R: Read> Input<R> {
    fn new(inner: R) -> Input<R> {
        Input {
            inner,
            buf: vec![0; 1 << 20],
            pos: 0,
            filled: 0,
            eof: false,
            at: 0,
        }
    }

    /// The buffered bytes, at least `n` of them unless the input ends first.
    fn peek(&mut self, n: usize) -> io::Result<&[u8]> {
        while self.filled - self.pos < n && !self.eof {
            if self.pos > 0 {
                self.buf.copy_within(self.pos..self.filled, 0);
                self.filled -= self.pos;
                self.pos = 0;
            }
            if self.buf.len() < n {
                self.buf.resize(n, 0);
            }
            match self.inner.read(&mut self.buf[self.filled..]) {
                Ok(0) => self.eof = true,
                Ok(k) => self.filled += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(&self.buf[self.pos..self.filled])
    }

    /// Moves up to `n` bytes into `out`; fewer only at the end of the input.
    fn take_into(&mut self, n: usize, out: &mut Vec<u8>) -> io::Result<usize> {
        let mut got = 0;
        while got < n {
            let avail = self.fill_buf()?;
            if avail.is_empty() {
                break;
            }
            let k = avail.len().min(n - got);
            out.extend_from_slice(&avail[..k]);
            self.consume(k);
            got += k;
        }
        Ok(got)
    }
}

impl<R: Read> Read for Input<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let avail = self.fill_buf()?;
        let k = avail.len().min(buf.len());
        buf[..k].copy_from_slice(&avail[..k]);
        self.consume(k);
        Ok(k)
    }
}

impl<R: Read> BufRead for Input<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if self.pos == self.filled && !self.eof {
            self.pos = 0;
            self.filled = 0;
            self.peek(1)?;
        }
        Ok(&self.buf[self.pos..self.filled])
    }

    fn consume(&mut self, amt: usize) {
        let amt = amt.min(self.filled - self.pos);
        self.pos += amt;
        self.at += amt as u64;
    }
}

/// The splitting thread: walks the members of `compressed`, hands members that
/// record their size to the workers, streams the others itself.
fn split(compressed: impl Read, slots: SyncSender<Slot>, workers: usize, pool: Pool) {
    let mut src = Input::new(compressed);
    let mut job_tx: Option<SyncSender<Job>> = None;
    let mut member = 0u64;
    loop {
        let (tx, rx) = sync_channel(2);
        member += 1;
        let at = src.at;
        // Enough of the header to see a whole extra field (XLEN is 16 bits).
        let size = match src.peek(12 + 65_535) {
            Ok([]) => return, // the end of the input, after a complete member
            // The input ends inside the fixed 10-byte header: a cut if what is
            // there starts like a member, else bytes that are no gzip member.
            Ok(head) if head.len() < 10 => {
                let like = head.iter().zip([0x1f, 0x8b, 8]).all(|(a, b)| *a == b);
                let err = if like {
                    GzipTruncated {
                        member,
                        member_at: at,
                        detail: format!("only {} bytes of its header are there", head.len()),
                    }
                    .into_io()
                } else {
                    member_error(
                        io::Error::new(io::ErrorKind::InvalidData, "not a gzip member"),
                        at,
                    )
                };
                let _ = tx.send(Err(err));
                let _ = slots.send(rx);
                return;
            }
            Ok(head) => recorded_size(head),
            Err(e) => {
                let _ = tx.send(Err(e));
                let _ = slots.send(rx);
                return;
            }
        };
        if slots.send(rx).is_err() {
            return; // the reader is gone
        }
        let whole = match size {
            Some(n) if workers > 1 => {
                let mut whole_member = pool.get(n);
                match src.take_into(n, &mut whole_member) {
                    Ok(got) if got == n => Some(whole_member),
                    Ok(_) => {
                        // The input ended inside this member: decompress what is
                        // there, then report the cut.
                        stream_member(io::Cursor::new(whole_member), (member, at), &tx, &pool);
                        return;
                    }
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        return;
                    }
                }
            }
            _ => None,
        };
        match whole {
            Some(bytes) => {
                let jobs = job_tx.get_or_insert_with(|| spawn_workers(workers, &pool));
                if jobs
                    .send(Job {
                        member: bytes,
                        at,
                        out: tx,
                    })
                    .is_err()
                {
                    return;
                }
            }
            None => {
                if !stream_member(&mut src, (member, at), &tx, &pool) {
                    return;
                }
            }
        }
    }
}

/// Decompresses one member from `src` (positioned at its header) as a stream,
/// sending blocks to `out`. `(member, at)`: its number (1-based) and compressed
/// offset. Returns false when the stream must stop (an error was sent, or the reader
/// is gone). When the input ends inside the member, what it decompressed to is sent,
/// then a [`GzipTruncated`].
fn stream_member<R: BufRead>(
    src: R,
    (member, at): (u64, u64),
    out: &SyncSender<io::Result<Vec<u8>>>,
    pool: &Pool,
) -> bool {
    let mut dec = flate2::bufread::GzDecoder::new(src);
    loop {
        let mut block = pool.get(BLOCK);
        block.resize(BLOCK, 0);
        let mut filled = 0;
        let result = loop {
            match dec.read(&mut block[filled..]) {
                Ok(0) => break Ok(true),
                Ok(k) => {
                    filled += k;
                    if filled == block.len() {
                        break Ok(false);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => break Err(e),
            }
        };
        block.truncate(filled);
        match result {
            Ok(end) => {
                if filled > 0 && out.send(Ok(block)).is_err() {
                    return false;
                }
                if end {
                    return true;
                }
            }
            Err(e) => {
                if filled > 0 {
                    let _ = out.send(Ok(block));
                }
                // The decompressor ran out of input, and the input is really over
                // (nothing follows): a cut, not damage.
                let cut = e.kind() == io::ErrorKind::UnexpectedEof
                    && dec.get_mut().fill_buf().is_ok_and(|b| b.is_empty());
                let err = if cut {
                    GzipTruncated {
                        member,
                        member_at: at,
                        detail: e.to_string(),
                    }
                    .into_io()
                } else {
                    member_error(e, at)
                };
                let _ = out.send(Err(err));
                return false;
            }
        }
    }
}

fn member_error(e: io::Error, at: u64) -> io::Error {
    // A failed read of the compressed bytes from a store (a connection that could not
    // be resumed) is not damage in the member: it goes on as it is, with its hint.
    if crate::storage::storage_error(&e).is_some() {
        return e;
    }
    io::Error::new(
        e.kind(),
        format!("gzip member starting at compressed byte {at}: {e}"),
    )
}

fn spawn_workers(n: usize, pool: &Pool) -> SyncSender<Job> {
    let (tx, rx) = sync_channel::<Job>(IN_FLIGHT);
    let rx = Arc::new(Mutex::new(rx));
    for k in 0..n {
        let rx = rx.clone();
        let pool = pool.clone();
        thread::Builder::new()
            .name(format!("gzip-{k}"))
            .spawn(move || loop {
                let next = match rx.lock() {
                    Ok(r) => r.recv(),
                    Err(_) => return,
                };
                let Ok(job) = next else { return };
                let result =
                    decompress_whole(&job.member, &pool).map_err(|e| member_error(e, job.at));
                pool.put(job.member);
                let _ = job.out.send(result);
            })
            .expect("spawning a gzip worker");
    }
    tx
}

/// Decompresses one complete member held in memory; its recorded size must be
/// exactly its length.
fn decompress_whole(member: &[u8], pool: &Pool) -> io::Result<Vec<u8>> {
    let n = member.len();
    let isize =
        u32::from_le_bytes([member[n - 4], member[n - 3], member[n - 2], member[n - 1]]) as usize;
    let mut out = pool.get(isize.min(MAX_WHOLE_MEMBER));
    let mut dec = flate2::bufread::GzDecoder::new(member);
    dec.read_to_end(&mut out)?;
    if !dec.into_inner().is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "the member is shorter than the size its header records (corrupt header)",
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::Compression;

    /// Deterministic, compressible test data of `n` bytes.
    fn data(n: usize, seed: u32) -> Vec<u8> {
        let mut x = seed.wrapping_mul(2_654_435_761).max(1);
        (0..n)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                if i % 3 == 0 {
                    (x % 7) as u8 + b'a'
                } else {
                    b' '
                }
            })
            .collect()
    }

    fn members(parts: &[Vec<u8>]) -> Vec<u8> {
        let mut out = Vec::new();
        for p in parts {
            write_member(&mut out, p, Compression::default()).unwrap();
        }
        out
    }

    fn plain_member(p: &[u8]) -> Vec<u8> {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), Compression::fast());
        enc.write_all(p).unwrap();
        enc.finish().unwrap()
    }

    fn read_all(compressed: Vec<u8>, workers: usize) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        ThreadedDecoder::spawn(io::Cursor::new(compressed), workers).read_to_end(&mut out)?;
        Ok(out)
    }

    #[test]
    fn members_record_their_size_and_read_like_gzip_dc() {
        let parts: Vec<Vec<u8>> = (0..40).map(|k| data(1000 + k * 3001, k as u32)).collect();
        let file = members(&parts);
        // Any gzip reader reads them (the extra field is skipped).
        let mut plain = Vec::new();
        flate2::read::MultiGzDecoder::new(&file[..])
            .read_to_end(&mut plain)
            .unwrap();
        assert_eq!(plain, parts.concat());
        // Each header records exactly its member's length.
        let mut at = 0;
        for p in &parts {
            let n = recorded_size(&file[at..]).unwrap();
            let mut one = Vec::new();
            flate2::read::GzDecoder::new(&file[at..at + n])
                .read_to_end(&mut one)
                .unwrap();
            assert_eq!(&one, p);
            at += n;
        }
        assert_eq!(at, file.len());
        // Threaded, in parallel or not, the bytes come out in order.
        for workers in [1, 2, 4] {
            assert_eq!(read_all(file.clone(), workers).unwrap(), parts.concat());
        }
    }

    #[test]
    fn sized_and_plain_members_mix_and_an_empty_input_is_empty() {
        let (a, b, c) = (data(70_000, 1), data(3_000_000, 2), data(10, 3));
        let file = [
            members(std::slice::from_ref(&a)),
            plain_member(&b),
            members(std::slice::from_ref(&c)),
        ]
        .concat();
        assert_eq!(read_all(file, 2).unwrap(), [a, b, c].concat());
        assert_eq!(read_all(Vec::new(), 2).unwrap(), Vec::<u8>::new());
    }

    /// Reads until the end or the first error; returns the bytes read and the error.
    fn read_until_error(compressed: Vec<u8>, workers: usize) -> (Vec<u8>, Option<io::Error>) {
        let mut dec = ThreadedDecoder::spawn(io::Cursor::new(compressed), workers);
        let mut out = Vec::new();
        let mut buf = vec![0; 7000];
        loop {
            match dec.read(&mut buf) {
                Ok(0) => return (out, None),
                Ok(n) => out.extend_from_slice(&buf[..n]),
                Err(e) => return (out, Some(e)),
            }
        }
    }

    /// Issue 17 item 11: a cut anywhere delivers a prefix of the data, then a
    /// `GzipTruncated` naming the member the cut is in; streamed (1 worker) or
    /// decompressed whole (2), sized members or not.
    #[test]
    fn a_cut_anywhere_is_a_prefix_then_gzip_truncated() {
        let parts: Vec<Vec<u8>> = (0..5).map(|k| data(30_000 + k * 7, k as u32)).collect();
        let all = parts.concat();
        let sized = members(&parts);
        let plain: Vec<u8> = parts.iter().flat_map(|p| plain_member(p)).collect();
        for (what, file) in [("sized", sized), ("plain", plain)] {
            let starts: Vec<usize> = {
                // Member starts, by walking single-member decoders.
                let mut v = vec![0];
                let mut at = 0;
                while at < file.len() {
                    let mut one = flate2::bufread::GzDecoder::new(&file[at..]);
                    io::copy(&mut one, &mut io::sink()).unwrap();
                    at = file.len() - one.into_inner().len();
                    v.push(at);
                }
                v.pop();
                v
            };
            assert_eq!(starts.len(), 5, "{what}");
            for cut in (2..file.len())
                .step_by(997)
                .chain([file.len() - 1, starts[3] + 3])
            {
                let member = starts.iter().filter(|&&s| s < cut).count() as u64;
                for workers in [1, 2] {
                    let (out, err) = read_until_error(file[..cut].to_vec(), workers);
                    let ctx = format!("{what} cut {cut} workers {workers}");
                    assert!(all.starts_with(&out), "{ctx}: not a prefix");
                    let err = err.unwrap_or_else(|| panic!("{ctx}: no error"));
                    let t = GzipTruncated::of(&err).unwrap_or_else(|| panic!("{ctx}: {err}"));
                    assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof, "{ctx}");
                    assert_eq!(
                        (t.member, t.member_at),
                        (member, starts[member as usize - 1] as u64),
                        "{ctx}"
                    );
                    // Whole members before the cut are all there.
                    let before: usize = parts[..member as usize - 1].iter().map(Vec::len).sum();
                    assert!(out.len() >= before, "{ctx}");
                }
            }
        }
    }

    #[test]
    fn damage_is_an_error_never_a_short_read() {
        let parts: Vec<Vec<u8>> = (0..8).map(|k| data(50_000, k)).collect();
        let file = members(&parts);
        // Cut inside the last member.
        let cut = file[..file.len() - 100].to_vec();
        assert!(read_all(cut, 2).is_err());
        // Bytes that are no gzip member after a complete one.
        let mut trailing = file.clone();
        trailing.extend_from_slice(b"not gzip at all");
        assert!(read_all(trailing, 2).is_err());
        // A flipped byte inside the compressed data of the third member.
        let third = recorded_size(&file).unwrap() * 2 + 40;
        let mut flipped = file.clone();
        flipped[third] ^= 0xff;
        let err = read_all(flipped, 2).unwrap_err();
        assert!(
            err.to_string()
                .contains("gzip member starting at compressed byte"),
            "{err}"
        );
        assert!(GzipTruncated::of(&err).is_none(), "damage is not a cut");
        // A short member followed by more bytes (its recorded size lies): damage.
        let mut short = file.clone();
        let n = recorded_size(&short).unwrap() as u32;
        short[16..20].copy_from_slice(&(n - 30).to_le_bytes());
        let err = read_all(short, 2).unwrap_err();
        assert!(GzipTruncated::of(&err).is_none(), "{err}");
        // Bytes after the last member that do not start like one.
        let mut tail = file.clone();
        tail.extend_from_slice(b"ab");
        let err = read_all(tail, 2).unwrap_err();
        assert!(GzipTruncated::of(&err).is_none(), "{err}");
        // A size field that does not match the member.
        let mut lying = file.clone();
        let n = recorded_size(&lying).unwrap() as u32;
        lying[16..20].copy_from_slice(&(n + 3).to_le_bytes());
        assert!(read_all(lying, 2).is_err());
    }
}
