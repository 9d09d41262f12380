//! Applying a `$v:2` delta (`diff`) to a document, on raw bytes.
//!
//! Ports `doc_diff::applyDiff` (`db/update/document_diff_applier.cpp`, the
//! `BSONObjBuilder` path `DeltaExecutor` uses) and the readers that validate the
//! format (`DocumentDiffReader`, `ArrayDiffReader`, `document_diff_serialization.cpp`).
//! Validation happens exactly where the server does it, so the same malformed diff
//! fails with the same code (and a malformed sub-diff for a field the document does
//! not have is, as on the server, never looked at):
//!
//! - a level's sections are checked when its reader is made (`d`, `u`, `i`, `b`, then
//!   `s<field>` sub-diffs; strict order, each once; sections are recognised by their
//!   first character);
//! - a document level's table (`buildObjDiffTables`) reads deletes, updates, binary
//!   diffs, sub-diffs (making each sub-diff's reader) and inserts, in that order, and
//!   rejects a field named twice (4728000) before the pre-image is walked;
//! - an array level's entries are read one at a time as the array is walked.
//!
//! Object rules: walk the pre-image in order; untouched fields are copied; `d` drops;
//! `u` replaces in place; `i` drops here and re-adds at the end; a sub-diff recurses
//! when the types match (object diff on an object, array diff on an array) and
//! otherwise leaves `null` in place (a later entry overwrites it); `b` patches
//! BinData. Then append the `u` fields the pre-image lacked, then every `i` field.
//!
//! Array rules: with `l` the new length when present, walk indices of the pre-image
//! below `l`, replacing (`u`), recursing or nulling (`s`), or keeping; drop the rest;
//! then while below `l` or modifications remain, append `u` values, `null` for a
//! sub-diff without an element, `null` padding otherwise. Element names are
//! re-numbered "0", "1", ... as `BSONArrayBuilder` does.
//!
//! Versions: the `b` (binary) section exists only in the newest servers (N); older
//! servers reject it as an unknown section, which cannot occur in their oplogs. A
//! modification beyond `l` is error 12495901 at N and an invariant failure (a crash)
//! on older servers. Non-ascending array indices, or a negative `l`, make every
//! server pad the array without bound until its 64 MB buffer limit (13548); pitr
//! reports that at once.

use smallvec::SmallVec;

use super::super::error::{codes, show, Result, UpdateError};
use super::super::raw::{
    self, begin_doc, end_doc, fields, find_field, name_eq, parse_array_index, put_header,
    put_index_header, read_f64, read_i32, read_i64, Field, MAX_USER_DOC,
};

/// Nesting deeper than this is refused (the server's BSON depth limit is lower).
pub(crate) const MAX_DEPTH: usize = 256;

/// A null array element takes at least 3 bytes: more padding than this outgrows the
/// server's 64 MB `BufBuilder`.
const PAD_BEYOND_BUFFER: usize = 64 * 1024 * 1024 / 3;

/// Applies `diff` (a `$v:2` `diff` object) to the document `pre`, appending the
/// result to `out`. This is `doc_diff::applyDiff` alone, without the `_id` handling of
/// the executor around it.
pub(crate) fn apply_diff(pre: &[u8], diff: &[u8], out: &mut Vec<u8>) -> Result<()> {
    // The top level is always read as a document diff: an array diff there fails on
    // its `a` "section" (4770503, `ArrayDiffAtTop`).
    let reader = ObjDiff::read(diff)?;
    apply_object(pre, &reader, out, 0)
}

fn diff_error(code: i32, message: impl Into<String>) -> UpdateError {
    UpdateError::rejected(code, format!("malformed $v:2 diff: {}", message.into()))
}

/// A document-level diff whose sections passed the reader's checks.
#[derive(Clone, Copy, Debug)]
struct ObjDiff<'a> {
    doc: &'a [u8],
    /// Where the `d`, `u`, `i` and `b` sections' values lie in `doc` (start, length;
    /// a length of 0 for a missing section). Offsets keep the reader small: it is
    /// stored in its parent's table.
    sections: [(u32, u32); 4],
    /// How many fields precede the first `s` sub-diff (`u32::MAX`: none).
    subdiffs_from: u32,
}

const DELETES: usize = 0;
const UPDATES: usize = 1;
const INSERTS: usize = 2;
const BINARIES: usize = 3;

impl<'a> ObjDiff<'a> {
    fn section(&self, which: usize) -> Option<&'a [u8]> {
        let (at, len) = self.sections[which];
        (len != 0).then(|| &self.doc[at as usize..(at + len) as usize])
    }

    /// `DocumentDiffReader::DocumentDiffReader`.
    fn read(doc: &'a [u8]) -> Result<ObjDiff<'a>> {
        let mut d = ObjDiff {
            doc,
            sections: [(0, 0); 4],
            subdiffs_from: u32::MAX,
        };
        if raw::is_empty_doc(doc) {
            return Err(diff_error(codes::DIFF_EMPTY, "a diff is empty"));
        }
        let mut prev = 0;
        for (n, f) in fields(doc).enumerate() {
            let f = f?;
            let Some(&c) = f.name.first() else {
                return Err(diff_error(
                    codes::DIFF_EMPTY_SECTION_NAME,
                    "a section has an empty name",
                ));
            };
            let order = match c {
                b'd' => 1,
                b'u' => 2,
                b'i' => 3,
                b'b' => 4,
                b's' => 5,
                _ => 0,
            };
            if order == 0 || order <= prev {
                return Err(diff_error(
                    codes::DIFF_UNEXPECTED_SECTION,
                    format!(
                        "unexpected section `{}` (sections are d, u, i, b, then s<field>, each once)",
                        show(f.name)
                    ),
                ));
            }
            if f.kind != raw::T_OBJECT {
                return Err(diff_error(
                    codes::DIFF_SECTION_WRONG_TYPE,
                    format!("section `{}` is not an object", show(f.name)),
                ));
            }
            let at = (f.value.as_ptr() as usize - doc.as_ptr() as usize) as u32;
            let section = (at, f.value.len() as u32);
            match c {
                b'd' => d.sections[DELETES] = section,
                b'u' => d.sections[UPDATES] = section,
                b'i' => d.sections[INSERTS] = section,
                b'b' => d.sections[BINARIES] = section,
                _ => {
                    d.subdiffs_from = n as u32;
                    break;
                }
            }
            prev = order;
        }
        Ok(d)
    }
}

/// An array-level diff whose header passed the reader's checks.
#[derive(Clone, Copy, Debug)]
struct ArrDiff<'a> {
    doc: &'a [u8],
    new_size: Option<i32>,
    /// Fields before the first modification (`a`, and `l` when present).
    mods_from: usize,
}

impl<'a> ArrDiff<'a> {
    /// `ArrayDiffReader::ArrayDiffReader` (the caller saw the first field is `a`).
    fn read(doc: &'a [u8]) -> Result<ArrDiff<'a>> {
        let mut it = fields(doc);
        let header = match it.next() {
            Some(f) => f?,
            None => return Err(diff_error(codes::DIFF_EMPTY, "a diff is empty")),
        };
        if header.kind != raw::T_BOOL {
            return Err(diff_error(
                codes::DIFF_ARRAY_HEADER_NOT_BOOL,
                format!(
                    "array header `a` is of BSON type {:#04x}, not a boolean",
                    header.kind
                ),
            ));
        }
        if header.value.first().copied().unwrap_or(0) == 0 {
            return Err(diff_error(
                codes::DIFF_ARRAY_HEADER_FALSE,
                "array header `a` is false",
            ));
        }
        let mut d = ArrDiff {
            doc,
            new_size: None,
            mods_from: 1,
        };
        if let Some(f) = it.next() {
            let f = f?;
            if f.name == b"l" {
                if f.kind != raw::T_INT32 {
                    return Err(diff_error(
                        codes::DIFF_SECTION_WRONG_TYPE,
                        format!(
                            "array resize `l` is of BSON type {:#04x}, not int32",
                            f.kind
                        ),
                    ));
                }
                d.new_size = read_i32(f.value);
                d.mods_from = 2;
            }
        }
        Ok(d)
    }

    fn mods(&self) -> ArrMods<'a> {
        let mut it = fields(self.doc);
        for _ in 0..self.mods_from {
            it.next();
        }
        ArrMods { it }
    }
}

/// A sub-diff, read by `getReader`: an array diff when its first field is `a`.
#[derive(Clone, Copy, Debug)]
enum SubDiff<'a> {
    Obj(ObjDiff<'a>),
    Arr(ArrDiff<'a>),
}

fn read_sub(doc: &[u8]) -> Result<SubDiff<'_>> {
    match fields(doc).next() {
        None => Err(diff_error(codes::DIFF_EMPTY, "a sub-diff is empty")),
        Some(f) => {
            if f?.name == b"a" {
                Ok(SubDiff::Arr(ArrDiff::read(doc)?))
            } else {
                Ok(SubDiff::Obj(ObjDiff::read(doc)?))
            }
        }
    }
}

/// One array modification.
#[derive(Clone, Copy, Debug)]
enum ArrMod<'a> {
    /// `u<idx>`: the new element (its name is the diff's, its value the new one).
    Update(Field<'a>),
    /// `s<idx>`, already checked by its reader.
    Sub(SubDiff<'a>),
}

/// `ArrayDiffReader::next`, lazily.
struct ArrMods<'a> {
    it: raw::Fields<'a>,
}

impl<'a> ArrMods<'a> {
    fn next(&mut self) -> Result<Option<(usize, ArrMod<'a>)>> {
        let Some(f) = self.it.next() else {
            return Ok(None);
        };
        let f = f?;
        if f.name.len() < 2 {
            return Err(diff_error(
                codes::DIFF_ARRAY_NAME_TOO_SHORT,
                format!(
                    "array entry name `{}` is shorter than two characters",
                    show(f.name)
                ),
            ));
        }
        // The index is parsed before the prefix is looked at, as the server does.
        let idx = parse_array_index(&f.name[1..]).ok_or_else(|| {
            diff_error(
                codes::DIFF_ARRAY_BAD_INDEX,
                format!(
                    "array entry `{}` has no unsigned integer index",
                    show(f.name)
                ),
            )
        })?;
        match f.name[0] {
            b'u' => Ok(Some((idx, ArrMod::Update(f)))),
            b's' => {
                if f.kind != raw::T_OBJECT {
                    return Err(diff_error(
                        codes::DIFF_ARRAY_SUBDIFF_NOT_OBJECT,
                        format!("array sub-diff `{}` is not an object", show(f.name)),
                    ));
                }
                Ok(Some((idx, ArrMod::Sub(read_sub(f.value)?))))
            }
            _ => Err(diff_error(
                codes::DIFF_ARRAY_BAD_PREFIX,
                format!(
                    "array entry `{}` is neither `u<index>` nor `s<index>`",
                    show(f.name)
                ),
            )),
        }
    }
}

/// What the diff does to one field of a document level.
#[derive(Clone, Copy, Debug)]
enum Op<'a> {
    Delete,
    /// The `u` element, whole (its name is the field's).
    Update(&'a [u8]),
    /// The `i` element, whole.
    Insert(&'a [u8]),
    /// The `b` element's type byte and value.
    Binary(u8, &'a [u8]),
    /// A sub-diff, with its reader.
    Sub(SubDiff<'a>),
}

struct Entry<'a> {
    name: &'a [u8],
    op: Op<'a>,
    /// An update already written in place (`fieldsToSkipInserting`).
    applied: bool,
}

/// `DocumentDiffTables`: the modifications of one level, by field name.
struct Tables<'a> {
    entries: SmallVec<[Entry<'a>; 4]>,
    /// Built once the level has more entries than a linear scan handles well.
    index: Option<std::collections::HashMap<&'a [u8], usize>>,
    /// One bit per (length, first byte) signature of the names: most fields of a
    /// document are not in the diff, and this rejects them without comparing names.
    sigs: u64,
}

const LINEAR_MAX: usize = 16;

#[inline]
fn sig(name: &[u8]) -> u64 {
    let h = name
        .len()
        .wrapping_mul(31)
        .wrapping_add(usize::from(name.first().copied().unwrap_or(0)));
    1u64 << (h & 63)
}

impl<'a> Tables<'a> {
    #[inline(always)]
    fn lookup(&self, name: &[u8]) -> Option<usize> {
        if self.sigs & sig(name) == 0 {
            return None;
        }
        match &self.index {
            Some(m) => m.get(name).copied(),
            None => self.entries.iter().position(|e| name_eq(e.name, name)),
        }
    }

    /// `DocumentDiffTables::safeInsert`.
    fn insert(&mut self, name: &'a [u8], op: Op<'a>) -> Result<()> {
        if self.lookup(name).is_some() {
            return Err(diff_error(
                codes::DIFF_DUPLICATE_FIELD,
                format!("field `{}` is named twice", show(name)),
            ));
        }
        self.sigs |= sig(name);
        self.entries.push(Entry {
            name,
            op,
            applied: false,
        });
        let n = self.entries.len();
        match &mut self.index {
            Some(m) => {
                m.insert(name, n - 1);
            }
            None if n > LINEAR_MAX => {
                self.index = Some(
                    self.entries
                        .iter()
                        .enumerate()
                        .map(|(i, e)| (e.name, i))
                        .collect(),
                );
            }
            None => {}
        }
        Ok(())
    }

    fn new() -> Tables<'a> {
        Tables {
            entries: SmallVec::new(),
            index: None,
            sigs: 0,
        }
    }

    /// `buildObjDiffTables` (with `mustCheckExistenceForInsertOperations`, which oplog
    /// application always uses outside time-series secondaries).
    fn build(&mut self, d: &ObjDiff<'a>) -> Result<()> {
        let t = self;
        if let Some(s) = d.section(DELETES) {
            for f in fields(s) {
                t.insert(f?.name, Op::Delete)?;
            }
        }
        if let Some(s) = d.section(UPDATES) {
            for f in fields(s) {
                let f = f?;
                t.insert(f.name, Op::Update(f.whole))?;
            }
        }
        if let Some(s) = d.section(BINARIES) {
            for f in fields(s) {
                let f = f?;
                t.insert(f.name, Op::Binary(f.kind, f.value))?;
            }
        }
        if d.subdiffs_from != u32::MAX {
            for f in fields(d.doc).skip(d.subdiffs_from as usize) {
                let f = f?;
                // `DocumentDiffReader::nextSubDiff`.
                if f.name.first() != Some(&b's') {
                    return Err(diff_error(
                        codes::DIFF_FIELD_AFTER_SUBDIFFS,
                        format!("section `{}` follows the sub-diffs", show(f.name)),
                    ));
                }
                if f.kind != raw::T_OBJECT {
                    return Err(diff_error(
                        codes::DIFF_SUBDIFF_NOT_OBJECT,
                        format!("sub-diff `{}` is not an object", show(f.name)),
                    ));
                }
                let sub = read_sub(f.value)?;
                t.insert(&f.name[1..], Op::Sub(sub))?;
            }
        }
        if let Some(s) = d.section(INSERTS) {
            for f in fields(s) {
                let f = f?;
                t.insert(f.name, Op::Insert(f.whole))?;
            }
        }
        Ok(())
    }
}

fn check_depth(depth: usize) -> Result<()> {
    if depth > MAX_DEPTH {
        return Err(UpdateError::unsupported(format!(
            "the $v:2 diff nests more than {MAX_DEPTH} levels deep"
        )));
    }
    Ok(())
}

/// `DiffApplier::applyDiffToObject`: writes the new version of the document `pre`.
fn apply_object(pre: &[u8], d: &ObjDiff<'_>, out: &mut Vec<u8>, depth: usize) -> Result<()> {
    check_depth(depth)?;
    let mut t = Tables::new();
    t.build(d)?;
    let start = begin_doc(out);
    // Untouched fields are copied in runs: `run` is where the current run began.
    let mut run = 4;
    for f in fields(pre) {
        let f = f?;
        let Some(i) = t.lookup(f.name) else {
            continue;
        };
        let at = f.whole.as_ptr() as usize - pre.as_ptr() as usize;
        out.extend_from_slice(&pre[run..at]);
        run = at + f.whole.len();
        match t.entries[i].op {
            Op::Delete | Op::Insert(_) => {}
            Op::Update(u) => {
                out.extend_from_slice(u);
                t.entries[i].applied = true;
            }
            Op::Binary(kind, value) => apply_binary(&f, t.entries[i].name, kind, value, out)?,
            Op::Sub(SubDiff::Obj(sub)) if f.kind == raw::T_OBJECT => {
                put_header(out, raw::T_OBJECT, f.name);
                apply_object(f.value, &sub, out, depth + 1)?;
            }
            Op::Sub(SubDiff::Arr(sub)) if f.kind == raw::T_ARRAY => {
                put_header(out, raw::T_ARRAY, f.name);
                apply_array(f.value, &sub, out, depth + 1)?;
            }
            // A type mismatch: the diff is being re-applied and a later entry
            // rewrites this field, so it keeps its place as null.
            Op::Sub(_) => put_header(out, raw::T_NULL, f.name),
        }
    }
    out.extend_from_slice(&pre[run.min(pre.len() - 1)..pre.len() - 1]);
    // `fieldsToInsert`: the updates (in `u` order) not applied in place, then the
    // inserts (in `i` order).
    for e in &t.entries {
        if let Op::Update(u) = e.op {
            if !e.applied {
                out.extend_from_slice(u);
            }
        }
    }
    for e in &t.entries {
        if let Op::Insert(ins) = e.op {
            out.extend_from_slice(ins);
        }
    }
    end_doc(out, start);
    Ok(())
}

/// `DiffApplier::applyDiffToArray`.
fn apply_array(pre: &[u8], d: &ArrDiff<'_>, out: &mut Vec<u8>, depth: usize) -> Result<()> {
    check_depth(depth)?;
    let resize = match d.new_size {
        Some(n) if n < 0 => {
            return Err(UpdateError::rejected(
                codes::BUFFER_PAST_64MB,
                format!(
                    "malformed $v:2 diff: array resize `l: {n}` is negative; the server pads the array without bound"
                ),
            ))
        }
        n => n.map(|n| n as usize),
    };
    let mut mods = d.mods();
    let mut next = mods.next()?;
    let start = begin_doc(out);
    let mut idx = 0usize;
    let mut pre_it = fields(pre);
    while resize.is_none_or(|l| idx < l) {
        let Some(f) = pre_it.next() else { break };
        let f = f?;
        match next {
            Some((at, m)) if at == idx => {
                append_new_value(Some(&f), m, idx, out, depth)?;
                next = mods.next()?;
            }
            _ => {
                put_index_header(out, f.kind, idx);
                out.extend_from_slice(f.value);
            }
        }
        idx += 1;
    }
    // Elements of the pre-image at or beyond `l` are dropped (truncation).
    while resize.is_some_and(|l| idx < l) || next.is_some() {
        match next {
            Some((at, m)) if at == idx => {
                append_new_value(None, m, idx, out, depth)?;
                next = mods.next()?;
            }
            Some((at, _)) if at < idx => {
                return Err(UpdateError::rejected(
                    codes::BUFFER_PAST_64MB,
                    format!(
                        "malformed $v:2 diff: array index {at} comes after index {}; the server pads the array without bound",
                        idx - 1
                    ),
                ));
            }
            _ => {
                // Padding up to the next modification or to `l`. The server keeps
                // padding until its 64 MB buffer limit when the target is that far.
                let target = next.map_or(resize.unwrap_or(idx), |(at, _)| at);
                if target.saturating_sub(idx) > PAD_BEYOND_BUFFER {
                    return Err(UpdateError::rejected(
                        codes::BUFFER_PAST_64MB,
                        format!(
                            "malformed $v:2 diff: padding an array up to index {target} exceeds the server's 64 MB buffer"
                        ),
                    ));
                }
                put_index_header(out, raw::T_NULL, idx);
                if out.len() - start > MAX_USER_DOC {
                    return Err(too_large("the $v:2 diff pads an array"));
                }
            }
        }
        idx += 1;
    }
    if let Some(l) = resize {
        if l != idx {
            return Err(diff_error(
                codes::DIFF_INDEX_BEYOND_RESIZE,
                format!(
                    "an array modification at index {} is beyond the new length `l: {l}`",
                    idx - 1
                ),
            ));
        }
    }
    end_doc(out, start);
    Ok(())
}

pub(crate) fn too_large(what: &str) -> UpdateError {
    UpdateError::rejected(
        codes::BSON_OBJECT_TOO_LARGE,
        format!("{what} beyond the 16 MiB document limit"),
    )
}

/// `DiffApplier::appendNewValueForArrayIndex`.
fn append_new_value(
    pre: Option<&Field<'_>>,
    m: ArrMod<'_>,
    idx: usize,
    out: &mut Vec<u8>,
    depth: usize,
) -> Result<()> {
    match (m, pre) {
        (ArrMod::Update(u), _) => {
            put_index_header(out, u.kind, idx);
            out.extend_from_slice(u.value);
        }
        (ArrMod::Sub(SubDiff::Arr(sub)), Some(p)) if p.kind == raw::T_ARRAY => {
            put_index_header(out, raw::T_ARRAY, idx);
            apply_array(p.value, &sub, out, depth + 1)?;
        }
        (ArrMod::Sub(SubDiff::Obj(sub)), Some(p)) if p.kind == raw::T_OBJECT => {
            put_index_header(out, raw::T_OBJECT, idx);
            apply_object(p.value, &sub, out, depth + 1)?;
        }
        // No element, or one of another type: a later entry rewrites it.
        (ArrMod::Sub(_), _) => put_index_header(out, raw::T_NULL, idx),
    }
    Ok(())
}

/// The `b` section (newest servers): `{o: <offset>, d: <BinData>}` keeps the first
/// `o` bytes of the current BinData and appends `d`, keeping the current subtype; a
/// current value shorter than `o` is left alone (re-application).
fn apply_binary(
    cur: &Field<'_>,
    name: &[u8],
    kind: u8,
    spec: &[u8],
    out: &mut Vec<u8>,
) -> Result<()> {
    if kind != raw::T_OBJECT {
        return Err(UpdateError::rejected(
            codes::EXPECTED_OBJECT,
            format!(
                "malformed $v:2 diff: binary diff for `{}` is not an object",
                show(name)
            ),
        ));
    }
    let offset = binary_offset(spec)?;
    if offset < 0 {
        return Err(diff_error(
            codes::DIFF_BINARY_NEGATIVE_OFFSET,
            format!("binary diff for `{}` has a negative offset", show(name)),
        ));
    }
    let data = match find_field(spec, b"d")? {
        Some(f) if f.kind == raw::T_BINARY => bin_data(&f)?,
        _ => {
            return Err(diff_error(
                codes::DIFF_BINARY_DATA_NOT_BINDATA,
                format!("binary diff for `{}` has no BinData `d`", show(name)),
            ))
        }
    };
    if cur.kind != raw::T_BINARY {
        return Err(UpdateError::unsupported(format!(
            "a $v:2 binary diff targets `{}`, which is not BinData (the server fails an internal assertion)",
            show(cur.name)
        )));
    }
    let current = bin_data(cur)?;
    let offset = offset as usize;
    if current.len() >= offset {
        let new_len = offset + data.len();
        put_header(out, raw::T_BINARY, name);
        out.extend_from_slice(&(new_len as i32).to_le_bytes());
        out.push(cur.value[4]);
        out.extend_from_slice(&current[..offset]);
        out.extend_from_slice(data);
    } else {
        out.extend_from_slice(cur.whole);
    }
    Ok(())
}

/// The bytes of a BinData value (`binData()`: subtype 2 is not special-cased).
fn bin_data<'a>(f: &Field<'a>) -> Result<&'a [u8]> {
    let n = read_i32(f.value).and_then(|n| usize::try_from(n).ok());
    n.and_then(|n| f.value.get(5..5 + n))
        .ok_or_else(|| UpdateError::malformed("a BinData value", "bad length"))
}

/// `BSONObj::getIntField("o")`: a number cast to int, `INT_MIN` otherwise.
fn binary_offset(spec: &[u8]) -> Result<i64> {
    let Some(o) = find_field(spec, b"o")? else {
        return Ok(i64::from(i32::MIN));
    };
    let as_double = match o.kind {
        raw::T_INT32 => read_i32(o.value).map(f64::from),
        raw::T_INT64 => read_i64(o.value).map(|v| v as f64),
        raw::T_DOUBLE => read_f64(o.value),
        raw::T_DECIMAL => {
            return Err(UpdateError::unsupported(
                "a $v:2 binary diff with a decimal offset `o`",
            ))
        }
        _ => return Ok(i64::from(i32::MIN)),
    };
    match as_double {
        Some(v)
            if v.is_finite() && v > f64::from(i32::MIN) - 1.0 && v < f64::from(i32::MAX) + 1.0 =>
        {
            Ok(v.trunc() as i64)
        }
        _ => Err(UpdateError::unsupported(
            "a $v:2 binary diff offset `o` outside the int32 range (undefined on the server)",
        )),
    }
}
