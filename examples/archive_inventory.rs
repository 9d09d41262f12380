//! Lists what a mongodump archive holds: header, prelude, and per namespace the
//! document count and checksum, in one streaming pass (what `pitr::archive` sees).
//!
//! Usage: cargo run --release --example archive_inventory -- FILE|-

use std::collections::BTreeMap;

use pitr::archive::{self, Event, ReadOptions};

fn main() {
    let spec = std::env::args()
        .nth(1)
        .expect("usage: archive_inventory FILE|-");
    if let Err(e) = run(&spec) {
        eprintln!("error: {e}");
        let mut src = std::error::Error::source(&e);
        while let Some(s) = src {
            eprintln!("  caused by: {s}");
            src = s.source();
        }
        std::process::exit(2);
    }
}

fn run(spec: &str) -> Result<(), archive::ArchiveError> {
    let mut r = archive::open(spec, ReadOptions::default())?;
    let h = r.header().clone();
    println!(
        "gzip: {}; format {}; server {}; tool {}; concurrent_collections {}",
        r.is_gzip(),
        h.format_version,
        h.server_version,
        h.tool_version,
        h.concurrent_collections
    );
    for m in r.prelude() {
        println!(
            "prelude: db={:?} collection={:?} type={:?} size={} metadata={} bytes",
            m.db,
            m.collection,
            m.kind.as_str(),
            m.size,
            m.metadata.len()
        );
    }
    let mut segments: BTreeMap<String, u64> = BTreeMap::new();
    let mut last = String::new();
    while let Some(ev) = r.next_event()? {
        match ev {
            Event::Document(d) => {
                let ns = d.namespace.to_string();
                if ns != last {
                    *segments.entry(ns.clone()).or_default() += 1;
                    last = ns;
                }
            }
            Event::End(e) => {
                last.clear();
                println!(
                    "end: {} documents={} bytes={} crc={:?} (EOF header at byte {})",
                    e.namespace, e.documents, e.bytes, e.crc, e.offset
                );
            }
        }
    }
    println!(
        "complete at byte {}; runs of documents per namespace: {segments:?}",
        r.offset()
    );
    Ok(())
}
