//! Snapshot backups: a copy of a mongod's data files (a cloud volume, LVM or ZFS
//! snapshot, a `cp` of a stopped member's dbpath, a physical backup), as a directory
//! or a `.tar`/`.tar.gz` of one. Recognised by content, never by name: a WiredTiger
//! dbpath holds `WiredTiger`, `WiredTiger.wt`, `WiredTiger.turtle`, `_mdb_catalog.wt`
//! and `storage.bson` (the server itself decides "this directory holds data files"
//! by `storage.bson` or `WiredTiger.wt`: `encryption_key_manager.cpp`
//! `hasExistingDatafiles`; `storage_engine_metadata.cpp` writes `storage.bson`).
//!
//! What can be decided from the files without starting a server is read here:
//! the storage engine `storage.bson` names (`{storage: {engine, options}}`), the
//! WiredTiger version the `WiredTiger` file states, whether the files are encrypted
//! (the Enterprise keystore `key.store/`, `encryption_key_manager.cpp`, or a named
//! `encryption=(...)` in `WiredTiger.turtle`) and whether the journal was copied
//! (`journal/`). The data itself can only be read by a mongod (issue 23): the embedded
//! engine refuses a snapshot with [`super::BackupError::Snapshot`].

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use super::error::BackupError;

/// Names whose presence at a directory's top makes it a dbpath.
const MARKERS: &[&str] = &[
    "WiredTiger",
    "WiredTiger.wt",
    "WiredTiger.turtle",
    "_mdb_catalog.wt",
    "storage.bson",
];

/// How the files are packaged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Packaging {
    Directory,
    /// A tar of the dbpath, gzip-compressed or not.
    Tar {
        gzip: bool,
    },
}

/// A snapshot backup, as far as its files tell without a server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    pub path: PathBuf,
    pub packaging: Packaging,
    /// The marker files found (see [`MARKERS`]).
    pub markers: Vec<String>,
    /// `storage.bson`'s `storage.engine` (`wiredTiger`, `inMemory`, ...).
    pub engine: Option<String>,
    /// The `WiredTiger` file's version line (`WiredTiger 11.2.0: (December 20, 2022)`).
    pub wiredtiger_version: Option<String>,
    /// Whether `journal/` is there; unknown for a tar until it is unpacked.
    pub journal: Option<bool>,
    /// Encrypted at rest (Enterprise `key.store/` or a named turtle `encryption=`);
    /// unknown for a tar until it is unpacked.
    pub encrypted: Option<bool>,
    /// The version of the last mongod that ran on these files: `buildInfo.version` in
    /// the newest FTDC metadata document of `diagnostic.data/` (see [`ftdc_version`]);
    /// `None` when the snapshot has no diagnostic data.
    pub written_by: Option<String>,
    /// `mongod.lock` holds a process id: the files were taken from a running (or
    /// killed) mongod, crash-consistent, not cleanly shut down. The server writes its
    /// pid into the lock file at start-up and truncates it at a clean shutdown
    /// (`storage_engine_lock_file_posix.cpp`, `writeString` / `clearPidAndUnlock`).
    /// `None` when there is no lock file.
    pub unclean: Option<bool>,
    /// The bytes to copy (a directory: its files' sizes; a tar: the tar's size) and,
    /// for a directory, the number of files.
    pub bytes: u64,
    pub files: Option<u64>,
}

impl Snapshot {
    /// One line for error messages and plans: what the files are.
    pub fn describe(&self) -> String {
        let what = match self.packaging {
            Packaging::Directory => "a copy of a mongod's data files",
            Packaging::Tar { gzip: false } => "a tar of a mongod's data files",
            Packaging::Tar { gzip: true } => "a gzip-compressed tar of a mongod's data files",
        };
        let engine = match (&self.engine, &self.wiredtiger_version) {
            (_, Some(v)) => format!(" ({})", v.split(':').next().unwrap_or(v)),
            (Some(e), None) => format!(" (storage engine {e})"),
            (None, None) => String::new(),
        };
        format!("{what}{engine}: a snapshot backup, not a mongodump")
    }

    /// Why a mongod could not be started on these files to restore them, when the
    /// files alone say so: another storage engine, encryption at rest, no journal.
    pub fn refusals(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(e) = self.engine.as_deref().filter(|e| *e != "wiredTiger") {
            out.push(format!(
                "storage.bson names the storage engine `{e}`: only WiredTiger data files can be \
                 recovered from their oplog (an inMemory member keeps no files worth restoring)"
            ));
        }
        if self.encrypted == Some(true) {
            out.push(
                "the files are encrypted at rest (key.store/ or a named encryption in WiredTiger.turtle): \
                 starting a mongod on them needs the master key of the member they came from"
                    .into(),
            );
        }
        if self.journal == Some(false) {
            out.push(
                "there is no journal/ directory: a snapshot taken without the journal (kept on another \
                 volume) misses the writes since the last checkpoint and cannot be recovered consistently"
                    .into(),
            );
        }
        out
    }
}

/// A directory that holds a dbpath's files (see [`MARKERS`]), read as far as the
/// files go; `None` for any other directory.
pub fn in_dir(path: &Path) -> Result<Option<Snapshot>, BackupError> {
    let markers: Vec<String> = MARKERS
        .iter()
        .filter(|m| path.join(m).is_file())
        .map(|m| m.to_string())
        .collect();
    if markers.is_empty() {
        return Ok(None);
    }
    let read_text = |name: &str| -> Result<Option<String>, BackupError> {
        let p = path.join(name);
        match fs::read(&p) {
            Ok(b) => Ok(Some(String::from_utf8_lossy(&b).into_owned())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(BackupError::Io { path: p, source }),
        }
    };
    let engine = match fs::read(path.join("storage.bson")) {
        Ok(b) => engine_of(&b),
        Err(_) => None,
    };
    let turtle = read_text("WiredTiger.turtle")?;
    let (files, bytes) = tree_size(path);
    let unclean = fs::metadata(path.join("mongod.lock"))
        .ok()
        .map(|m| m.len() > 0);
    Ok(Some(Snapshot {
        path: path.to_path_buf(),
        packaging: Packaging::Directory,
        markers,
        engine,
        wiredtiger_version: read_text("WiredTiger")?.as_deref().and_then(version_of),
        journal: Some(path.join("journal").is_dir()),
        encrypted: Some(
            path.join("key.store").is_dir() || turtle.as_deref().is_some_and(turtle_encrypted),
        ),
        written_by: newest_ftdc_version(&path.join("diagnostic.data")),
        unclean,
        bytes,
        files: Some(files),
    }))
}

/// Files and bytes under `dir` (`mongod.lock` left out, as the copy leaves it out).
fn tree_size(dir: &Path) -> (u64, u64) {
    let mut n = (0, 0);
    let Ok(entries) = fs::read_dir(dir) else {
        return n;
    };
    for e in entries.flatten() {
        match e.file_type() {
            Ok(t) if t.is_dir() => {
                let (f, b) = tree_size(&e.path());
                n = (n.0 + f, n.1 + b);
            }
            Ok(t) if t.is_file() && e.file_name() != "mongod.lock" => {
                n.0 += 1;
                n.1 += e.metadata().map_or(0, |m| m.len());
            }
            _ => {}
        }
    }
    n
}

/// How much of an FTDC archive file is read for its metadata: the metadata document
/// is the first one a file gets (`file_manager.cpp` writes the rotate collectors'
/// sample when it opens a file).
const FTDC_HEAD: u64 = 1 << 20;

/// The version of the newest `diagnostic.data/metrics.*` archive file that names one
/// (`metrics.interim` holds metrics only).
fn newest_ftdc_version(dir: &Path) -> Option<String> {
    let mut names: Vec<PathBuf> = fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| is_ftdc_archive(p))
        .collect();
    names.sort();
    names.iter().rev().find_map(|p| {
        let mut head = Vec::new();
        fs::File::open(p)
            .ok()?
            .take(FTDC_HEAD)
            .read_to_end(&mut head)
            .ok()?;
        ftdc_version(&head)
    })
}

/// `metrics.2024-03-08T22-58-41Z-00000`, not `metrics.interim`.
fn is_ftdc_archive(p: &Path) -> bool {
    p.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("metrics.") && n != "metrics.interim")
}

/// `buildInfo.version` of the last metadata document (`type: 0`) in the head of an
/// FTDC archive file. The format (`src/mongo/db/ftdc/README.md`): a sequence of BSON
/// documents `{_id: Date, type: 0|1|2, doc: ...}`; a metadata document's `doc` holds
/// one sub-document per collector, `buildInfo` among them, and from 8.0 on a sharded
/// member nests them under `shard`/`router`/`common`. A document cut off at the end
/// of the head is ignored.
pub fn ftdc_version(bytes: &[u8]) -> Option<String> {
    let mut found = None;
    let mut at = 0usize;
    while at + 4 <= bytes.len() {
        let len = i32::from_le_bytes(bytes[at..at + 4].try_into().ok()?);
        let Ok(len) = usize::try_from(len) else { break };
        if len < 5 || at + len > bytes.len() {
            break;
        }
        let Ok(d) = bson::RawDocument::from_bytes(&bytes[at..at + len]) else {
            break;
        };
        at += len;
        let metadata = matches!(d.get_i32("type"), Ok(0))
            || matches!(d.get_i64("type"), Ok(0))
            || matches!(d.get_f64("type"), Ok(t) if t == 0.0);
        if !metadata {
            continue;
        }
        let Ok(doc) = d.get_document("doc") else {
            continue;
        };
        let build_info = doc.get_document("buildInfo").ok().or_else(|| {
            ["common", "shard", "router"]
                .iter()
                .find_map(|r| doc.get_document(r).ok()?.get_document("buildInfo").ok())
        });
        if let Some(v) = build_info.and_then(|b| b.get_str("version").ok()) {
            found = Some(v.to_string());
        }
    }
    found
}

/// A file that is a tar (plain or gzip) of a dbpath: recognised by its marker files
/// (at the top or under one directory, as `tar -C /data -cf x.tar db` writes it).
/// Reading stops once everything [`Snapshot`] holds is found, or 256 MiB after the
/// first marker, so that a 100 GB tar is not read through; then what was not seen
/// (`journal/`, the encryption, the version) stays unknown until it is unpacked.
pub fn in_tar(path: &Path) -> Result<Option<Snapshot>, BackupError> {
    let io = |source| BackupError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = fs::File::open(path).map_err(io)?;
    let (reader, compression) =
        match crate::oplog::source::decompressed(&path.to_string_lossy(), file) {
            Ok(x) => x,
            Err(_) => return Ok(None),
        };
    let gzip = compression != crate::oplog::source::Compression::None;
    let mut archive = tar::Archive::new(reader);
    let Ok(entries) = archive.entries() else {
        return Ok(None);
    };
    let tar_bytes = fs::metadata(path).map_or(0, |m| m.len());
    let mut found: Option<Snapshot> = None;
    // Seen anywhere in the tar, before or after the first marker.
    let mut unclean = None;
    let mut ftdc: Option<(PathBuf, String)> = None;
    let (mut journal, mut key_store, mut turtle_encryptor) = (false, false, None);
    let mut read_through = true;
    // Bytes of entries read past the first marker while looking for `storage.bson`,
    // `WiredTiger` (the engine and its version), the lock file and the diagnostic
    // data: bounded, so that a 100 GB tar is never read through to describe it.
    let mut past_first = 0u64;
    // Enough entries to pass a few database directories and diagnostic files.
    let mut seen = 0;
    for entry in entries.take(10_000) {
        seen += 1;
        // Not a tar (or a damaged one): not a snapshot we can name.
        let Ok(mut entry) = entry else {
            read_through = false;
            break;
        };
        let Ok(name) = entry.path().map(|p| p.into_owned()) else {
            read_through = false;
            break;
        };
        if found.is_some() {
            past_first += entry.size();
        }
        let top_dir = |d: &str| {
            let parts: Vec<_> = name
                .components()
                .filter(|c| !matches!(c, std::path::Component::CurDir))
                .collect();
            parts.iter().take(2).any(|c| c.as_os_str() == d)
        };
        journal |= top_dir("journal");
        key_store |= top_dir("key.store");
        if name.file_name().is_some_and(|n| n == "mongod.lock") && depth(&name) <= 2 {
            unclean = Some(entry.size() > 0);
        }
        if is_ftdc_archive(&name) && depth(&name) <= 3 {
            let mut head = Vec::new();
            let newer = ftdc.as_ref().is_none_or(|(p, _)| name > *p);
            if newer
                && entry
                    .by_ref()
                    .take(FTDC_HEAD)
                    .read_to_end(&mut head)
                    .is_ok()
            {
                if let Some(v) = ftdc_version(&head) {
                    ftdc = Some((name.clone(), v));
                }
            }
        }
        if let Some(marker) = tar_marker(&name) {
            let s = found.get_or_insert_with(|| Snapshot {
                path: path.to_path_buf(),
                packaging: Packaging::Tar { gzip },
                markers: Vec::new(),
                engine: None,
                wiredtiger_version: None,
                journal: None,
                encrypted: None,
                written_by: None,
                unclean: None,
                bytes: tar_bytes,
                files: None,
            });
            s.markers.push(marker.to_string());
            let mut body = Vec::new();
            if entry.by_ref().take(64 << 10).read_to_end(&mut body).is_ok() {
                match marker {
                    "storage.bson" => s.engine = engine_of(&body),
                    "WiredTiger" => {
                        s.wiredtiger_version = version_of(&String::from_utf8_lossy(&body))
                    }
                    "WiredTiger.turtle" => {
                        turtle_encryptor = Some(turtle_encrypted(&String::from_utf8_lossy(&body)))
                    }
                    _ => {}
                }
            }
        }
        if let Some(s) = &found {
            let all = s.engine.is_some()
                && s.wiredtiger_version.is_some()
                && unclean.is_some()
                && ftdc.is_some()
                && journal
                && turtle_encryptor.is_some();
            if all || past_first > 256 << 20 {
                read_through = all;
                break;
            }
        }
    }
    read_through &= seen < 10_000;
    if let Some(s) = &mut found {
        s.unclean = unclean;
        s.written_by = ftdc.map(|(_, v)| v);
        // What was seen is known; what was not is known absent only if every entry
        // was read (else it is checked once unpacked).
        s.journal = (journal || read_through).then_some(journal);
        s.encrypted = if key_store || turtle_encryptor == Some(true) {
            Some(true)
        } else if read_through {
            turtle_encryptor.map(|_| false)
        } else {
            None
        };
    }
    Ok(found)
}

/// Path components of a tar entry's name, `./` left out.
fn depth(name: &Path) -> usize {
    name.components()
        .filter(|c| !matches!(c, std::path::Component::CurDir))
        .count()
}

/// The marker a tar entry is, at the top or one directory down (`db/WiredTiger`).
fn tar_marker(name: &Path) -> Option<&'static str> {
    let parts: Vec<_> = name
        .components()
        .filter(|c| !matches!(c, std::path::Component::CurDir))
        .collect();
    if parts.is_empty() || parts.len() > 2 {
        return None;
    }
    let file = parts.last()?.as_os_str().to_str()?;
    MARKERS.iter().copied().find(|m| *m == file)
}

/// `storage.bson`'s engine: `{storage: {engine: "wiredTiger", options: {...}}}`
/// (`storage_engine_metadata.cpp`, `StorageEngineMetadata::read`).
fn engine_of(bytes: &[u8]) -> Option<String> {
    let doc = bson::Document::from_reader(bytes).ok()?;
    doc.get_document("storage")
        .ok()?
        .get_str("engine")
        .ok()
        .map(str::to_string)
}

/// The version line of the `WiredTiger` file: its first line is `WiredTiger`, its
/// second `WiredTiger 11.2.0: (December 20, 2022)`.
fn version_of(text: &str) -> Option<String> {
    text.lines()
        .map(str::trim)
        .find(|l| {
            l.starts_with("WiredTiger ") && l.chars().nth(11).is_some_and(|c| c.is_ascii_digit())
        })
        .map(str::to_string)
}

/// Whether a `WiredTiger.turtle` names an encryptor: `encryption=(keyid=...,name=X)`
/// with a non-empty name (an unencrypted database writes `encryption=(keyid=,name=)`).
fn turtle_encrypted(turtle: &str) -> bool {
    turtle.match_indices("encryption=(").any(|(i, m)| {
        let rest = &turtle[i + m.len()..];
        let inner = &rest[..rest.find(')').unwrap_or(rest.len())];
        inner
            .split(',')
            .filter_map(|kv| kv.strip_prefix("name="))
            .any(|name| !name.is_empty() && name != "none")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dbpath(dir: &Path, engine: &str, journal: bool) {
        fs::write(
            dir.join("WiredTiger"),
            "WiredTiger\nWiredTiger 11.2.0: (December 20, 2022)\n",
        )
        .unwrap();
        fs::write(dir.join("WiredTiger.wt"), [0u8; 16]).unwrap();
        fs::write(
            dir.join("WiredTiger.turtle"),
            "WiredTiger version\nmajor=11,minor=2,patch=0\nfile:WiredTiger.wt\n\
             access_pattern_hint=none,encryption=(keyid=,name=),format=btree\n",
        )
        .unwrap();
        fs::write(dir.join("_mdb_catalog.wt"), [0u8; 16]).unwrap();
        let meta = bson::doc! {"storage": {"engine": engine, "options": {"directoryPerDB": false}}};
        fs::write(dir.join("storage.bson"), bson::to_vec(&meta).unwrap()).unwrap();
        if journal {
            fs::create_dir(dir.join("journal")).unwrap();
            fs::write(dir.join("journal/WiredTigerLog.0000000001"), [0u8; 8]).unwrap();
        }
    }

    #[test]
    fn a_wiredtiger_dbpath_is_recognised_with_what_its_files_say() {
        let d = tempfile::tempdir().unwrap();
        dbpath(d.path(), "wiredTiger", true);
        let s = in_dir(d.path()).unwrap().expect("a dbpath");
        assert_eq!(s.engine.as_deref(), Some("wiredTiger"));
        assert_eq!(
            s.wiredtiger_version.as_deref(),
            Some("WiredTiger 11.2.0: (December 20, 2022)")
        );
        assert_eq!((s.journal, s.encrypted), (Some(true), Some(false)));
        assert!(s.refusals().is_empty(), "{:?}", s.refusals());
        assert!(
            s.describe().contains("WiredTiger 11.2.0"),
            "{}",
            s.describe()
        );
    }

    /// An FTDC archive file as `file_manager.cpp` starts one: the metadata document
    /// (type 0) with the rotate collectors, then a metrics chunk (type 1).
    fn ftdc_file(version: &str, role_based: bool) -> Vec<u8> {
        let now = bson::DateTime::now();
        let build_info =
            bson::doc! {"start": now, "version": version, "gitVersion": "x", "end": now};
        let collectors = bson::doc! {"start": now, "buildInfo": build_info, "hostInfo": {"system": {}}, "end": now};
        let doc = if role_based {
            bson::doc! {"start": now, "shard": {"start": now, "end": now}, "common": collectors, "end": now}
        } else {
            collectors
        };
        let mut out = bson::to_vec(&bson::doc! {"_id": now, "type": 0, "doc": doc}).unwrap();
        let chunk = bson::Binary {
            subtype: bson::spec::BinarySubtype::Generic,
            bytes: vec![1, 2, 3],
        };
        out.extend(bson::to_vec(&bson::doc! {"_id": now, "type": 1, "data": chunk}).unwrap());
        out
    }

    #[test]
    fn the_version_that_last_ran_on_the_files_comes_from_the_newest_ftdc_file() {
        assert_eq!(
            ftdc_version(&ftdc_file("7.0.14", false)).as_deref(),
            Some("7.0.14")
        );
        assert_eq!(
            ftdc_version(&ftdc_file("8.0.3", true)).as_deref(),
            Some("8.0.3")
        );
        let cut = ftdc_file("7.0.14", false);
        assert_eq!(
            ftdc_version(&cut[..cut.len() / 3]),
            None,
            "a cut document is ignored"
        );
        assert_eq!(ftdc_version(b"junk"), None);
        let d = tempfile::tempdir().unwrap();
        dbpath(d.path(), "wiredTiger", true);
        let s = in_dir(d.path()).unwrap().unwrap();
        assert_eq!((s.written_by.clone(), s.unclean), (None, None));
        assert!(s.bytes > 0 && s.files == Some(6), "{s:?}");
        let diag = d.path().join("diagnostic.data");
        fs::create_dir(&diag).unwrap();
        fs::write(
            diag.join("metrics.2026-01-01T00-00-00Z-00000"),
            ftdc_file("6.0.14", false),
        )
        .unwrap();
        fs::write(
            diag.join("metrics.2026-03-01T00-00-00Z-00000"),
            ftdc_file("7.0.2", false),
        )
        .unwrap();
        fs::write(diag.join("metrics.interim"), b"x").unwrap();
        fs::write(d.path().join("mongod.lock"), "4242\n").unwrap();
        let s = in_dir(d.path()).unwrap().unwrap();
        assert_eq!(
            (s.written_by.as_deref(), s.unclean),
            (Some("7.0.2"), Some(true))
        );
        // The same in a tar, wherever the entries fall.
        let out = d.path().join("../snap-ftdc.tar");
        tar_of(d.path(), "db", true, &out);
        let t = in_tar(&out).unwrap().unwrap();
        assert_eq!(
            (t.written_by.as_deref(), t.unclean),
            (Some("7.0.2"), Some(true))
        );
        let _ = fs::remove_file(out);
        fs::write(d.path().join("mongod.lock"), "").unwrap();
        assert_eq!(in_dir(d.path()).unwrap().unwrap().unclean, Some(false));
    }

    #[test]
    fn a_mongodump_directory_is_not_a_snapshot() {
        let d = tempfile::tempdir().unwrap();
        fs::create_dir(d.path().join("shop")).unwrap();
        fs::write(d.path().join("shop/orders.bson"), []).unwrap();
        fs::write(d.path().join("oplog.bson"), []).unwrap();
        assert_eq!(in_dir(d.path()).unwrap(), None);
    }

    #[test]
    fn refusals_from_the_files_alone() {
        let d = tempfile::tempdir().unwrap();
        dbpath(d.path(), "inMemory", false);
        fs::create_dir(d.path().join("key.store")).unwrap();
        let r = in_dir(d.path()).unwrap().unwrap().refusals();
        assert_eq!(r.len(), 3, "{r:?}");
        assert!(
            r[0].contains("`inMemory`") && r[1].contains("encrypted") && r[2].contains("journal")
        );
        // A tar read through says the same before anything is unpacked.
        let out = d.path().join("../refused.tar.gz");
        tar_of(d.path(), "db", true, &out);
        let t = in_tar(&out).unwrap().unwrap();
        let _ = fs::remove_file(&out);
        assert_eq!(t.refusals(), r);
    }

    #[test]
    fn a_named_encryptor_in_the_turtle_is_encryption() {
        assert!(!turtle_encrypted("x,encryption=(keyid=,name=),y"));
        assert!(!turtle_encrypted("encryption=(keyid=,name=none)"));
        assert!(turtle_encrypted(
            "a=1,encryption=(keyid=.system,name=AES256-CBC),b=2"
        ));
    }

    fn tar_of(dir: &Path, top: &str, gzip: bool, out: &Path) {
        let f = fs::File::create(out).unwrap();
        let w: Box<dyn std::io::Write> = if gzip {
            Box::new(flate2::write::GzEncoder::new(
                f,
                flate2::Compression::fast(),
            ))
        } else {
            Box::new(f)
        };
        let mut b = tar::Builder::new(w);
        b.append_dir_all(top, dir).unwrap();
        b.into_inner().unwrap().flush().unwrap();
    }

    #[test]
    fn a_tar_of_a_dbpath_plain_or_gzip_at_the_top_or_one_directory_down() {
        use std::io::Write as _;
        let d = tempfile::tempdir().unwrap();
        let db = d.path().join("db");
        fs::create_dir(&db).unwrap();
        dbpath(&db, "wiredTiger", true);
        for (top, gzip) in [(".", false), ("db", true), ("db", false)] {
            let out = d.path().join(format!("snap-{gzip}.tar"));
            tar_of(&db, top, gzip, &out);
            let s = in_tar(&out)
                .unwrap()
                .unwrap_or_else(|| panic!("{top} {gzip}"));
            assert_eq!(s.packaging, Packaging::Tar { gzip });
            assert_eq!((s.journal, s.encrypted), (Some(true), Some(false)));
        }
        // A tar of something else, and a file that is no tar at all.
        let other = d.path().join("other");
        fs::create_dir(&other).unwrap();
        fs::write(other.join("notes.txt"), "x").unwrap();
        let out = d.path().join("other.tar");
        tar_of(&other, ".", false, &out);
        assert_eq!(in_tar(&out).unwrap(), None);
        let junk = d.path().join("junk");
        fs::File::create(&junk)
            .unwrap()
            .write_all(b"hello world")
            .unwrap();
        assert_eq!(in_tar(&junk).unwrap(), None);
    }
}
