//! Turning what the user typed (`oplog.bson`, `oplog.bson.gz`, a dump directory,
//! `-`) into a reader.

use std::fs::File;
use std::io::{self, BufReader};
use std::path::{Path, PathBuf};

use flate2::read::MultiGzDecoder;

use super::error::ReadError;
use super::reader::{ByteCounter, CountingRead, OplogReader, ReadOptions};

/// Where the oplog of a mongodump directory can be, in order of preference.
pub const DIR_CANDIDATES: [&str; 4] = [
    "oplog.bson",
    "oplog.bson.gz",
    "local/oplog.rs.bson",
    "local/oplog.rs.bson.gz",
];

/// Resolves a directory to the oplog file inside it; other paths are returned as is.
pub fn resolve(path: &Path) -> Result<PathBuf, ReadError> {
    if !path.is_dir() {
        return Ok(path.to_path_buf());
    }
    for c in DIR_CANDIDATES {
        let p = path.join(c);
        if p.is_file() {
            return Ok(p);
        }
    }
    Err(ReadError::NoOplogInDir {
        dir: path.to_path_buf(),
        looked: DIR_CANDIDATES.iter().map(|c| c.to_string()).collect(),
    })
}

/// Opens `spec`: `-` for stdin, a directory (see [`DIR_CANDIDATES`]), a `.gz` file
/// (gzip, as `mongodump --gzip` writes), or a plain `.bson` file.
pub fn open(spec: &str, opts: ReadOptions) -> Result<OplogReader, ReadError> {
    if spec == "-" {
        let counter = ByteCounter::default();
        let src = CountingRead::new(io::stdin(), counter.clone());
        return Ok(OplogReader::with_counter(
            "<stdin>",
            Box::new(src),
            opts,
            counter,
            None,
        ));
    }
    let path = resolve(Path::new(spec))?;
    let file = File::open(&path).map_err(|source| ReadError::Open {
        path: path.clone(),
        source,
    })?;
    let len = file.metadata().ok().map(|m| m.len());
    let counter = ByteCounter::default();
    let counted = CountingRead::new(file, counter.clone());
    let name = path.display().to_string();
    let gz = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("gz"));
    let src: Box<dyn io::Read + Send> = if gz {
        Box::new(MultiGzDecoder::new(BufReader::with_capacity(
            1 << 20,
            counted,
        )))
    } else {
        Box::new(counted)
    };
    Ok(OplogReader::with_counter(name, src, opts, counter, len))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn entry() -> Vec<u8> {
        bson::to_vec(&bson::doc! { "ts": bson::Timestamp { time: 3, increment: 1 }, "op": "n", "ns": "", "o": {} }).unwrap()
    }

    fn count(r: &mut OplogReader) -> u64 {
        while r.next_entry().unwrap().is_some() {}
        r.entries_read()
    }

    #[test]
    fn opens_plain_gzip_and_dump_dirs() {
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("x.bson");
        std::fs::write(&plain, [entry(), entry()].concat()).unwrap();
        assert_eq!(
            count(&mut open(plain.to_str().unwrap(), ReadOptions::default()).unwrap()),
            2
        );

        let gz = dir.path().join("x.bson.gz");
        let mut enc =
            flate2::write::GzEncoder::new(File::create(&gz).unwrap(), flate2::Compression::fast());
        enc.write_all(&[entry(), entry(), entry()].concat())
            .unwrap();
        enc.finish().unwrap();
        assert_eq!(
            count(&mut open(gz.to_str().unwrap(), ReadOptions::default()).unwrap()),
            3
        );

        let dump = dir.path().join("dump");
        std::fs::create_dir_all(dump.join("local")).unwrap();
        std::fs::write(dump.join("local/oplog.rs.bson"), entry()).unwrap();
        let r = open(dump.to_str().unwrap(), ReadOptions::default()).unwrap();
        assert!(r.name().ends_with("local/oplog.rs.bson"));
        // A root oplog.bson (mongodump --oplog) wins over local/oplog.rs.bson.
        std::fs::write(dump.join("oplog.bson"), [entry(), entry()].concat()).unwrap();
        let mut r = open(dump.to_str().unwrap(), ReadOptions::default()).unwrap();
        assert!(r.name().ends_with("dump/oplog.bson"));
        assert_eq!(count(&mut r), 2);
    }

    #[test]
    fn missing_file_and_empty_dir_are_clear_errors() {
        let dir = tempfile::tempdir().unwrap();
        let err = open(
            dir.path().join("nope.bson").to_str().unwrap(),
            ReadOptions::default(),
        )
        .err()
        .unwrap();
        assert!(matches!(err, ReadError::Open { .. }));
        let err = open(dir.path().to_str().unwrap(), ReadOptions::default())
            .err()
            .unwrap();
        assert!(err.to_string().contains("without an oplog"), "{err}");
    }
}
