//! Classification of `o`, replacements, `_id` handling and upserts, through the
//! public [`apply`] / [`upsert`] API: `object_replace_executor_test.cpp` cases and
//! `write_ops` `parseFromOplogEntry` rules.

use bson::{rawdoc, RawDocumentBuf, Timestamp};

use super::super::error::{codes, UpdateError};
use super::super::update::{apply, classify, upsert, ApplyOptions, UpdateKind};
use super::super::IdKey;
use super::assert_bytes_eq;

fn run(pre: &RawDocumentBuf, o: &RawDocumentBuf) -> Result<RawDocumentBuf, UpdateError> {
    let mut out = vec![0xAB]; // something already in the buffer: output is appended
    apply(pre, classify(o)?, ApplyOptions::default(), &mut out)?;
    assert_eq!(out[0], 0xAB);
    Ok(RawDocumentBuf::from_bytes(out[1..].to_vec()).unwrap())
}

fn kind(o: &RawDocumentBuf) -> Result<&'static str, i32> {
    match classify(o) {
        Ok(UpdateKind::Replacement(_)) => Ok("replacement"),
        Ok(UpdateKind::Delta(_)) => Ok("delta"),
        Ok(UpdateKind::Modifier(_)) => Ok("modifier"),
        Err(e) => Err(e.code().unwrap_or(0)),
    }
}

#[test]
fn classification() {
    // write_ops.cpp parseFromOplogEntry (5.x+) and write_ops_parsers.cpp (4.7–5.x).
    assert_eq!(kind(&rawdoc! {"_id": 1, "a": 1}), Ok("replacement"));
    // _id first: a replacement may hold a user field named $v.
    assert_eq!(kind(&rawdoc! {"$v": 2, "_id": 1}), Ok("replacement"));
    assert_eq!(
        kind(&rawdoc! {"$v": 2, "diff": {"u": {"a": 1}}}),
        Ok("delta")
    );
    assert_eq!(
        kind(&rawdoc! {"$v": 2i64, "diff": {"u": {"a": 1}}}),
        Ok("delta")
    );
    assert_eq!(
        kind(&rawdoc! {"$v": 2.0, "diff": {"u": {"a": 1}}}),
        Ok("delta")
    );
    assert_eq!(
        kind(&rawdoc! {"$v": 2, "diff": 5}),
        Err(codes::OPLOG_UPDATE_DIFF_NOT_OBJECT)
    );
    assert_eq!(
        kind(&rawdoc! {"$v": 2}),
        Err(codes::OPLOG_UPDATE_DIFF_NOT_OBJECT)
    );
    assert_eq!(
        kind(&rawdoc! {"$v": "2", "diff": {}}),
        Err(codes::OPLOG_UPDATE_BAD_VERSION)
    );
    assert_eq!(
        kind(&rawdoc! {"$v": 3, "diff": {}}),
        Err(codes::OPLOG_UPDATE_UNKNOWN_VERSION)
    );
    assert_eq!(kind(&rawdoc! {"$v": 1, "$set": {"a": 1}}), Ok("modifier"));
    assert_eq!(kind(&rawdoc! {"$set": {"a": 1}}), Ok("modifier"));
    assert_eq!(kind(&rawdoc! {"$unset": {"a": 1}, "$v": 1}), Ok("modifier"));
    // isClassicalUpdateReplacement: first field not `$`, or an empty object.
    assert_eq!(kind(&rawdoc! {"a": 1}), Ok("replacement"));
    assert_eq!(kind(&rawdoc! {}), Ok("replacement"));
}

#[test]
fn replacement_cases() {
    // object_replace_executor_test.cpp
    let cases = [
        // Noop
        (
            rawdoc! {"_id": 0, "a": 1, "b": 2},
            rawdoc! {"_id": 0, "a": 1, "b": 2},
            rawdoc! {"_id": 0, "a": 1, "b": 2},
        ),
        // ShouldPreserveIdOfExistingDocumentIfIdNotSpecified
        (
            rawdoc! {"_id": 0, "c": 1, "d": 2},
            rawdoc! {"a": 1, "b": 2},
            rawdoc! {"_id": 0, "a": 1, "b": 2},
        ),
        // ShouldSucceedWhenImmutableIdIsNotModified
        (
            rawdoc! {"_id": 0, "c": 1, "d": 2},
            rawdoc! {"_id": 0, "a": 1, "b": 2},
            rawdoc! {"_id": 0, "a": 1, "b": 2},
        ),
        // IdFieldIsNotRemoved
        (
            rawdoc! {"_id": 0, "b": 1},
            rawdoc! {"a": 1},
            rawdoc! {"_id": 0, "a": 1},
        ),
        // ComplexDoc (with an _id)
        (
            rawdoc! {"_id": 0, "a": 1, "b": [0, 2, 2], "e": []},
            rawdoc! {"a": 1, "b": [0, 1, 2], "c": {"d": 1}},
            rawdoc! {"_id": 0, "a": 1, "b": [0, 1, 2], "c": {"d": 1}},
        ),
        // Oplog application does not check immutable fields: _id may change.
        (rawdoc! {"_id": 0}, rawdoc! {"_id": 1}, rawdoc! {"_id": 1}),
        // ensureIdFieldIsFirst
        (
            rawdoc! {"_id": 0, "a": 1},
            rawdoc! {"a": 2, "_id": 0, "b": 3},
            rawdoc! {"_id": 0, "a": 2, "b": 3},
        ),
    ];
    for (pre, o, expected) in cases {
        assert_bytes_eq(&run(&pre, &o).unwrap(), &expected);
    }
}

#[test]
fn zero_timestamps_stay_zero_from_the_oplog() {
    // object_replace_executor_test.cpp NonIdTimestampsModified applies to user
    // writes only: update_driver.cpp bypasses it when `_fromOplogApplication`.
    let zero = Timestamp {
        time: 0,
        increment: 0,
    };
    let post = run(
        &rawdoc! {"_id": 1},
        &rawdoc! {"_id": 1, "a": zero, "b": zero},
    )
    .unwrap();
    assert_bytes_eq(&post, &rawdoc! {"_id": 1, "a": zero, "b": zero});
}

#[test]
fn delta_keeps_id_and_moves_it_first() {
    // DeltaExecutor::applyUpdate -> applyReplacementUpdate(postImage, postImageHasId).
    let pre = rawdoc! {"_id": 7, "a": 1};
    assert_bytes_eq(
        &run(
            &pre,
            &rawdoc! {"$v": 2, "diff": {"d": {"_id": false}, "u": {"a": 2}}},
        )
        .unwrap(),
        &rawdoc! {"_id": 7, "a": 2},
    );
    assert_bytes_eq(
        &run(&pre, &rawdoc! {"$v": 2, "diff": {"i": {"_id": 8}}}).unwrap(),
        &rawdoc! {"_id": 8, "a": 1},
    );
}

#[test]
fn modifier_moves_id_first_and_refuses_removing_it() {
    let pre = rawdoc! {"a": 1, "_id": 3};
    assert_bytes_eq(
        &run(&pre, &rawdoc! {"$set": {"b": 2}}).unwrap(),
        &rawdoc! {"_id": 3, "a": 1, "b": 2},
    );
    let err = run(&pre, &rawdoc! {"$unset": {"_id": 1}}).unwrap_err();
    assert!(matches!(err, UpdateError::Unsupported { .. }), "{err:?}");
}

#[test]
fn upserts() {
    // UpsertStage / produceDocumentForUpsert: the seed is {_id: o2._id}.
    let id = IdKey::from_value(bson::RawBsonRef::Int32(5));
    let up = |o: &RawDocumentBuf| {
        let mut out = Vec::new();
        upsert(&id, classify(o).unwrap(), ApplyOptions::default(), &mut out)
            .map(|()| RawDocumentBuf::from_bytes(out).unwrap())
    };
    assert_bytes_eq(
        &up(&rawdoc! {"$set": {"a.b": 1, "c": 2}}).unwrap(),
        &rawdoc! {"_id": 5, "a": {"b": 1}, "c": 2},
    );
    assert_bytes_eq(
        &up(&rawdoc! {"$v": 2, "diff": {"u": {"x": 1}, "i": {"y": 2}, "sz": {"u": {"q": 1}}}})
            .unwrap(),
        &rawdoc! {"_id": 5, "x": 1, "y": 2},
    );
    assert_bytes_eq(
        &up(&rawdoc! {"_id": 5, "a": 1}).unwrap(),
        &rawdoc! {"_id": 5, "a": 1},
    );
    assert_bytes_eq(&up(&rawdoc! {"a": 1}).unwrap(), &rawdoc! {"_id": 5, "a": 1});
    assert_bytes_eq(
        &up(&rawdoc! {"$unset": {"a": 1}}).unwrap(),
        &rawdoc! {"_id": 5},
    );
}

#[test]
fn errors_leave_the_buffer_unchanged() {
    let mut out = vec![1, 2, 3];
    let o = rawdoc! {"$v": 2, "diff": {"u": {"a": 1}, "d": {"b": false}}};
    let err = apply(
        &rawdoc! {"_id": 1},
        classify(&o).unwrap(),
        ApplyOptions::default(),
        &mut out,
    );
    assert_eq!(
        err.unwrap_err().code(),
        Some(codes::DIFF_UNEXPECTED_SECTION)
    );
    assert_eq!(out, vec![1, 2, 3]);
}

#[test]
fn malformed_bytes_are_errors() {
    // Truncated element inside an otherwise framed document.
    let mut bad = rawdoc! {"_id": 1, "s": "abc"}.into_bytes();
    let n = bad.len();
    bad[n - 6] = 0x7E; // string length byte becomes huge
    let pre = RawDocumentBuf::from_bytes(bad).expect("framing is intact");
    let mut out = Vec::new();
    let r = apply(
        &pre,
        classify(&rawdoc! {"$set": {"a": 1}}).unwrap(),
        ApplyOptions::default(),
        &mut out,
    );
    assert!(matches!(r, Err(UpdateError::Malformed { .. })), "{r:?}");
    assert!(out.is_empty());
}
