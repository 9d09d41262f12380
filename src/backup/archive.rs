//! A `mongodump --archive[=FILE] [--gzip] [--oplog]` file, as mongorestore reads
//! it: the prelude lists every namespace with its metadata (the same JSON as a
//! directory's `<coll>.metadata.json`), the data follows interleaved, and the oplog
//! of `--oplog` is the namespace `{db: "", collection: "oplog"}` (see
//! [`crate::archive`]). Nothing is unpacked: the namespaces come from the prelude,
//! the documents from one streaming pass.

use std::collections::HashMap;
use std::path::Path;

use bson::RawDocument;

use super::error::BackupError;
use super::metadata::Metadata;
use super::{kind_of, Backup, Layout, NsEntry, NsKind, Prelude};
use crate::archive::{self, ArchiveReader, CollectionType, Event, Namespace};

fn open_reader(path: &Path) -> Result<ArchiveReader, BackupError> {
    archive::open(&path.to_string_lossy(), archive::ReadOptions::default())
        .map_err(|e| BackupError::Archive(Box::new(e)))
}

/// Reads an archive's header and prelude.
pub fn open(path: &Path) -> Result<Backup, BackupError> {
    let r = open_reader(path)?;
    let header = r.header().clone();
    let mut b = Backup {
        path: path.to_path_buf(),
        layout: Layout::Archive,
        gzip: r.is_gzip(),
        prelude: Some(Prelude {
            server_version: Some(header.server_version.clone())
                .filter(|v| !v.is_empty() && v != "unknown"),
            tool_version: Some(header.tool_version.clone()).filter(|v| !v.is_empty()),
        }),
        namespaces: Vec::new(),
        oplog: None,
        problems: Vec::new(),
        ignored_files: Vec::new(),
    };
    for m in r.prelude() {
        if Namespace::new(m.db.clone(), m.collection.clone()).is_oplog() {
            b.oplog = Some(path.to_path_buf());
            continue;
        }
        let mut meta = if m.metadata.trim().is_empty() {
            None
        } else {
            Some(Metadata::parse(m.metadata.as_bytes(), path)?)
        };
        // The prelude's `type` is authoritative where the metadata text predates it.
        if let Some(md) = meta.as_mut() {
            if md.kind.is_empty() && !m.kind.as_str().is_empty() {
                md.kind = m.kind.as_str().to_string();
            }
        }
        let kind = kind_of(
            &m.db,
            &m.collection,
            m.kind == CollectionType::Timeseries,
            meta.as_ref(),
        );
        let data = m.data_namespace(&header);
        b.namespaces.push(NsEntry {
            ns: format!("{}.{}", m.db, m.collection),
            kind,
            data_ns: (kind != NsKind::View).then(|| format!("{}.{}", data.db, data.collection)),
            data_file: None,
            metadata_file: None,
            metadata: meta,
        });
    }
    b.namespaces.sort_by(|a, c| a.ns.cmp(&c.ns));
    Ok(b)
}

/// Every document of every namespace but the oplog, in archive order.
pub fn for_each_document<E: From<BackupError>>(
    b: &Backup,
    mut f: impl FnMut(&NsEntry, &RawDocument, u64, u64) -> Result<(), E>,
) -> Result<(), E> {
    let by_data: HashMap<&str, &NsEntry> = b
        .namespaces
        .iter()
        .filter_map(|n| n.data_ns.as_deref().map(|d| (d, n)))
        .collect();
    let mut r = open_reader(&b.path).map_err(E::from)?;
    let name = b.path.display().to_string();
    while let Some(ev) = r
        .next_event()
        .map_err(|e| E::from(BackupError::Archive(Box::new(e))))?
    {
        let Event::Document(d) = ev else { continue };
        if d.namespace.is_oplog() {
            continue;
        }
        let key = format!("{}.{}", d.namespace.db, d.namespace.collection);
        let Some(entry) = by_data.get(key.as_str()) else {
            continue;
        };
        let doc = RawDocument::from_bytes(d.bytes).map_err(|e| {
            E::from(BackupError::Read(super::malformed(
                &format!("{name} ({key})"),
                d.offset,
                d.index,
                e.to_string(),
            )))
        })?;
        f(entry, doc, d.offset, d.index)?;
    }
    Ok(())
}
