//! `$v:2` diffs: `document_diff_applier_test.cpp`, `document_diff_serialization_test.cpp`
//! and `delta_executor_test.cpp` cases. The diffs the server tests build with
//! `diff_tree::*Node::serialize()` are written out as the documents that produces
//! (`d`, `u`, `i`, `b`, then sub-diffs; arrays `a`, `l`, ascending indices).

use bson::spec::BinarySubtype;
use bson::{rawdoc, Binary, RawBson};

use super::super::error::codes;
use super::{apply_diff, assert_bytes_eq, check_diff, diff_code};

fn bin(subtype: u8, bytes: &[u8]) -> RawBson {
    RawBson::Binary(Binary {
        subtype: BinarySubtype::from(subtype),
        bytes: bytes.to_vec(),
    })
}

const COLUMN: u8 = 7;
const GENERAL: u8 = 0;
const NEW_UUID: u8 = 4;

#[test]
fn delete_simple() {
    // document_diff_applier_test.cpp DeleteSimple
    check_diff(
        &rawdoc! {"f1": 1, "foo": 2, "f2": 3},
        &rawdoc! {"foo": 2},
        &rawdoc! {"d": {"f1": false, "f2": false, "f3": false}},
    );
}

#[test]
fn insert_simple() {
    // document_diff_applier_test.cpp InsertSimple: an insert of an existing field
    // moves it to the end.
    check_diff(
        &rawdoc! {"f1": 1, "foo": 2, "f2": 3},
        &rawdoc! {"foo": 2, "f2": 3, "f1": 1, "newField": 2},
        &rawdoc! {"i": {"f1": 1, "newField": 2}},
    );
}

#[test]
fn update_simple() {
    // document_diff_applier_test.cpp UpdateSimple
    check_diff(
        &rawdoc! {"f1": 0, "foo": 2, "f2": 3},
        &rawdoc! {"f1": 1, "foo": 2, "f2": 3, "newField": 2},
        &rawdoc! {"u": {"f1": 1, "newField": 2}},
    );
}

#[test]
fn binary_append_simple() {
    // document_diff_applier_test.cpp BinaryAppendSimple
    check_diff(
        &rawdoc! {"b1": bin(COLUMN, b"abc")},
        &rawdoc! {"b1": bin(COLUMN, b"abcdef")},
        &rawdoc! {"b": {"b1": {"o": 3, "d": bin(GENERAL, b"def")}}},
    );
}

#[test]
fn binary_overwrite_simple() {
    // document_diff_applier_test.cpp BinaryOverwriteSimple
    check_diff(
        &rawdoc! {"b1": bin(COLUMN, b"abc")},
        &rawdoc! {"b1": bin(COLUMN, b"abdef")},
        &rawdoc! {"b": {"b1": {"o": 2, "d": bin(GENERAL, b"def")}}},
    );
}

#[test]
fn binary_is_idempotent_multiple_with_shrink() {
    // document_diff_applier_test.cpp BinaryIsIdempotent, BinaryIsIdempotentMultipleWithShrink
    let append = rawdoc! {"b": {"b1": {"o": 3, "d": bin(GENERAL, b"def")}}};
    let shrink = rawdoc! {"b": {"b1": {"o": 1, "d": bin(GENERAL, b"x")}}};
    let first = rawdoc! {"b1": bin(COLUMN, b"abc")};
    let second = rawdoc! {"b1": bin(COLUMN, b"abcdef")};
    let third = rawdoc! {"b1": bin(COLUMN, b"ax")};
    check_diff(&first, &second, &append);
    check_diff(&second, &third, &shrink);
    check_diff(&third, &third, &append);
    check_diff(&third, &third, &shrink);
}

#[test]
fn binary_keeps_non_column_subtype() {
    // document_diff_applier_test.cpp BinaryAppendNonColumnSubtype,
    // BinaryOverwriteNonColumnSubtype, BinaryIsIdempotentNonColumnSubtype
    check_diff(
        &rawdoc! {"b1": bin(GENERAL, b"abc")},
        &rawdoc! {"b1": bin(GENERAL, b"abcdef")},
        &rawdoc! {"b": {"b1": {"o": 3, "d": bin(GENERAL, b"def")}}},
    );
    check_diff(
        &rawdoc! {"b1": bin(NEW_UUID, b"abc")},
        &rawdoc! {"b1": bin(NEW_UUID, b"abdef")},
        &rawdoc! {"b": {"b1": {"o": 2, "d": bin(GENERAL, b"def")}}},
    );
}

#[test]
fn binary_malformed() {
    // document_diff_applier_test.cpp BinaryMalformedDiffNotObject, BinaryNegativeDiffOffset,
    // BinaryMalformedDiffFieldNotBinData
    let pre = rawdoc! {"b1": bin(COLUMN, b"abc")};
    assert_eq!(
        diff_code(&pre, &rawdoc! {"b": {"b1": "not_an_object"}}),
        Some(codes::EXPECTED_OBJECT)
    );
    assert_eq!(
        diff_code(
            &pre,
            &rawdoc! {"b": {"b1": {"o": -1, "d": bin(GENERAL, b"def")}}}
        ),
        Some(codes::DIFF_BINARY_NEGATIVE_OFFSET)
    );
    assert_eq!(
        diff_code(&pre, &rawdoc! {"b": {"b1": {"o": 3, "d": "not_bindata"}}}),
        Some(codes::DIFF_BINARY_DATA_NOT_BINDATA)
    );
    // `getIntField` gives INT_MIN for a missing offset.
    assert_eq!(
        diff_code(&pre, &rawdoc! {"b": {"b1": {"d": bin(GENERAL, b"def")}}}),
        Some(codes::DIFF_BINARY_NEGATIVE_OFFSET)
    );
    // A binary diff for a field the document lacks is never looked at.
    check_diff(
        &rawdoc! {"x": 1},
        &rawdoc! {"x": 1},
        &rawdoc! {"b": {"b1": "not_an_object"}},
    );
}

#[test]
fn sub_obj_diff_simple() {
    // document_diff_applier_test.cpp SubObjDiffSimple
    check_diff(
        &rawdoc! {"obj": {"dField": 0, "iField": 0, "uField": 0}, "otherField": 0},
        &rawdoc! {"obj": {"uField": 2, "iField": 1}, "otherField": 0},
        &rawdoc! {"sobj": {"d": {"dField": false}, "u": {"uField": 2}, "i": {"iField": 1}}},
    );
}

#[test]
fn sub_array_diff_simple_with_append() {
    // document_diff_applier_test.cpp SubArrayDiffSimpleWithAppend
    check_diff(
        &rawdoc! {"arr": [999, 999, 999, 999]},
        &rawdoc! {"arr": [999, 1, 999, 999, 2]},
        &rawdoc! {"sarr": {"a": true, "u1": 1, "u4": 2}},
    );
}

#[test]
fn sub_array_diff_simple_with_truncate() {
    // document_diff_applier_test.cpp SubArrayDiffSimpleWithTruncate
    check_diff(
        &rawdoc! {"arr": [999, 999, 999, 999]},
        &rawdoc! {"arr": [999, 1, 999]},
        &rawdoc! {"sarr": {"a": true, "l": 3, "u1": 1}},
    );
}

#[test]
fn sub_array_diff_simple_with_null_padding() {
    // document_diff_applier_test.cpp SubArrayDiffSimpleWithNullPadding
    check_diff(
        &rawdoc! {"arr": [0]},
        &rawdoc! {"arr": [0, null, null, 1]},
        &rawdoc! {"sarr": {"a": true, "u3": 1}},
    );
}

#[test]
fn nested_sub_obj_update_scalar() {
    // document_diff_applier_test.cpp NestedSubObjUpdateScalar
    let diff = rawdoc! {"ssubObj": {"ssubObj": {"u": {"a": 1}}}};
    check_diff(
        &rawdoc! {"subObj": {"subObj": {"a": 0}}},
        &rawdoc! {"subObj": {"subObj": {"a": 1}}},
        &diff,
    );
    let other = rawdoc! {"someOtherField": 1};
    check_diff(&other, &other, &diff);
    check_diff(
        &rawdoc! {"dummyA": 1, "dummyB": 2, "subObj": "scalar!", "dummyC": 3, "dummyD": 4},
        &rawdoc! {"dummyA": 1, "dummyB": 2, "subObj": null, "dummyC": 3, "dummyD": 4},
        &diff,
    );
    check_diff(
        &rawdoc! {"dummyA": 1, "dummyB": 2, "subObj": {"subDummyA": 1, "subObj": "scalar!", "subDummyB": 2}, "dummyC": 3},
        &rawdoc! {"dummyA": 1, "dummyB": 2, "subObj": {"subDummyA": 1, "subObj": null, "subDummyB": 2}, "dummyC": 3},
        &diff,
    );
}

#[test]
fn update_array_of_objects_sub_diff() {
    // document_diff_applier_test.cpp UpdateArrayOfObjectsSubDiff
    let diff = rawdoc! {
        "d": {"dFieldA": false, "dFieldB": false},
        "u": {"uField": 999},
        "sarr": {"a": true, "s1": {"u": {"a": 1}}, "s2": {"u": {"b": 2}}, "s3": {"u": {"c": 3}}, "u4": {"x": 1}},
    };
    check_diff(
        &rawdoc! {"uField": 1, "dFieldA": 1, "arr": [null, {"a": 0}, {"b": 0}, {"c": 0}], "dFieldB": 1},
        &rawdoc! {"uField": 999, "arr": [null, {"a": 1}, {"b": 2}, {"c": 3}, {"x": 1}]},
        &diff,
    );
    check_diff(
        &rawdoc! {"uField": 1, "dFieldA": 1, "arr": [{"a": 0}, {"b": 0}, {"c": 0}, {}], "dFieldB": 1},
        &rawdoc! {"uField": 999, "arr": [{"a": 0}, {"b": 0, "a": 1}, {"c": 0, "b": 2}, {"c": 3}, {"x": 1}]},
        &diff,
    );
    let noop = rawdoc! {"arr": [null, {"a": 1}, {"b": 2}, {"c": 3}, {"x": 1}], "uField": 999};
    check_diff(&noop, &noop, &diff);
    check_diff(
        &rawdoc! {"arr": [0, 0, 0, 0, {"x": 2}], "uField": 1},
        &rawdoc! {"arr": [0, null, null, null, {"x": 1}], "uField": 999},
        &diff,
    );
    check_diff(
        &rawdoc! {"arr": [], "uField": 1},
        &rawdoc! {"arr": [null, null, null, null, {"x": 1}], "uField": 999},
        &diff,
    );
    check_diff(
        &rawdoc! {"arr": [0, {}, {}, {}, 4, 5, 6], "uField": 1},
        &rawdoc! {"arr": [0, {"a": 1}, {"b": 2}, {"c": 3}, {"x": 1}, 5, 6], "uField": 999},
        &diff,
    );
    check_diff(
        &rawdoc! {"dummyA": 1, "arr": {"foo": 1}, "dummyB": 1},
        &rawdoc! {"dummyA": 1, "arr": null, "dummyB": 1, "uField": 999},
        &diff,
    );
    check_diff(
        &rawdoc! {"dummyA": 1, "arr": 1, "dummyB": 1},
        &rawdoc! {"dummyA": 1, "arr": null, "dummyB": 1, "uField": 999},
        &diff,
    );
}

#[test]
fn update_array_of_objects_with_update_operation_non_contiguous() {
    // document_diff_applier_test.cpp UpdateArrayOfObjectsWithUpdateOperationNonContiguous
    let diff = rawdoc! {"sarr": {"a": true, "u1": 997, "u2": {"newVal": 998}, "u5": 999}};
    check_diff(
        &rawdoc! {"arr": [null, {}, {}, {}, {}, {}]},
        &rawdoc! {"arr": [null, 997, {"newVal": 998}, {}, {}, 999]},
        &diff,
    );
    check_diff(
        &rawdoc! {"arr": [{}, {}, {}, {}]},
        &rawdoc! {"arr": [{}, 997, {"newVal": 998}, {}, null, 999]},
        &diff,
    );
    let noop = rawdoc! {"arr": [{}, 997, {"newVal": 998}, {}, {}, 999]};
    check_diff(&noop, &noop, &diff);
    check_diff(
        &rawdoc! {"arr": [0, 1, 2, 3, 4, 5, 6]},
        &rawdoc! {"arr": [0, 997, {"newVal": 998}, 3, 4, 999, 6]},
        &diff,
    );
    check_diff(
        &rawdoc! {"arr": [0, 1, [], [], ["a", "b"], 5, 6]},
        &rawdoc! {"arr": [0, 997, {"newVal": 998}, [], ["a", "b"], 999, 6]},
        &diff,
    );
    check_diff(
        &rawdoc! {"arr": [0, {"x": 1}, 2, 3, {"x": 1}, 5, 6]},
        &rawdoc! {"arr": [0, 997, {"newVal": 998}, 3, {"x": 1}, 999, 6]},
        &diff,
    );
    check_diff(&rawdoc! {"arr": {"x": 1}}, &rawdoc! {"arr": null}, &diff);
    check_diff(&rawdoc! {"arr": "scalar!"}, &rawdoc! {"arr": null}, &diff);
    check_diff(
        &rawdoc! {"dummyA": 1, "arr": {"foo": 1}, "dummyB": 1},
        &rawdoc! {"dummyA": 1, "arr": null, "dummyB": 1},
        &diff,
    );
}

#[test]
fn duplicate_field_names() {
    // document_diff_applier_test.cpp DiffWithDuplicateFields, DuplicateFieldNames
    let empty = rawdoc! {};
    for diff in [
        rawdoc! {"d": {"dupField": false}, "u": {"dupField": "new value"}},
        rawdoc! {"d": {"a": false, "b": false, "a": false}},
        rawdoc! {"u": {"f1": 3, "f1": 4}},
        rawdoc! {"i": {"a": {}, "a": null}},
        rawdoc! {"sa": {"d": {"p": false}}, "sa": {"a": true, "d": {"p": false}}},
        rawdoc! {"d": {"b": false}, "i": {"a": {}, "b": null}},
        rawdoc! {"u": {"b": false}, "i": {"a": {}, "b": null}},
        rawdoc! {"u": {"a": {}}, "sa": {"d": {"k": false}}},
    ] {
        assert_eq!(
            diff_code(&empty, &diff),
            Some(codes::DIFF_DUPLICATE_FIELD),
            "{diff:?}"
        );
    }
}

#[test]
fn empty_diff_and_array_diff_at_top() {
    // document_diff_applier_test.cpp EmptyDiff, ArrayDiffAtTop
    let empty = rawdoc! {};
    assert_eq!(diff_code(&empty, &rawdoc! {}), Some(codes::DIFF_EMPTY));
    assert_eq!(
        diff_code(&empty, &rawdoc! {"a": true, "l": 5, "d0": false}),
        Some(codes::DIFF_UNEXPECTED_SECTION)
    );
}

#[test]
fn unexpected_fields_in_obj_diff() {
    // document_diff_serialization_test.cpp UnexpectedFieldsInObjDiff
    let empty = rawdoc! {};
    let cases = [
        (
            rawdoc! {"d": {"f": false}, "": {}},
            codes::DIFF_EMPTY_SECTION_NAME,
        ),
        (rawdoc! {"": {}}, codes::DIFF_EMPTY_SECTION_NAME),
        (rawdoc! {"d": {"f": false}, "s": {}}, codes::DIFF_EMPTY),
        (rawdoc! {"sa": {}}, codes::DIFF_EMPTY),
        (rawdoc! {"p": 1}, codes::DIFF_UNEXPECTED_SECTION),
        (rawdoc! {"u": true}, codes::DIFF_SECTION_WRONG_TYPE),
        (rawdoc! {"d": []}, codes::DIFF_SECTION_WRONG_TYPE),
        (rawdoc! {"i": null}, codes::DIFF_SECTION_WRONG_TYPE),
        (rawdoc! {"i": {}, "d": {}}, codes::DIFF_UNEXPECTED_SECTION),
        (
            rawdoc! {"s": {"i": {}}, "i": {}},
            codes::DIFF_FIELD_AFTER_SUBDIFFS,
        ),
        (
            rawdoc! {"sa": {"u": {}}, "d": {"p": false}},
            codes::DIFF_FIELD_AFTER_SUBDIFFS,
        ),
        (
            rawdoc! {"sa": {"u": {}}, "sb": {"u": {}}, "i": {}},
            codes::DIFF_FIELD_AFTER_SUBDIFFS,
        ),
        (
            rawdoc! {"sa": {"u": {}}, "p": {}},
            codes::DIFF_FIELD_AFTER_SUBDIFFS,
        ),
    ];
    for (diff, code) in cases {
        assert_eq!(diff_code(&empty, &diff), Some(code), "{diff:?}");
    }
    // An empty deletes object is valid.
    let post = apply_diff(&rawdoc! {"a": 1}, &rawdoc! {"d": {}}).unwrap();
    assert_bytes_eq(&post, &rawdoc! {"a": 1});
}

#[test]
fn unexpected_fields_in_array_diff() {
    // document_diff_serialization_test.cpp UnexpectedFieldsInArrayDiff
    let pre = rawdoc! {"arr": []};
    let cases = [
        (
            rawdoc! {"sarr": {"a": true, "3u": 1}},
            codes::DIFF_ARRAY_BAD_INDEX,
        ),
        (
            rawdoc! {"sarr": {"a": true, "u": true}},
            codes::DIFF_ARRAY_NAME_TOO_SHORT,
        ),
        (
            rawdoc! {"sarr": {"a": true, "5": {}}},
            codes::DIFF_ARRAY_NAME_TOO_SHORT,
        ),
        (
            rawdoc! {"sarr": {"a": false, "u3": 4}},
            codes::DIFF_ARRAY_HEADER_FALSE,
        ),
        (
            rawdoc! {"sarr": {"a": 1, "u3": 4}},
            codes::DIFF_ARRAY_HEADER_NOT_BOOL,
        ),
        (
            rawdoc! {"sarr": {"a": true, "s3": 4}},
            codes::DIFF_ARRAY_SUBDIFF_NOT_OBJECT,
        ),
        (
            rawdoc! {"sarr": {"a": true, "d3": 4}},
            codes::DIFF_ARRAY_BAD_PREFIX,
        ),
    ];
    for (diff, code) in cases {
        assert_eq!(diff_code(&pre, &diff), Some(code), "{diff:?}");
    }
}

#[test]
fn array_header_and_resize_are_checked_when_the_sub_diff_is_read() {
    // ArrayDiffReader's constructor runs while the parent's table is built
    // (`buildObjDiffTables` -> `nextSubDiff` -> `getReader`), even for a field the
    // document lacks; its entries are read only while the array is walked.
    let pre = rawdoc! {"x": 1};
    assert_eq!(
        diff_code(&pre, &rawdoc! {"sarr": {"a": true, "l": "3"}}),
        Some(codes::DIFF_SECTION_WRONG_TYPE)
    );
    assert_eq!(
        diff_code(&pre, &rawdoc! {"sarr": {"a": false}}),
        Some(codes::DIFF_ARRAY_HEADER_FALSE)
    );
    check_diff(&pre, &pre, &rawdoc! {"sarr": {"a": true, "d3": 4}});
    // A malformed sub-diff nested below a missing field is never read either.
    check_diff(&pre, &pre, &rawdoc! {"sarr": {"u": {"p": 1, "p": 2}}});
}

#[test]
fn resize_beyond_modifications_and_index_past_resize() {
    // document_diff_applier.cpp applyDiffToArray: `l` longer than the array pads with
    // nulls; a modification at or beyond `l` is 12495901 (newest servers).
    check_diff(
        &rawdoc! {"arr": [1]},
        &rawdoc! {"arr": [1, null, 7, null]},
        &rawdoc! {"sarr": {"a": true, "l": 4, "u2": 7}},
    );
    assert_eq!(
        diff_code(
            &rawdoc! {"arr": [1, 2, 3]},
            &rawdoc! {"sarr": {"a": true, "l": 2, "u2": 7}}
        ),
        Some(codes::DIFF_INDEX_BEYOND_RESIZE)
    );
    // A sub-diff for an index past the end appends null.
    check_diff(
        &rawdoc! {"arr": [1]},
        &rawdoc! {"arr": [1, null]},
        &rawdoc! {"sarr": {"a": true, "s1": {"u": {"x": 1}}}},
    );
}

#[test]
fn unbounded_array_padding_is_refused() {
    // Non-ascending indices and a negative `l` make the server pad without bound
    // until its 64 MB buffer limit (13548).
    let pre = rawdoc! {"arr": [1, 2, 3]};
    assert_eq!(
        diff_code(&pre, &rawdoc! {"sarr": {"a": true, "u2": 7, "u1": 8}}),
        Some(codes::BUFFER_PAST_64MB)
    );
    assert_eq!(
        diff_code(&pre, &rawdoc! {"sarr": {"a": true, "l": -1}}),
        Some(codes::BUFFER_PAST_64MB)
    );
    assert_eq!(
        diff_code(&pre, &rawdoc! {"sarr": {"a": true, "u4000000000": 1}}),
        Some(codes::BUFFER_PAST_64MB)
    );
    assert_eq!(
        diff_code(&pre, &rawdoc! {"sarr": {"a": true, "u3000000": 1}}),
        Some(codes::BSON_OBJECT_TOO_LARGE)
    );
}

#[test]
fn delta_executor_cases() {
    // delta_executor_test.cpp Delete, Update, Insert, InsertNumericFieldNames*,
    // ArraysInIndexPath (post-images; the index bookkeeping is not modelled).
    let pre = rawdoc! {"f1": {"a": {"b": {"c": 1}, "c": 1}}};
    let cases = [
        (
            &pre,
            rawdoc! {"d": {"f1": false, "f2": false, "f3": false}},
            rawdoc! {},
        ),
        (
            &pre,
            rawdoc! {"sf1": {"sa": {"d": {"p": false, "c": false, "b": false}}}},
            rawdoc! {"f1": {"a": {}}},
        ),
        (
            &pre,
            rawdoc! {"sf1": {"sa": {"sb": {"d": {"c": false}}}}},
            rawdoc! {"f1": {"a": {"b": {}, "c": 1}}},
        ),
        (
            &pre,
            rawdoc! {"sf1": {"sa": {"d": {"c": false}}}},
            rawdoc! {"f1": {"a": {"b": {"c": 1}}}},
        ),
        (
            &pre,
            rawdoc! {"u": {"f1": false, "f2": false, "f3": false}},
            rawdoc! {"f1": false, "f2": false, "f3": false},
        ),
        (
            &pre,
            rawdoc! {"sf1": {"sa": {"u": {"p": false, "c": false, "b": false}}}},
            rawdoc! {"f1": {"a": {"b": false, "c": false, "p": false}}},
        ),
        (
            &pre,
            rawdoc! {"sf1": {"sa": {"sb": {"u": {"c": false}}}}},
            rawdoc! {"f1": {"a": {"b": {"c": false}, "c": 1}}},
        ),
        (
            &pre,
            rawdoc! {"sf1": {"sa": {"u": {"c": false}}}},
            rawdoc! {"f1": {"a": {"b": {"c": 1}, "c": false}}},
        ),
    ];
    for (pre, diff, expected) in cases {
        assert_bytes_eq(&apply_diff(pre, &diff).unwrap(), &expected);
    }
    let inserts = [
        (
            rawdoc! {},
            rawdoc! {"i": {"f1": false, "f2": false, "f3": false}},
            rawdoc! {"f1": false, "f2": false, "f3": false},
        ),
        (
            rawdoc! {"f1": {"a": {"c": true}}},
            rawdoc! {"sf1": {"sa": {"i": {"p": false, "c": false, "b": false}}}},
            rawdoc! {"f1": {"a": {"p": false, "c": false, "b": false}}},
        ),
        (
            rawdoc! {"f1": {"a": {"b": {"c": {"e": 1}}}}},
            rawdoc! {"sf1": {"sa": {"sb": {"sc": {"i": {"d": 2}}}}}},
            rawdoc! {"f1": {"a": {"b": {"c": {"e": 1, "d": 2}}}}},
        ),
        (
            rawdoc! {"f1": {"a": {"b": {"c": 1}}}},
            rawdoc! {"sf1": {"sa": {"i": {"c": 2}}}},
            rawdoc! {"f1": {"a": {"b": {"c": 1}, "c": 2}}},
        ),
        (
            rawdoc! {},
            rawdoc! {"i": {"0": false, "1": false, "2": false}},
            rawdoc! {"0": false, "1": false, "2": false},
        ),
        (
            rawdoc! {"a": {}},
            rawdoc! {"sa": {"i": {"0": false, "2": false}}},
            rawdoc! {"a": {"0": false, "2": false}},
        ),
        (
            rawdoc! {"f1": [{"a": {"b": {"c": 1}, "c": 1}}, 1]},
            rawdoc! {"sf1": {"a": true, "l": 1}},
            rawdoc! {"f1": [{"a": {"b": {"c": 1}, "c": 1}}]},
        ),
        (
            rawdoc! {"f1": [{"a": {"b": {"c": 1}, "c": 1}}, 1]},
            rawdoc! {"sf1": {"a": true, "s0": {"sa": {"sb": {"i": {"d": 1}}}}}},
            rawdoc! {"f1": [{"a": {"b": {"c": 1, "d": 1}, "c": 1}}, 1]},
        ),
        (
            rawdoc! {"f1": [{"a": {"b": {"c": 1}, "c": 1}}, 1]},
            rawdoc! {"sf1": {"a": true, "u2": {"b": 1}}},
            rawdoc! {"f1": [{"a": {"b": {"c": 1}, "c": 1}}, 1, {"b": 1}]},
        ),
    ];
    for (pre, diff, expected) in inserts {
        assert_bytes_eq(&apply_diff(&pre, &diff).unwrap(), &expected);
    }
}

#[test]
fn sections_are_recognised_by_their_first_character() {
    // DocumentDiffReader looks at `fieldName[0]` only.
    check_diff(
        &rawdoc! {"a": 1, "b": 2},
        &rawdoc! {"b": 2, "c": 3},
        &rawdoc! {"delete": {"a": false}, "insert": {"c": 3}},
    );
}

#[test]
fn array_elements_are_renumbered() {
    // BSONArrayBuilder names elements by position, whatever the pre-image's names.
    let pre = bson::RawDocumentBuf::from_bytes({
        let mut arr = bson::RawDocumentBuf::new();
        arr.append("7", 1);
        arr.append("9", 2);
        let mut d = Vec::new();
        let start = crate::engine::raw::begin_doc(&mut d);
        crate::engine::raw::put_header(&mut d, 0x04, b"arr");
        d.extend_from_slice(arr.as_bytes());
        crate::engine::raw::end_doc(&mut d, start);
        d
    })
    .unwrap();
    check_diff(
        &pre,
        &rawdoc! {"arr": [1, 5]},
        &rawdoc! {"sarr": {"a": true, "u1": 5}},
    );
}
