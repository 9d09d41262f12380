//! Property tests: the appliers never panic on arbitrary input; a diff computed the
//! way a primary computes it (`document_diff_test.cpp` `RandomizedDocumentBuilderTest`)
//! turns the first document into the second byte for byte, and re-applying it changes
//! nothing; the order is a consistent total order whose equality agrees with `Hash`.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use bson::spec::BinarySubtype;
use bson::{Binary, Decimal128, RawArrayBuf, RawBson, RawDocumentBuf};
use proptest::prelude::*;

use super::super::compare::{compare_values, IdKey};
use super::super::update::{apply, classify, ApplyOptions, FieldOrder, UpdateKind};
use super::diff_calc::compute_diff;
use super::{apply_diff, apply_modifier_with, assert_bytes_eq};

/// Field names from a small pool, so documents share fields; includes names that look
/// like diff sections and array indices.
fn key() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "a", "b", "c", "d", "u", "i", "s", "sa", "l", "0", "1", "10", "02", "x.y", "$v", "",
    ])
    .prop_map(str::to_string)
}

fn scalar() -> impl Strategy<Value = RawBson> {
    prop_oneof![
        (0i32..3).prop_map(RawBson::Int32),
        any::<i32>().prop_map(RawBson::Int32),
        (0i64..3).prop_map(RawBson::Int64),
        prop::sample::select(vec![0.0, -0.0, 1.0, 0.5, f64::NAN, f64::INFINITY])
            .prop_map(RawBson::Double),
        any::<bool>().prop_map(RawBson::Boolean),
        "[ab]{0,2}".prop_map(RawBson::String),
        Just(RawBson::Null),
        prop::collection::vec(any::<u8>(), 0..4).prop_map(|b| RawBson::Binary(Binary {
            subtype: BinarySubtype::Generic,
            bytes: b
        })),
    ]
}

fn value() -> impl Strategy<Value = RawBson> {
    scalar().prop_recursive(4, 32, 5, |inner| {
        prop_oneof![
            prop::collection::vec((key(), inner.clone()), 0..5)
                .prop_map(|kv| RawBson::Document(unique_doc(kv))),
            prop::collection::vec(inner, 0..5).prop_map(|vs| {
                let mut a = RawArrayBuf::new();
                for v in vs {
                    a.push(v);
                }
                RawBson::Array(a)
            }),
        ]
    })
}

fn unique_doc(kv: Vec<(String, RawBson)>) -> RawDocumentBuf {
    let mut seen = std::collections::HashSet::new();
    let mut d = RawDocumentBuf::new();
    for (k, v) in kv {
        if seen.insert(k.clone()) {
            d.append(k, v);
        }
    }
    d
}

fn document() -> impl Strategy<Value = RawDocumentBuf> {
    prop::collection::vec((key(), value()), 0..7).prop_map(unique_doc)
}

/// Documents that may hold repeated names and any value, as diffs or updates.
fn anything() -> impl Strategy<Value = RawDocumentBuf> {
    prop::collection::vec((key(), value()), 0..7).prop_map(|kv| {
        let mut d = RawDocumentBuf::new();
        for (k, v) in kv {
            d.append(k, v);
        }
        d
    })
}

fn hash(k: &IdKey) -> u64 {
    let mut h = DefaultHasher::new();
    k.hash(&mut h);
    h.finish()
}

/// The `_id`s [`IdKey`] compares without the general path (ObjectIds, 32/64-bit
/// integers, strings), mixed with numbers and symbols that take it.
fn common_id() -> impl Strategy<Value = RawBson> {
    prop_oneof![
        number(),
        any::<[u8; 12]>().prop_map(|b| RawBson::ObjectId(bson::oid::ObjectId::from_bytes(b))),
        prop::sample::select(vec![[0u8; 12], [0xff; 12], [1; 12]])
            .prop_map(|b| RawBson::ObjectId(bson::oid::ObjectId::from_bytes(b))),
        "[a-c\\x00é]{0,6}".prop_map(RawBson::String),
        ".{0,12}".prop_map(RawBson::String),
        "[a-c]{0,3}".prop_map(RawBson::Symbol),
    ]
}

fn number() -> impl Strategy<Value = RawBson> {
    prop_oneof![
        (-3i32..3).prop_map(RawBson::Int32),
        any::<i32>().prop_map(RawBson::Int32),
        (-3i64..3).prop_map(RawBson::Int64),
        any::<i64>().prop_map(RawBson::Int64),
        prop::sample::select(vec![
            -1.5,
            -1.0,
            -0.0,
            0.0,
            0.5,
            1.0,
            2.0,
            1e20,
            9.223372036854776e18,
            f64::NAN,
            f64::INFINITY,
            -f64::INFINITY,
            f64::MIN_POSITIVE
        ])
        .prop_map(RawBson::Double),
        any::<f64>().prop_map(RawBson::Double),
        (-30i64..30, -3i32..3).prop_map(|(c, e)| RawBson::Decimal128(
            format!("{c}E{e}").parse::<Decimal128>().unwrap()
        )),
        (any::<i64>(), -40i32..40).prop_map(|(c, e)| RawBson::Decimal128(
            format!("{c}E{e}").parse::<Decimal128>().unwrap()
        )),
        prop::sample::select(vec![
            "NaN",
            "Infinity",
            "-Infinity",
            "0.5",
            "0.1",
            "9223372036854775808",
            "-0"
        ])
        .prop_map(|s| RawBson::Decimal128(s.parse::<Decimal128>().unwrap())),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn computed_diff_turns_pre_into_post(pre in document(), post in document(), bits in any::<u64>()) {
        let mut n = 0u32;
        let mut prefer_update = || { n += 1; bits >> (n % 64) & 1 == 1 };
        let diff = compute_diff(&pre, &post, &mut prefer_update);
        if diff.as_bytes().len() <= 5 {
            // Identical documents: the server logs no update.
            prop_assert_eq!(pre.as_bytes(), post.as_bytes());
        } else {
            let once = apply_diff(&pre, &diff).unwrap();
            assert_bytes_eq(&once, &post);
            // Re-applying an update is idempotent (checkDiff's second application).
            let twice = apply_diff(&once, &diff).unwrap();
            assert_bytes_eq(&twice, &post);
        }
    }

    #[test]
    fn random_diffs_never_panic(pre in document(), diff in anything()) {
        let _ = apply_diff(&pre, &diff);
        let mut o = RawDocumentBuf::new();
        o.append("$v", 2);
        o.append("diff", diff);
        let mut doc = RawDocumentBuf::new();
        doc.append("_id", 1);
        for e in pre.iter() {
            let (k, v) = e.unwrap();
            if k != "_id" {
                doc.append(k, v.to_raw_bson());
            }
        }
        if let Ok(kind) = classify(&o) {
            let mut out = Vec::new();
            let _ = apply(&doc, kind, ApplyOptions::default(), &mut out);
        }
    }

    #[test]
    fn random_modifiers_never_panic(pre in document(), set in anything(), unset in anything(), numeric in any::<bool>()) {
        let mut o = RawDocumentBuf::new();
        o.append("$set", set);
        o.append("$unset", unset);
        let order = if numeric { FieldOrder::NumericAware } else { FieldOrder::Lexicographic };
        if let Ok(post) = apply_modifier_with(&pre, &o, order) {
            // Every output is a well-formed document.
            prop_assert!(post.iter().all(|e| e.is_ok()));
        }
    }

    #[test]
    fn corrupted_bytes_never_panic(pre in document(), diff in anything(), flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4)) {
        let mut bytes = diff.into_bytes();
        for (at, b) in flips {
            let i = at.index(bytes.len());
            bytes[i] = b;
        }
        if let Ok(diff) = RawDocumentBuf::from_bytes(bytes.clone()) {
            let _ = apply_diff(&pre, &diff);
            let _ = apply_modifier_with(&pre, &diff, FieldOrder::NumericAware);
            if let Ok(kind) = classify(&diff) {
                let mut out = Vec::new();
                let _ = apply(&pre, kind, ApplyOptions::default(), &mut out);
                if let UpdateKind::Replacement(_) = kind {}
            }
        }
        // The corrupted bytes as a current document.
        if let Ok(cur) = RawDocumentBuf::from_bytes(bytes) {
            let o = bson::rawdoc! {"$set": {"a.b": 1}, "$unset": {"c": 1}};
            let mut out = Vec::new();
            let _ = apply(&cur, classify(&o).unwrap(), ApplyOptions::default(), &mut out);
            let _ = IdKey::from_document_id(&cur);
        }
    }

    #[test]
    fn order_is_total_and_hash_agrees(a in number(), b in number(), c in number()) {
        let ab = compare_values(a.as_raw_bson_ref(), b.as_raw_bson_ref());
        prop_assert_eq!(ab, compare_values(b.as_raw_bson_ref(), a.as_raw_bson_ref()).reverse());
        let bc = compare_values(b.as_raw_bson_ref(), c.as_raw_bson_ref());
        let ac = compare_values(a.as_raw_bson_ref(), c.as_raw_bson_ref());
        if ab != std::cmp::Ordering::Greater && bc != std::cmp::Ordering::Greater {
            prop_assert!(ac != std::cmp::Ordering::Greater, "{:?} <= {:?} <= {:?}", a, b, c);
        }
        let (ka, kb) = (IdKey::from_value(a.as_raw_bson_ref()), IdKey::from_value(b.as_raw_bson_ref()));
        if ab == std::cmp::Ordering::Equal {
            prop_assert_eq!(hash(&ka), hash(&kb), "{:?} == {:?}", a, b);
        }
        prop_assert_eq!(ka.cmp(&kb), ab);
    }

    /// The fast paths of `IdKey`'s order (and of the on-disk store's comparator)
    /// agree with the general comparison of values.
    #[test]
    fn common_ids_order_as_values_do(a in common_id(), b in common_id()) {
        let (ka, kb) = (IdKey::from_value(a.as_raw_bson_ref()), IdKey::from_value(b.as_raw_bson_ref()));
        let ab = compare_values(a.as_raw_bson_ref(), b.as_raw_bson_ref());
        prop_assert_eq!(ka.cmp(&kb), ab, "{:?} vs {:?}", a, b);
        prop_assert_eq!(
            super::super::compare::id_key::cmp_key_bytes(ka.document_bytes(), kb.document_bytes()),
            ab
        );
    }

    #[test]
    fn documents_order_like_values(a in document(), b in document()) {
        let (ka, kb) = (
            IdKey::from_value(bson::RawBsonRef::Document(&a)),
            IdKey::from_value(bson::RawBsonRef::Document(&b)),
        );
        let ab = ka.cmp(&kb);
        prop_assert_eq!(ab, kb.cmp(&ka).reverse());
        if ab == std::cmp::Ordering::Equal {
            prop_assert_eq!(hash(&ka), hash(&kb));
        }
    }
}
