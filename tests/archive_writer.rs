//! `ArchiveWriter` writes what mongodump writes: real archives read and written back
//! come out byte for byte the same; the writer's own refusals.
//!
//! (Archives from the real mongodump 100.x, and the real mongorestore reading the
//! writer's output, are in `archive_real_tools.rs`.)

mod archive_common;
mod common;

use archive_common::*;
use pitr::archive::{
    self, ArchiveReader, ArchiveWriter, CollectionMetadata, CollectionType, Header, Namespace,
    ReadOptions, WriteError, WriterOptions,
};

fn doc(i: i32) -> Vec<u8> {
    bson::to_vec(&bson::doc! { "_id": i, "pad": "x".repeat((i % 7) as usize) }).unwrap()
}

#[test]
fn peer_archives_written_back_are_identical() {
    let Some(td) = peer_testdata("peer_archives_written_back_are_identical") else {
        return;
    };
    for (file, whole) in [
        // mongodump 100.3.1: the whole archive, prelude included.
        ("timeseries_tests/dump.archive", true),
        // mongodump 3.4 and 4.1 wrote no `type` in the prelude: compare the data part.
        ("test.bar.archive", false),
        ("dump-w-oplog.archive", false),
    ] {
        let original = std::fs::read(td.join(file)).unwrap();
        let r = ArchiveReader::new(
            file,
            std::io::Cursor::new(original.clone()),
            ReadOptions::default(),
        )
        .unwrap();
        let written = replay(r, false);
        if whole {
            assert!(written == original, "{file}: written back differs");
        } else {
            assert!(
                written[prelude_end(&written)..] == original[prelude_end(&original)..],
                "{file}: data part written back differs"
            );
        }
    }
}

fn small_archive(gzip: bool) -> Vec<u8> {
    let header = Header::new("7.0.14", "pitr-test", 1);
    let prelude = [
        CollectionMetadata::new(
            "shop",
            "orders",
            r#"{"options":{},"indexes":[]}"#,
            CollectionType::Collection,
        ),
        CollectionMetadata::new(
            "shop",
            "empty",
            r#"{"options":{}}"#,
            CollectionType::Collection,
        ),
        CollectionMetadata::oplog(),
    ];
    let mut w = ArchiveWriter::new(Vec::new(), &header, &prelude, WriterOptions { gzip }).unwrap();
    let orders = Namespace::new("shop", "orders");
    let empty = Namespace::new("shop", "empty");
    let oplog = Namespace::oplog();
    for i in 0..10 {
        // Interleaved: orders and empty alternate in runs of 3, giving several segments.
        let ns = if (i / 3) % 2 == 0 { &orders } else { &empty };
        w.write_document(ns, &doc(i)).unwrap();
    }
    w.end_namespace(&orders).unwrap();
    w.end_namespace(&empty).unwrap();
    w.write_document(&oplog, &doc(99)).unwrap();
    w.end_namespace(&oplog).unwrap();
    w.finish().unwrap()
}

#[test]
fn the_layout_is_mongodumps() {
    let bytes = small_archive(false);
    let data = &bytes[prelude_end(&bytes)..];
    // Walk the blocks: (namespace, EOF?, documents in the segment).
    let mut blocks = Vec::new();
    let mut p = 0;
    while p < data.len() {
        let n = u32::from_le_bytes(data[p..p + 4].try_into().unwrap()) as usize;
        let h = bson::RawDocument::from_bytes(&data[p..p + n]).unwrap();
        let ns = format!(
            "{}.{}",
            h.get_str("db").unwrap(),
            h.get_str("collection").unwrap()
        );
        let eof = h.get_bool("EOF").unwrap();
        p += n;
        let mut docs = 0;
        loop {
            let n = u32::from_le_bytes(data[p..p + 4].try_into().unwrap());
            if n == u32::MAX {
                p += 4;
                break;
            }
            p += n as usize;
            docs += 1;
        }
        blocks.push((ns, eof, docs));
    }
    let b = |ns: &str, eof, docs| (ns.to_string(), eof, docs);
    assert_eq!(
        blocks,
        [
            b("shop.orders", false, 3),
            b("shop.empty", false, 3),
            b("shop.orders", false, 3),
            b("shop.empty", false, 1),
            // Ending a namespace that is not the current one: an empty segment
            // first (multiplexer.go: MuxIn.Close flushes its buffer, then formatEOF).
            b("shop.orders", false, 0),
            b("shop.orders", true, 0),
            // The current one: its segment just ends.
            b("shop.empty", false, 0),
            b("shop.empty", true, 0),
            b(".oplog", false, 1),
            b(".oplog", true, 0),
        ]
    );
}

#[test]
fn gzip_wraps_the_whole_stream_and_reads_back() {
    let plain = small_archive(false);
    let gz = small_archive(true);
    assert_eq!(&gz[..2], &[0x1f, 0x8b]);
    assert_eq!(gunzip(&gz), plain);
    let r = ArchiveReader::new("x", std::io::Cursor::new(gz), ReadOptions::default()).unwrap();
    assert!(r.is_gzip());
    let inv = inventory(r).unwrap();
    assert_eq!(inv.counts["shop.orders"], 6);
    assert_eq!(inv.counts["shop.empty"], 4);
    assert_eq!(inv.counts["oplog"], 1);
    assert_eq!(inv.documents["shop.empty"][0], doc(3));
    assert_eq!(inv.documents["oplog"], [doc(99)]);
}

#[test]
fn the_writer_refuses_what_mongorestore_would() {
    let header = Header::new("7.0.14", "t", 1);
    let prelude = [CollectionMetadata::new(
        "a",
        "b",
        "{}",
        CollectionType::Collection,
    )];
    let ab = Namespace::new("a", "b");
    let mut w =
        ArchiveWriter::new(Vec::new(), &header, &prelude, WriterOptions::default()).unwrap();
    assert!(matches!(
        w.write_document(&Namespace::new("a", "zz"), &doc(1)),
        Err(WriteError::NotInPrelude(ns)) if ns == "a.zz"
    ));
    let mut bad = doc(1);
    bad.push(0);
    assert!(matches!(
        w.write_document(&ab, &bad),
        Err(WriteError::BadDocument { .. })
    ));
    assert!(matches!(
        w.write_document(&ab, &[1, 2]),
        Err(WriteError::BadDocument { .. })
    ));
    w.write_document(&ab, &doc(1)).unwrap();
    assert_eq!(w.documents(&ab), Some(1));
    w.end_namespace(&ab).unwrap();
    assert!(matches!(
        w.write_document(&ab, &doc(2)),
        Err(WriteError::AlreadyEnded(_))
    ));
    assert!(matches!(
        w.end_namespace(&ab),
        Err(WriteError::AlreadyEnded(_))
    ));
    w.finish().unwrap();

    // The oplog comes last.
    let with_oplog = [prelude[0].clone(), CollectionMetadata::oplog()];
    let mut w =
        ArchiveWriter::new(Vec::new(), &header, &with_oplog, WriterOptions::default()).unwrap();
    match w.write_document(&Namespace::oplog(), &doc(1)) {
        Err(e @ WriteError::OplogNotLast(_)) => assert!(e.to_string().contains("`a.b`"), "{e}"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        w.end_namespace(&Namespace::oplog()),
        Err(WriteError::OplogNotLast(_))
    ));
    w.end_namespace(&ab).unwrap();
    w.write_document(&Namespace::oplog(), &doc(1)).unwrap();

    let w = ArchiveWriter::new(Vec::new(), &header, &prelude, WriterOptions::default()).unwrap();
    match w.finish() {
        Err(e @ WriteError::Unended(_)) => assert!(e.to_string().contains("`a.b`"), "{e}"),
        other => panic!("{:?}", other.map(|v| v.len())),
    }
}

#[test]
fn timeseries_data_goes_under_system_buckets_before_8_3() {
    let prelude = [CollectionMetadata::new(
        "m",
        "temps",
        "{}",
        CollectionType::Timeseries,
    )];
    for (version, data) in [("7.0.14", "system.buckets.temps"), ("8.3.1", "temps")] {
        let header = Header::new(version, "t", 1);
        let mut w =
            ArchiveWriter::new(Vec::new(), &header, &prelude, WriterOptions::default()).unwrap();
        let ns = Namespace::new("m", data);
        w.write_document(&ns, &doc(1)).unwrap();
        w.end_namespace(&ns).unwrap();
        let bytes = w.finish().unwrap();
        let r =
            archive::ArchiveReader::new("x", std::io::Cursor::new(bytes), ReadOptions::default())
                .unwrap();
        assert_eq!(
            inventory(r).unwrap().counts[&format!("m.{data}")],
            1,
            "{version}"
        );
    }
}

#[test]
fn events_carry_offsets_and_indexes() {
    let bytes = small_archive(false);
    let mut r = ArchiveReader::new(
        "x",
        std::io::Cursor::new(bytes.clone()),
        ReadOptions::default(),
    )
    .unwrap();
    let mut per_ns = std::collections::BTreeMap::<String, u64>::new();
    loop {
        let end = match r.next_event().unwrap() {
            None => break,
            Some(archive::Event::Document(d)) => {
                let o = d.offset as usize;
                assert_eq!(&bytes[o..o + d.bytes.len()], d.bytes);
                let n = per_ns.entry(d.namespace.to_string()).or_default();
                assert_eq!(d.index, *n);
                *n += 1;
                d.offset + d.bytes.len() as u64
            }
            Some(archive::Event::End(e)) => {
                let ns = e.namespace.to_string();
                assert_eq!(e.documents, per_ns.get(&ns).copied().unwrap_or(0));
                // The EOF header of that namespace is at the offset given.
                let o = e.offset as usize;
                let len = u32::from_le_bytes(bytes[o..o + 4].try_into().unwrap()) as usize;
                let h = bson::RawDocument::from_bytes(&bytes[o..o + len]).unwrap();
                assert!(h.get_bool("EOF").unwrap());
                assert_eq!(h.get_str("collection").unwrap(), e.namespace.collection);
                (o + len + 4) as u64
            }
        };
        // offset() is just past what was handed out.
        assert_eq!(r.offset(), end);
    }
    assert_eq!(r.offset(), bytes.len() as u64);
}
