//! A minimal, bounds-checked walk over the top-level elements of a BSON document.
//!
//! This is the hot loop of every scan: an oplog entry has about ten top-level
//! fields and pitr needs a few of them. The walk reads each element's type byte and
//! key, computes the value's extent from the BSON spec, and hands back the raw value
//! bytes; nothing is decoded unless the caller asks. Every length is checked against
//! the document's bounds, so corrupt input is an error, never a panic or an
//! out-of-bounds read. Keys are compared as bytes and not UTF-8-validated (the
//! values pitr uses, such as `ns`, are validated when read).

use std::fmt;

/// A framing problem inside a document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElementError {
    /// Byte offset inside the document.
    pub at: usize,
    pub what: &'static str,
}

impl fmt::Display for ElementError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at byte {} of the entry", self.what, self.at)
    }
}

impl std::error::Error for ElementError {}

/// One top-level element: its key, BSON type byte, and raw value bytes.
#[derive(Clone, Copy, Debug)]
pub struct Element<'a> {
    pub key: &'a [u8],
    pub kind: u8,
    pub value: &'a [u8],
}

/// Iterates over the elements of a whole BSON document (`doc` includes the 4-byte
/// length and the trailing NUL, as `RawDocument::as_bytes` returns it).
pub struct Elements<'a> {
    doc: &'a [u8],
    pos: usize,
    end: usize,
    failed: bool,
}

impl<'a> Elements<'a> {
    pub fn new(doc: &'a [u8]) -> Elements<'a> {
        Self::starting_at(doc, 4)
    }

    /// Walks the elements of `doc` from byte `pos` on (an offset
    /// [`Elements::position`] returned: the start of an element).
    pub fn starting_at(doc: &'a [u8], pos: usize) -> Elements<'a> {
        // The caller's document is already framed (length matches, ends in NUL);
        // elements live between the length prefix and the final NUL.
        let end = doc.len().saturating_sub(1);
        Elements {
            doc,
            pos: pos.max(4).min(end),
            end,
            failed: false,
        }
    }

    /// Offset of the next element (just past the last one returned).
    pub fn position(&self) -> usize {
        self.pos
    }

    fn fail(&mut self, at: usize, what: &'static str) -> Option<Result<Element<'a>, ElementError>> {
        self.failed = true;
        Some(Err(ElementError { at, what }))
    }
}

#[inline]
fn read_i32(b: &[u8], at: usize) -> Option<i32> {
    let s = b.get(at..at + 4)?;
    Some(i32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

/// Value sizes of the fixed-size BSON types, by type byte; `VAR` for types whose
/// size is read from the value, `BAD` for bytes that are no BSON type.
const VAR: u8 = 0xFE;
const BAD: u8 = 0xFF;
const FIXED: [u8; 256] = {
    let mut t = [BAD; 256];
    t[0x01] = 8; // double
    t[0x09] = 8; // datetime
    t[0x11] = 8; // timestamp
    t[0x12] = 8; // int64
    t[0x10] = 4; // int32
    t[0x08] = 1; // bool
    t[0x07] = 12; // ObjectId
    t[0x13] = 16; // decimal128
    t[0x06] = 0; // undefined
    t[0x0A] = 0; // null
    t[0xFF] = 0; // minKey
    t[0x7F] = 0; // maxKey
    t[0x02] = VAR; // string
    t[0x0D] = VAR; // JavaScript
    t[0x0E] = VAR; // symbol
    t[0x03] = VAR; // document
    t[0x04] = VAR; // array
    t[0x0F] = VAR; // code with scope
    t[0x05] = VAR; // binary
    t[0x0C] = VAR; // DBPointer
    t[0x0B] = VAR; // regex
    t
};

impl<'a> Elements<'a> {
    /// The extent of a variable-size value starting at `v`, checked to lie within
    /// the document and, for strings and documents, to end with their NUL.
    #[inline(always)]
    fn var_len(&self, kind: u8, v: usize) -> Result<usize, &'static str> {
        let b = self.doc;
        let prefix = || read_i32(b, v).ok_or("element with an impossible length");
        let (len, needs_nul) = match kind {
            // string, JavaScript, symbol: int32 length (incl. NUL) + bytes
            0x02 | 0x0D | 0x0E => match prefix()? {
                n if n >= 1 => (4 + n as usize, true),
                _ => return Err("element with an impossible length"),
            },
            // document, array: int32 total length, NUL-terminated
            0x03 | 0x04 => match prefix()? {
                n if n >= 5 => (n as usize, true),
                _ => return Err("element with an impossible length"),
            },
            // code with scope: int32 total length
            0x0F => match prefix()? {
                n if n >= 5 => (n as usize, false),
                _ => return Err("element with an impossible length"),
            },
            // binary: int32 length + subtype byte + bytes
            0x05 => match prefix()? {
                n if n >= 0 => (5 + n as usize, false),
                _ => return Err("element with an impossible length"),
            },
            // DBPointer: string + 12-byte id
            0x0C => match prefix()? {
                n if n >= 1 => (4 + n as usize + 12, false),
                _ => return Err("element with an impossible length"),
            },
            // regex: two C strings
            _ => {
                let end = self.end;
                let p1 = b[v.min(end)..end]
                    .iter()
                    .position(|&c| c == 0)
                    .ok_or("regex without its NUL")?;
                let s2 = v + p1 + 1;
                let p2 = b[s2.min(end)..end]
                    .iter()
                    .position(|&c| c == 0)
                    .ok_or("regex without its NUL")?;
                (p1 + 1 + p2 + 1, false)
            }
        };
        match v.checked_add(len) {
            Some(e) if e <= self.end => {
                if needs_nul && b[e - 1] != 0 {
                    return Err("string or document without its NUL terminator");
                }
                Ok(len)
            }
            _ => Err("element runs past the end of its document"),
        }
    }
}

impl<'a> Iterator for Elements<'a> {
    type Item = Result<Element<'a>, ElementError>;

    #[inline(always)]
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.pos >= self.end {
            return None;
        }
        let b = self.doc;
        let start = self.pos;
        let kind = b[start];
        // Key: a NUL-terminated C string, almost always a few bytes long.
        let key_start = start + 1;
        let Some(k) = nul_at(b, key_start, self.end) else {
            return self.fail(start, "element key without its NUL terminator");
        };
        let key = &b[key_start..k];
        let v = k + 1;
        let len = match FIXED[kind as usize] {
            BAD => return self.fail(start, "unknown BSON element type"),
            VAR => match self.var_len(kind, v) {
                Ok(n) => n,
                Err(what) => return self.fail(start, what),
            },
            n => {
                if v + n as usize > self.end {
                    return self.fail(start, "element runs past the end of its document");
                }
                n as usize
            }
        };
        let value = &b[v..v + len];
        self.pos = v + len;
        Some(Ok(Element { key, kind, value }))
    }
}

/// The offset of the first NUL byte of `b[from..end]`, eight bytes at a time: keys
/// are short, and a byte loop over them was the walk's largest cost (17% of a
/// find-drop profile).
#[inline(always)]
fn nul_at(b: &[u8], from: usize, end: usize) -> Option<usize> {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    let end = end.min(b.len());
    let mut k = from;
    while k + 8 <= end {
        let w = u64::from_le_bytes(b[k..k + 8].try_into().expect("8 bytes"));
        // The lowest byte flagged here is the first zero byte (bytes above it may be
        // flagged falsely, never bytes below).
        let zero = w.wrapping_sub(LO) & !w & HI;
        if zero != 0 {
            return Some(k + (zero.trailing_zeros() / 8) as usize);
        }
        k += 8;
    }
    while k < end {
        if b[k] == 0 {
            return Some(k);
        }
        k += 1;
    }
    None
}

/// The text of a string element's value (without length prefix and NUL).
#[inline]
pub fn str_value(value: &[u8]) -> Option<&str> {
    let bytes = value.get(4..value.len().checked_sub(1)?)?;
    // Namespaces and op codes are ASCII; the word-at-a-time ASCII check is much
    // cheaper than full UTF-8 validation on the hot path.
    if bytes.is_ascii() {
        // SAFETY: every ASCII byte sequence is valid UTF-8.
        return Some(unsafe { std::str::from_utf8_unchecked(bytes) });
    }
    std::str::from_utf8(bytes).ok()
}

/// The raw bytes of a string element's value (without length prefix and NUL).
#[inline]
pub fn str_bytes(value: &[u8]) -> Option<&[u8]> {
    value.get(4..value.len().checked_sub(1)?)
}

/// A BSON Timestamp value: little-endian increment, then seconds.
#[inline]
pub fn ts_value(v: &[u8]) -> Option<crate::oplog::Ts> {
    let b = v.get(0..8)?;
    Some(crate::oplog::Ts {
        i: u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
        t: u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
    })
}

/// The one-letter `op` of an entry whose FIRST element is `op` (the field order of
/// MongoDB 4.4+ oplogs), read from fixed byte positions without walking; `None`
/// for any other layout (older servers put `ts` first), and the caller walks.
#[inline(always)]
pub fn leading_op(doc: &[u8]) -> Option<u8> {
    // int32 length | 0x02 'o' 'p' 0x00 | int32 2 | op byte | 0x00
    match doc.get(4..14)? {
        [0x02, b'o', b'p', 0, 2, 0, 0, 0, op, 0] => Some(*op),
        _ => None,
    }
}

/// How many leading elements [`find_op`] looks at: enough for every layout
/// servers write (`ts, t, h, v, op` before 4.4; `lsid, txnNumber, op` for sessions;
/// `_id, ts, op` in very old oplogs), few enough to give up quickly on a document
/// that is no oplog entry.
const OP_SEARCH_ELEMENTS: usize = 8;

/// The one-letter `op` of an entry (`0` for longer op codes) and the offset of the
/// element that follows it, in any field order: read from fixed byte positions when
/// `op` comes first (4.4+), otherwise found by walking the few elements before it
/// (`lsid, txnNumber` of retryable writes and transactions; `ts, t, h, v` of 4.0 and
/// 4.2). `None` when it is not among the first [`OP_SEARCH_ELEMENTS`] elements or is
/// not a string: the caller then parses the entry fully, which reports problems
/// precisely.
#[inline(always)]
pub fn find_op(doc: &[u8]) -> Option<(u8, usize)> {
    if let Some(op) = leading_op(doc) {
        return Some((op, 14));
    }
    find_op_walking(doc)
}

#[inline(never)]
fn find_op_walking(doc: &[u8]) -> Option<(u8, usize)> {
    let end = doc.len().checked_sub(1)?;
    let mut p = 4;
    for _ in 0..OP_SEARCH_ELEMENTS {
        // The op element: 02 'o' 'p' 00, then a string (almost always one letter).
        if doc.get(p..p + 4)? == [0x02, b'o', b'p', 0] {
            let el = Elements::starting_at(doc, p).next()?.ok()?;
            let op = match str_bytes(el.value)? {
                [c] => *c,
                _ => 0,
            };
            return Some((op, p + 4 + el.value.len()));
        }
        p = skip_element(doc, p, end)?;
    }
    None
}

/// The offset just past the element that starts at `p` (before `end`, the
/// document's final NUL). Elements with one- or two-letter keys and fixed-size
/// values (the `ts, t, h, v` that lead 4.0/4.2 entries) are stepped over from their
/// first bytes; anything else goes through the checked walker.
#[inline(always)]
fn skip_element(doc: &[u8], p: usize, end: usize) -> Option<usize> {
    let head = doc.get(p..p + 4)?;
    let size = FIXED[head[0] as usize];
    if size < VAR && head[1] != 0 {
        let key_end = if head[2] == 0 {
            p + 2
        } else if head[3] == 0 {
            p + 3
        } else {
            0
        };
        if key_end != 0 {
            let next = key_end + 1 + size as usize;
            return (next <= end).then_some(next);
        }
    }
    let mut it = Elements::starting_at(doc, p);
    it.next()?.ok()?;
    Some(it.position())
}

/// The value of the first element named `key` at or after offset `from` of `doc`
/// (an element boundary, such as [`find_op`] returns), with its type byte. `None`
/// when there is none or the walk meets malformed bytes first.
#[inline]
pub fn find_field<'a>(doc: &'a [u8], from: usize, key: &[u8]) -> Option<(u8, &'a [u8])> {
    let end = doc.len().checked_sub(1)?;
    let mut p = from.max(4);
    while p < end {
        // Compare the key in place: type byte, key, NUL.
        if doc.get(p + 1..p + 1 + key.len())? == key && doc.get(p + 1 + key.len()) == Some(&0) {
            let el = Elements::starting_at(doc, p).next()?.ok()?;
            return Some((el.kind, el.value));
        }
        p = skip_element(doc, p, end)?;
    }
    None
}

/// The two fields every scan needs first, found by walking only as far as needed:
/// the entry's `ts` and the first byte of a one-letter `op` (`0` for longer op
/// codes). `None` when either is missing or malformed: the caller then parses the
/// entry fully, which reports the problem precisely.
#[inline]
pub fn peek_ts_op(doc: &[u8]) -> Option<(crate::oplog::Ts, u8)> {
    let (mut ts, mut op) = (None, None);
    for el in Elements::new(doc) {
        let el = el.ok()?;
        match el.key {
            b"ts" if el.kind == 0x11 => ts = ts_value(el.value),
            b"op" if el.kind == 0x02 => {
                op = Some(match str_bytes(el.value)? {
                    [c] => *c,
                    _ => 0,
                })
            }
            b"ts" | b"op" => return None,
            _ => {}
        }
        if let (Some(t), Some(o)) = (ts, op) {
            return Some((t, o));
        }
    }
    None
}

#[inline]
pub fn i64_value(kind: u8, value: &[u8]) -> Option<i64> {
    match kind {
        0x10 => read_i32(value, 0).map(i64::from),
        0x12 | 0x09 => value
            .get(0..8)
            .map(|s| i64::from_le_bytes(s.try_into().expect("8 bytes"))),
        0x01 => {
            let f = f64::from_le_bytes(value.get(0..8)?.try_into().ok()?);
            (f.fract() == 0.0 && f.abs() < 9.2e18).then_some(f as i64)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{
        doc, Binary, Bson, DateTime, Decimal128, JavaScriptCodeWithScope, Regex, Timestamp,
    };

    #[test]
    fn walks_every_bson_type_like_the_bson_crate() {
        let d = doc! {
            "d": 1.5, "s": "héllo", "doc": { "a": 1 }, "arr": [1, "x"], "bin": Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: vec![1, 2, 3] },
            "u": Bson::Undefined, "oid": bson::oid::ObjectId::new(), "b": true, "dt": DateTime::from_millis(5), "n": Bson::Null,
            "re": Regex { pattern: "a.*".into(), options: "i".into() }, "js": Bson::JavaScriptCode("f()".into()),
            "sym": Bson::Symbol("sy".into()), "jsws": JavaScriptCodeWithScope { code: "g()".into(), scope: doc! { "x": 1 } },
            "i32": 7i32, "ts": Timestamp { time: 9, increment: 2 }, "i64": 8i64, "dec": Decimal128::from_bytes([0; 16]),
            "min": Bson::MinKey, "max": Bson::MaxKey,
        };
        let bytes = bson::to_vec(&d).unwrap();
        let ours: Vec<(String, u8, usize)> = Elements::new(&bytes)
            .map(|e| e.unwrap())
            .map(|e| {
                (
                    String::from_utf8(e.key.to_vec()).unwrap(),
                    e.kind,
                    e.value.len(),
                )
            })
            .collect();
        let raw = bson::RawDocument::from_bytes(&bytes).unwrap();
        let theirs: Vec<(String, u8, usize)> = raw
            .iter_elements()
            .map(|e| e.unwrap())
            .map(|e| (e.key().to_string(), e.element_type() as u8, e.len()))
            .collect();
        assert_eq!(
            ours.iter().map(|x| (&x.0, x.1)).collect::<Vec<_>>(),
            theirs.iter().map(|x| (&x.0, x.1)).collect::<Vec<_>>()
        );
        let s = Elements::new(&bytes)
            .find(|e| e.as_ref().unwrap().key == b"s")
            .unwrap()
            .unwrap();
        assert_eq!(str_value(s.value), Some("héllo"));
    }

    proptest::proptest! {
        #[test]
        fn nul_at_finds_the_first_nul_like_a_byte_loop(
            b in proptest::collection::vec(proptest::prop_oneof![0u8..=0, 1u8..=255, 0x80u8..=0x81], 0..40),
            from in 0usize..40,
            end in 0usize..48,
        ) {
            let naive = (from..end.min(b.len())).find(|&i| b[i] == 0);
            proptest::prop_assert_eq!(nul_at(&b, from, end), naive);
        }
    }

    #[test]
    fn corrupt_lengths_are_errors_not_panics() {
        let mut bytes = bson::to_vec(&doc! { "s": "abc", "n": 1 }).unwrap();
        // The string's length prefix sits after type byte + "s\0".
        bytes[4 + 2..4 + 6].copy_from_slice(&1000i32.to_le_bytes());
        let r: Vec<_> = Elements::new(&bytes).collect();
        assert!(r[0].is_err());
        assert_eq!(r.len(), 1, "stops after the first error");
    }
}
