//! [`IdKey`]: an owned `_id` value usable as a map key, ordered and compared as the
//! server's `_id` index orders and compares them.
//!
//! The key holds the bytes of the one-field document `{_id: <value>}`: that is the
//! query an oplog entry's `o2` or `o` selects by, the seed of an upsert, and it reads
//! back as a [`RawBsonRef`] through the bson crate. Keys up to 30 bytes (an
//! ObjectId, any number, strings up to 19 bytes) live inline without a heap
//! allocation.
//!
//! `Ord` and `Eq` follow [`super::compare_values`]; `Hash` agrees with `Eq`, across
//! numeric types too: `1`, `1.0`, `NumberLong(1)` and `NumberDecimal("1.0")` are one
//! key with one hash.

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};

use bson::{RawBsonRef, RawDocument};

use super::{cmp_val, hash_val, Val};
use crate::engine::raw::{self, fields};
use crate::error::Hint;

const INLINE: usize = 30;
/// `{_id: v}`: 4-byte length, type byte, "_id" NUL, value, NUL.
const VALUE_AT: usize = 4 + 1 + 4;
/// `{_id: ObjectId}`: the value's 12 bytes and the NUL after them.
const OID_KEY_LEN: usize = VALUE_AT + 12 + 1;

/// Why an `_id` key could not be built or read back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdKeyError {
    #[error("the document has no `_id` field")]
    Missing,
    #[error("the document is malformed BSON: {0}")]
    Malformed(String),
    #[error("the `_id` value cannot be read back: {0}")]
    Unreadable(String),
}

impl Hint for IdKeyError {
    fn hint(&self) -> Option<String> {
        Some("the oplog entry or backup document is corrupt; inspect it with `bsondump`".into())
    }
}

/// An owned `_id` value; see the module documentation.
#[derive(Clone)]
pub struct IdKey {
    repr: Repr,
}

#[derive(Clone)]
enum Repr {
    Inline { len: u8, buf: [u8; INLINE] },
    Heap(Box<[u8]>),
}

impl IdKey {
    /// The key of a value with BSON type `kind` and value bytes `value` (as found in
    /// a document, without the field name).
    pub(crate) fn from_raw_parts(kind: u8, value: &[u8]) -> IdKey {
        let total = VALUE_AT + value.len() + 1;
        let fill = |b: &mut [u8]| {
            b[..4].copy_from_slice(&(total as i32).to_le_bytes());
            b[4] = kind;
            b[5..VALUE_AT].copy_from_slice(b"_id\0");
            b[VALUE_AT..total - 1].copy_from_slice(value);
            b[total - 1] = 0;
        };
        if total <= INLINE {
            let mut buf = [0u8; INLINE];
            fill(&mut buf[..total]);
            IdKey {
                repr: Repr::Inline {
                    len: total as u8,
                    buf,
                },
            }
        } else {
            let mut b = vec![0u8; total].into_boxed_slice();
            fill(&mut b);
            IdKey {
                repr: Repr::Heap(b),
            }
        }
    }

    /// The key of a value.
    pub fn from_value(v: RawBsonRef<'_>) -> IdKey {
        // Fixed-size values are encoded on the stack.
        let fixed: Option<(u8, [u8; 16], usize)> = match v {
            RawBsonRef::ObjectId(o) => Some((raw::T_OID, pad(&o.bytes()), 12)),
            RawBsonRef::Int32(i) => Some((raw::T_INT32, pad(&i.to_le_bytes()), 4)),
            RawBsonRef::Int64(i) => Some((raw::T_INT64, pad(&i.to_le_bytes()), 8)),
            RawBsonRef::Double(d) => Some((raw::T_DOUBLE, pad(&d.to_le_bytes()), 8)),
            RawBsonRef::Decimal128(d) => Some((raw::T_DECIMAL, d.bytes(), 16)),
            _ => None,
        };
        if let Some((kind, bytes, len)) = fixed {
            return IdKey::from_raw_parts(kind, &bytes[..len]);
        }
        let mut tmp = Vec::with_capacity(32);
        raw::put_raw_value(&mut tmp, b"", v);
        // type byte, "" NUL, value
        IdKey::from_raw_parts(tmp[0], &tmp[2..])
    }

    /// The key of a document's `_id` (its first field named `_id`, as the server's
    /// `BSONObj::getField` finds it), copied from the document's bytes.
    pub fn from_document_id(doc: &RawDocument) -> Result<IdKey, IdKeyError> {
        IdKey::from_raw_document_id(doc.as_bytes())
    }

    /// [`IdKey::from_document_id`] of a document's bytes.
    pub fn from_raw_document_id(doc: &[u8]) -> Result<IdKey, IdKeyError> {
        for f in fields(doc) {
            let f = f.map_err(|e| IdKeyError::Malformed(e.to_string()))?;
            if f.name == b"_id" {
                return Ok(IdKey::from_raw_parts(f.kind, f.value));
            }
        }
        Err(IdKeyError::Missing)
    }

    /// The bytes of `{_id: <value>}`.
    pub fn document_bytes(&self) -> &[u8] {
        match &self.repr {
            Repr::Inline { len, buf } => &buf[..*len as usize],
            Repr::Heap(b) => b,
        }
    }

    /// The document `{_id: <value>}`.
    pub fn as_document(&self) -> &RawDocument {
        RawDocument::from_bytes(self.document_bytes())
            .expect("an IdKey always holds a framed one-field document")
    }

    /// The BSON type byte of the value.
    pub fn element_type(&self) -> u8 {
        self.document_bytes()[4]
    }

    /// The value's bytes (without type byte and field name).
    pub fn value_bytes(&self) -> &[u8] {
        let d = self.document_bytes();
        &d[VALUE_AT..d.len() - 1]
    }

    /// The value, decoded by the bson crate (which rejects, for example, strings
    /// that are not UTF-8).
    pub fn value(&self) -> Result<RawBsonRef<'_>, IdKeyError> {
        match self.as_document().iter().next() {
            Some(Ok((_, v))) => Ok(v),
            Some(Err(e)) => Err(IdKeyError::Unreadable(e.to_string())),
            None => Err(IdKeyError::Unreadable("empty key".into())),
        }
    }

    fn val(&self) -> Val<'_> {
        Val::from_raw(self.element_type(), self.value_bytes())
    }
}

impl PartialEq for IdKey {
    #[inline]
    fn eq(&self, other: &IdKey) -> bool {
        if let (Some(a), Some(b)) = (self.inline_oid(), other.inline_oid()) {
            return a == b;
        }
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for IdKey {}

impl PartialOrd for IdKey {
    fn partial_cmp(&self, other: &IdKey) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for IdKey {
    #[inline]
    fn cmp(&self, other: &IdKey) -> Ordering {
        if let (Some(a), Some(b)) = (self.inline_oid(), other.inline_oid()) {
            return a.cmp(&b);
        }
        self.cmp_general(other)
    }
}

impl IdKey {
    /// An ObjectId's 12 bytes as one big-endian word (compared as the server
    /// compares them: byte by byte), read at a fixed place without bounds checks
    /// (the in-memory documents' tables compare keys on every lookup, and sort
    /// them): the 4 bytes after the value are the terminating NUL and the
    /// buffer's zero padding.
    #[inline]
    fn inline_oid(&self) -> Option<u128> {
        match &self.repr {
            Repr::Inline { len, buf } if buf[4] == raw::T_OID && *len as usize == OID_KEY_LEN => {
                let mut w = [0u8; 16];
                w.copy_from_slice(&buf[VALUE_AT..VALUE_AT + 16]);
                Some(u128::from_be_bytes(w))
            }
            _ => None,
        }
    }

    fn cmp_general(&self, other: &IdKey) -> Ordering {
        let (ka, va) = (self.element_type(), self.value_bytes());
        let (kb, vb) = (other.element_type(), other.value_bytes());
        same_kind_cmp(ka, va, kb, vb).unwrap_or_else(|| cmp_val(&self.val(), &other.val()))
    }
}

/// The common `_id`s compared without building [`Val`]s (the replica's maps compare
/// keys on every lookup: the general path was a sixth of an in-memory replay's
/// time): two ObjectIds by their bytes (as big-endian words), two 32- or 64-bit
/// integers by value (as `cmp_num` compares them), two strings by their bytes (as
/// `cmp_val` compares `Val::Str`). None for anything else, or a value too short to
/// read, which the general path handles.
#[inline]
fn same_kind_cmp(ka: u8, va: &[u8], kb: u8, vb: &[u8]) -> Option<Ordering> {
    let int = |k: u8, v: &[u8]| match k {
        raw::T_INT32 => raw::read_i32(v).map(i64::from),
        _ => raw::read_i64(v),
    };
    match (ka, kb) {
        (raw::T_OID, raw::T_OID) => {
            let words = |v: &[u8]| -> Option<(u64, u32)> {
                Some((
                    u64::from_be_bytes(v.get(..8)?.try_into().ok()?),
                    u32::from_be_bytes(v.get(8..12)?.try_into().ok()?),
                ))
            };
            Some(words(va)?.cmp(&words(vb)?))
        }
        (raw::T_INT32 | raw::T_INT64, raw::T_INT32 | raw::T_INT64) => {
            Some(int(ka, va)?.cmp(&int(kb, vb)?))
        }
        (raw::T_STRING, raw::T_STRING) => Some(string_bytes(va)?.cmp(string_bytes(vb)?)),
        _ => None,
    }
}

impl Hash for IdKey {
    #[inline]
    fn hash<H: Hasher>(&self, state: &mut H) {
        // An ObjectId fed to the hasher exactly as `hash_val` feeds it (its type
        // bracket, then its 12 bytes), without building a `Val`: the in-memory
        // documents' tables hash a key per write.
        if self.element_type() == raw::T_OID {
            if let Some(o) = self.value_bytes().get(..12) {
                state.write_i32(super::canonical_type(raw::T_OID).unwrap_or(128));
                state.write(o);
                return;
            }
        }
        hash_val(&self.val(), state)
    }
}

impl fmt::Debug for IdKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.value() {
            Ok(v) => write!(f, "IdKey({v:?})"),
            Err(_) => write!(
                f,
                "IdKey(type {:#04x}, {:?})",
                self.element_type(),
                self.value_bytes()
            ),
        }
    }
}

/// A string value's bytes without its length and NUL (as `compare`'s `string_bytes`).
#[inline]
fn string_bytes(v: &[u8]) -> Option<&[u8]> {
    let n = usize::try_from(raw::read_i32(v)?)
        .ok()
        .filter(|n| *n >= 1)?;
    v.get(4..4 + n).map(|s| &s[..n - 1])
}

fn pad(b: &[u8]) -> [u8; 16] {
    let mut out = [0u8; 16];
    out[..b.len()].copy_from_slice(b);
    out
}

impl IdKey {
    /// Reads back a key from [`IdKey::document_bytes`] (as a storage backend keeps
    /// it): a framed one-field document whose field is `_id`.
    pub fn from_document_bytes(bytes: &[u8]) -> Result<IdKey, IdKeyError> {
        if bytes.len() < VALUE_AT + 1
            || &bytes[5..VALUE_AT] != b"_id\0"
            || i32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize != bytes.len()
            || bytes[bytes.len() - 1] != 0
        {
            return Err(IdKeyError::Malformed("not an `{_id: value}` key".into()));
        }
        Ok(IdKey::from_raw_parts(
            bytes[4],
            &bytes[VALUE_AT..bytes.len() - 1],
        ))
    }
}

/// Compares two [`IdKey::document_bytes`] encodings as their keys compare, without
/// building the keys (the on-disk store's comparator). Both must be well-formed
/// keys, as the store writes them.
pub fn cmp_key_bytes(a: &[u8], b: &[u8]) -> Ordering {
    fn val(k: &[u8]) -> (u8, &[u8]) {
        (k[4], &k[VALUE_AT..k.len() - 1])
    }
    let ((ka, va), (kb, vb)) = (val(a), val(b));
    same_kind_cmp(ka, va, kb, vb)
        .unwrap_or_else(|| cmp_val(&Val::from_raw(ka, va), &Val::from_raw(kb, vb)))
}
