//! Applying `$v:1` (and unversioned) `$set` / `$unset` updates, on raw bytes.
//!
//! Ports the update tree with `fromOplogApplication = true`:
//! `UpdateDriver::parse` / `parseUpdateExpression` (`update_driver.cpp`),
//! `UpdateObjectNode::parseAndMerge` and `apply` (`update_object_node.cpp`),
//! `ModifierNode::applyToNonexistentElement` (`modifier_node.cpp`), `SetNode`,
//! `UnsetNode`, and `pathsupport::createPathAt` (`path_support.cpp`).
//!
//! Parsing: each modifier must be `$set` or `$unset` (see below) and an object; each
//! path is split on `.`, must have no empty component (56), and paths must not
//! repeat or be prefixes of one another (40). The paths form a tree; the children
//! of every node are applied in a fixed order, [`FieldOrder`], whatever the order
//! written in the update.
//!
//! Application, per child in that order:
//! - under an object, the child is the *first* field of that name: `$set` replaces
//!   its value in place, `$unset` removes it; a missing field is created (missing
//!   parents become embedded documents) and appended to the end of its parent;
//! - under an array, the name is an index (`parseUnsignedBase10Integer`: digits only,
//!   leading zeros allowed, so `02` is element 2): `$set` replaces the element,
//!   `$unset` sets it to null (`UnsetArrayElement`); an index past the end pads with
//!   nulls (at most 1,500,000, else error 34) and appends; a non-numeric name cannot
//!   address an array element;
//! - a path that cannot be created (a scalar in the way, a non-numeric component
//!   under an array) is skipped, because oplog application ignores `PathNotViable`
//!   (`ApplyBlockingElementFromReplication`); `$unset` of a missing path does
//!   nothing (`UnsetNoOpThroughArray`);
//! - a name is a path component, never a dotted literal: `a.b` never matches a field
//!   literally named `a.b` (`ApplyFieldWithDot`).
//!
//! Only `$set` and `$unset` are applied. Since the update-system rewrite of 3.6 (and
//! the idempotent oplog of every earlier release), primaries log every modifier as
//! the resulting `$set` / `$unset` (`LogBuilder` has no other sections); another
//! operator in an oplog entry (`$inc`, `$push`, ...) would mean a tool or a user
//! wrote it through `applyOps`. The server would apply it, with semantics pitr does
//! not model, so it is refused as unsupported. Positional (`$`) paths fail as on the
//! server (2); `$[]` paths, which the server would expand, are refused.
//! Pre-3.6 servers (update semantics "v0") are not modelled.

use std::cmp::Ordering;

use super::super::error::{codes, show, Result, UpdateError};
use super::super::raw::{
    self, begin_doc, end_doc, fields, name_eq, parse_array_index, put_element, put_header,
    put_index_header,
};
use super::diff::MAX_DEPTH;
use super::FieldOrder;

/// `pathsupport::kMaxPaddingAllowed`.
const MAX_PADDING: usize = 1_500_000;

/// Update operators the server knows (`modifier_table.cpp`) but pitr does not apply.
const OTHER_MODIFIERS: [&[u8]; 13] = [
    b"$addToSet",
    b"$bit",
    b"$currentDate",
    b"$inc",
    b"$max",
    b"$min",
    b"$mul",
    b"$pop",
    b"$pull",
    b"$pullAll",
    b"$push",
    b"$rename",
    b"$setOnInsert",
];

/// One node of the update tree.
#[derive(Debug)]
pub(crate) struct Node<'a> {
    name: &'a [u8],
    kind: NodeKind<'a>,
}

#[derive(Debug)]
enum NodeKind<'a> {
    /// `$set`: the new value's type byte and bytes.
    Set {
        kind: u8,
        value: &'a [u8],
    },
    Unset,
    /// An inner path component; children sorted by the [`FieldOrder`].
    Inner(Vec<Node<'a>>),
}

/// `cmpPathsAndArrayIndexes` (`path_support.h`, 5.0+): two components that both
/// start with a digit, neither with a leading zero (other than "0" itself), compare
/// shorter first, then by bytes; anything else by bytes. 4.4 and earlier used a
/// plain `std::map<std::string>`: bytes only.
pub(crate) fn cmp_components(a: &[u8], b: &[u8], order: FieldOrder) -> Ordering {
    if order == FieldOrder::Lexicographic {
        return a.cmp(b);
    }
    let numeric =
        |s: &[u8]| !s.is_empty() && s[0].is_ascii_digit() && !(s[0] == b'0' && s.len() > 1);
    if numeric(a) && numeric(b) && a.len() != b.len() {
        return a.len().cmp(&b.len());
    }
    a.cmp(b)
}

/// Parses a modifier update's `o` into the update tree.
pub(crate) fn parse(o: &[u8], order: FieldOrder) -> Result<Vec<Node<'_>>> {
    let mut root = Vec::new();
    let mut seen_version = false;
    for m in fields(o) {
        let m = m?;
        if m.name == b"$v" {
            if seen_version {
                return Err(UpdateError::rejected(
                    codes::BAD_VALUE,
                    "duplicate `$v` in oplog update document",
                ));
            }
            seen_version = true;
            continue;
        }
        let set = match m.name {
            b"$set" => true,
            b"$unset" => false,
            n if OTHER_MODIFIERS.contains(&n) => {
                return Err(UpdateError::unsupported(format!(
                    "the update uses `{}`; primaries log only $set/$unset, and pitr applies no other operator",
                    show(n)
                )))
            }
            n => {
                return Err(UpdateError::rejected(
                    codes::FAILED_TO_PARSE,
                    format!("unknown modifier `{}` in the update", show(n)),
                ))
            }
        };
        if m.kind != raw::T_OBJECT {
            return Err(UpdateError::rejected(
                codes::FAILED_TO_PARSE,
                format!(
                    "modifier `{}` holds BSON type {:#04x}, not an object of fields",
                    show(m.name),
                    m.kind
                ),
            ));
        }
        for f in fields(m.value) {
            let f = f?;
            let leaf = if set {
                NodeKind::Set {
                    kind: f.kind,
                    value: f.value,
                }
            } else {
                NodeKind::Unset
            };
            insert_path(&mut root, f.name, leaf)?;
        }
    }
    sort_tree(&mut root, order);
    Ok(root)
}

/// `UpdateObjectNode::parseAndMerge` for one path.
fn insert_path<'a>(root: &mut Vec<Node<'a>>, path: &'a [u8], leaf: NodeKind<'a>) -> Result<()> {
    let shown = show(path);
    if path.is_empty() {
        return Err(UpdateError::rejected(
            codes::EMPTY_FIELD_NAME,
            "an empty update path is not valid",
        ));
    }
    let parts: Vec<&[u8]> = path.split(|&c| c == b'.').collect();
    if parts.len() > MAX_DEPTH {
        return Err(UpdateError::unsupported(format!(
            "the update path `{shown}` has more than {MAX_DEPTH} components"
        )));
    }
    if parts.iter().any(|p| p.is_empty()) {
        return Err(UpdateError::rejected(
            codes::EMPTY_FIELD_NAME,
            format!("the update path `{shown}` contains an empty field name"),
        ));
    }
    // `fieldchecker::isPositional`: '$' alone. Oplog entries carry resolved paths, so
    // the server always fails these (there is no query match to substitute).
    let positional = parts.iter().filter(|p| **p == b"$").count();
    if positional > 1 {
        return Err(UpdateError::rejected(
            codes::BAD_VALUE,
            format!("too many positional (`$`) elements in path `{shown}`"),
        ));
    }
    if parts[0] == b"$" {
        return Err(UpdateError::rejected(
            codes::BAD_VALUE,
            format!("positional (`$`) element in the first position of path `{shown}`"),
        ));
    }
    if positional == 1 {
        return Err(UpdateError::rejected(
            codes::BAD_VALUE,
            format!("the positional operator in path `{shown}` has no query match to use"),
        ));
    }
    // `fieldchecker::isArrayFilterIdentifier`: `$[...]`.
    for (i, p) in parts.iter().enumerate() {
        if p.len() >= 3 && p.starts_with(b"$[") && p.ends_with(b"]") {
            if i == 0 {
                return Err(UpdateError::rejected(
                    codes::BAD_VALUE,
                    format!("array filter identifier in the first position of path `{shown}`"),
                ));
            }
            if p.len() > 3 {
                return Err(UpdateError::rejected(
                    codes::BAD_VALUE,
                    format!(
                        "no array filter found for identifier `{}` in path `{shown}`",
                        show(&p[2..p.len() - 1])
                    ),
                ));
            }
            return Err(UpdateError::unsupported(format!(
                "the update path `{shown}` uses `$[]`, which pitr does not apply"
            )));
        }
    }
    let conflict = |at: usize| {
        UpdateError::rejected(
            codes::CONFLICTING_UPDATE_OPERATORS,
            format!(
                "updating the path `{shown}` would create a conflict at `{}`",
                show(&path[..parts[..=at].iter().map(|p| p.len() + 1).sum::<usize>() - 1])
            ),
        )
    };
    let mut cur = root;
    let last = parts.len() - 1;
    for (i, part) in parts[..last].iter().enumerate() {
        let j = match cur.iter().position(|n| n.name == *part) {
            Some(j) => j,
            None => {
                cur.push(Node {
                    name: part,
                    kind: NodeKind::Inner(Vec::new()),
                });
                cur.len() - 1
            }
        };
        cur = match &mut cur[j].kind {
            NodeKind::Inner(kids) => kids,
            _ => return Err(conflict(i)),
        };
    }
    if cur.iter().any(|n| n.name == parts[last]) {
        return Err(conflict(last));
    }
    cur.push(Node {
        name: parts[last],
        kind: leaf,
    });
    Ok(())
}

fn sort_tree(nodes: &mut [Node<'_>], order: FieldOrder) {
    nodes.sort_by(|a, b| cmp_components(a.name, b.name, order));
    for n in nodes {
        if let NodeKind::Inner(kids) = &mut n.kind {
            sort_tree(kids, order);
        }
    }
}

/// Whether applying `node` to a missing path creates anything: only `$set` creates.
fn creates(node: &Node<'_>) -> bool {
    match &node.kind {
        NodeKind::Set { .. } => true,
        NodeKind::Unset => false,
        NodeKind::Inner(kids) => kids.iter().any(creates),
    }
}

fn check_depth(depth: usize) -> Result<()> {
    if depth > MAX_DEPTH {
        return Err(UpdateError::unsupported(format!(
            "the update reaches more than {MAX_DEPTH} levels deep"
        )));
    }
    Ok(())
}

/// Applies the update tree to the document `pre`, appending the result to `out`.
pub(crate) fn apply(pre: &[u8], root: &[Node<'_>], out: &mut Vec<u8>) -> Result<()> {
    apply_object(pre, root, out, 0)
}

/// The children of an existing object.
fn apply_object(pre: &[u8], kids: &[Node<'_>], out: &mut Vec<u8>, depth: usize) -> Result<()> {
    check_depth(depth)?;
    let mut found = Found::new(kids.len());
    let start = begin_doc(out);
    for f in fields(pre) {
        let f = f?;
        // `element[field]` finds the first field of that name; later duplicates are
        // left alone.
        match kids.iter().position(|n| name_eq(n.name, f.name)) {
            Some(j) if !found.get(j) => {
                found.set(j);
                match &kids[j].kind {
                    NodeKind::Set { kind, value } => put_element(out, *kind, f.name, value),
                    NodeKind::Unset => {}
                    NodeKind::Inner(sub) => match f.kind {
                        raw::T_OBJECT => {
                            put_header(out, raw::T_OBJECT, f.name);
                            apply_object(f.value, sub, out, depth + 1)?;
                        }
                        raw::T_ARRAY => {
                            put_header(out, raw::T_ARRAY, f.name);
                            apply_array(f.value, sub, out, depth + 1)?;
                        }
                        // A scalar in the way: every `$set` below is not viable (skipped
                        // in oplog application), every `$unset` a no-op.
                        _ => out.extend_from_slice(f.whole),
                    },
                }
            }
            _ => out.extend_from_slice(f.whole),
        }
    }
    // Missing children are created at the end, in the children's order.
    for (j, n) in kids.iter().enumerate() {
        if !found.get(j) {
            create(n, n.name, out, depth + 1)?;
        }
    }
    end_doc(out, start);
    Ok(())
}

/// Writes the element a node creates where nothing exists (`createPathAt`): a
/// `$set` value, or an embedded document holding what its children create.
fn create(node: &Node<'_>, name: &[u8], out: &mut Vec<u8>, depth: usize) -> Result<()> {
    check_depth(depth)?;
    match &node.kind {
        NodeKind::Set { kind, value } => put_element(out, *kind, name, value),
        NodeKind::Unset => {}
        NodeKind::Inner(kids) => {
            if creates(node) {
                put_header(out, raw::T_OBJECT, name);
                let start = begin_doc(out);
                for k in kids {
                    create(k, k.name, out, depth + 1)?;
                }
                end_doc(out, start);
            }
        }
    }
    Ok(())
}

/// One element of an array being updated.
enum Slot<'a> {
    Borrowed(u8, &'a [u8]),
    Owned(u8, Vec<u8>),
}

impl Slot<'_> {
    fn parts(&self) -> (u8, &[u8]) {
        match self {
            Slot::Borrowed(k, v) => (*k, v),
            Slot::Owned(k, v) => (*k, v),
        }
    }
}

/// The children of an existing array. Several children may name the same element
/// ("1" and "01"), and an element created by one child exists for the next, so the
/// children are applied one after another to a list of the elements.
fn apply_array<'a>(
    pre: &'a [u8],
    kids: &'a [Node<'a>],
    out: &mut Vec<u8>,
    depth: usize,
) -> Result<()> {
    check_depth(depth)?;
    let mut slots = Vec::new();
    for f in fields(pre) {
        let f = f?;
        slots.push(Slot::Borrowed(f.kind, f.value));
    }
    for n in kids {
        // A non-numeric name cannot address an array element: not viable.
        let Some(i) = parse_array_index(n.name) else {
            continue;
        };
        if i < slots.len() {
            match &n.kind {
                NodeKind::Set { kind, value } => slots[i] = Slot::Borrowed(*kind, value),
                NodeKind::Unset => slots[i] = Slot::Borrowed(raw::T_NULL, &[]),
                NodeKind::Inner(sub) => {
                    let (kind, value) = slots[i].parts();
                    let mut buf = Vec::with_capacity(value.len() + 16);
                    match kind {
                        raw::T_OBJECT => apply_object(value, sub, &mut buf, depth + 1)?,
                        raw::T_ARRAY => apply_array(value, sub, &mut buf, depth + 1)?,
                        _ => continue,
                    }
                    slots[i] = Slot::Owned(kind, buf);
                }
            }
        } else if creates(n) {
            let pad = i - slots.len();
            if pad > MAX_PADDING {
                return Err(UpdateError::rejected(
                    codes::CANNOT_BACKFILL_ARRAY,
                    format!(
                        "setting array element `{}` would pad the array with {pad} nulls (at most {MAX_PADDING})",
                        show(n.name)
                    ),
                ));
            }
            slots.extend((0..pad).map(|_| Slot::Borrowed(raw::T_NULL, &[])));
            match &n.kind {
                NodeKind::Set { kind, value } => slots.push(Slot::Borrowed(*kind, value)),
                _ => {
                    // An array element created with a sub-path is an embedded document.
                    let mut buf = Vec::new();
                    let start = begin_doc(&mut buf);
                    if let NodeKind::Inner(sub) = &n.kind {
                        for k in sub {
                            create(k, k.name, &mut buf, depth + 1)?;
                        }
                    }
                    end_doc(&mut buf, start);
                    slots.push(Slot::Owned(raw::T_OBJECT, buf));
                }
            }
        }
    }
    let start = begin_doc(out);
    for (i, s) in slots.iter().enumerate() {
        let (kind, value) = s.parts();
        put_index_header(out, kind, i);
        out.extend_from_slice(value);
    }
    end_doc(out, start);
    Ok(())
}

/// Which children were found in the pre-image.
struct Found {
    small: u64,
    large: Vec<bool>,
}

impl Found {
    fn new(n: usize) -> Found {
        Found {
            small: 0,
            large: if n > 64 { vec![false; n] } else { Vec::new() },
        }
    }

    fn get(&self, j: usize) -> bool {
        if self.large.is_empty() {
            self.small & (1 << j) != 0
        } else {
            self.large[j]
        }
    }

    fn set(&mut self, j: usize) {
        if self.large.is_empty() {
            self.small |= 1 << j;
        } else {
            self.large[j] = true;
        }
    }
}
