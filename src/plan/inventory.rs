//! What a backup holds, counted: the namespaces [`crate::backup`] found, each with
//! its number of documents, read by streaming every data file (or the archive) once,
//! so memory does not grow with the backup. When expected counts are wanted, the
//! `_id` of every document is also kept (see [`super::expect`] for the cost and the
//! cap).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use crate::backup::NsKind;
use crate::backup::{self, Backup, BackupError};

use super::error::PlanError;
use super::expect::{id_key, IdKey};

/// One namespace of the backup, as `plan.json` shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackupNs {
    pub ns: String,
    pub kind: NsKind,
    /// Documents in the data (0 when there is none); buckets for a time-series collection.
    pub documents: u64,
    /// Documents without an `_id` (cannot be matched by later deletes).
    pub no_id_documents: u64,
    /// The data file, relative to the backup directory (null in an archive).
    pub data_file: Option<String>,
    /// The metadata file, relative to the backup directory (null in an archive).
    pub metadata_file: Option<String>,
    /// `options.capped` in the metadata.
    pub capped: bool,
    /// Where the documents live: `db.system.buckets.X` for a time-series
    /// collection `db.X`, else `ns`; null without data.
    #[serde(default)]
    pub data_ns: Option<String>,
    /// Metadata is known (from a file, or an archive's prelude).
    #[serde(default)]
    pub has_metadata: bool,
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
    pub backup: Backup,
    /// Data files are gzip-compressed (`mongodump --gzip`): mongorestore needs `--gzip`.
    pub gzip: bool,
    /// Sorted by namespace.
    pub namespaces: Vec<BackupNs>,
    /// The backup's own oplog (see [`Backup::oplog`]).
    pub oplog_file: Option<PathBuf>,
    /// Files mongorestore does not know what to do with (relative paths).
    pub ignored_files: Vec<String>,
    /// Per data namespace, the `_id`s of its documents (None: not collected, or over the cap).
    pub ids: Option<HashMap<String, HashSet<IdKey>>>,
    /// Why `ids` is None although they were asked for.
    pub ids_note: Option<String>,
}

/// Reads and counts the backup.
pub fn inventory(path: &Path, opts: InventoryOptions) -> Result<Inventory, PlanError> {
    inventory_with(path, opts, &super::Quiet)
}

/// [`inventory`], reporting the read to `progress`; stops on Ctrl-C during an
/// embedded replay ([`crate::engine::replica::interrupt`]).
pub fn inventory_with(
    path: &Path,
    opts: InventoryOptions,
    progress: &dyn super::Progress,
) -> Result<Inventory, PlanError> {
    let backup = backup::open(path)?;
    let meter = crate::engine::replica::Meter::new();
    let _phase = progress.phase("reading the backup", super::Unit::Documents, None, &meter);
    let mut namespaces: Vec<BackupNs> = backup
        .namespaces
        .iter()
        .map(|n| BackupNs {
            ns: n.ns.clone(),
            kind: n.kind,
            documents: 0,
            no_id_documents: 0,
            data_file: n.data_file.as_ref().map(|p| backup.rel(p)),
            metadata_file: n.metadata_file.as_ref().map(|p| backup.rel(p)),
            capped: n.capped(),
            data_ns: n.data_ns.clone(),
            has_metadata: n.metadata.is_some(),
        })
        .collect();
    let mut ids: Option<HashMap<String, HashSet<IdKey>>> = opts.collect_ids.then(HashMap::new);
    let mut ids_note = None;
    let mut kept: u64 = 0;
    let counted = |k: NsKind| matches!(k, NsKind::Collection | NsKind::Timeseries);
    let mut slot = 0usize;
    backup.for_each_document(|entry, doc, offset, index| -> Result<(), PlanError> {
        if namespaces[slot].ns != entry.ns {
            slot = namespaces
                .iter()
                .position(|n| n.ns == entry.ns)
                .expect("every entry has a row");
        }
        let item = &mut namespaces[slot];
        item.documents += 1;
        meter.add(1);
        if index % crate::engine::replica::interrupt::EVERY == 0 {
            crate::engine::replica::interrupt::check()?;
        }
        match doc.get("_id") {
            Ok(Some(v)) => {
                if counted(entry.kind) && ids.is_some() {
                    kept += 1;
                    if kept > opts.id_cap {
                        ids = None;
                        ids_note = Some(format!(
                            "the backup holds more than {} documents (--expect-max-ids); expected counts need about 70 bytes of memory per document",
                            opts.id_cap
                        ));
                    } else if let Some(all) = ids.as_mut() {
                        let data_ns = entry.data_ns.as_deref().unwrap_or(&entry.ns);
                        match all.get_mut(data_ns) {
                            Some(set) => set.insert(id_key(v)),
                            None => all.entry(data_ns.to_string()).or_default().insert(id_key(v)),
                        };
                    }
                }
            }
            Ok(None) => item.no_id_documents += 1,
            Err(e) => {
                let name = entry
                    .data_file
                    .as_ref()
                    .map_or_else(|| entry.ns.clone(), |p| p.display().to_string());
                return Err(BackupError::Read(backup::malformed(&name, offset, index, e.to_string())).into());
            }
        }
        Ok(())
    })
    .inspect_err(|_| meter.cut_short())?;
    Ok(Inventory {
        dir: path.to_path_buf(),
        gzip: backup.gzip,
        oplog_file: backup.oplog.clone(),
        ignored_files: backup.ignored_files.clone(),
        namespaces,
        ids,
        ids_note,
        backup,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;
    use std::fs;
    use std::io::Write;

    fn gz(bytes: &[u8]) -> Vec<u8> {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(bytes).unwrap();
        enc.finish().unwrap()
    }

    fn write_docs(path: &Path, docs: &[bson::Document], gzip: bool) {
        let mut bytes = Vec::new();
        for d in docs {
            bytes.extend(bson::to_vec(d).unwrap());
        }
        if gzip {
            bytes = gz(&bytes);
        }
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, bytes).unwrap();
    }

    const ALL: InventoryOptions = InventoryOptions {
        collect_ids: true,
        id_cap: 1_000,
    };

    fn rows(inv: &Inventory) -> Vec<(&str, NsKind, u64)> {
        inv.namespaces
            .iter()
            .map(|n| (n.ns.as_str(), n.kind, n.documents))
            .collect()
    }

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
        fs::write(root.join("notes.txt"), "mine").unwrap();
        let inv = inventory(root, ALL).unwrap();
        assert_eq!(
            rows(&inv),
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
        assert_eq!(inv.ignored_files, vec!["notes.txt".to_string()]);
        let ids = inv.ids.unwrap();
        assert_eq!(ids["shop.orders"].len(), 2);
        assert!(!inv.gzip);
        assert!(inv.backup.problems.is_empty());
    }

    /// What `mongodump --gzip --oplog` 100.18 writes: `.gz` names, gzip content in a
    /// root file still named `oplog.bson`, and `prelude.json.gz`.
    #[test]
    fn gzip_dump_with_gzip_oplog_named_oplog_bson_and_a_prelude() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        let docs: Vec<bson::Document> = (0..20).map(|i| doc! {"_id": i}).collect();
        write_docs(&root.join("db/trunc%24hash.bson.gz"), &docs, true);
        fs::write(
            root.join("db/trunc%24hash.metadata.json.gz"),
            gz(br#"{"collectionName":"a.very.long.name","indexes":[],"options":{"capped":true,"size":4096}}"#),
        )
        .unwrap();
        let entry = bson::to_vec(
            &doc! {"ts": bson::Timestamp { time: 5, increment: 1 }, "op": "n", "ns": "", "o": {}},
        )
        .unwrap();
        fs::write(root.join("oplog.bson"), gz(&entry)).unwrap();
        fs::write(
            root.join("prelude.json.gz"),
            gz(br#"{"ServerVersion":"7.0.16","ToolVersion":"100.18.0"}"#),
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
        assert!(inv.gzip, "a --gzip dump");
        assert!(inv.backup.problems.is_empty(), "{:?}", inv.backup.problems);
        assert_eq!(inv.namespaces[0].ns, "db.a.very.long.name");
        assert!(inv.namespaces[0].capped);
        assert_eq!(inv.namespaces[0].documents, 20);
        assert!(inv.ids.is_none());
        assert!(inv.ids_note.unwrap().contains("more than 10"));
        let p = inv.backup.prelude.unwrap();
        assert_eq!(p.server_version.as_deref(), Some("7.0.16"));
        assert_eq!(p.tool_version.as_deref(), Some("100.18.0"));
        assert!(inv.ignored_files.is_empty());
    }

    #[test]
    fn timeseries_users_and_local_namespaces() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        write_docs(
            &root.join("db/system.buckets.weather.bson"),
            &[doc! {"_id": 1}, doc! {"_id": 2}],
            false,
        );
        fs::write(
            root.join("db/weather.metadata.json"),
            r#"{"options":{"timeseries":{"timeField":"t"}},"indexes":[],"type":"timeseries","collectionName":"weather"}"#,
        )
        .unwrap();
        write_docs(
            &root.join("admin/system.users.bson"),
            &[doc! {"_id": "admin.u"}],
            false,
        );
        write_docs(
            &root.join("admin/system.version.bson"),
            &[doc! {"_id": "authSchema"}],
            false,
        );
        write_docs(
            &root.join("local/startup_log.bson"),
            &[doc! {"_id": "h"}],
            false,
        );
        write_docs(
            &root.join("db/system.profile.bson"),
            &[doc! {"op": "query"}],
            false,
        );
        let inv = inventory(root, ALL).unwrap();
        assert_eq!(
            rows(&inv),
            vec![
                ("admin.system.users", NsKind::Auth, 1),
                ("admin.system.version", NsKind::Auth, 1),
                ("db.system.profile", NsKind::NotRestored, 1),
                ("db.weather", NsKind::Timeseries, 2),
                ("local.startup_log", NsKind::Local, 1),
            ]
        );
        let w = &inv.namespaces[3];
        assert_eq!(w.data_ns.as_deref(), Some("db.system.buckets.weather"));
        assert_eq!(
            w.data_file.as_deref(),
            Some("db/system.buckets.weather.bson")
        );
        assert_eq!(w.metadata_file.as_deref(), Some("db/weather.metadata.json"));
        let ids = inv.ids.unwrap();
        assert_eq!(ids["db.system.buckets.weather"].len(), 2);
        assert!(!ids.contains_key("admin.system.users"));
    }

    /// Names and contents that make mongorestore skip or fail on a file.
    #[test]
    fn mismatched_names_and_contents_are_problems() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        // Named .gz but plain; a plain file beside gzip ones; a gzip oplog renamed .gz.
        write_docs(&root.join("db/a.bson.gz"), &[doc! {"_id": 1}], false);
        write_docs(&root.join("db/b.bson.gz"), &[doc! {"_id": 1}], true);
        write_docs(&root.join("db/c.bson"), &[doc! {"_id": 1}], false);
        let entry = bson::to_vec(
            &doc! {"ts": bson::Timestamp { time: 5, increment: 1 }, "op": "n", "ns": "", "o": {}},
        )
        .unwrap();
        fs::write(root.join("oplog.bson.gz"), gz(&entry)).unwrap();
        let inv = inventory(root, ALL).unwrap();
        let problems: Vec<String> = inv
            .backup
            .problems
            .iter()
            .map(|p| p.message.clone())
            .collect();
        let all = problems.join("\n");
        assert!(all.contains("`db/a.bson.gz` is plain BSON"), "{all}");
        assert!(all.contains("mixes `.gz` files and plain files"), "{all}");
        assert!(all.contains("ignores `oplog.bson.gz`"), "{all}");
        // pitr still reads everything (by content).
        assert_eq!(rows(&inv).iter().map(|r| r.2).sum::<u64>(), 3);
        assert!(inv.oplog_file.unwrap().ends_with("oplog.bson.gz"));
    }

    #[test]
    fn bad_inputs_are_errors() {
        let d = tempfile::tempdir().unwrap();
        assert!(matches!(
            inventory(d.path(), ALL),
            Err(PlanError::Backup(BackupError::Empty(_)))
        ));
        assert!(matches!(
            inventory(&d.path().join("nope"), ALL),
            Err(PlanError::Backup(BackupError::Missing(_)))
        ));
        let f = d.path().join("notes.txt");
        fs::write(&f, "hello").unwrap();
        let e = inventory(&f, ALL).unwrap_err();
        assert!(
            e.to_string().contains("neither a mongodump directory"),
            "{e}"
        );
        fs::create_dir_all(d.path().join("db")).unwrap();
        fs::write(d.path().join("db/c.bson"), [1u8, 2, 3]).unwrap();
        assert!(matches!(
            inventory(d.path(), ALL),
            Err(PlanError::Backup(BackupError::Read(_)))
        ));
        fs::write(d.path().join("db/c.bson"), []).unwrap();
        fs::write(d.path().join("db/c.metadata.json"), "{not json").unwrap();
        assert!(matches!(
            inventory(d.path(), ALL),
            Err(PlanError::Backup(BackupError::Metadata { .. }))
        ));
    }
}
