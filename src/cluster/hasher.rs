//! The server's hash of a BSON value, as hashed indexes and hashed shard keys use it
//! (`BSONElementHasher::hash64`, `src/mongo/db/hasher.cpp`), so that pitr finds the
//! chunk (and the shard) that owns a document of a collection sharded on a hashed
//! key.
//!
//! The hash is the first 8 bytes, read little-endian, of an MD5 over: the seed (an
//! `int`, 0 for hashed indexes and shard keys), then for the element
//! (`recursiveHash`):
//!
//! - its canonical type as a 4-byte little-endian `int` (`canonicalizeBSONType`,
//!   `src/mongo/bson/bsontypes.h`: numbers 10, strings and symbols 15, objects 20,
//!   arrays 25, ..., MinKey -1, MaxKey 127), so that equal values of different
//!   numeric types hash alike;
//! - inside an object or array, its field name with its terminating NUL;
//! - a number as a 64-bit little-endian integer (`safeNumberLongForHash`: doubles
//!   truncated, NaN 0, out of range clamped, 2^63 exactly to -2^63 as older servers
//!   did; decimals rounded half to even, as `Decimal128::toLong` does by default);
//! - any other scalar as its value bytes on the wire (a string with its length and
//!   NUL, an ObjectId's 12 bytes, ...);
//! - an object or array as its elements in order, each with its name, then the
//!   end-of-object element (type 0, no name); code with scope as its code's bytes,
//!   then its scope's elements likewise.
//!
//! Tested on the server's own test vectors (`src/mongo/db/hasher_test.cpp`).

use bson::{RawBsonRef, RawDocument, RawDocumentBuf};
use md5::{Digest, Md5};

/// The seed hashed indexes and hashed shard keys use
/// (`BSONElementHasher::DEFAULT_HASH_SEED`).
pub const DEFAULT_SEED: i32 = 0;

/// `BSONElementHasher::hash64(e, seed)` of a value.
pub fn hash64(v: RawBsonRef<'_>, seed: i32) -> i64 {
    let mut h = Md5::new();
    h.update(seed.to_le_bytes());
    element(&mut h, v, None);
    let d = h.finalize();
    i64::from_le_bytes(d[..8].try_into().expect("an MD5 digest has 16 bytes"))
}

/// `canonicalizeBSONType` of the element's type byte.
fn canonical(v: &RawBsonRef<'_>) -> i32 {
    use bson::spec::ElementType as T;
    match v.element_type() {
        T::MinKey => -1,
        T::MaxKey => 127,
        T::Undefined => 0,
        T::Null => 5,
        T::Double | T::Int32 | T::Int64 | T::Decimal128 => 10,
        T::String | T::Symbol => 15,
        T::EmbeddedDocument => 20,
        T::Array => 25,
        T::Binary => 30,
        T::ObjectId => 35,
        T::Boolean => 40,
        T::DateTime => 45,
        T::Timestamp => 47,
        T::RegularExpression => 50,
        T::DbPointer => 55,
        T::JavaScriptCode => 60,
        T::JavaScriptCodeWithScope => 65,
    }
}

fn element(h: &mut Md5, v: RawBsonRef<'_>, name: Option<&str>) {
    h.update(canonical(&v).to_le_bytes());
    if let Some(n) = name {
        h.update(n.as_bytes());
        h.update([0]);
    }
    match v {
        RawBsonRef::Document(d) => object(h, d),
        RawBsonRef::Array(a) => {
            for (i, v) in a.into_iter().flatten().enumerate() {
                element(h, v, Some(&i.to_string()));
            }
            h.update(0i32.to_le_bytes());
        }
        RawBsonRef::JavaScriptCodeWithScope(c) => {
            h.update(c.code.as_bytes());
            h.update([0]);
            object(h, c.scope);
        }
        RawBsonRef::Double(d) => h.update(double_for_hash(d).to_le_bytes()),
        RawBsonRef::Int32(i) => h.update(i64::from(i).to_le_bytes()),
        RawBsonRef::Int64(i) => h.update(i.to_le_bytes()),
        RawBsonRef::Decimal128(d) => h.update(decimal_for_hash(&d.bytes()).to_le_bytes()),
        other => h.update(value_bytes(other)),
    }
}

/// The elements of an object (an array's names are its indexes), then the EOO element:
/// its canonical type 0, no name, no value (`BSONObjIterator::moreWithEOO`).
fn object(h: &mut Md5, d: &RawDocument) {
    for (k, v) in d.iter().flatten() {
        element(h, v, Some(k));
    }
    h.update(0i32.to_le_bytes());
}

/// A scalar's bytes as BSON stores it (`BSONElement::value()`, `valuesize()`): the
/// element appended to an empty document, less the document's length, the type
/// byte, the empty name's NUL and the closing NUL.
fn value_bytes(v: RawBsonRef<'_>) -> Vec<u8> {
    let mut d = RawDocumentBuf::new();
    d.append_ref("", v);
    let b = d.as_bytes();
    b[6..b.len() - 1].to_vec()
}

/// 2^63 as a double.
const TWO_63: f64 = 9_223_372_036_854_775_808.0;

/// `safeNumberLongForHash` of a double (`src/mongo/bson/bsonelement.h`).
fn double_for_hash(d: f64) -> i64 {
    if d.is_nan() {
        0
    } else if d == TWO_63 {
        // Older servers' overflowing cast, kept for their hashes.
        i64::MIN
    } else if d >= TWO_63 {
        i64::MAX
    } else if d < -TWO_63 {
        i64::MIN
    } else {
        d as i64
    }
}

/// `safeNumberLong` of a Decimal128 (IEEE 754-2008 BID encoding): NaN 0, out of the
/// int64 range clamped, else rounded half to even (`Decimal128::toLong`'s default
/// `kRoundTiesToEven`).
fn decimal_for_hash(bytes: &[u8; 16]) -> i64 {
    let bits = u128::from_le_bytes(*bytes);
    let negative = bits >> 127 == 1;
    let comb = (bits >> 122) & 0x1f;
    if comb == 0x1f {
        return 0; // NaN
    }
    if comb == 0x1e {
        return if negative { i64::MIN } else { i64::MAX }; // infinity
    }
    // Two encodings of the exponent and coefficient: the usual one, and the one for
    // coefficients past 2^113, which are not canonical (read as zero).
    let (exponent, coefficient) = if (bits >> 125) & 0b11 == 0b11 {
        (((bits >> 111) & 0x3fff) as i32, 0u128)
    } else {
        (((bits >> 113) & 0x3fff) as i32, bits & ((1u128 << 113) - 1))
    };
    let exponent = exponent - 6176;
    let magnitude: Option<u128> = if exponent >= 0 {
        10u128
            .checked_pow(exponent as u32)
            .and_then(|p| coefficient.checked_mul(p))
            .or(if coefficient == 0 { Some(0) } else { None })
    } else {
        let scale = 10u128.checked_pow((-exponent) as u32);
        Some(match scale {
            None => 0, // |value| < 1e-38: rounds to 0
            Some(p) => {
                let (q, r) = (coefficient / p, coefficient % p);
                let twice = r * 2;
                if twice > p || (twice == p && q % 2 == 1) {
                    q + 1
                } else {
                    q
                }
            }
        })
    };
    let limit = if negative {
        1u128 << 63
    } else {
        (1u128 << 63) - 1
    };
    match magnitude {
        Some(m) if m <= limit => {
            if negative {
                (m as i128).wrapping_neg() as i64
            } else {
                m as i64
            }
        }
        _ => {
            if negative {
                i64::MIN
            } else {
                i64::MAX
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, oid::ObjectId, spec::BinarySubtype, Binary, Bson, Document, Regex};

    /// `hashIt`: the first element of a document `{check: v}`, seed 0.
    fn hash_it(v: Bson) -> i64 {
        let d = RawDocumentBuf::from_document(&doc! {"check": v}).unwrap();
        let (_, e) = d.iter().next().unwrap().unwrap();
        hash64(e, DEFAULT_SEED)
    }

    // The vectors of src/mongo/db/hasher_test.cpp.
    #[test]
    fn numbers_hash_as_64_bit_integers() {
        for v in [Bson::Int32(42), Bson::Double(42.123), Bson::Int64(42)] {
            assert_eq!(hash_it(v), -944302157085130861);
        }
        for v in [
            Bson::Int32(0),
            Bson::Double(0.456),
            Bson::Int64(0),
            Bson::Double(f64::NAN),
        ] {
            assert_eq!(hash_it(v), 4854801880128277513);
        }
        for v in [Bson::Int32(1), Bson::Double(1.987), Bson::Int64(1)] {
            assert_eq!(hash_it(v), 5902408780260971510);
        }
        for v in [Bson::Int32(-1), Bson::Double(-1.789), Bson::Int64(-1)] {
            assert_eq!(hash_it(v), 1140205862565771219);
        }
        let min = i32::MIN;
        for v in [
            Bson::Int32(min),
            Bson::Double(min as f64),
            Bson::Int64(min as i64),
        ] {
            assert_eq!(hash_it(v), 6165898260261354870);
        }
        let max = i32::MAX;
        for v in [
            Bson::Int32(max),
            Bson::Double(max as f64),
            Bson::Int64(max as i64),
        ] {
            assert_eq!(hash_it(v), 1143184177162245883);
        }
        assert_eq!(hash_it(Bson::Double(f64::MAX)), 921523596458303250);
        assert_eq!(hash_it(Bson::Int64(i64::MAX)), 921523596458303250);
        assert_eq!(hash_it(Bson::Double(-f64::MAX)), 4532067210535695462);
        assert_eq!(hash_it(Bson::Int64(i64::MIN)), 4532067210535695462);
        // 2^63 exactly: the older servers' -2^63.
        assert_eq!(hash_it(Bson::Double(TWO_63)), 4532067210535695462);
    }

    #[test]
    fn min_max_undefined() {
        assert_eq!(hash_it(Bson::MinKey), 7961148599568647290);
        assert_eq!(hash_it(Bson::MaxKey), 5504842513779440750);
        assert_eq!(hash_it(Bson::Undefined), 40158834000849533);
    }

    #[test]
    fn strings_and_symbols() {
        assert_eq!(hash_it(Bson::String("abc".into())), 8478485326885698097);
        assert_eq!(hash_it(Bson::Symbol("abc".into())), 8478485326885698097);
        assert_eq!(hash_it(Bson::String(String::new())), 2049396243249673340);
        assert_eq!(hash_it(Bson::Symbol(String::new())), 2049396243249673340);
    }

    #[test]
    fn objects_and_arrays() {
        let o: Document = doc! {"a": "abc", "b": 123i64};
        assert_eq!(hash_it(Bson::Document(o)), 4771603801758380216);
        assert_eq!(
            hash_it(Bson::Document(Document::new())),
            7980500913326740417
        );
        let a = vec![Bson::from("bar"), Bson::from("baz"), Bson::from("qux")];
        assert_eq!(hash_it(Bson::Array(a)), -2938911267422831539);
        assert_eq!(hash_it(Bson::Array(vec![])), 8849948234993459283);
    }

    #[test]
    fn binary() {
        let bin = |subtype, bytes: &[u8]| {
            Bson::Binary(Binary {
                subtype,
                bytes: bytes.to_vec(),
            })
        };
        let bytes = [0u8, 1, 2, 3, 4, 6];
        assert_eq!(
            hash_it(bin(BinarySubtype::Generic, &bytes)),
            7252465090394235301
        );
        assert_eq!(
            hash_it(bin(BinarySubtype::UserDefined(0x80), &bytes)),
            5736670452907618262
        );
        let uuid: Vec<u8> = (0..16).collect();
        assert_eq!(
            hash_it(bin(BinarySubtype::Uuid, &uuid)),
            6084661258071355978
        );
    }

    #[test]
    fn object_ids_booleans_dates() {
        let oid = |s| Bson::ObjectId(ObjectId::parse_str(s).unwrap());
        assert_eq!(
            hash_it(oid("010203040506070809101112")),
            -5588663249627035708
        );
        assert_eq!(
            hash_it(oid("000000000000000000000000")),
            -4293118519463489418
        );
        assert_eq!(hash_it(Bson::Boolean(true)), 6405873908747105701);
        assert_eq!(hash_it(Bson::Boolean(false)), 6289544573401934092);
        let date = |ms| Bson::DateTime(bson::DateTime::from_millis(ms));
        assert_eq!(hash_it(date(0x5566778811223344)), 4476222765095560467);
        assert_eq!(hash_it(date(0)), -1178696894582842035);
        // (The test's Timestamp vectors predate Timestamp's own canonical type, 47,
        // and equal the Date ones; a Timestamp hashes differently since.)
        let ts = Bson::Timestamp(bson::Timestamp {
            time: 0,
            increment: 0,
        });
        assert_ne!(hash_it(ts), -1178696894582842035);
    }

    #[test]
    fn regex_dbref_code() {
        let re = |p: &str, o: &str| {
            Bson::RegularExpression(Regex {
                pattern: p.into(),
                options: o.into(),
            })
        };
        assert_eq!(hash_it(re("mongodb", "")), -7275792090268217043);
        assert_eq!(hash_it(re(".*", "i")), 7095855029187981886);
        let ptr = |ns: &str| {
            bson::from_slice::<Document>(&dbpointer_doc(ns, "010203040506070809101112"))
                .unwrap()
                .get("check")
                .unwrap()
                .clone()
        };
        assert_eq!(hash_it(ptr("c")), 940175826736461384);
        assert_eq!(hash_it(ptr("db.c")), 2426768198104018194);
        assert_eq!(
            hash_it(Bson::JavaScriptCode("func f() { return 1; }".into())),
            6861638109178014270
        );
        assert_eq!(
            hash_it(Bson::JavaScriptCodeWithScope(
                bson::JavaScriptCodeWithScope {
                    code: "func f() { return 1; }".into(),
                    scope: doc! {"c": true},
                }
            )),
            501342939894575968
        );
    }

    /// `{check: DBPointer(ns, oid)}` on the wire (the bson crate builds none itself).
    fn dbpointer_doc(ns: &str, oid: &str) -> Vec<u8> {
        let mut body = vec![0x0c];
        body.extend(b"check\0");
        body.extend(((ns.len() + 1) as i32).to_le_bytes());
        body.extend(ns.as_bytes());
        body.push(0);
        body.extend(ObjectId::parse_str(oid).unwrap().bytes());
        body.push(0);
        let mut out = ((body.len() + 4) as i32).to_le_bytes().to_vec();
        out.extend(body);
        out
    }

    #[test]
    fn decimals_round_half_to_even() {
        let dec = |s: &str| s.parse::<bson::Decimal128>().unwrap().bytes();
        assert_eq!(decimal_for_hash(&dec("42")), 42);
        assert_eq!(decimal_for_hash(&dec("42.5")), 42);
        assert_eq!(decimal_for_hash(&dec("43.5")), 44);
        assert_eq!(decimal_for_hash(&dec("-2.5")), -2);
        assert_eq!(decimal_for_hash(&dec("-2.51")), -3);
        assert_eq!(decimal_for_hash(&dec("1E+30")), i64::MAX);
        assert_eq!(decimal_for_hash(&dec("-1E+30")), i64::MIN);
        assert_eq!(decimal_for_hash(&dec("NaN")), 0);
        assert_eq!(decimal_for_hash(&dec("Infinity")), i64::MAX);
        assert_eq!(decimal_for_hash(&dec("1E-40")), 0);
        assert_eq!(decimal_for_hash(&dec("0")), 0);
        assert_eq!(decimal_for_hash(&dec("-9223372036854775808")), i64::MIN);
        // A decimal hashes as the integer it rounds to.
        assert_eq!(
            hash_it(Bson::Decimal128("42.4".parse().unwrap())),
            -944302157085130861
        );
    }
}
