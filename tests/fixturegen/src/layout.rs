//! The same backup in every layout a real mongodump writes, converted from the plain
//! directory the generator produces, so that pitr is tested on each layout with
//! data whose truth is known:
//!
//! | [`Layout`] | what mongodump command writes it | written as |
//! |---|---|---|
//! | `Dir` | `mongodump --oplog --out DIR` | `backup/` |
//! | `Gzip` | `mongodump --oplog --gzip --out DIR` (100.18) | `backup-gzip/`: `<coll>.bson.gz`, `<coll>.metadata.json.gz`, gzip content in a root file still named `oplog.bson`, `prelude.json.gz` |
//! | `Archive` | `mongodump --oplog --archive=FILE` | `backup.archive` |
//! | `ArchiveGzip` | `mongodump --oplog --archive=FILE --gzip` | `backup-gzip.archive` (the whole stream gzipped) |
//!
//! Archives are written with pitr's own [`ArchiveWriter`], one namespace after the
//! other (what `mongodump --numParallelCollections=1` writes), the oplog last.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use pitr::archive::{ArchiveWriter, CollectionMetadata, CollectionType, Header, WriterOptions};

use super::files::AtomicFile;
use super::GenError;

/// The versions the converted dumps claim (as in a prelude written by mongodump
/// 100.18 from a 7.0 server).
pub const SERVER_VERSION: &str = "7.0.14";
pub const TOOL_VERSION: &str = "100.18.0";

/// A backup layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Layout {
    Dir,
    Gzip,
    Archive,
    ArchiveGzip,
}

impl Layout {
    pub const ALL: [Layout; 4] = [
        Layout::Dir,
        Layout::Gzip,
        Layout::Archive,
        Layout::ArchiveGzip,
    ];

    /// Where a run's output directory holds the backup in this layout.
    pub fn file_name(self) -> &'static str {
        match self {
            Layout::Dir => "backup",
            Layout::Gzip => "backup-gzip",
            Layout::Archive => "backup.archive",
            Layout::ArchiveGzip => "backup-gzip.archive",
        }
    }
}

fn io_err(what: &str, path: &Path, source: std::io::Error) -> GenError {
    GenError::Io {
        what: what.to_string(),
        path: path.to_path_buf(),
        source,
    }
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(bytes).expect("writing to memory");
    enc.finish().expect("writing to memory")
}

fn sorted(dir: &Path) -> Result<Vec<PathBuf>, GenError> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .map_err(|e| io_err("cannot list", dir, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    v.sort();
    Ok(v)
}

fn read(p: &Path) -> Result<Vec<u8>, GenError> {
    fs::read(p).map_err(|e| io_err("cannot read", p, e))
}

fn name_of(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Converts the plain directory `src` (laid out as [`Layout::Dir`]) into `layout`
/// at `dest` (a directory or a file, see [`Layout`]). `dest` must not exist.
pub fn convert(src: &Path, layout: Layout, dest: &Path) -> Result<(), GenError> {
    match layout {
        Layout::Dir => copy_dir(src, dest),
        Layout::Gzip => gzip_dir(src, dest),
        Layout::Archive => archive(src, dest, false),
        Layout::ArchiveGzip => archive(src, dest, true),
    }
}

fn copy_dir(src: &Path, dest: &Path) -> Result<(), GenError> {
    fs::create_dir_all(dest).map_err(|e| io_err("cannot create", dest, e))?;
    for p in sorted(src)? {
        let to = dest.join(name_of(&p));
        if p.is_dir() {
            copy_dir(&p, &to)?;
        } else {
            fs::copy(&p, &to).map_err(|e| io_err("cannot copy", &p, e))?;
        }
    }
    Ok(())
}

/// `mongodump --oplog --gzip` (mongo-tools `mongodump/prepare.go`: every data and
/// metadata file named `.gz`, the oplog intent named `oplog.bson` whatever the
/// compression; 100.12+ also writes `prelude.json.gz`).
fn gzip_dir(src: &Path, dest: &Path) -> Result<(), GenError> {
    fs::create_dir_all(dest).map_err(|e| io_err("cannot create", dest, e))?;
    for p in sorted(src)? {
        let name = name_of(&p);
        if p.is_dir() {
            let d = dest.join(&name);
            fs::create_dir_all(&d).map_err(|e| io_err("cannot create", &d, e))?;
            for f in sorted(&p)? {
                let out = d.join(format!("{}.gz", name_of(&f)));
                fs::write(&out, gzip(&read(&f)?)).map_err(|e| io_err("cannot write", &out, e))?;
            }
        } else if name == "oplog.bson" {
            let out = dest.join("oplog.bson");
            fs::write(&out, gzip(&read(&p)?)).map_err(|e| io_err("cannot write", &out, e))?;
        }
    }
    let prelude =
        format!("{{\"ServerVersion\":\"{SERVER_VERSION}\",\"ToolVersion\":\"{TOOL_VERSION}\"}}");
    let out = dest.join("prelude.json.gz");
    fs::write(&out, gzip(prelude.as_bytes())).map_err(|e| io_err("cannot write", &out, e))
}

/// One collection of the directory: its prelude entry and its data file.
struct Source {
    meta: CollectionMetadata,
    data: Option<PathBuf>,
}

/// The collections of a plain dump directory, in name order.
fn sources(src: &Path) -> Result<Vec<Source>, GenError> {
    let mut out = Vec::new();
    for dbdir in sorted(src)?.into_iter().filter(|p| p.is_dir()) {
        let db = name_of(&dbdir);
        for f in sorted(&dbdir)? {
            let name = name_of(&f);
            let Some(coll) = name.strip_suffix(".metadata.json") else {
                continue;
            };
            let text = String::from_utf8(read(&f)?).map_err(|e| {
                io_err(
                    "not UTF-8:",
                    &f,
                    std::io::Error::new(std::io::ErrorKind::InvalidData, e),
                )
            })?;
            let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
                io_err(
                    "not JSON:",
                    &f,
                    std::io::Error::new(std::io::ErrorKind::InvalidData, e),
                )
            })?;
            let kind = CollectionType::parse(v["type"].as_str().unwrap_or(""));
            let data_name = match kind {
                CollectionType::Timeseries => format!("system.buckets.{coll}.bson"),
                _ => format!("{coll}.bson"),
            };
            let data = dbdir.join(data_name);
            out.push(Source {
                meta: CollectionMetadata::new(db.clone(), coll, text, kind),
                data: data.is_file().then_some(data),
            });
        }
    }
    Ok(out)
}

/// Splits a `.bson` file into its documents (the generator's own output: well
/// framed).
fn documents(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut at = 0;
    std::iter::from_fn(move || {
        let len = i32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?) as usize;
        let doc = bytes.get(at..at + len)?;
        at += len;
        Some(doc)
    })
}

/// `mongodump --oplog --archive=FILE [--gzip]`.
fn archive(src: &Path, dest: &Path, gz: bool) -> Result<(), GenError> {
    let sources = sources(src)?;
    let oplog = src.join("oplog.bson");
    let mut prelude: Vec<CollectionMetadata> = sources.iter().map(|s| s.meta.clone()).collect();
    if oplog.is_file() {
        prelude.push(CollectionMetadata::oplog());
    }
    let header = Header::new(SERVER_VERSION, TOOL_VERSION, 4);
    let file = AtomicFile::create(dest).map_err(|e| io_err("cannot create", dest, e))?;
    let werr = |e: pitr::archive::WriteError| {
        io_err(
            "cannot write the archive",
            dest,
            std::io::Error::other(e.to_string()),
        )
    };
    let mut w =
        ArchiveWriter::new(file, &header, &prelude, WriterOptions { gzip: gz }).map_err(werr)?;
    for s in &sources {
        let ns = s.meta.data_namespace(&header);
        if let Some(p) = &s.data {
            let bytes = read(p)?;
            for d in documents(&bytes) {
                w.write_document(&ns, d).map_err(werr)?;
            }
        }
        w.end_namespace(&ns).map_err(werr)?;
    }
    if oplog.is_file() {
        let ns = pitr::archive::Namespace::oplog();
        let bytes = read(&oplog)?;
        for d in documents(&bytes) {
            w.write_document(&ns, d).map_err(werr)?;
        }
        w.end_namespace(&ns).map_err(werr)?;
    }
    let file = w.finish().map_err(werr)?;
    file.commit().map_err(|e| io_err("cannot write", dest, e))
}

/// Adds a time-series collection `db.coll` to the plain directory backup `dir`, as
/// `mongodump` writes one (mongo-tools `mongodump/prepare.go` dumps the buckets
/// collection under `system.buckets.<coll>.bson` and the metadata under the
/// time-series name with `"type": "timeseries"`; shapes as in mongo-tools'
/// `testdata/timeseries_tests/ts_dump_with_oplog`): `buckets` buckets of 3
/// measurements each, one host each, starting at `start` (seconds since the
/// epoch), bucket ids whose ObjectId time is the bucket's minimum time as the
/// server makes them. Returns the number of buckets written.
pub fn add_timeseries(
    dir: &Path,
    db: &str,
    coll: &str,
    buckets: u32,
    start: u32,
) -> Result<u32, GenError> {
    use bson::{doc, oid::ObjectId, DateTime};
    let dbdir = dir.join(db);
    fs::create_dir_all(&dbdir).map_err(|e| io_err("cannot create", &dbdir, e))?;
    let mut data = Vec::new();
    for b in 0..buckets {
        let secs = start + b * 60;
        let mut id = [0u8; 12];
        id[..4].copy_from_slice(&secs.to_be_bytes());
        id[4..8].copy_from_slice(&b.to_be_bytes());
        let t = |k: u32| DateTime::from_millis((secs as i64 + k as i64 * 10) * 1000);
        let d = doc! {
            "_id": ObjectId::from_bytes(id),
            "control": {
                "version": 1,
                "min": { "t": t(0), "load": 0.0 },
                "max": { "t": t(2), "load": 2.0 + b as f64 },
            },
            "meta": { "host": format!("h{}", b % 4) },
            "data": {
                "t": { "0": t(0), "1": t(1), "2": t(2) },
                "load": { "0": 0.0, "1": 1.0, "2": 2.0 + b as f64 },
            },
        };
        d.to_writer(&mut data).expect("writing to memory");
    }
    let bson_path = dbdir.join(format!("system.buckets.{coll}.bson"));
    fs::write(&bson_path, data).map_err(|e| io_err("cannot write", &bson_path, e))?;
    let meta = format!(
        "{{\"options\":{{\"timeseries\":{{\"timeField\":\"t\",\"metaField\":\"meta\",\
         \"granularity\":\"seconds\",\"bucketMaxSpanSeconds\":{{\"$numberInt\":\"3600\"}}}}}},\
         \"indexes\":[{{\"v\":{{\"$numberInt\":\"2\"}},\"key\":{{\"meta.host\":{{\"$numberInt\":\"1\"}},\
         \"t\":{{\"$numberInt\":\"1\"}}}},\"name\":\"meta.host_1_t_1\"}}],\
         \"collectionName\":\"{coll}\",\"type\":\"timeseries\"}}"
    );
    let meta_path = dbdir.join(format!("{coll}.metadata.json"));
    fs::write(&meta_path, meta).map_err(|e| io_err("cannot write", &meta_path, e))?;
    Ok(buckets)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_layout_reads_back_with_the_same_documents() {
        let d = tempfile::tempdir().unwrap();
        let src = d.path().join("backup");
        fs::create_dir_all(src.join("shop")).unwrap();
        let doc = bson::to_vec(&bson::doc! {"_id": 1, "x": "y"}).unwrap();
        fs::write(
            src.join("shop/orders.bson"),
            [doc.clone(), doc.clone()].concat(),
        )
        .unwrap();
        fs::write(
            src.join("shop/orders.metadata.json"),
            r#"{"indexes":[],"uuid":"00","collectionName":"orders","type":"collection"}"#,
        )
        .unwrap();
        let entry = bson::to_vec(&bson::doc! {"ts": bson::Timestamp { time: 5, increment: 1 }, "op": "n", "ns": "", "o": {}}).unwrap();
        fs::write(src.join("oplog.bson"), &entry).unwrap();
        for l in Layout::ALL {
            let dest = d.path().join(l.file_name());
            if l != Layout::Dir {
                convert(&src, l, &dest).unwrap();
            }
            let b = pitr::backup::open(&dest).unwrap();
            assert_eq!(
                b.gzip,
                matches!(l, Layout::Gzip | Layout::ArchiveGzip),
                "{l:?}"
            );
            assert!(b.problems.is_empty(), "{l:?}: {:?}", b.problems);
            let mut n = 0;
            b.for_each_document(|e, _, _, _| -> Result<(), pitr::backup::BackupError> {
                assert_eq!(e.ns, "shop.orders");
                n += 1;
                Ok(())
            })
            .unwrap();
            assert_eq!(n, 2, "{l:?}");
            let mut r =
                pitr::oplog::open(&b.oplog.unwrap().to_string_lossy(), Default::default()).unwrap();
            assert!(r.next_entry().unwrap().is_some(), "{l:?}");
        }
    }
}
