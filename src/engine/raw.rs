//! Reading and writing raw BSON bytes for the engine.
//!
//! Documents stay as bytes: the appliers walk a pre-image's elements with
//! [`fields`] (bounds-checked: corrupt input is an error, never a panic), copy
//! untouched elements whole, and write new elements with the small writers here. A document
//! under construction is opened with [`begin_doc`] (a placeholder length) and closed
//! with [`end_doc`] (which patches the length).

use bson::RawBsonRef;

use super::error::{Result, UpdateError};

pub(crate) const T_DOUBLE: u8 = 0x01;
pub(crate) const T_STRING: u8 = 0x02;
pub(crate) const T_OBJECT: u8 = 0x03;
pub(crate) const T_ARRAY: u8 = 0x04;
pub(crate) const T_BINARY: u8 = 0x05;
pub(crate) const T_UNDEFINED: u8 = 0x06;
pub(crate) const T_OID: u8 = 0x07;
pub(crate) const T_BOOL: u8 = 0x08;
pub(crate) const T_DATE: u8 = 0x09;
pub(crate) const T_NULL: u8 = 0x0A;
pub(crate) const T_REGEX: u8 = 0x0B;
pub(crate) const T_DBPOINTER: u8 = 0x0C;
pub(crate) const T_CODE: u8 = 0x0D;
pub(crate) const T_SYMBOL: u8 = 0x0E;
pub(crate) const T_CODE_W_SCOPE: u8 = 0x0F;
pub(crate) const T_INT32: u8 = 0x10;
pub(crate) const T_TIMESTAMP: u8 = 0x11;
pub(crate) const T_INT64: u8 = 0x12;
pub(crate) const T_DECIMAL: u8 = 0x13;
pub(crate) const T_MAXKEY: u8 = 0x7F;
pub(crate) const T_MINKEY: u8 = 0xFF;

/// Largest document a user write may produce (`BSONObjMaxUserSize`).
pub(crate) const MAX_USER_DOC: usize = 16 * 1024 * 1024;

/// One element of a document: type byte, name, value bytes, and the whole element
/// (type + name + NUL + value) for copying it unchanged.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Field<'a> {
    pub kind: u8,
    pub name: &'a [u8],
    pub value: &'a [u8],
    pub whole: &'a [u8],
}

/// Iterates the elements of `doc` (whole document bytes, framing already checked).
///
/// The same bounds-checked walk as [`crate::oplog::elements`], specialised for the
/// engine's hot loops: it also hands out each element's whole bytes, and stays small
/// enough to be inlined into them.
pub(crate) struct Fields<'a> {
    doc: &'a [u8],
    pos: usize,
    end: usize,
}

/// Value sizes of fixed-size types by type byte; `VAR` when read from the value,
/// `BAD` for bytes that are no BSON type.
const VAR: u8 = 0xFE;
const BAD: u8 = 0xFF;
const FIXED: [u8; 256] = {
    let mut t = [BAD; 256];
    t[T_DOUBLE as usize] = 8;
    t[T_DATE as usize] = 8;
    t[T_TIMESTAMP as usize] = 8;
    t[T_INT64 as usize] = 8;
    t[T_INT32 as usize] = 4;
    t[T_BOOL as usize] = 1;
    t[T_OID as usize] = 12;
    t[T_DECIMAL as usize] = 16;
    t[T_UNDEFINED as usize] = 0;
    t[T_NULL as usize] = 0;
    t[T_MINKEY as usize] = 0;
    t[T_MAXKEY as usize] = 0;
    t[T_STRING as usize] = VAR;
    t[T_CODE as usize] = VAR;
    t[T_SYMBOL as usize] = VAR;
    t[T_OBJECT as usize] = VAR;
    t[T_ARRAY as usize] = VAR;
    t[T_CODE_W_SCOPE as usize] = VAR;
    t[T_BINARY as usize] = VAR;
    t[T_DBPOINTER as usize] = VAR;
    t[T_REGEX as usize] = VAR;
    t
};

impl<'a> Fields<'a> {
    /// The size of a variable-size value at `v`, checked to end within the document
    /// (and, for strings and documents, with a NUL).
    #[inline(always)]
    fn var_len(&self, kind: u8, v: usize) -> Option<usize> {
        let b = self.doc;
        if kind == T_REGEX {
            // two C strings
            let s = b.get(v..self.end)?;
            let p1 = s.iter().position(|&c| c == 0)?;
            let p2 = s[p1 + 1..].iter().position(|&c| c == 0)?;
            return Some(p1 + 1 + p2 + 1);
        }
        let n = i64::from(i32::from_le_bytes(b.get(v..v + 4)?.try_into().ok()?));
        let (len, min, nul) = match kind {
            T_STRING | T_CODE | T_SYMBOL => (4 + n, 5, true),
            T_OBJECT | T_ARRAY => (n, 5, true),
            T_CODE_W_SCOPE => (n, 14, false),
            T_BINARY => (5 + n, 5, false),
            // DBPointer: a string, then a 12-byte id
            _ => (4 + n + 12, 17, false),
        };
        if len < min {
            return None;
        }
        let e = v.checked_add(len as usize)?;
        if e > self.end || (nul && b[e - 1] != 0) {
            return None;
        }
        Some(len as usize)
    }

    #[cold]
    fn fail(&mut self, what: &'static str) -> Option<Result<Field<'a>>> {
        let at = self.pos;
        self.pos = self.end;
        Some(Err(UpdateError::malformed(
            "a document",
            format!("{what} at byte {at}"),
        )))
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<Field<'a>>;

    #[inline(always)]
    fn next(&mut self) -> Option<Self::Item> {
        if self.pos >= self.end {
            return None;
        }
        let b = self.doc;
        let start = self.pos;
        let kind = b[start];
        let Some(klen) = nul_at(&b[start + 1..self.end]) else {
            return self.fail("element name without its NUL");
        };
        let v = start + 1 + klen + 1;
        let len = match FIXED[kind as usize] {
            BAD => return self.fail("unknown BSON type"),
            VAR => match self.var_len(kind, v) {
                Some(n) => n,
                None => return self.fail("element with a bad length"),
            },
            n => {
                let n = n as usize;
                if v + n > self.end {
                    return self.fail("element runs past the end of its document");
                }
                n
            }
        };
        self.pos = v + len;
        Some(Ok(Field {
            kind,
            name: &b[start + 1..start + 1 + klen],
            value: &b[v..v + len],
            whole: &b[start..v + len],
        }))
    }
}

/// The position of the first NUL in `s`, eight bytes at a time (field names are
/// short, so this is usually a single word).
#[inline(always)]
fn nul_at(s: &[u8]) -> Option<usize> {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    let mut i = 0;
    while i + 8 <= s.len() {
        let w = u64::from_le_bytes(s[i..i + 8].try_into().expect("8 bytes"));
        let z = w.wrapping_sub(LO) & !w & HI;
        if z != 0 {
            return Some(i + (z.trailing_zeros() / 8) as usize);
        }
        i += 8;
    }
    s[i..].iter().position(|&c| c == 0).map(|p| i + p)
}

/// The elements of a document whose framing (length prefix, trailing NUL) is valid:
/// a top-level document checked with [`check_doc`], or a nested document value.
#[inline]
pub(crate) fn fields(doc: &[u8]) -> Fields<'_> {
    let end = doc.len().saturating_sub(1);
    Fields {
        doc,
        pos: 4.min(end),
        end,
    }
}

/// Byte equality for field names, which are short: an inline loop beats a call to
/// `memcmp`.
#[inline(always)]
pub(crate) fn name_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    if a.len() > 16 {
        return a == b;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Checks a top-level document's framing: length prefix equal to its byte length,
/// at least 5 bytes, trailing NUL.
pub(crate) fn check_doc(doc: &[u8], what: &'static str) -> Result<()> {
    if doc.len() < 5 {
        return Err(UpdateError::malformed(what, "shorter than 5 bytes"));
    }
    let len = i32::from_le_bytes([doc[0], doc[1], doc[2], doc[3]]);
    if len < 5 || len as usize != doc.len() || doc[doc.len() - 1] != 0 {
        return Err(UpdateError::malformed(
            what,
            format!("length prefix {len} does not match its {} bytes", doc.len()),
        ));
    }
    Ok(())
}

/// Whether a document has no elements.
#[inline]
pub(crate) fn is_empty_doc(doc: &[u8]) -> bool {
    doc.len() <= 5
}

/// The first element named `name`, as `BSONObj::getField` finds it.
pub(crate) fn find_field<'a>(doc: &'a [u8], name: &[u8]) -> Result<Option<Field<'a>>> {
    for f in fields(doc) {
        let f = f?;
        if name_eq(f.name, name) {
            return Ok(Some(f));
        }
    }
    Ok(None)
}

/// Opens a document in `out`; returns its start for [`end_doc`].
#[inline]
pub(crate) fn begin_doc(out: &mut Vec<u8>) -> usize {
    let start = out.len();
    out.extend_from_slice(&[0, 0, 0, 0]);
    start
}

/// Closes the document opened at `start`.
#[inline]
pub(crate) fn end_doc(out: &mut Vec<u8>, start: usize) {
    out.push(0);
    let len = (out.len() - start) as i32;
    out[start..start + 4].copy_from_slice(&len.to_le_bytes());
}

/// Writes an element's type byte and name (the caller writes the value).
#[inline]
pub(crate) fn put_header(out: &mut Vec<u8>, kind: u8, name: &[u8]) {
    out.push(kind);
    out.extend_from_slice(name);
    out.push(0);
}

/// Writes a whole element.
#[inline]
pub(crate) fn put_element(out: &mut Vec<u8>, kind: u8, name: &[u8], value: &[u8]) {
    put_header(out, kind, name);
    out.extend_from_slice(value);
}

/// Writes an array index as a field name ("0", "1", ...), as `BSONArrayBuilder` does.
#[inline]
pub(crate) fn put_index_header(out: &mut Vec<u8>, kind: u8, index: usize) {
    out.push(kind);
    put_decimal(out, index);
    out.push(0);
}

fn put_decimal(out: &mut Vec<u8>, mut n: usize) {
    if n < 10 {
        out.push(b'0' + n as u8);
        return;
    }
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    while n > 0 {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
    }
    out.extend_from_slice(&buf[i..]);
}

/// `str::parseUnsignedBase10Integer` (`util/str.cpp`): the first character must be a
/// digit (no sign, no space), the whole string must parse, and the value must fit the
/// 32-bit `unsigned int` it is parsed into. Leading zeros are accepted ("02" is 2).
pub(crate) fn parse_array_index(s: &[u8]) -> Option<usize> {
    if s.is_empty() || !s[0].is_ascii_digit() {
        return None;
    }
    let mut v: u64 = 0;
    for &c in s {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v * 10 + u64::from(c - b'0');
        if v > u64::from(u32::MAX) {
            return None;
        }
    }
    Some(v as usize)
}

#[inline]
pub(crate) fn read_i32(b: &[u8]) -> Option<i32> {
    Some(i32::from_le_bytes(b.get(..4)?.try_into().ok()?))
}

#[inline]
pub(crate) fn read_i64(b: &[u8]) -> Option<i64> {
    Some(i64::from_le_bytes(b.get(..8)?.try_into().ok()?))
}

#[inline]
pub(crate) fn read_f64(b: &[u8]) -> Option<f64> {
    Some(f64::from_le_bytes(b.get(..8)?.try_into().ok()?))
}

/// Appends `name: value` as a BSON element, encoding a [`RawBsonRef`] exactly as the
/// bson crate (and the server) lays it out.
pub(crate) fn put_raw_value(out: &mut Vec<u8>, name: &[u8], value: RawBsonRef<'_>) {
    use bson::spec::BinarySubtype;
    let kind = value.element_type() as u8;
    put_header(out, kind, name);
    match value {
        RawBsonRef::Double(f) => out.extend_from_slice(&f.to_le_bytes()),
        RawBsonRef::String(s) | RawBsonRef::JavaScriptCode(s) | RawBsonRef::Symbol(s) => {
            put_string(out, s.as_bytes())
        }
        RawBsonRef::Document(d) => out.extend_from_slice(d.as_bytes()),
        RawBsonRef::Array(a) => out.extend_from_slice(a.as_bytes()),
        RawBsonRef::Binary(b) => {
            if b.subtype == BinarySubtype::BinaryOld {
                // The crate hands out the bytes without the old subtype's inner length.
                out.extend_from_slice(&((b.bytes.len() + 4) as i32).to_le_bytes());
                out.push(u8::from(b.subtype));
                out.extend_from_slice(&(b.bytes.len() as i32).to_le_bytes());
            } else {
                out.extend_from_slice(&(b.bytes.len() as i32).to_le_bytes());
                out.push(u8::from(b.subtype));
            }
            out.extend_from_slice(b.bytes);
        }
        RawBsonRef::Undefined | RawBsonRef::Null | RawBsonRef::MinKey | RawBsonRef::MaxKey => {}
        RawBsonRef::ObjectId(o) => out.extend_from_slice(&o.bytes()),
        RawBsonRef::Boolean(b) => out.push(b as u8),
        RawBsonRef::DateTime(d) => out.extend_from_slice(&d.timestamp_millis().to_le_bytes()),
        RawBsonRef::RegularExpression(r) => {
            out.extend_from_slice(r.pattern.as_bytes());
            out.push(0);
            out.extend_from_slice(r.options.as_bytes());
            out.push(0);
        }
        RawBsonRef::JavaScriptCodeWithScope(c) => {
            let total = 4 + 4 + c.code.len() + 1 + c.scope.as_bytes().len();
            out.extend_from_slice(&(total as i32).to_le_bytes());
            put_string(out, c.code.as_bytes());
            out.extend_from_slice(c.scope.as_bytes());
        }
        RawBsonRef::Int32(i) => out.extend_from_slice(&i.to_le_bytes()),
        RawBsonRef::Timestamp(t) => {
            out.extend_from_slice(&t.increment.to_le_bytes());
            out.extend_from_slice(&t.time.to_le_bytes());
        }
        RawBsonRef::Int64(i) => out.extend_from_slice(&i.to_le_bytes()),
        RawBsonRef::Decimal128(d) => out.extend_from_slice(&d.bytes()),
        RawBsonRef::DbPointer(_) => {
            // The crate keeps a DBPointer's parts private: let it encode the value
            // (this deprecated type is the only one that allocates here).
            let mut tmp = bson::RawDocumentBuf::new();
            tmp.append_ref("", value);
            let bytes = tmp.as_bytes();
            // 4-byte length, type byte, "" + NUL, value..., trailing NUL.
            out.extend_from_slice(&bytes[6..bytes.len() - 1]);
        }
    }
}

fn put_string(out: &mut Vec<u8>, s: &[u8]) {
    out.extend_from_slice(&((s.len() + 1) as i32).to_le_bytes());
    out.extend_from_slice(s);
    out.push(0);
}
