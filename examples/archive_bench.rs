//! Throughput of reading an oplog out of a mongodump archive, next to reading the
//! same bytes from a plain `.bson` file, both through `pitr::oplog::OplogReader`.
//!
//! Usage:
//!   pitr gen-fixtures --scenario bench --target-bytes 1073741824 --out bench-data/bench-1073741824 --seed 1
//!   cargo run --release --example archive_bench -- bench-data/bench-1073741824/oplog.bson
//!
//! Next to the oplog it writes (once, then reuses) `oplog.archive` (the oplog as the
//! `--oplog` namespace of an archive), `oplog-after-256MiB.archive` (the same after a
//! 256 MiB collection that the adapter must skip) and `oplog.archive.gz`. Every file
//! is read once first so that all runs read from the page cache; each figure is the
//! best of `RUNS` (default 3) runs, in MB/s of oplog bytes. Pin it to one core
//! (`taskset -c 0`) for steadier numbers; `ONLY=text` runs only the rows whose label
//! contains `text` (e.g. for `perf record`). `WRITE_ONLY=1` writes `oplog.archive`
//! and `oplog.archive.gz` if missing and exits (what `scripts/bench-scan.sh` needs).

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::time::Instant;

use pitr::archive::{
    self, ArchiveWriter, CollectionMetadata, CollectionType, Event, Header, Namespace,
    NamespaceReader, ReadOptions, WriterOptions,
};
use pitr::oplog::{OplogReader, ReadOptions as OplogOptions};

const FILLER_BYTES: u64 = 256 << 20;

fn main() {
    let oplog = PathBuf::from(
        std::env::args()
            .nth(1)
            .expect("usage: archive_bench OPLOG.bson"),
    );
    let runs: usize = std::env::var("RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let only = std::env::var("ONLY").unwrap_or_default();
    let dir = oplog.parent().unwrap().to_path_buf();
    let plain_archive = dir.join("oplog.archive");
    let filler_archive = dir.join("oplog-after-256MiB.archive");
    let gz_archive = dir.join("oplog.archive.gz");
    if std::env::var("WRITE_ONLY").is_ok_and(|v| v == "1") {
        for (path, gzip) in [(&plain_archive, false), (&gz_archive, true)] {
            if !path.exists() {
                eprintln!("writing {} ...", path.display());
                write_archive(&oplog, path, gzip, 0);
            }
        }
        return;
    }
    for (path, gzip, filler) in [
        (&plain_archive, false, 0),
        (&filler_archive, false, FILLER_BYTES),
        (&gz_archive, true, 0),
    ] {
        if !path.exists() {
            eprintln!("writing {} ...", path.display());
            write_archive(&oplog, path, gzip, filler);
        }
    }
    let oplog_bytes = std::fs::metadata(&oplog).unwrap().len();
    for p in [&oplog, &plain_archive, &filler_archive, &gz_archive] {
        std::io::copy(&mut File::open(p).unwrap(), &mut std::io::sink()).unwrap();
    }

    let size = |p: &Path| std::fs::metadata(p).unwrap().len() >> 20;
    println!(
        "oplog {} MiB; archive {} MiB; with a {} MiB collection first {} MiB; archive.gz {} MiB; best of {runs}",
        oplog_bytes >> 20,
        size(&plain_archive),
        FILLER_BYTES >> 20,
        size(&filler_archive),
        size(&gz_archive)
    );
    println!("{:<56} {:>8} {:>8}", "reader", "seconds", "MB/s");
    let row = |what: &str, f: &dyn Fn() -> u64| {
        if !what.contains(only.as_str()) {
            return;
        }
        let mut best = f64::MAX;
        let mut n = 0;
        for _ in 0..runs {
            let t = Instant::now();
            n = f();
            best = best.min(t.elapsed().as_secs_f64());
        }
        println!(
            "{what:<56} {best:>8.3} {:>8.0}   ({n} entries)",
            oplog_bytes as f64 / 1e6 / best
        );
    };
    let plain = || {
        OplogReader::new(
            "oplog.bson",
            File::open(&oplog).unwrap(),
            OplogOptions::default(),
        )
    };
    let from_archive = |path: &Path, verify_crc: bool| {
        let a = archive::open(path.to_str().unwrap(), ReadOptions { verify_crc }).unwrap();
        let ns = NamespaceReader::new(a, &Namespace::oplog()).unwrap();
        OplogReader::new("oplog (archive)", ns, OplogOptions::default())
    };

    row("plain file, OplogReader::next_entry", &|| entries(plain()));
    row(
        "archive, NamespaceReader + OplogReader::next_entry",
        &|| entries(from_archive(&plain_archive, true)),
    );
    row("archive, same, CRC not verified", &|| {
        entries(from_archive(&plain_archive, false))
    });
    row("archive after 256 MiB to skip, same", &|| {
        entries(from_archive(&filler_archive, true))
    });
    row(
        "plain file, OplogReader::next_bytes (framing only)",
        &|| frames(plain()),
    );
    row(
        "archive, NamespaceReader + OplogReader::next_bytes",
        &|| frames(from_archive(&plain_archive, true)),
    );
    row(
        "archive, ArchiveReader::next_event (all documents)",
        &|| {
            let mut a =
                archive::open(plain_archive.to_str().unwrap(), ReadOptions::default()).unwrap();
            let mut n = 0;
            while let Some(ev) = a.next_event().unwrap() {
                if let Event::Document(d) = ev {
                    n += d.namespace.is_oplog() as u64;
                }
            }
            n
        },
    );
    row(
        "archive.gz, NamespaceReader + OplogReader::next_entry",
        &|| entries(from_archive(&gz_archive, true)),
    );
    // The floor for the line above: decompressing alone (0 entries: no parsing).
    row("archive.gz, gunzip to nowhere (flate2 alone)", &|| {
        let file = File::open(&gz_archive).unwrap();
        let mut d =
            flate2::bufread::MultiGzDecoder::new(std::io::BufReader::with_capacity(1 << 20, file));
        std::io::copy(&mut d, &mut std::io::sink()).unwrap();
        0
    });
}

fn entries(mut r: OplogReader) -> u64 {
    while r.next_entry().unwrap().is_some() {}
    r.entries_read()
}

fn frames(mut r: OplogReader) -> u64 {
    while r.next_bytes().unwrap().is_some() {}
    r.entries_read()
}

/// `filler` bytes of a `bench.filler` collection made of the oplog's first
/// documents (none when 0), then the oplog.
fn write_archive(oplog: &Path, out: &Path, gzip: bool, filler: u64) {
    let header = Header::new("7.0.14", "archive_bench", 4);
    let filler_ns = Namespace::new("bench", "filler");
    let mut prelude = vec![CollectionMetadata::oplog()];
    if filler > 0 {
        let meta = r#"{"options":{},"indexes":[]}"#;
        prelude.insert(
            0,
            CollectionMetadata::new("bench", "filler", meta, CollectionType::Collection),
        );
    }
    let tmp = out.with_extension("tmp");
    let file = BufWriter::with_capacity(1 << 20, File::create(&tmp).unwrap());
    let mut w = ArchiveWriter::new(file, &header, &prelude, WriterOptions { gzip }).unwrap();
    if filler > 0 {
        let mut r = OplogReader::new("oplog", File::open(oplog).unwrap(), OplogOptions::default());
        let mut written = 0u64;
        while written < filler {
            let Some((doc, _, _)) = r.next_bytes().unwrap() else {
                break;
            };
            w.write_document(&filler_ns, doc).unwrap();
            written += doc.len() as u64;
        }
        w.end_namespace(&filler_ns).unwrap();
    }
    let mut r = OplogReader::new("oplog", File::open(oplog).unwrap(), OplogOptions::default());
    while let Some((doc, _, _)) = r.next_bytes().unwrap() {
        w.write_document(&Namespace::oplog(), doc).unwrap();
    }
    w.end_namespace(&Namespace::oplog()).unwrap();
    w.finish().unwrap();
    std::fs::rename(tmp, out).unwrap();
}
