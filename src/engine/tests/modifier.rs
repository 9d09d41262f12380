//! `$set` / `$unset` with oplog-application semantics: `set_node_test.cpp`,
//! `unset_node_test.cpp`, `update_object_node_test.cpp` cases. The server's node
//! tests start from a pre-computed `pathTaken`/`pathToCreate`; here the same update
//! runs from the root of the same document, which resolves to those paths.

use bson::rawdoc;

use super::super::error::codes;
use super::super::update::modifier::cmp_components;
use super::super::update::FieldOrder;
use super::{apply_modifier, apply_modifier_with, assert_bytes_eq, check_modifier};

#[test]
fn set_node_cases() {
    // set_node_test.cpp, named per case.
    let cases = [
        // ApplyNoOp
        (
            rawdoc! {"a": 5},
            rawdoc! {"$set": {"a": 5}},
            rawdoc! {"a": 5},
        ),
        // ApplyEmptyPathToCreate
        (
            rawdoc! {"a": 5},
            rawdoc! {"$set": {"a": 6}},
            rawdoc! {"a": 6},
        ),
        // ApplyCreatePath
        (
            rawdoc! {"a": {"d": 5}},
            rawdoc! {"$set": {"a.b.c": 6}},
            rawdoc! {"a": {"d": 5, "b": {"c": 6}}},
        ),
        // ApplyCreatePathFromRoot
        (
            rawdoc! {"c": 5},
            rawdoc! {"$set": {"a.b": 6}},
            rawdoc! {"c": 5, "a": {"b": 6}},
        ),
        // ApplyNonViablePathToCreateFromReplicationIsNoOp
        (
            rawdoc! {"a": 5},
            rawdoc! {"$set": {"a.b": 5}},
            rawdoc! {"a": 5},
        ),
        // TypeChangeIsNotANoop
        (
            rawdoc! {"a": 2i32},
            rawdoc! {"$set": {"a": 2i64}},
            rawdoc! {"a": 2i64},
        ),
        // ApplyEmptyDocument
        (rawdoc! {}, rawdoc! {"$set": {"a": 2}}, rawdoc! {"a": 2}),
        // ApplyOverridePath
        (
            rawdoc! {"a": {"b": 1}},
            rawdoc! {"$set": {"a": 2}},
            rawdoc! {"a": 2},
        ),
        // ApplyChangeType
        (
            rawdoc! {"a": "str"},
            rawdoc! {"$set": {"a": 2}},
            rawdoc! {"a": 2},
        ),
        // ApplyNewPath
        (
            rawdoc! {"b": 1},
            rawdoc! {"$set": {"a": 2}},
            rawdoc! {"b": 1, "a": 2},
        ),
        // ApplyNoOpDottedPath
        (
            rawdoc! {"a": {"b": 2}},
            rawdoc! {"$set": {"a.b": 2}},
            rawdoc! {"a": {"b": 2}},
        ),
        // TypeChangeOnDottedPathIsNotANoOp
        (
            rawdoc! {"a": {"b": 2i64}},
            rawdoc! {"$set": {"a.b": 2i32}},
            rawdoc! {"a": {"b": 2i32}},
        ),
        // ApplyPathNotViable, from replication: skipped
        (
            rawdoc! {"a": 1},
            rawdoc! {"$set": {"a.b": 2}},
            rawdoc! {"a": 1},
        ),
        // ApplyPathNotViableArrray, from replication: skipped
        (
            rawdoc! {"a": [{"b": 1}]},
            rawdoc! {"$set": {"a.b": 2}},
            rawdoc! {"a": [{"b": 1}]},
        ),
        // ApplyInPlaceDottedPath
        (
            rawdoc! {"a": {"b": 1}},
            rawdoc! {"$set": {"a.b": 2}},
            rawdoc! {"a": {"b": 2}},
        ),
        // ApplyChangeTypeDottedPath
        (
            rawdoc! {"a": {"b": "str"}},
            rawdoc! {"$set": {"a.b": 2}},
            rawdoc! {"a": {"b": 2}},
        ),
        // ApplyChangePath
        (
            rawdoc! {"a": {"b": {"c": 1}}},
            rawdoc! {"$set": {"a.b": 2}},
            rawdoc! {"a": {"b": 2}},
        ),
        // ApplyExtendPath
        (
            rawdoc! {"a": {"c": 1}},
            rawdoc! {"$set": {"a.b": 2}},
            rawdoc! {"a": {"c": 1, "b": 2}},
        ),
        // ApplyNewDottedPath
        (
            rawdoc! {"c": 1},
            rawdoc! {"$set": {"a.b": 2}},
            rawdoc! {"c": 1, "a": {"b": 2}},
        ),
        // ApplyEmptyDoc
        (
            rawdoc! {},
            rawdoc! {"$set": {"a.b": 2}},
            rawdoc! {"a": {"b": 2}},
        ),
        // ApplyFieldWithDot
        (
            rawdoc! {"a.b": 4},
            rawdoc! {"$set": {"a.b": 2}},
            rawdoc! {"a.b": 4, "a": {"b": 2}},
        ),
        // ApplyNoOpArrayIndex
        (
            rawdoc! {"a": [{"b": 0}, {"b": 1}, {"b": 2}]},
            rawdoc! {"$set": {"a.2.b": 2}},
            rawdoc! {"a": [{"b": 0}, {"b": 1}, {"b": 2}]},
        ),
        // TypeChangeInArrayIsNotANoOp
        (
            rawdoc! {"a": [{"b": 0}, {"b": 1}, {"b": 2.0}]},
            rawdoc! {"$set": {"a.2.b": 2i32}},
            rawdoc! {"a": [{"b": 0}, {"b": 1}, {"b": 2i32}]},
        ),
        // ApplyNonViablePath, from replication: skipped
        (
            rawdoc! {"a": 0},
            rawdoc! {"$set": {"a.2.b": 2}},
            rawdoc! {"a": 0},
        ),
        // ApplyInPlaceArrayIndex
        (
            rawdoc! {"a": [{"b": 0}, {"b": 1}, {"b": 1}]},
            rawdoc! {"$set": {"a.2.b": 2}},
            rawdoc! {"a": [{"b": 0}, {"b": 1}, {"b": 2}]},
        ),
        // ApplyNormalArray
        (
            rawdoc! {"a": [{"b": 0}, {"b": 1}]},
            rawdoc! {"$set": {"a.2.b": 2}},
            rawdoc! {"a": [{"b": 0}, {"b": 1}, {"b": 2}]},
        ),
        // ApplyPaddingArray
        (
            rawdoc! {"a": [{"b": 0}]},
            rawdoc! {"$set": {"a.2.b": 2}},
            rawdoc! {"a": [{"b": 0}, null, {"b": 2}]},
        ),
        // ApplyNumericObject
        (
            rawdoc! {"a": {"b": 0}},
            rawdoc! {"$set": {"a.2.b": 2}},
            rawdoc! {"a": {"b": 0, "2": {"b": 2}}},
        ),
        // ApplyNumericField
        (
            rawdoc! {"a": {"2": {"b": 1}}},
            rawdoc! {"$set": {"a.2.b": 2}},
            rawdoc! {"a": {"2": {"b": 2}}},
        ),
        // ApplyExtendNumericField
        (
            rawdoc! {"a": {"2": {"c": 1}}},
            rawdoc! {"$set": {"a.2.b": 2}},
            rawdoc! {"a": {"2": {"c": 1, "b": 2}}},
        ),
        // ApplyEmptyObject
        (
            rawdoc! {"a": {}},
            rawdoc! {"$set": {"a.2.b": 2}},
            rawdoc! {"a": {"2": {"b": 2}}},
        ),
        // ApplyEmptyArray
        (
            rawdoc! {"a": []},
            rawdoc! {"$set": {"a.2.b": 2}},
            rawdoc! {"a": [null, null, {"b": 2}]},
        ),
        // ApplyNoOpComplex
        (
            rawdoc! {"a": [{"b": {"c": 0, "d": 0}}, {"b": {"c": 1, "d": 1}}]},
            rawdoc! {"$set": {"a.1.b": {"c": 1, "d": 1}}},
            rawdoc! {"a": [{"b": {"c": 0, "d": 0}}, {"b": {"c": 1, "d": 1}}]},
        ),
        // ApplySameStructure
        (
            rawdoc! {"a": [{"b": {"c": 0, "d": 0}}, {"b": {"c": 1, "xxx": 1}}]},
            rawdoc! {"$set": {"a.1.b": {"c": 1, "d": 1}}},
            rawdoc! {"a": [{"b": {"c": 0, "d": 0}}, {"b": {"c": 1, "d": 1}}]},
        ),
        // SingleFieldFromReplication
        (
            rawdoc! {"_id": 1, "a": 1},
            rawdoc! {"$set": {"a.1.b": 1}},
            rawdoc! {"_id": 1, "a": 1},
        ),
        // SingleFieldNoIdFromReplication
        (
            rawdoc! {"a": 1},
            rawdoc! {"$set": {"a.1.b": 1}},
            rawdoc! {"a": 1},
        ),
        // NestedFieldFromReplication
        (
            rawdoc! {"_id": 1, "a": {"a": 1}},
            rawdoc! {"$set": {"a.a.1.b": 1}},
            rawdoc! {"_id": 1, "a": {"a": 1}},
        ),
        // DoubleNestedFieldFromReplication
        (
            rawdoc! {"_id": 1, "a": {"b": {"c": 1}}},
            rawdoc! {"$set": {"a.b.c.d": 2}},
            rawdoc! {"_id": 1, "a": {"b": {"c": 1}}},
        ),
        // ReplayArrayFieldNotAppendedIntermediateFromReplication
        (
            rawdoc! {"_id": 0, "a": [1, {"b": [1]}]},
            rawdoc! {"$set": {"a.0.b": [0, 2]}},
            rawdoc! {"_id": 0, "a": [1, {"b": [1]}]},
        ),
        // Set6, Set6FromRepl
        (
            rawdoc! {"_id": 1, "r": {"a": 1, "b": 2}},
            rawdoc! {"$set": {"r.a": 2}},
            rawdoc! {"_id": 1, "r": {"a": 2, "b": 2}},
        ),
        // ApplySetModToEphemeralDocument
        (
            rawdoc! {"x": {"a": 100}},
            rawdoc! {"$set": {"x": {"a": 100, "b": 2}}},
            rawdoc! {"x": {"a": 100, "b": 2}},
        ),
        // ApplyCanCreateDollarPrefixedFieldNameWhenValidateForStorageIsFalse
        (
            rawdoc! {},
            rawdoc! {"$set": {"$bad": 1}},
            rawdoc! {"$bad": 1},
        ),
        // ApplySetFieldInNonExistentArrayElementAffectsIndexOnSiblingField
        (
            rawdoc! {"a": [{"b": 0}]},
            rawdoc! {"$set": {"a.1.c": 2}},
            rawdoc! {"a": [{"b": 0}, {"c": 2}]},
        ),
        // ApplySetFieldInExistingArrayElementDoesNotAffectIndexOnSiblingField
        (
            rawdoc! {"a": [{"b": 0}]},
            rawdoc! {"$set": {"a.0.c": 2}},
            rawdoc! {"a": [{"b": 0, "c": 2}]},
        ),
        // ApplySetFieldInNonExistentNumericFieldDoesNotAffectIndexOnSiblingField
        (
            rawdoc! {"a": {"0": {"b": 0}}},
            rawdoc! {"$set": {"a.1.c": 2}},
            rawdoc! {"a": {"0": {"b": 0}, "1": {"c": 2}}},
        ),
    ];
    for (pre, o, expected) in cases {
        check_modifier(&pre, &o, &expected);
    }
}

#[test]
fn unset_node_cases() {
    // unset_node_test.cpp, named per case.
    let cases = [
        // UnsetNoOp
        (
            rawdoc! {"b": 5},
            rawdoc! {"$unset": {"a": 1}},
            rawdoc! {"b": 5},
        ),
        // UnsetNoOpDottedPath
        (
            rawdoc! {"a": 5},
            rawdoc! {"$unset": {"a.b": 1}},
            rawdoc! {"a": 5},
        ),
        // UnsetNoOpThroughArray
        (
            rawdoc! {"a": [{"b": 1}]},
            rawdoc! {"$unset": {"a.b": 1}},
            rawdoc! {"a": [{"b": 1}]},
        ),
        // UnsetNoOpEmptyDoc
        (rawdoc! {}, rawdoc! {"$unset": {"a": 1}}, rawdoc! {}),
        // UnsetTopLevelPath
        (rawdoc! {"a": 5}, rawdoc! {"$unset": {"a": 1}}, rawdoc! {}),
        // UnsetNestedPath
        (
            rawdoc! {"a": {"b": {"c": 6}}},
            rawdoc! {"$unset": {"a.b.c": 1}},
            rawdoc! {"a": {"b": {}}},
        ),
        // UnsetObject
        (
            rawdoc! {"a": {"b": {"c": 6}}},
            rawdoc! {"$unset": {"a.b": 1}},
            rawdoc! {"a": {}},
        ),
        // UnsetArrayElement
        (
            rawdoc! {"a": [1], "b": 1},
            rawdoc! {"$unset": {"a.0": 1}},
            rawdoc! {"a": [null], "b": 1},
        ),
        // UnsetEntireArray
        (
            rawdoc! {"a": [0, 1, 2]},
            rawdoc! {"$unset": {"a": 1}},
            rawdoc! {},
        ),
        // UnsetFromObjectInArray
        (
            rawdoc! {"a": [{"b": 1}]},
            rawdoc! {"$unset": {"a.0.b": 1}},
            rawdoc! {"a": [{}]},
        ),
        // CanUnsetInvalidField (with the positional element resolved, as oplogs log it)
        (
            rawdoc! {"b": 1, "a": [{"$b": 1}]},
            rawdoc! {"$unset": {"a.0.$b": true}},
            rawdoc! {"b": 1, "a": [{}]},
        ),
        // ApplyFieldWithDot
        (
            rawdoc! {"a.b": 4, "a": {"b": 2}},
            rawdoc! {"$unset": {"a.b": 1}},
            rawdoc! {"a.b": 4, "a": {}},
        ),
        // ApplyCanRemoveRequiredPartOfDBRefIfValidateForStorageIsFalse
        (
            rawdoc! {"a": {"$ref": "c", "$id": 0}},
            rawdoc! {"$unset": {"a.$id": true}},
            rawdoc! {"a": {"$ref": "c"}},
        ),
        // ApplyCanRemoveImmutablePathIfNoop
        (
            rawdoc! {"a": {"b": 1}},
            rawdoc! {"$unset": {"a.b.c": true}},
            rawdoc! {"a": {"b": 1}},
        ),
    ];
    for (pre, o, expected) in cases {
        check_modifier(&pre, &o, &expected);
    }
}

#[test]
fn update_object_node_cases() {
    // update_object_node_test.cpp, named per case.
    let cases = [
        // ApplyCreateField
        (
            rawdoc! {"a": 5},
            rawdoc! {"$set": {"b": 6}},
            rawdoc! {"a": 5, "b": 6},
        ),
        // ApplyExistingField
        (
            rawdoc! {"a": 5},
            rawdoc! {"$set": {"a": 6}},
            rawdoc! {"a": 6},
        ),
        // ApplyExistingAndNonexistingFields
        (
            rawdoc! {"a": 0, "c": 0},
            rawdoc! {"$set": {"a": 5, "b": 6, "c": 7, "d": 8}},
            rawdoc! {"a": 5, "c": 7, "b": 6, "d": 8},
        ),
        // ApplyExistingNestedPaths
        (
            rawdoc! {"a": {"b": 5, "c": 5}, "b": {"d": 5, "e": 5}},
            rawdoc! {"$set": {"a.b": 6, "a.c": 7, "b.d": 8, "b.e": 9}},
            rawdoc! {"a": {"b": 6, "c": 7}, "b": {"d": 8, "e": 9}},
        ),
        // ApplyCreateNestedPaths
        (
            rawdoc! {"z": 0},
            rawdoc! {"$set": {"a.b": 6, "a.c": 7, "b.d": 8, "b.e": 9}},
            rawdoc! {"z": 0, "a": {"b": 6, "c": 7}, "b": {"d": 8, "e": 9}},
        ),
        // ApplyCreateDeeplyNestedPaths
        (
            rawdoc! {"z": 0},
            rawdoc! {"$set": {"a.b.c.d": 6, "a.b.c.e": 7, "a.f": 8}},
            rawdoc! {"z": 0, "a": {"b": {"c": {"d": 6, "e": 7}}, "f": 8}},
        ),
        // ChildrenShouldBeAppliedInAlphabeticalOrder
        (
            rawdoc! {"z": 0, "a": 0},
            rawdoc! {"$set": {"a": 5, "d": 6, "c": 7, "b": 8, "z": 9}},
            rawdoc! {"z": 9, "a": 5, "b": 8, "c": 7, "d": 6},
        ),
        // CollatorShouldNotAffectUpdateOrder
        (
            rawdoc! {},
            rawdoc! {"$set": {"abc": 5, "cba": 6}},
            rawdoc! {"abc": 5, "cba": 6},
        ),
        // ApplyNoop
        (
            rawdoc! {"a": 5, "b": 6, "c": 7},
            rawdoc! {"$set": {"a": 5, "b": 6, "c": 7}},
            rawdoc! {"a": 5, "b": 6, "c": 7},
        ),
        // ApplySomeChildrenNoops
        (
            rawdoc! {"a": 5, "b": 0, "c": 7},
            rawdoc! {"$set": {"a": 5, "b": 6, "c": 7}},
            rawdoc! {"a": 5, "b": 6, "c": 7},
        ),
        // ApplyBlockingElementFromReplication
        (
            rawdoc! {"a": 0},
            rawdoc! {"$set": {"a.b": 5, "b": 6}},
            rawdoc! {"a": 0, "b": 6},
        ),
        // ApplyToArrayByIndexWithLeadingZero
        (
            rawdoc! {"a": [0, 0, 0, 0, 0]},
            rawdoc! {"$set": {"a.02": 2}},
            rawdoc! {"a": [0, 0, 2, 0, 0]},
        ),
        // ApplyMultipleArrayUpdates (same result in both orders)
        (
            rawdoc! {"a": []},
            rawdoc! {"$set": {"a.2": 2, "a.10": 10}},
            rawdoc! {"a": [null, null, 2, null, null, null, null, null, null, null, 10]},
        ),
        // ApplyMultipleUpdatesToDocumentInArray
        (
            rawdoc! {"a": []},
            rawdoc! {"$set": {"a.2.b": 1, "a.2.c": 1}},
            rawdoc! {"a": [null, null, {"b": 1, "c": 1}]},
        ),
        // ApplyUpdateToNonViablePathInArray, from replication: skipped
        (
            rawdoc! {"a": [{"b": 1}, {"b": 2}]},
            rawdoc! {"$set": {"a.b": 3}},
            rawdoc! {"a": [{"b": 1}, {"b": 2}]},
        ),
        // SetAndUnsetWithCommonPrefix: the unset of a path created by a sibling $set
        (
            rawdoc! {},
            rawdoc! {"$set": {"a.b": 5}, "$unset": {"a.c": 1}},
            rawdoc! {"a": {"b": 5}},
        ),
    ];
    for (pre, o, expected) in cases {
        check_modifier(&pre, &o, &expected);
    }
}

#[test]
fn field_order_differs_between_4_4_and_5_0() {
    // update_object_node.h: std::map<std::string> (4.4) vs
    // std::map<..., pathsupport::cmpPathsAndArrayIndexes> (5.0+).
    let pre = rawdoc! {"a": {}};
    let o = rawdoc! {"$set": {"a.10": 1, "a.9": 2}};
    assert_bytes_eq(
        &apply_modifier_with(&pre, &o, FieldOrder::NumericAware).unwrap(),
        &rawdoc! {"a": {"9": 2, "10": 1}},
    );
    assert_bytes_eq(
        &apply_modifier_with(&pre, &o, FieldOrder::Lexicographic).unwrap(),
        &rawdoc! {"a": {"10": 1, "9": 2}},
    );
    // Leading zeros make a component a string again.
    let o = rawdoc! {"$set": {"b.10": 1, "b.09": 2, "b.9": 3}};
    assert_bytes_eq(
        &apply_modifier_with(&rawdoc! {"b": {}}, &o, FieldOrder::NumericAware).unwrap(),
        &rawdoc! {"b": {"09": 2, "9": 3, "10": 1}},
    );
}

#[test]
fn cmp_paths_and_array_indexes() {
    // path_support.h cmpPathsAndArrayIndexes
    use std::cmp::Ordering::*;
    let n = FieldOrder::NumericAware;
    assert_eq!(cmp_components(b"9", b"10", n), Less);
    assert_eq!(cmp_components(b"10", b"9", n), Greater);
    assert_eq!(cmp_components(b"0", b"00", n), Less);
    assert_eq!(cmp_components(b"01", b"1", n), Less);
    assert_eq!(cmp_components(b"1a", b"20", n), Less);
    assert_eq!(cmp_components(b"1ab", b"20", n), Greater);
    assert_eq!(cmp_components(b"abc", b"9", n), Greater);
    assert_eq!(cmp_components(b"12", b"12", n), Equal);
    assert_eq!(
        cmp_components(b"9", b"10", FieldOrder::Lexicographic),
        Greater
    );
}

#[test]
fn same_array_element_by_two_names() {
    // "01" and "1" are different children (applied in order: "01" < "1") that reach
    // the same element: the element created by the first exists for the second.
    let o = rawdoc! {"$set": {"a.1": "second", "a.01": "first"}};
    check_modifier(&rawdoc! {"a": [0]}, &o, &rawdoc! {"a": [0, "second"]});
}

#[test]
fn first_field_of_a_name_is_the_target() {
    // `element[field]` finds the first field of that name.
    let mut pre = bson::RawDocumentBuf::new();
    pre.append("a", 1);
    pre.append("a", 2);
    let mut expected = bson::RawDocumentBuf::new();
    expected.append("a", 9);
    expected.append("a", 2);
    check_modifier(&pre, &rawdoc! {"$set": {"a": 9}}, &expected);
}

#[test]
fn padding_limit() {
    // path_support.cpp maybePadTo: at most 1,500,000 nulls (CannotBackfillArray).
    let err = apply_modifier(&rawdoc! {"a": []}, &rawdoc! {"$set": {"a.1500001": 1}}).unwrap_err();
    assert_eq!(err.code(), Some(codes::CANNOT_BACKFILL_ARRAY));
    // $unset never pads.
    check_modifier(
        &rawdoc! {"a": []},
        &rawdoc! {"$unset": {"a.1500001": 1}},
        &rawdoc! {"a": []},
    );
}

#[test]
fn parse_errors() {
    // update_object_node_test.cpp InvalidPathFailsToParse, MultiplePositionalElementsFailToParse,
    // PositionalElementFirstPositionFailsToParse, TwoModifiersOnSameFieldFailToParse,
    // ApplyPositionalMissingMatchedField; update_driver.cpp validateMod.
    let pre = rawdoc! {};
    let cases = [
        (rawdoc! {"$set": {"": 5}}, codes::EMPTY_FIELD_NAME),
        (rawdoc! {"$set": {"a..b": 5}}, codes::EMPTY_FIELD_NAME),
        (rawdoc! {"$set": {"a.": 5}}, codes::EMPTY_FIELD_NAME),
        (rawdoc! {"$set": {"a.$.b.$": 5}}, codes::BAD_VALUE),
        (rawdoc! {"$set": {"$": 5}}, codes::BAD_VALUE),
        (rawdoc! {"$set": {"a.$": 5}}, codes::BAD_VALUE),
        (rawdoc! {"$set": {"a.$[i]": 5}}, codes::BAD_VALUE),
        (
            rawdoc! {"$set": {"a": 5}, "$unset": {"a": 1}},
            codes::CONFLICTING_UPDATE_OPERATORS,
        ),
        (
            rawdoc! {"$set": {"a": 5, "a.b": 1}},
            codes::CONFLICTING_UPDATE_OPERATORS,
        ),
        (
            rawdoc! {"$set": {"a.b": 5, "a": 1}},
            codes::CONFLICTING_UPDATE_OPERATORS,
        ),
        (rawdoc! {"$set": {"a": 5}, "b": 1}, codes::FAILED_TO_PARSE),
        (rawdoc! {"$set": 5}, codes::FAILED_TO_PARSE),
        (
            rawdoc! {"$v": 1, "$set": {"a": 1}, "$v": 1},
            codes::BAD_VALUE,
        ),
    ];
    for (o, code) in cases {
        assert_eq!(
            apply_modifier(&pre, &o).unwrap_err().code(),
            Some(code),
            "{o:?}"
        );
    }
}

#[test]
fn other_operators_are_refused() {
    // Primaries log only $set/$unset; anything else is not reproduced.
    for op in ["$inc", "$push", "$rename", "$setOnInsert"] {
        let mut o = bson::RawDocumentBuf::new();
        o.append(op, rawdoc! {"a": 1});
        let err = apply_modifier(&rawdoc! {"a": 1}, &o).unwrap_err();
        assert!(
            matches!(err, crate::engine::UpdateError::Unsupported { .. }),
            "{op}: {err:?}"
        );
        assert!(err.to_string().contains(op), "{err}");
    }
    let err = apply_modifier(&rawdoc! {"a": [1]}, &rawdoc! {"$set": {"a.$[]": 1}}).unwrap_err();
    assert!(
        matches!(err, crate::engine::UpdateError::Unsupported { .. }),
        "{err:?}"
    );
}

#[test]
fn v1_field_is_skipped() {
    check_modifier(
        &rawdoc! {"a": 1},
        &rawdoc! {"$v": 1, "$set": {"b": 2}, "$unset": {"a": 1}},
        &rawdoc! {"b": 2},
    );
}
