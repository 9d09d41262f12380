//! Tests of the replay engine, on the server's own unit-test cases.
//!
//! Each test names the server test it ports (file and `TEST` name). Expected
//! documents are compared as bytes, as the server's `ASSERT_BSONOBJ_BINARY_EQ` does:
//! logical equality would hide field-order and numeric-type mistakes.

mod classify_replace;
mod compare;
mod diff;
mod diff_calc;
mod modifier;
mod props;
mod real_oplog;

use bson::{RawDocument, RawDocumentBuf};

use super::error::UpdateError;
use super::update::{diff as diff_impl, modifier as modifier_impl, FieldOrder};

/// Fails with both documents shown when their bytes differ.
#[track_caller]
pub(super) fn assert_bytes_eq(actual: &RawDocument, expected: &RawDocument) {
    if actual.as_bytes() != expected.as_bytes() {
        panic!(
            "documents differ\n  actual:   {:?}\n  expected: {:?}",
            bson::Document::try_from(actual),
            bson::Document::try_from(expected)
        );
    }
}

fn to_doc(out: Vec<u8>) -> RawDocumentBuf {
    RawDocumentBuf::from_bytes(out).expect("the engine writes framed documents")
}

/// `applyDiffTestHelper`: `doc_diff::applyDiff` alone.
pub(super) fn apply_diff(
    pre: &RawDocumentBuf,
    diff: &RawDocumentBuf,
) -> Result<RawDocumentBuf, UpdateError> {
    let mut out = Vec::new();
    diff_impl::apply_diff(pre.as_bytes(), diff.as_bytes(), &mut out)?;
    Ok(to_doc(out))
}

/// `checkDiff` (`document_diff_applier_test.cpp`): applying the diff once and twice
/// gives the expected document, byte for byte.
#[track_caller]
pub(super) fn check_diff(pre: &RawDocumentBuf, expected: &RawDocumentBuf, diff: &RawDocumentBuf) {
    let post = apply_diff(pre, diff).expect("diff applies");
    assert_bytes_eq(&post, expected);
    let again = apply_diff(&post, diff).expect("diff re-applies");
    assert_bytes_eq(&again, expected);
}

/// The server code of a failed diff application.
#[track_caller]
pub(super) fn diff_code(pre: &RawDocumentBuf, diff: &RawDocumentBuf) -> Option<i32> {
    match apply_diff(pre, diff) {
        Ok(d) => panic!("expected an error, got {:?}", bson::Document::try_from(&*d)),
        Err(e) => e.code(),
    }
}

/// The update tree of `o` applied to `pre` (no `_id` handling), with 5.0+ order.
pub(super) fn apply_modifier(
    pre: &RawDocumentBuf,
    o: &RawDocumentBuf,
) -> Result<RawDocumentBuf, UpdateError> {
    apply_modifier_with(pre, o, FieldOrder::NumericAware)
}

pub(super) fn apply_modifier_with(
    pre: &RawDocumentBuf,
    o: &RawDocumentBuf,
    order: FieldOrder,
) -> Result<RawDocumentBuf, UpdateError> {
    let tree = modifier_impl::parse(o.as_bytes(), order)?;
    let mut out = Vec::new();
    modifier_impl::apply(pre.as_bytes(), &tree, &mut out)?;
    Ok(to_doc(out))
}

/// Applies `o` with every order and checks the result is `expected` in each.
#[track_caller]
pub(super) fn check_modifier(pre: &RawDocumentBuf, o: &RawDocumentBuf, expected: &RawDocumentBuf) {
    for order in [FieldOrder::NumericAware, FieldOrder::Lexicographic] {
        let post = apply_modifier_with(pre, o, order).expect("update applies");
        assert_bytes_eq(&post, expected);
    }
}
