//! The server's BSON order: `bson_obj_test.cpp` `BSONObjCompare` cases (values wrapped
//! as `{"": v}` there, compared as values here), plus type brackets and [`IdKey`].

use std::cmp::Ordering::{self, *};
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::str::FromStr;

use bson::oid::ObjectId;
use bson::spec::BinarySubtype;
use bson::{rawdoc, Binary, DateTime, Decimal128, RawBson, RawBsonRef, Regex, Timestamp};

use super::super::compare::{compare_documents, compare_values, IdKey};

fn dec(s: &str) -> RawBson {
    RawBson::Decimal128(Decimal128::from_str(s).expect("decimal literal"))
}

/// `(-1)^neg * coef * 10^exp` encoded directly (the crate's parser rounds some
/// literals it should not).
fn dec_parts(neg: bool, coef: u128, exp: i32) -> RawBson {
    let v = (u128::from(neg) << 127) | (((exp + 6176) as u128) << 113) | coef;
    dec_bits(v)
}

fn dec_bits(v: u128) -> RawBson {
    RawBson::Decimal128(Decimal128::from_bytes(v.to_le_bytes()))
}

#[track_caller]
fn cmp(a: &RawBson, b: &RawBson) -> Ordering {
    let o = compare_values(a.as_raw_bson_ref(), b.as_raw_bson_ref());
    let r = compare_values(b.as_raw_bson_ref(), a.as_raw_bson_ref());
    assert_eq!(o, r.reverse(), "antisymmetry of {a:?} and {b:?}");
    o
}

#[track_caller]
fn lt(a: impl Into<RawBson>, b: impl Into<RawBson>) {
    let (a, b) = (a.into(), b.into());
    assert_eq!(cmp(&a, &b), Less, "{a:?} < {b:?}");
}

#[track_caller]
fn eq(a: impl Into<RawBson>, b: impl Into<RawBson>) {
    let (a, b) = (a.into(), b.into());
    assert_eq!(cmp(&a, &b), Equal, "{a:?} == {b:?}");
    let (ka, kb) = (
        IdKey::from_value(a.as_raw_bson_ref()),
        IdKey::from_value(b.as_raw_bson_ref()),
    );
    assert_eq!(ka, kb);
    assert_eq!(hash(&ka), hash(&kb), "hash of {a:?} and {b:?}");
}

fn hash(k: &IdKey) -> u64 {
    let mut h = DefaultHasher::new();
    k.hash(&mut h);
    h.finish()
}

const NAN: f64 = f64::NAN;
const INF: f64 = f64::INFINITY;

#[test]
fn timestamp() {
    // BSONObjCompare Timestamp: unsigned, seconds then increment.
    lt(
        Timestamp {
            time: 0,
            increment: 3,
        },
        Timestamp {
            time: u32::MAX,
            increment: 2,
        },
    );
    lt(
        Timestamp {
            time: 2,
            increment: 2,
        },
        Timestamp {
            time: 2,
            increment: 3,
        },
    );
}

#[test]
fn number_double() {
    // BSONObjCompare NumberDouble
    lt(0.0, 1.0);
    lt(-1.0, 0.0);
    lt(-1.0, 1.0);
    lt(0.0, 0.1);
    lt(0.1, 1.0);
    lt(-1.0, -0.1);
    lt(-0.1, 0.0);
    lt(-0.1, 0.1);
    lt(0.0, f64::from_bits(1));
    lt(-f64::from_bits(1), 0.0);
    lt(1.0, 1.0 + f64::EPSILON);
    lt(-1.0 - f64::EPSILON, -1.0);
    eq(0.0, -0.0);
    lt(0.0, INF);
    lt(f64::MAX, INF);
    lt(-INF, INF);
    lt(-INF, 0.0);
    lt(-INF, -f64::MAX);
    lt(NAN, 0.0);
    lt(NAN, -f64::MAX);
    lt(NAN, INF);
    lt(NAN, -INF);
    // Distinct NaN representations are one value.
    eq(NAN, f64::from_bits(0x7FF0_0000_0000_0001));
    eq(NAN, -NAN);
}

#[test]
fn number_long_double() {
    // BSONObjCompare NumberLong_Double
    eq(0i64, 0.0);
    eq(0i64, -0.0);
    eq(1i64, 1.0);
    eq(-1i64, -1.0);
    lt(0i64, 1.0);
    lt(-1i64, 0.0);
    lt(0i64, 0.1);
    lt(0.1, 1i64);
    lt(-1i64, -0.1);
    lt(-0.1, 0i64);
    lt(0i64, f64::from_bits(1));
    lt(-f64::from_bits(1), 0i64);
    lt(1i64, 1.0 + f64::EPSILON);
    lt(-1.0 - f64::EPSILON, -1i64);
    lt(0i64, INF);
    lt(i64::MAX, INF);
    lt(i64::MIN, INF);
    lt(-INF, 0i64);
    lt(-INF, i64::MAX);
    lt(-INF, i64::MIN);
    lt(NAN, 0i64);
    lt(NAN, i64::MIN);
    for p in 0..63 {
        let l: i64 = 1 << p;
        let d = l as f64;
        eq(l, d);
        eq(-l, -d);
        lt(d, l + 1);
        lt(l - 1, d);
        lt(-d, -l + 1);
        lt(-l - 1, -d);
        if p <= 52 {
            lt(d - 0.5, l);
            lt(-l, -(d - 0.5));
        }
        if p <= 51 {
            lt(l, d + 0.5);
            lt(-(d + 0.5), -l);
        }
    }
    // Around +/- i64::MAX, which no double represents.
    let max = i64::MAX;
    let above = 9_223_372_036_854_775_808.0; // 2^63
    let below = 9_223_372_036_854_774_784.0; // 2^63 - epsilon
    lt(max - 1, max);
    lt(max, above);
    lt(below, max);
    lt(-max, -(max - 1));
    lt(-above, -max);
    lt(-max, -below);
    // Around i64::MIN, which a double represents.
    let min = i64::MIN;
    lt(min, min + 1);
    eq(min, -9_223_372_036_854_775_808.0);
    lt(min, -9_223_372_036_854_774_784.0);
    lt(-9_223_372_036_854_777_856.0, min);
}

#[test]
fn number_decimal() {
    // BSONObjCompare NumberDecimalScaleAndZero, NumberDecimalMaxAndMins,
    // NumberDecimalInfinity, NumberDecimalPosNaN, NumberDecimalNegNan
    lt(dec("0"), dec("1"));
    lt(dec("-1"), dec("0"));
    lt(dec("0"), dec("0.1"));
    lt(dec("0.1"), dec("1.0"));
    lt(dec("-1.0"), dec("-0.1"));
    lt(dec("-0.1"), dec("-0.0"));
    let smallest_positive = dec("1E-6176");
    let largest_negative = dec("-1E-6176");
    lt(dec("0"), smallest_positive.clone());
    lt(largest_negative.clone(), dec("0"));
    eq(dec("0"), dec("-0"));
    eq(dec("0"), dec("0E+300"));
    eq(dec("1"), dec("1.000000000000000000000000000000000"));
    eq(smallest_positive.clone(), smallest_positive);
    let largest_positive = dec("9999999999999999999999999999999999E+6111");
    let smallest_negative = dec("-9999999999999999999999999999999999E+6111");
    lt(dec("0"), dec("Infinity"));
    lt(largest_positive, dec("Infinity"));
    lt(dec("-Infinity"), dec("Infinity"));
    eq(dec("Infinity"), dec("Infinity"));
    lt(dec("-Infinity"), smallest_negative.clone());
    let pos_nan = dec("NaN");
    let neg_nan = dec_bits(0xFC00_0000_0000_0000_0000_0000_0000_0000);
    for nan in [pos_nan.clone(), neg_nan.clone()] {
        lt(nan.clone(), RawBson::Double(0.0));
        lt(nan.clone(), smallest_negative.clone());
        lt(nan.clone(), dec("Infinity"));
        lt(nan.clone(), dec("-Infinity"));
    }
    eq(pos_nan, neg_nan);
}

#[test]
fn number_decimal_versus_int_long() {
    // BSONObjCompare NumberDecimalCompareInt, NumberDecimalCompareLong
    eq(dec("0.0"), 0i32);
    eq(dec("502.0"), 502i32);
    eq(dec("2147483647"), i32::MAX);
    eq(dec("-2147483647"), -i32::MAX);
    lt(dec("NaN"), -i32::MAX);
    lt(dec("-Infinity"), -i32::MAX);
    lt(i32::MAX, dec("Infinity"));
    lt(0i32, dec("1.0"));
    lt(dec("-1.0"), 0i32);
    eq(dec("0.0"), 0i64);
    eq(dec("502.0"), 502i64);
    eq(dec("9223372036854775807"), i64::MAX);
    eq(dec("-9223372036854775807"), -i64::MAX);
    lt(dec("NaN"), -i64::MAX);
    lt(dec("-Infinity"), -i64::MAX);
    lt(i64::MAX, dec("Infinity"));
    lt(0i64, dec("1.0"));
    lt(dec("-1.0"), 0i64);
    // Beyond 2^53, where a double cannot tell these apart.
    lt(9_007_199_254_740_993i64, dec("9007199254740993.5"));
    eq(dec("90071992547409930E-1"), 9_007_199_254_740_993i64);
}

#[test]
fn number_decimal_versus_double() {
    // BSONObjCompare NumberDecimalCompareDoubleExactRepresentations,
    // NumberDecimalCompareDoubleNoDoubleRepresentation, NumberDecimalCompareDoubleQuantize,
    // NumberDecimalCompareDoubleInfinity, NumberDecimalCompareDoubleNaN
    eq(dec("0"), 0.0);
    eq(dec("1.0"), 1.0);
    eq(dec("-1.0"), -1.0);
    eq(dec("0.125"), 0.125);
    lt(dec("0.0"), 0.125);
    lt(dec("-1.0"), -0.125);
    lt(0.125, dec("1.0"));
    lt(-0.125, dec("0.0"));
    lt(0.1, dec("0.3"));
    lt(dec("0.1"), 0.3);
    lt(dec("-0.3"), -0.1);
    lt(-0.3, dec("-0.1"));
    lt(dec("0.1"), 0.1);
    lt(0.3, dec("0.3"));
    lt(-0.1, dec("-0.1"));
    lt(dec("-0.3"), -0.3);
    eq(dec("0.5"), 0.5);
    lt(0.5, dec("0.5000000000000000000000000000000001"));
    lt(dec("0.0"), 0.1);
    lt(0.1, dec("1.0"));
    // Around the largest double (1.7976931348623157e308).
    lt(f64::MAX, dec("179769313486232E294"));
    lt(dec("179769313486231E294"), f64::MAX);
    lt(dec("-179769313486232E294"), -f64::MAX);
    // Subnormal and tiny.
    // 2^-1074 is 4.9406564584124654417656879286822137236505...E-324: its 34-digit
    // truncation is below it, the next decimal above.
    lt(
        dec_parts(false, 4_940_656_458_412_465_441_765_687_928_682_213, -357),
        f64::from_bits(1),
    );
    lt(
        f64::from_bits(1),
        dec_parts(false, 4_940_656_458_412_465_441_765_687_928_682_214, -357),
    );
    eq(dec("9.094947017729282379150390625E-13"), 2f64.powi(-40));
    lt(dec("1E-400"), f64::from_bits(1));
    lt(0.0, dec("1E-400"));
    lt(dec("-1E-400"), 0.0);
    // Huge decimals against infinities.
    lt(dec("1E+6000"), INF);
    lt(-INF, dec("-1E+6000"));
    eq(dec("Infinity"), INF);
    eq(dec("-Infinity"), -INF);
    eq(dec("NaN"), NAN);
    eq(dec_bits(0xFC00_0000_0000_0000_0000_0000_0000_0000), -NAN);
    lt(dec("NaN"), -INF);
    lt(NAN, dec("-Infinity"));
}

/// A DBPointer (the bson crate offers no constructor): namespace "ns", zero id.
fn db_pointer() -> RawBson {
    use crate::engine::raw::{begin_doc, end_doc, put_header};
    let mut d = Vec::new();
    let start = begin_doc(&mut d);
    put_header(&mut d, 0x0C, b"x");
    d.extend_from_slice(&3i32.to_le_bytes());
    d.extend_from_slice(b"ns\0");
    d.extend_from_slice(&[0u8; 12]);
    end_doc(&mut d, start);
    let doc = bson::RawDocumentBuf::from_bytes(d).unwrap();
    doc.get("x").unwrap().unwrap().to_raw_bson()
}

#[test]
fn string_symbol_code_regex() {
    // BSONObjCompare StringSymbol, StringOrder1
    eq(
        RawBson::String("eliot".into()),
        RawBson::Symbol("eliot".into()),
    );
    lt(RawBson::String("a".into()), RawBson::String("a\0".into()));
    lt(RawBson::String("a\0".into()), RawBson::String("ab".into()));
    lt(RawBson::String("z".into()), RawBson::String("é".into()));
    lt(
        Regex {
            pattern: "foo".into(),
            options: "".into(),
        },
        Regex {
            pattern: "goo".into(),
            options: "".into(),
        },
    );
    lt(
        Regex {
            pattern: "a".into(),
            options: "i".into(),
        },
        Regex {
            pattern: "a".into(),
            options: "m".into(),
        },
    );
    lt(
        RawBson::JavaScriptCode("a".into()),
        RawBson::JavaScriptCode("b".into()),
    );
}

#[test]
fn integer_order() {
    // BSONObjCompare StringOrder2, NumericBounds
    lt(2i64, 3i32);
    lt(2i64, 4i64);
    lt(3i32, 4i64);
    lt(i64::MAX, f64::MAX);
    lt(i32::MAX, f64::MAX);
}

#[test]
fn type_brackets() {
    // canonicalizeBSONType: each value below sorts before the next, whatever its value.
    let oid = ObjectId::from_bytes([0xFF; 12]);
    let values: Vec<RawBson> = vec![
        RawBson::MinKey,
        RawBson::Undefined,
        RawBson::Null,
        RawBson::Double(f64::INFINITY),
        RawBson::String("".into()),
        RawBson::Document(rawdoc! {}),
        RawBson::Array(bson::RawArrayBuf::new()),
        RawBson::Binary(Binary {
            subtype: BinarySubtype::Generic,
            bytes: vec![],
        }),
        RawBson::ObjectId(oid),
        RawBson::Boolean(false),
        RawBson::DateTime(DateTime::from_millis(i64::MIN)),
        RawBson::Timestamp(Timestamp {
            time: 0,
            increment: 0,
        }),
        RawBson::RegularExpression(Regex {
            pattern: "".into(),
            options: "".into(),
        }),
        db_pointer(),
        RawBson::JavaScriptCode("".into()),
        RawBson::JavaScriptCodeWithScope(bson::RawJavaScriptCodeWithScope {
            code: "".into(),
            scope: rawdoc! {},
        }),
        RawBson::MaxKey,
    ];
    for (i, a) in values.iter().enumerate() {
        for b in &values[i + 1..] {
            assert_eq!(cmp(a, b), Less, "{a:?} < {b:?}");
        }
    }
}

#[test]
fn scalars_within_their_bracket() {
    lt(false, true);
    lt(DateTime::from_millis(-1), DateTime::from_millis(0));
    lt(ObjectId::from_bytes([0; 12]), ObjectId::from_bytes([1; 12]));
    // BinData: length first, then subtype, then bytes.
    let bin = |s: u8, b: &[u8]| {
        RawBson::Binary(Binary {
            subtype: BinarySubtype::from(s),
            bytes: b.to_vec(),
        })
    };
    lt(bin(9, b"zz"), bin(0, b"aaa"));
    lt(bin(0, b"zz"), bin(1, b"aa"));
    lt(bin(0, b"ab"), bin(0, b"ac"));
}

#[test]
fn documents_and_arrays() {
    // woCompare: element by element; canonical type, then field name, then value.
    let c = |a: bson::RawDocumentBuf, b: bson::RawDocumentBuf| compare_documents(&a, &b);
    assert_eq!(c(rawdoc! {"a": 1}, rawdoc! {"b": 0}), Less);
    assert_eq!(c(rawdoc! {"a": 1}, rawdoc! {"a": 1.0}), Equal);
    assert_eq!(c(rawdoc! {"a": "x"}, rawdoc! {"b": 1}), Greater);
    assert_eq!(c(rawdoc! {}, rawdoc! {"a": 1}), Less);
    assert_eq!(c(rawdoc! {"a": 1}, rawdoc! {"a": 1, "b": 1}), Less);
    assert_eq!(c(rawdoc! {"a": [1, 2]}, rawdoc! {"a": [1, 3]}), Less);
    assert_eq!(c(rawdoc! {"a": [1]}, rawdoc! {"a": [1, 0]}), Less);
    assert_eq!(
        c(rawdoc! {"a": {"x": 1i64}}, rawdoc! {"a": {"x": 1.0}}),
        Equal
    );
    eq(
        RawBson::Document(rawdoc! {"a": 1, "b": [2]}),
        RawBson::Document(rawdoc! {"a": 1.0, "b": [2i64]}),
    );
    lt(
        RawBson::Document(rawdoc! {"b": 1}),
        RawBson::Document(rawdoc! {"b": 1, "a": 0}),
    );
}

#[test]
fn id_key_equality_and_hash_across_numeric_types() {
    eq(1i32, 1i64);
    eq(1i32, 1.0);
    eq(1i32, dec("1"));
    eq(1i32, dec("1.00"));
    eq(1i64, dec("100E-2"));
    eq(0i32, -0.0);
    eq(0i32, dec("-0E+12"));
    eq(NAN, dec("NaN"));
    eq(0.5, dec("0.5"));
    eq(0.5, dec("5000E-4"));
    eq(1e20, dec("1E20"));
    eq(9_223_372_036_854_775_808.0, dec("9223372036854775808"));
    eq(i64::MIN, dec("-9223372036854775808"));
    eq(i64::MIN, -9_223_372_036_854_775_808.0);
    eq(INF, dec("Infinity"));
    eq(dec("0.1"), dec("0.10"));
    eq(
        dec_parts(false, 123_456_789_012_345_678_901_234_567_890, 0),
        dec_parts(false, 1_234_567_890_123_456_789_012_345_678_900, -1),
    );
    eq(dec_parts(true, 5, -1), -0.5);
    eq(2f64.powi(-40), dec("9.094947017729282379150390625E-13"));
    eq(2f64.powi(80), dec("1208925819614629174706176"));
    // Not equal, so whatever the hashes, `Eq` must say so.
    assert_ne!(
        IdKey::from_value(RawBsonRef::Double(0.1)),
        IdKey::from_value(dec("0.1").as_raw_bson_ref())
    );
    assert_ne!(
        IdKey::from_value(RawBsonRef::Int64(i64::MAX)),
        IdKey::from_value(RawBsonRef::Double(9_223_372_036_854_775_808.0))
    );
}

#[test]
fn id_key_storage_and_read_back() {
    assert_eq!(std::mem::size_of::<IdKey>(), 32);
    let oid = ObjectId::parse_str("65f0a1b2c3d4e5f601234567").unwrap();
    let doc = rawdoc! {"x": 1, "_id": oid, "_id": 2};
    let k = IdKey::from_document_id(&doc).unwrap();
    assert_eq!(k.value().unwrap(), RawBsonRef::ObjectId(oid));
    assert_eq!(k.as_document().as_bytes(), rawdoc! {"_id": oid}.as_bytes());
    let long = "x".repeat(100);
    let k2 = IdKey::from_document_id(&rawdoc! {"_id": long.clone()}).unwrap();
    assert_eq!(k2.value().unwrap(), RawBsonRef::String(&long));
    assert_ne!(k, k2);
    assert_eq!(
        IdKey::from_document_id(&rawdoc! {"a": 1}).unwrap_err(),
        super::super::compare::IdKeyError::Missing
    );
    // Old binary subtype: the bson crate strips the inner length; the key does not.
    let old = Binary {
        subtype: BinarySubtype::BinaryOld,
        bytes: b"abc".to_vec(),
    };
    let raw_doc = rawdoc! {"_id": RawBson::Binary(old.clone())};
    let from_doc = IdKey::from_document_id(&raw_doc).unwrap();
    let from_val = IdKey::from_value(RawBsonRef::Binary(bson::RawBinaryRef {
        subtype: old.subtype,
        bytes: &old.bytes,
    }));
    assert_eq!(from_doc, from_val);
    assert_eq!(from_doc.document_bytes(), from_val.document_bytes());
}

#[test]
fn id_key_orders_a_map_like_the_id_index() {
    let keys: Vec<RawBson> = vec![
        RawBson::String("b".into()),
        RawBson::Int32(10),
        RawBson::Double(2.5),
        RawBson::ObjectId(ObjectId::from_bytes([1; 12])),
        RawBson::Null,
        RawBson::Int64(-3),
        dec("2.4"),
        RawBson::String("a".into()),
        RawBson::MinKey,
        RawBson::Document(rawdoc! {"a": 1}),
    ];
    let map: std::collections::BTreeMap<IdKey, usize> = keys
        .iter()
        .enumerate()
        .map(|(i, v)| (IdKey::from_value(v.as_raw_bson_ref()), i))
        .collect();
    let order: Vec<usize> = map.values().copied().collect();
    assert_eq!(order, vec![8, 4, 5, 6, 2, 1, 7, 0, 9, 3]);
}

#[test]
fn deep_nesting_does_not_overflow_the_stack() {
    // {a: {a: {a: ... 1 ...}}} 10,000 levels deep, as bytes.
    fn nested(depth: usize, leaf: i32) -> Vec<u8> {
        let mut doc = rawdoc! {"a": leaf}.into_bytes();
        for _ in 0..depth {
            let mut outer = Vec::with_capacity(doc.len() + 8);
            let start = crate::engine::raw::begin_doc(&mut outer);
            crate::engine::raw::put_header(&mut outer, 0x03, b"a");
            outer.extend_from_slice(&doc);
            crate::engine::raw::end_doc(&mut outer, start);
            doc = outer;
        }
        doc
    }
    let (x, y) = (nested(10_000, 1), nested(10_000, 2));
    let (x, y) = (
        bson::RawDocumentBuf::from_bytes(x).unwrap(),
        bson::RawDocumentBuf::from_bytes(y).unwrap(),
    );
    assert_eq!(compare_documents(&x, &y), Less);
    let (kx, ky) = (
        IdKey::from_value(RawBsonRef::Document(&x)),
        IdKey::from_value(RawBsonRef::Document(&y)),
    );
    assert!(kx < ky);
    assert_eq!(hash(&kx), hash(&kx.clone()));
    // And through the update appliers: refused, not a crash.
    let o = {
        let mut d = bson::RawDocumentBuf::new();
        d.append("$v", 2);
        d.append("diff", x.clone());
        d
    };
    let r = crate::engine::update::apply_oplog_update(&x, &o, Default::default(), &mut Vec::new());
    assert!(r.is_err(), "{r:?}");
}

/// The fast paths of ObjectId keys (one word compared, the bytes hashed without a
/// `Val`) give what the general path gives: the order of `cmp_val` and the hash of
/// `hash_val`, which keys of every other type still go through.
#[test]
fn object_id_keys_take_the_general_paths_order_and_hash() {
    use super::super::compare::{cmp_val, hash_val, Val};
    let oids: Vec<[u8; 12]> = [
        "000000000000000000000000",
        "000000000000000000000001",
        "00000001ffffffffffffffff",
        "65f0a1b2c3d4e5f601234567",
        "65f0a1b2c3d4e5f601234568",
        "80000000000000000000ff00",
        "ffffffffffffffffffffffff",
    ]
    .iter()
    .map(|h| ObjectId::from_str(h).unwrap().bytes())
    .collect();
    fn general(o: &[u8; 12]) -> Val<'_> {
        Val::from_raw(bson::spec::ElementType::ObjectId as u8, &o[..])
    }
    let key = |o: &[u8; 12]| IdKey::from_value(RawBsonRef::ObjectId(ObjectId::from_bytes(*o)));
    for a in &oids {
        let ka = key(a);
        let mut h = DefaultHasher::new();
        hash_val(&general(a), &mut h);
        assert_eq!(hash(&ka), h.finish(), "hash of {a:?}");
        for b in &oids {
            let kb = key(b);
            assert_eq!(
                ka.cmp(&kb),
                cmp_val(&general(a), &general(b)),
                "{a:?} against {b:?}"
            );
            assert_eq!(ka == kb, a == b);
        }
    }
}
