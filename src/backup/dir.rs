//! A `mongodump --out DIR` directory, as mongorestore reads it (mongo-tools
//! `mongorestore/filepath.go`: `CreateAllIntents`, `CreateIntentsForDB`,
//! `getInfoFromFile`):
//!
//! ```text
//! DIR/<db>/<coll>.bson[.gz]            documents
//! DIR/<db>/<coll>.metadata.json[.gz]   options, indexes, uuid, collectionName, type
//! DIR/<db>/system.buckets.<X>.bson     a time-series collection's buckets (metadata in <X>.metadata.json)
//! DIR/oplog.bson                       entries written while the dump ran (--oplog; gzip content with --gzip)
//! DIR/prelude.json[.gz]                versions (mongodump 100.18+)
//! ```
//!
//! With `--gzip`, mongorestore only considers `.bson.gz`/`.metadata.json.gz` files
//! and reads the root `oplog.bson` through gzip; without it, only the plain names.
//! A file whose content does not match what its name makes mongorestore expect, a
//! mix of both naming styles, or an `oplog.bson.gz` (which `--oplogReplay` ignores)
//! is recorded as a [`Problem`].

use std::fs;
use std::path::{Path, PathBuf};

use super::error::BackupError;
use super::metadata::Metadata;
use super::{kind_of, Backup, Layout, NsEntry, NsKind, Prelude, Problem};
use crate::oplog::source::Compression;
use crate::storage::{Location, ObjectInfo};

/// The time-series buckets prefix (mongo-tools `common.TimeseriesBucketPrefix`).
pub const BUCKETS_PREFIX: &str = "system.buckets.";

/// In a bucket, the marker of a dump that `pitr replay --out s3://...` is uploading
/// (or whose upload was cut): such a prefix is refused (see `backup::upload`).
pub const UPLOAD_IN_PROGRESS: &str = ".pitr-upload-in-progress";

/// In a bucket, written last by `pitr replay --out s3://...`: every object of the
/// dump with its size, checked when the prefix is read.
pub const UPLOAD_MANIFEST: &str = ".pitr-dump.json";

#[derive(Default)]
struct Files {
    data: Option<PathBuf>,
    metadata: Option<PathBuf>,
}

/// Where a directory's entries come from: the file system, or the listing of a
/// prefix in a bucket (each key relative to the prefix, `/`-separated, sorted), so
/// that a backup in a bucket is read exactly as the same files on disk.
enum Walk {
    Local,
    Listed { root: PathBuf, keys: Vec<String> },
}

impl Walk {
    /// The entries of `dir` (the backup's root, or one database's directory), sorted,
    /// each with whether it is a directory.
    fn entries(&self, dir: &Path) -> Result<Vec<(PathBuf, bool)>, BackupError> {
        let Walk::Listed { root, keys } = self else {
            return Ok(sorted_entries(dir)?
                .into_iter()
                .map(|p| {
                    let d = p.is_dir();
                    (p, d)
                })
                .collect());
        };
        // `dir` is `root` or below it, both URLs as paths (`Location::display_path`).
        let rel = dir.strip_prefix(root).unwrap_or(Path::new(""));
        let rel = rel.to_string_lossy();
        let prefix = if rel.is_empty() {
            String::new()
        } else {
            format!("{rel}/")
        };
        let mut out: Vec<(PathBuf, bool)> = Vec::new();
        for k in keys {
            let Some(below) = k.strip_prefix(prefix.as_str()) else {
                continue;
            };
            let (name, is_dir) = match below.split_once('/') {
                Some((n, _)) => (n, true),
                None => (below, false),
            };
            if name.is_empty() {
                continue;
            }
            out.push((dir.join(name), is_dir));
        }
        out.sort();
        out.dedup();
        Ok(out)
    }
}

/// Reads a dump directory.
pub fn open(dir: &Path) -> Result<Backup, BackupError> {
    open_with(dir, &Walk::Local)
}

/// Reads a directory backup under the prefix `root` of a bucket, from its listing
/// (`listed`: every object under it); its files are then read object by object.
pub fn open_listed(root: &Location, listed: &[ObjectInfo]) -> Result<Backup, BackupError> {
    check_upload(root, listed)?;
    let mut keys: Vec<String> = listed
        .iter()
        .filter_map(|o| o.location.relative_to(root))
        .collect();
    keys.sort();
    let dir = root.display_path();
    open_with(
        &dir,
        &Walk::Listed {
            root: dir.clone(),
            keys,
        },
    )
}

/// A dump pitr uploaded is read only once its upload finished, and only if every
/// object its manifest lists is there with its size. (A prefix without either marker
/// was not uploaded by pitr: nothing to check.)
fn check_upload(root: &Location, listed: &[ObjectInfo]) -> Result<(), BackupError> {
    let incomplete = |detail: String| BackupError::IncompleteUpload {
        path: root.display_path(),
        detail,
    };
    let at = |name: &str| listed.iter().find(|o| o.location == root.join(name));
    if at(UPLOAD_IN_PROGRESS).is_some() {
        return Err(incomplete(format!(
            "`{UPLOAD_IN_PROGRESS}` is there: a `pitr replay --out` upload is running or was cut"
        )));
    }
    let Some(m) = at(UPLOAD_MANIFEST) else {
        return Ok(());
    };
    let (bytes, _) = crate::storage::global().read_versioned(&m.location)?;
    let v: serde_json::Value = serde_json::from_slice(&bytes)
        .map_err(|e| incomplete(format!("`{UPLOAD_MANIFEST}` is not JSON: {e}")))?;
    for o in v["objects"].as_array().into_iter().flatten() {
        let (Some(key), Some(size)) = (o["key"].as_str(), o["bytes"].as_u64()) else {
            return Err(incomplete(format!(
                "`{UPLOAD_MANIFEST}` lists {o} without key and bytes"
            )));
        };
        match at(key) {
            Some(found) if found.size == size => {}
            Some(found) => {
                return Err(incomplete(format!(
                    "`{key}` has {} bytes, the manifest says {size}",
                    found.size
                )))
            }
            None => {
                return Err(incomplete(format!(
                    "`{key}`, listed in `{UPLOAD_MANIFEST}`, is missing"
                )))
            }
        }
    }
    Ok(())
}

fn open_with(dir: &Path, walk: &Walk) -> Result<Backup, BackupError> {
    let mut b = Backup {
        path: dir.to_path_buf(),
        layout: Layout::Directory,
        gzip: false,
        prelude: None,
        namespaces: Vec::new(),
        oplog: None,
        problems: Vec::new(),
        ignored_files: Vec::new(),
    };
    let mut groups: Vec<(String, String, Files)> = Vec::new();
    let mut oplog_gz_name: Option<PathBuf> = None;
    for (entry, is_dir) in walk.entries(dir)? {
        let name = file_name(&entry);
        if name.starts_with('.') {
            continue;
        }
        if is_dir {
            collect_db(walk, &entry, &name, &mut groups, &mut b.ignored_files)?;
        } else if name == "oplog.bson" {
            b.oplog = Some(entry);
        } else if name == "oplog.bson.gz" {
            oplog_gz_name = Some(entry);
        } else if name == "prelude.json" || name == "prelude.json.gz" {
            b.prelude = Some(read_prelude(&entry)?);
        } else {
            b.ignored_files.push(name);
        }
    }
    if let Some(gz) = oplog_gz_name {
        if b.oplog.is_none() {
            b.problems.push(Problem {
                file: "oplog.bson.gz".into(),
                message: "mongorestore --oplogReplay only reads a root file named `oplog.bson` (with --gzip it reads it as \
                          gzip) and ignores `oplog.bson.gz`: rename it to `oplog.bson`, keeping its content"
                    .into(),
            });
            b.oplog = Some(gz);
        } else {
            b.ignored_files.push("oplog.bson.gz".into());
        }
    }
    if groups.is_empty() && b.oplog.is_none() {
        return Err(BackupError::Empty(dir.to_path_buf()));
    }

    // --gzip is what the names say (mongodump --gzip names every file `.gz`).
    let gz_named = groups
        .iter()
        .flat_map(|(_, _, f)| [&f.data, &f.metadata])
        .flatten()
        .filter(|p| is_gz_name(p))
        .count();
    let all_named = groups
        .iter()
        .flat_map(|(_, _, f)| [&f.data, &f.metadata])
        .flatten()
        .count();
    b.gzip = if all_named > 0 {
        gz_named * 2 >= all_named
    } else {
        // Only an oplog: its content decides.
        match &b.oplog {
            Some(p) => super::compression(p)? == Compression::Gzip,
            None => false,
        }
    };
    if gz_named > 0 && gz_named < all_named {
        b.problems.push(Problem {
            file: String::new(),
            message: format!(
                "the backup mixes `.gz` files and plain files ({gz_named} of {all_named} named `.gz`): mongorestore \
                 reads only the `.gz` ones with --gzip and only the plain ones without, so the others would not be restored"
            ),
        });
    }

    for (db, coll, files) in groups {
        let meta = match &files.metadata {
            Some(p) => Some(Metadata::read(p)?),
            None => None,
        };
        for p in [&files.data, &files.metadata].into_iter().flatten() {
            check_compression(&mut b, dir, p)?;
        }
        let coll = meta
            .as_ref()
            .and_then(|m| m.collection_name.clone())
            .unwrap_or(coll);
        let (user_coll, buckets) = match coll.strip_prefix(BUCKETS_PREFIX) {
            Some(x) => (x.to_string(), true),
            None => (coll.clone(), false),
        };
        let ns = format!("{db}.{user_coll}");
        let kind = kind_of(&db, &user_coll, buckets, meta.as_ref());
        let data_ns = files.data.as_ref().map(|_| format!("{db}.{coll}"));
        // A time-series collection comes as `system.buckets.X.bson` plus
        // `X.metadata.json`: two groups of files, one namespace.
        if let Some(prev) = b.namespaces.iter_mut().find(|n| n.ns == ns) {
            if prev.data_file.is_none() {
                prev.data_file = files.data;
                prev.data_ns = data_ns;
            }
            if prev.metadata.is_none() {
                prev.metadata_file = files.metadata;
                prev.metadata = meta;
            }
            if buckets || prev.kind == NsKind::Timeseries {
                prev.kind = NsKind::Timeseries;
            }
            continue;
        }
        b.namespaces.push(NsEntry {
            ns,
            kind,
            data_ns,
            data_file: files.data,
            metadata_file: files.metadata,
            metadata: meta,
        });
    }
    if let Some(p) = b.oplog.clone() {
        check_compression(&mut b, dir, &p)?;
    }
    b.namespaces.sort_by(|a, c| a.ns.cmp(&c.ns));
    Ok(b)
}

/// Records a problem when `p`'s content does not match what its name (and the
/// backup's `--gzip`) makes mongorestore expect.
fn check_compression(b: &mut Backup, dir: &Path, p: &Path) -> Result<(), BackupError> {
    let content_gz = super::compression(p)? == Compression::Gzip;
    let name = p.strip_prefix(dir).unwrap_or(p).display().to_string();
    let is_root_oplog = file_name(p).starts_with("oplog.bson") && p.parent() == Some(dir);
    // The root oplog.bson is read through gzip exactly when --gzip is given.
    let expected_gz = if is_root_oplog { b.gzip } else { is_gz_name(p) };
    if content_gz != expected_gz {
        let (has, wants) = if content_gz {
            ("gzip-compressed", "plain BSON")
        } else {
            ("plain BSON", "gzip-compressed")
        };
        let why = if is_root_oplog {
            format!(
                "mongorestore {} reads the root oplog.bson as {wants}",
                if b.gzip { "--gzip" } else { "without --gzip" }
            )
        } else {
            format!("its name makes mongorestore read it as {wants}")
        };
        b.problems.push(Problem {
            message: format!(
                "`{name}` is {has}, but {why}: it would fail to restore; recompress or rename the file so that name and content agree"
            ),
            file: name,
        });
    }
    Ok(())
}

fn is_gz_name(p: &Path) -> bool {
    p.extension().is_some_and(|e| e.eq_ignore_ascii_case("gz"))
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn sorted_entries(dir: &Path) -> Result<Vec<PathBuf>, BackupError> {
    let io = |source| BackupError::Io {
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
    walk: &Walk,
    dbdir: &Path,
    db: &str,
    groups: &mut Vec<(String, String, Files)>,
    ignored: &mut Vec<String>,
) -> Result<(), BackupError> {
    let mut by_coll: Vec<(String, Files)> = Vec::new();
    for (f, is_dir) in walk.entries(dbdir)? {
        let name = file_name(&f);
        if name.starts_with('.') {
            continue;
        }
        if is_dir {
            // mongorestore: "don't know what to do with subdirectory ..., skipping".
            ignored.push(format!("{db}/{name}/"));
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
        let taken = if is_meta {
            &mut slot.metadata
        } else {
            &mut slot.data
        };
        match taken {
            // Both `x.bson` and `x.bson.gz`: only one can be restored.
            Some(prev) => ignored.push(format!(
                "{db}/{}",
                file_name(if is_gz_name(prev) { &f } else { prev })
            )),
            None => *taken = Some(f),
        }
    }
    groups.extend(by_coll.into_iter().map(|(c, f)| (db.to_string(), c, f)));
    Ok(())
}

/// mongodump escapes collection names for the file system (`%2f` for `/`, `%25`
/// for `%`, ...): undo it.
pub fn unescape(name: &str) -> String {
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

/// `prelude.json[.gz]`: the versions mongodump 100.18+ records at the root of a
/// directory dump. Unknown keys are ignored; a damaged file is an error.
fn read_prelude(path: &Path) -> Result<Prelude, BackupError> {
    use std::io::Read;
    let file = super::open_file(path)?;
    let (mut r, _) = crate::oplog::source::decompressed(&path.display().to_string(), file)?;
    let mut text = Vec::new();
    r.read_to_end(&mut text).map_err(|source| BackupError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let v: serde_json::Value =
        serde_json::from_slice(&text).map_err(|e| BackupError::Metadata {
            path: path.to_path_buf(),
            detail: e.to_string(),
        })?;
    let find = |keys: &[&str]| {
        keys.iter().find_map(|k| {
            v.get(*k)
                .and_then(|x| x.as_str())
                .filter(|s| !s.is_empty())
                .map(str::to_string)
        })
    };
    Ok(Prelude {
        server_version: find(&["ServerVersion", "server_version", "serverVersion"]),
        tool_version: find(&["ToolVersion", "tool_version", "toolVersion"]),
    })
}

#[cfg(test)]
mod tests {
    use super::unescape;

    #[test]
    fn unescapes_percent_sequences() {
        assert_eq!(unescape("a%2fb%25c"), "a/b%c");
        assert_eq!(unescape("100%"), "100%");
        assert_eq!(unescape("x%zz"), "x%zz");
    }
}
