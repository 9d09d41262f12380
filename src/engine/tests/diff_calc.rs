//! A test-only port of `doc_diff::computeOplogDiff` (`document_diff_calculator.cpp`)
//! without its size limit: the diff a primary would log between two documents. A
//! sub-diff may randomly be logged as a whole-value update instead, which the server
//! does when the sub-diff would be larger than the value.

use std::collections::{BTreeMap, BTreeSet};

use bson::{RawBson, RawBsonRef, RawDocument, RawDocumentBuf};

#[derive(Default)]
struct DocNode {
    deletes: Vec<String>,
    updates: Vec<(String, RawBson)>,
    inserts: Vec<(String, RawBson)>,
    subs: Vec<(String, Sub)>,
}

#[derive(Default)]
struct ArrNode {
    resize: Option<i32>,
    entries: BTreeMap<usize, ArrEntry>,
}

enum Sub {
    Doc(DocNode),
    Arr(ArrNode),
}

enum ArrEntry {
    Update(RawBson),
    Sub(Sub),
}

/// The diff between `pre` and `post`; `prefer_update(depth)` decides, for each
/// possible sub-diff, whether to log a whole-value update instead.
pub(super) fn compute_diff(
    pre: &RawDocument,
    post: &RawDocument,
    prefer_update: &mut dyn FnMut() -> bool,
) -> RawDocumentBuf {
    serialize_doc(&doc_diff(pre, post, prefer_update))
}

fn elems(d: &RawDocument) -> Vec<(String, RawBsonRef<'_>, &[u8])> {
    // (name, value, whole element bytes) in order.
    let bytes = d.as_bytes();
    let mut out = Vec::new();
    for f in crate::engine::raw::fields(bytes) {
        let f = f.unwrap();
        let v = d
            .get(std::str::from_utf8(f.name).unwrap())
            .unwrap()
            .unwrap();
        // `get` finds the first of a name; the generators never repeat names.
        out.push((String::from_utf8(f.name.to_vec()).unwrap(), v, f.whole));
    }
    out
}

fn sub_diff(
    pre: RawBsonRef<'_>,
    post: RawBsonRef<'_>,
    prefer_update: &mut dyn FnMut() -> bool,
) -> Option<Sub> {
    if prefer_update() {
        return None;
    }
    match (pre, post) {
        (RawBsonRef::Document(a), RawBsonRef::Document(b)) => {
            Some(Sub::Doc(doc_diff(a, b, prefer_update)))
        }
        (RawBsonRef::Array(a), RawBsonRef::Array(b)) => {
            let (a, b) = (
                RawDocument::from_bytes(a.as_bytes()).unwrap(),
                RawDocument::from_bytes(b.as_bytes()).unwrap(),
            );
            Some(Sub::Arr(array_diff(a, b, prefer_update)))
        }
        _ => None,
    }
}

fn same_container_type(a: RawBsonRef<'_>, b: RawBsonRef<'_>) -> bool {
    matches!(
        (a, b),
        (RawBsonRef::Document(_), RawBsonRef::Document(_))
            | (RawBsonRef::Array(_), RawBsonRef::Array(_))
    )
}

/// `computeDocDiff`.
fn doc_diff(
    pre: &RawDocument,
    post: &RawDocument,
    prefer_update: &mut dyn FnMut() -> bool,
) -> DocNode {
    let (pre, post) = (elems(pre), elems(post));
    let mut node = DocNode::default();
    let mut deletes = BTreeSet::new();
    let (mut i, mut j) = (0, 0);
    while i < pre.len() && j < post.len() {
        let (pn, pv, pw) = &pre[i];
        let (qn, qv, qw) = &post[j];
        if pw == qw {
            i += 1;
            j += 1;
            continue;
        }
        if pn == qn {
            match same_container_type(*pv, *qv)
                .then(|| sub_diff(*pv, *qv, prefer_update))
                .flatten()
            {
                Some(s) => node.subs.push((pn.clone(), s)),
                None => node.updates.push((pn.clone(), qv.to_raw_bson())),
            }
            i += 1;
            j += 1;
        } else {
            deletes.insert(pn.clone());
            i += 1;
        }
    }
    for (pn, _, _) in &pre[i..] {
        node.deletes.push(pn.clone());
    }
    for (qn, qv, _) in &post[j..] {
        node.inserts.push((qn.clone(), qv.to_raw_bson()));
        deletes.remove(qn);
    }
    node.deletes.extend(deletes);
    node
}

/// `computeArrayDiff`.
fn array_diff(
    pre: &RawDocument,
    post: &RawDocument,
    prefer_update: &mut dyn FnMut() -> bool,
) -> ArrNode {
    let (pre, post) = (elems(pre), elems(post));
    let mut node = ArrNode::default();
    let n = pre.len().min(post.len());
    for k in 0..n {
        let ((_, pv, pw), (_, qv, qw)) = (&pre[k], &post[k]);
        if pw != qw {
            let entry = match same_container_type(*pv, *qv)
                .then(|| sub_diff(*pv, *qv, prefer_update))
                .flatten()
            {
                Some(s) => ArrEntry::Sub(s),
                None => ArrEntry::Update(qv.to_raw_bson()),
            };
            node.entries.insert(k, entry);
        }
    }
    for (k, (_, qv, _)) in post.iter().enumerate().skip(n) {
        node.entries.insert(k, ArrEntry::Update(qv.to_raw_bson()));
    }
    if pre.len() > post.len() {
        node.resize = Some(post.len() as i32);
    }
    node
}

/// `DocumentSubDiffNode::serialize`: d, u, i, then sub-diffs in the order added.
fn serialize_doc(n: &DocNode) -> RawDocumentBuf {
    let mut out = RawDocumentBuf::new();
    if !n.deletes.is_empty() {
        let mut d = RawDocumentBuf::new();
        for name in &n.deletes {
            d.append(name, false);
        }
        out.append("d", d);
    }
    for (key, list) in [("u", &n.updates), ("i", &n.inserts)] {
        if !list.is_empty() {
            let mut d = RawDocumentBuf::new();
            for (name, v) in list {
                d.append(name, v.clone());
            }
            out.append(key, d);
        }
    }
    for (name, s) in &n.subs {
        out.append(format!("s{name}"), serialize_sub(s));
    }
    out
}

fn serialize_sub(s: &Sub) -> RawDocumentBuf {
    match s {
        Sub::Doc(d) => serialize_doc(d),
        Sub::Arr(a) => {
            let mut out = RawDocumentBuf::new();
            out.append("a", true);
            if let Some(l) = a.resize {
                out.append("l", l);
            }
            for (k, e) in &a.entries {
                match e {
                    ArrEntry::Update(v) => out.append(format!("u{k}"), v.clone()),
                    ArrEntry::Sub(s) => out.append(format!("s{k}"), serialize_sub(s)),
                }
            }
            out
        }
    }
}
