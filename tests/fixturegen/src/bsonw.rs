//! A minimal, allocation-free BSON encoder for the generator's hot path.
//!
//! Building a `bson::Document` per oplog entry (a map of owned keys and values) and
//! serialising it costs more than writing the bytes directly, and the bench scenario
//! has to produce more than 100 MB/s. [`BsonW`] appends elements to one reused
//! `Vec<u8>` and back-patches document lengths when a document is closed. It writes
//! only the element types the generator uses; the tests check its output against the
//! `bson` crate.

use std::fmt::{self, Write as _};

/// Element type bytes from the BSON specification.
mod tag {
    pub const DOUBLE: u8 = 0x01;
    pub const STRING: u8 = 0x02;
    pub const DOC: u8 = 0x03;
    pub const ARRAY: u8 = 0x04;
    pub const BINARY: u8 = 0x05;
    pub const OID: u8 = 0x07;
    pub const BOOL: u8 = 0x08;
    pub const DATE: u8 = 0x09;
    pub const INT32: u8 = 0x10;
    pub const TIMESTAMP: u8 = 0x11;
    pub const INT64: u8 = 0x12;
}

/// Binary subtype of UUIDs (`ui`, `lsid.id`).
pub const SUBTYPE_UUID: u8 = 0x04;
/// Generic binary subtype (`lsid.uid`).
pub const SUBTYPE_GENERIC: u8 = 0x00;

/// Appends BSON to a buffer. Documents are opened with [`BsonW::start`] (top level),
/// [`BsonW::doc`] or [`BsonW::arr`] and closed with [`BsonW::end`].
#[derive(Default)]
pub struct BsonW {
    pub buf: Vec<u8>,
    /// Start offsets of the documents still open, innermost last.
    open: Vec<usize>,
    /// Per open array: the next element index (`usize::MAX` for documents).
    next_index: Vec<usize>,
}

impl BsonW {
    pub fn new() -> BsonW {
        BsonW::default()
    }

    /// Drops everything written so far (keeps the capacity).
    pub fn clear(&mut self) {
        self.buf.clear();
        self.open.clear();
        self.next_index.clear();
    }

    /// How many documents are open (0 when every document is complete).
    pub fn depth(&self) -> usize {
        self.open.len()
    }

    /// Opens a top-level document.
    pub fn start(&mut self) {
        self.open.push(self.buf.len());
        self.next_index.push(usize::MAX);
        self.buf.extend_from_slice(&[0; 4]);
    }

    /// Closes the innermost open document or array and fills in its length.
    pub fn end(&mut self) {
        self.buf.push(0);
        let start = self
            .open
            .pop()
            .expect("BsonW::end without an open document");
        self.next_index.pop();
        let len = (self.buf.len() - start) as i32;
        self.buf[start..start + 4].copy_from_slice(&len.to_le_bytes());
    }

    /// Writes the type byte and key. Inside an array, `key` is ignored and the next
    /// index is written instead.
    fn key(&mut self, t: u8, key: &str) {
        self.buf.push(t);
        match self.next_index.last_mut() {
            Some(n) if *n != usize::MAX => {
                let i = *n;
                *n += 1;
                write_decimal(&mut self.buf, i);
            }
            _ => self.buf.extend_from_slice(key.as_bytes()),
        }
        self.buf.push(0);
    }

    /// Opens a sub-document under `key`.
    pub fn doc(&mut self, key: &str) {
        self.key(tag::DOC, key);
        self.start();
    }

    /// Opens an array under `key`; elements written inside get keys `0`, `1`, ...
    pub fn arr(&mut self, key: &str) {
        self.key(tag::ARRAY, key);
        self.open.push(self.buf.len());
        self.next_index.push(0);
        self.buf.extend_from_slice(&[0; 4]);
    }

    pub fn str(&mut self, key: &str, v: &str) {
        self.key(tag::STRING, key);
        self.buf
            .extend_from_slice(&((v.len() + 1) as i32).to_le_bytes());
        self.buf.extend_from_slice(v.as_bytes());
        self.buf.push(0);
    }

    /// A string built with `format_args!`, written without an intermediate `String`.
    pub fn str_fmt(&mut self, key: &str, args: fmt::Arguments<'_>) {
        self.key(tag::STRING, key);
        let at = self.buf.len();
        self.buf.extend_from_slice(&[0; 4]);
        let _ = VecWriter(&mut self.buf).write_fmt(args);
        self.buf.push(0);
        let len = (self.buf.len() - at - 4) as i32;
        self.buf[at..at + 4].copy_from_slice(&len.to_le_bytes());
    }

    pub fn i32(&mut self, key: &str, v: i32) {
        self.key(tag::INT32, key);
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    pub fn i64(&mut self, key: &str, v: i64) {
        self.key(tag::INT64, key);
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    pub fn f64(&mut self, key: &str, v: f64) {
        self.key(tag::DOUBLE, key);
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    pub fn bool(&mut self, key: &str, v: bool) {
        self.key(tag::BOOL, key);
        self.buf.push(v as u8);
    }

    pub fn oid(&mut self, key: &str, v: &[u8; 12]) {
        self.key(tag::OID, key);
        self.buf.extend_from_slice(v);
    }

    /// A UTC datetime, milliseconds since the epoch.
    pub fn date(&mut self, key: &str, ms: i64) {
        self.key(tag::DATE, key);
        self.buf.extend_from_slice(&ms.to_le_bytes());
    }

    /// Like [`BsonW::date`], returning the offset of the 8 value bytes so that the
    /// value can be patched later (see [`BsonW::patch_date`]).
    pub fn date_slot(&mut self, key: &str, ms: i64) -> usize {
        self.key(tag::DATE, key);
        let at = self.buf.len();
        self.buf.extend_from_slice(&ms.to_le_bytes());
        at
    }

    pub fn patch_date(&mut self, at: usize, ms: i64) {
        self.buf[at..at + 8].copy_from_slice(&ms.to_le_bytes());
    }

    /// A BSON Timestamp: `t` seconds (high half), `i` ordinal (low half).
    pub fn ts(&mut self, key: &str, t: u32, i: u32) {
        self.key(tag::TIMESTAMP, key);
        self.buf.extend_from_slice(&i.to_le_bytes());
        self.buf.extend_from_slice(&t.to_le_bytes());
    }

    pub fn bin(&mut self, key: &str, subtype: u8, bytes: &[u8]) {
        self.key(tag::BINARY, key);
        self.buf
            .extend_from_slice(&(bytes.len() as i32).to_le_bytes());
        self.buf.push(subtype);
        self.buf.extend_from_slice(bytes);
    }

    pub fn uuid(&mut self, key: &str, bytes: &[u8; 16]) {
        self.bin(key, SUBTYPE_UUID, bytes);
    }
}

/// `fmt::Write` over a byte vector (string formatting straight into the buffer).
struct VecWriter<'a>(&'a mut Vec<u8>);

impl fmt::Write for VecWriter<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

fn write_decimal(buf: &mut Vec<u8>, mut n: usize) {
    if n < 10 {
        buf.push(b'0' + n as u8);
        return;
    }
    let mut tmp = [0u8; 20];
    let mut k = tmp.len();
    while n > 0 {
        k -= 1;
        tmp[k] = b'0' + (n % 10) as u8;
        n /= 10;
    }
    buf.extend_from_slice(&tmp[k..]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, spec::BinarySubtype, Binary, Bson, DateTime, Timestamp};

    #[test]
    fn matches_the_bson_crate() {
        let mut w = BsonW::new();
        w.start();
        w.str("s", "héllo");
        w.str_fmt("f", format_args!("C-{:06}", 42));
        w.i32("a", -3);
        w.i64("b", 1 << 40);
        w.f64("c", 19.99);
        w.bool("d", true);
        w.oid("e", &[1; 12]);
        w.date("g", 1_700_000_000_123);
        w.ts("ts", 1_700_000_000, 7);
        w.uuid("u", &[9; 16]);
        w.bin("x", SUBTYPE_GENERIC, &[1, 2, 3]);
        w.doc("sub");
        w.i32("k", 1);
        w.end();
        w.arr("list");
        for i in 0..12 {
            w.i32("ignored", i);
        }
        w.doc("ignored");
        w.end();
        w.end();
        w.end();
        assert_eq!(w.depth(), 0);

        let expected = doc! {
            "s": "héllo", "f": "C-000042", "a": -3, "b": 1i64 << 40, "c": 19.99, "d": true,
            "e": bson::oid::ObjectId::from_bytes([1; 12]),
            "g": DateTime::from_millis(1_700_000_000_123),
            "ts": Timestamp { time: 1_700_000_000, increment: 7 },
            "u": Binary { subtype: BinarySubtype::Uuid, bytes: vec![9; 16] },
            "x": Binary { subtype: BinarySubtype::Generic, bytes: vec![1, 2, 3] },
            "sub": { "k": 1 },
            "list": (0..12).map(Bson::Int32).chain([Bson::Document(doc! {})]).collect::<Vec<_>>(),
        };
        assert_eq!(w.buf, bson::to_vec(&expected).unwrap());
    }

    #[test]
    fn patches_dates_in_place() {
        let mut w = BsonW::new();
        w.start();
        let at = w.date_slot("wall", 0);
        w.end();
        w.patch_date(at, 5);
        let d = bson::Document::from_reader(&w.buf[..]).unwrap();
        assert_eq!(d.get_datetime("wall").unwrap().timestamp_millis(), 5);
    }
}
