//! What a backup directory holds, laid out the way `mongodump --oplog` writes it:
//!
//! ```text
//! DIR/<db>/<coll>.bson[.gz]            documents, one BSON document after another
//! DIR/<db>/<coll>.metadata.json[.gz]   options, indexes, uuid, collectionName, type
//! DIR/oplog.bson[.gz]                  entries written while the dump ran (--oplog)
//! ```
//!
//! Documents are counted by streaming each data file through the oplog reader's
//! framing ([`OplogReader::next_raw`]), so memory does not grow with the backup.
//! When expected counts are wanted, the `_id` of every document is also kept (see
//! [`super::expect`] for the cost and the cap).

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::oplog::{self, ReadError, ReadOptions};

use super::error::PlanError;
use super::expect::{id_key, IdKey};

/// How mongorestore treats a namespace of the backup.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NsKind {
    /// A collection: restored with its documents.
    Collection,
    /// A view (metadata only): restored as a definition, no documents.
    View,
    /// Legacy `system.indexes.bson`: index definitions of old dumps, not a collection.
    IndexCatalog,
    /// Never restored as data (`local.*`, `system.profile`).
    NotRestored,
}

/// One namespace of the backup.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackupNs {
    pub ns: String,
    pub kind: NsKind,
    /// Documents in the data file (0 when there is none).
    pub documents: u64,
    /// Documents without an `_id` (cannot be matched by later deletes).
    pub no_id_documents: u64,
    /// The data file, relative to the backup directory.
    pub data_file: Option<String>,
    /// The metadata file, relative to the backup directory.
    pub metadata_file: Option<String>,
    /// `options.capped` in the metadata.
    pub capped: bool,
}

/// What to collect besides counts.
#[derive(Clone, Copy, Debug)]
pub struct InventoryOptions {
    /// Keep every document's `_id` (for expected counts).
    pub collect_ids: bool,
    /// Stop keeping `_id`s past this many in total.
    pub id_cap: u64,
}

/// The result of [`inventory`].
#[derive(Debug)]
pub struct Inventory {
    pub dir: PathBuf,
    /// Data files are gzip-compressed (`mongodump --gzip`): mongorestore needs `--gzip`.
    pub gzip: bool,
    /// Some data files are compressed and others not.
    pub mixed_compression: bool,
    /// Sorted by namespace.
    pub namespaces: Vec<BackupNs>,
    /// `oplog.bson` or `oplog.bson.gz` at the root.
    pub oplog_file: Option<PathBuf>,
    /// Files pitr did not recognise (relative paths); mongorestore skips them too.
    pub ignored_files: Vec<String>,
    /// Per namespace, the `_id`s of its documents (None: not collected, or over the cap).
    pub ids: Option<HashMap<String, HashSet<IdKey>>>,
    /// Why `ids` is None although they were asked for.
    pub ids_note: Option<String>,
}

#[derive(Default)]
struct Files {
    data: Option<PathBuf>,
    metadata: Option<PathBuf>,
}

/// Reads the backup directory.
pub fn inventory(dir: &Path, opts: InventoryOptions) -> Result<Inventory, PlanError> {
    if !dir.is_dir() {
        return Err(PlanError::BackupNotDir(dir.to_path_buf()));
    }
    let mut inv = Inventory {
        dir: dir.to_path_buf(),
        gzip: false,
        mixed_compression: false,
        namespaces: Vec::new(),
        oplog_file: None,
        ignored_files: Vec::new(),
        ids: opts.collect_ids.then(HashMap::new),
        ids_note: None,
    };
    let mut groups: Vec<(String, String, Files)> = Vec::new();
    for entry in sorted_entries(dir)? {
        let name = entry
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if name.starts_with('.') {
            continue;
        }
        if entry.is_dir() {
            collect_db(&entry, &name, &mut groups, &mut inv.ignored_files)?;
        } else if name == "oplog.bson" || name == "oplog.bson.gz" {
            if inv.oplog_file.is_none() || name == "oplog.bson" {
                inv.oplog_file = Some(entry);
            }
        } else {
            inv.ignored_files.push(name);
        }
    }
    if groups.is_empty() && inv.oplog_file.is_none() {
        return Err(PlanError::BackupEmpty(dir.to_path_buf()));
    }
    let (mut plain, mut gz) = (0, 0);
    let mut kept_ids: u64 = 0;
    for (db, coll, files) in groups {
        let meta = match &files.metadata {
            Some(p) => Some(read_metadata(p)?),
            None => None,
        };
        let coll = meta
            .as_ref()
            .and_then(|m| m.collection_name.clone())
            .unwrap_or(coll);
        let ns = format!("{db}.{coll}");
        let kind = if coll == "system.indexes" {
            NsKind::IndexCatalog
        } else if db == "local" || coll == "system.profile" {
            NsKind::NotRestored
        } else if meta.as_ref().is_some_and(|m| m.view) {
            NsKind::View
        } else {
            NsKind::Collection
        };
        let mut item = BackupNs {
            ns: ns.clone(),
            kind,
            documents: 0,
            no_id_documents: 0,
            data_file: files.data.as_ref().map(|p| rel(dir, p)),
            metadata_file: files.metadata.as_ref().map(|p| rel(dir, p)),
            capped: meta.as_ref().is_some_and(|m| m.capped),
        };
        if let Some(data) = &files.data {
            if is_gz(data) {
                gz += 1;
            } else {
                plain += 1;
            }
            let want_ids = kind == NsKind::Collection && inv.ids.is_some();
            let mut ids = HashSet::new();
            count_documents(data, &mut item, want_ids.then_some(&mut ids))?;
            if let Some(all) = inv.ids.as_mut() {
                kept_ids += ids.len() as u64;
                if kept_ids > opts.id_cap {
                    inv.ids = None;
                    inv.ids_note = Some(format!(
                        "the backup holds more than {} documents (--expect-max-ids); expected counts need about 70 bytes of memory per document",
                        opts.id_cap
                    ));
                } else if kind == NsKind::Collection {
                    all.insert(ns.clone(), ids);
                }
            }
        }
        inv.namespaces.push(item);
    }
    inv.gzip = gz > 0;
    inv.mixed_compression = gz > 0 && plain > 0;
    inv.namespaces.sort_by(|a, b| a.ns.cmp(&b.ns));
    Ok(inv)
}

fn sorted_entries(dir: &Path) -> Result<Vec<PathBuf>, PlanError> {
    let io = |source| PlanError::Io {
        path: dir.to_path_buf(),
        source,
    };
    let mut v = Vec::new();
    for e in fs::read_dir(dir).map_err(io)? {
        v.push(e.map_err(io)?.path());
    }
    v.sort();
    Ok(v)
}

fn collect_db(
    dbdir: &Path,
    db: &str,
    groups: &mut Vec<(String, String, Files)>,
    ignored: &mut Vec<String>,
) -> Result<(), PlanError> {
    let mut by_coll: Vec<(String, Files)> = Vec::new();
    for f in sorted_entries(dbdir)? {
        let name = f
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if name.starts_with('.') || f.is_dir() {
            continue;
        }
        let (coll, is_meta) = if let Some(c) = name
            .strip_suffix(".metadata.json")
            .or_else(|| name.strip_suffix(".metadata.json.gz"))
        {
            (c, true)
        } else if let Some(c) = name
            .strip_suffix(".bson")
            .or_else(|| name.strip_suffix(".bson.gz"))
        {
            (c, false)
        } else {
            ignored.push(format!("{db}/{name}"));
            continue;
        };
        let coll = unescape(coll);
        let slot = match by_coll.iter().position(|(c, _)| *c == coll) {
            Some(i) => &mut by_coll[i].1,
            None => {
                by_coll.push((coll, Files::default()));
                &mut by_coll.last_mut().expect("just pushed").1
            }
        };
        if is_meta {
            slot.metadata = Some(f);
        } else if slot.data.is_none() || name.ends_with(".bson") {
            slot.data = Some(f);
        }
    }
    groups.extend(by_coll.into_iter().map(|(c, f)| (db.to_string(), c, f)));
    Ok(())
}

/// mongodump escapes collection names for the file system (`%2f` for `/`, `%25`
/// for `%`, ...): undo it.
fn unescape(name: &str) -> String {
    let b = name.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let hex = std::str::from_utf8(&b[i + 1..i + 3])
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok());
            if let Some(v) = hex {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8(out).unwrap_or_else(|_| name.to_string())
}

fn is_gz(p: &Path) -> bool {
    p.extension().is_some_and(|e| e.eq_ignore_ascii_case("gz"))
}

fn rel(dir: &Path, p: &Path) -> String {
    p.strip_prefix(dir).unwrap_or(p).display().to_string()
}

struct Metadata {
    view: bool,
    capped: bool,
    collection_name: Option<String>,
}

fn read_metadata(path: &Path) -> Result<Metadata, PlanError> {
    let io = |source| PlanError::Io {
        path: path.to_path_buf(),
        source,
    };
    let bytes = fs::read(path).map_err(io)?;
    let bytes = if is_gz(path) {
        use std::io::Read;
        let mut out = Vec::new();
        flate2::read::MultiGzDecoder::new(&bytes[..])
            .read_to_end(&mut out)
            .map_err(io)?;
        out
    } else {
        bytes
    };
    let v: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|source| PlanError::Metadata {
            path: path.to_path_buf(),
            source,
        })?;
    let options = v.get("options");
    Ok(Metadata {
        view: v.get("type").and_then(|t| t.as_str()) == Some("view")
            || options.and_then(|o| o.get("viewOn")).is_some(),
        capped: options
            .and_then(|o| o.get("capped"))
            .is_some_and(|c| c.as_bool() == Some(true)),
        collection_name: v
            .get("collectionName")
            .and_then(|c| c.as_str())
            .filter(|c| !c.is_empty())
            .map(str::to_string),
    })
}

fn count_documents(
    path: &Path,
    item: &mut BackupNs,
    mut ids: Option<&mut HashSet<IdKey>>,
) -> Result<(), PlanError> {
    let mut r = oplog::open(&path.to_string_lossy(), ReadOptions::default())?;
    while let Some((doc, offset, index)) = r.next_raw()? {
        item.documents += 1;
        match doc.get("_id") {
            Ok(Some(v)) => {
                if let Some(set) = ids.as_deref_mut() {
                    set.insert(id_key(v));
                }
            }
            Ok(None) => item.no_id_documents += 1,
            Err(e) => {
                return Err(ReadError::Malformed {
                    name: path.display().to_string(),
                    offset,
                    index,
                    detail: e.to_string(),
                }
                .into())
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;
    use std::io::Write;

    fn write_docs(path: &Path, docs: &[bson::Document], gz: bool) {
        let mut bytes = Vec::new();
        for d in docs {
            bytes.extend(bson::to_vec(d).unwrap());
        }
        if gz {
            let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            enc.write_all(&bytes).unwrap();
            bytes = enc.finish().unwrap();
        }
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, bytes).unwrap();
    }

    const ALL: InventoryOptions = InventoryOptions {
        collect_ids: true,
        id_cap: 1_000,
    };

    #[test]
    fn counts_documents_kinds_and_ids() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        write_docs(
            &root.join("shop/orders.bson"),
            &[doc! {"_id": 1}, doc! {"_id": 2.0}, doc! {"x": 1}],
            false,
        );
        fs::write(
            root.join("shop/orders.metadata.json"),
            r#"{"options":{},"indexes":[],"type":"collection"}"#,
        )
        .unwrap();
        fs::write(
            root.join("shop/recent.metadata.json"),
            r#"{"options":{"viewOn":"orders","pipeline":[]},"indexes":[]}"#,
        )
        .unwrap();
        write_docs(&root.join("shop/a%2fb.bson"), &[doc! {"_id": "k"}], false);
        write_docs(
            &root.join("old/system.indexes.bson"),
            &[doc! {"name": "_id_"}],
            false,
        );
        write_docs(&root.join("oplog.bson"), &[], false);
        fs::write(root.join("prelude.json"), "{}").unwrap();
        let inv = inventory(root, ALL).unwrap();
        let names: Vec<(&str, NsKind, u64)> = inv
            .namespaces
            .iter()
            .map(|n| (n.ns.as_str(), n.kind, n.documents))
            .collect();
        assert_eq!(
            names,
            vec![
                ("old.system.indexes", NsKind::IndexCatalog, 1),
                ("shop.a/b", NsKind::Collection, 1),
                ("shop.orders", NsKind::Collection, 3),
                ("shop.recent", NsKind::View, 0),
            ]
        );
        let orders = &inv.namespaces[2];
        assert_eq!(
            (orders.no_id_documents, orders.metadata_file.as_deref()),
            (1, Some("shop/orders.metadata.json"))
        );
        assert!(inv.oplog_file.unwrap().ends_with("oplog.bson"));
        assert_eq!(inv.ignored_files, vec!["prelude.json".to_string()]);
        let ids = inv.ids.unwrap();
        assert_eq!(ids["shop.orders"].len(), 2);
        assert!(!inv.gzip);
    }

    #[test]
    fn gzip_long_names_and_the_id_cap() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        let docs: Vec<bson::Document> = (0..20).map(|i| doc! {"_id": i}).collect();
        write_docs(&root.join("db/trunc%24hash.bson.gz"), &docs, true);
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(br#"{"collectionName":"a.very.long.name","indexes":[],"options":{"capped":true,"size":4096}}"#).unwrap();
        fs::write(
            root.join("db/trunc%24hash.metadata.json.gz"),
            enc.finish().unwrap(),
        )
        .unwrap();
        let inv = inventory(
            root,
            InventoryOptions {
                collect_ids: true,
                id_cap: 10,
            },
        )
        .unwrap();
        assert!(inv.gzip && !inv.mixed_compression);
        assert_eq!(inv.namespaces[0].ns, "db.a.very.long.name");
        assert!(inv.namespaces[0].capped);
        assert_eq!(inv.namespaces[0].documents, 20);
        assert!(inv.ids.is_none());
        assert!(inv.ids_note.unwrap().contains("more than 10"));
    }

    #[test]
    fn bad_inputs_are_errors() {
        let d = tempfile::tempdir().unwrap();
        assert!(matches!(
            inventory(d.path(), ALL),
            Err(PlanError::BackupEmpty(_))
        ));
        assert!(matches!(
            inventory(&d.path().join("nope"), ALL),
            Err(PlanError::BackupNotDir(_))
        ));
        fs::create_dir_all(d.path().join("db")).unwrap();
        fs::write(d.path().join("db/c.bson"), [1u8, 2, 3]).unwrap();
        assert!(matches!(inventory(d.path(), ALL), Err(PlanError::Read(_))));
        fs::write(d.path().join("db/c.bson"), []).unwrap();
        fs::write(d.path().join("db/c.metadata.json"), "{not json").unwrap();
        assert!(matches!(
            inventory(d.path(), ALL),
            Err(PlanError::Metadata { .. })
        ));
    }

    #[test]
    fn unescapes_percent_sequences() {
        assert_eq!(unescape("a%2fb%25c"), "a/b%c");
        assert_eq!(unescape("100%"), "100%");
        assert_eq!(unescape("x%zz"), "x%zz");
    }
}
