//! The heap the embedded engine's in-memory documents take beyond their own bytes,
//! which the store's memory estimate counts per document (`ENTRY_OVERHEAD` in
//! `src/engine/replica/store.rs`).
//!
//! Run with `cargo run --release --example store_memory -- [DOCS] [BYTES] [oid|int]`
//! (default: 1,000,000 documents of 300 bytes under ObjectId `_id`s, in two
//! partitions as with two writer threads). Prints the resident memory grown per
//! document beyond its bytes once they are all in, and the peak while they are
//! sorted by `_id` for the scans in order (`Store::flush`). One configuration per
//! process, so that each peak is its own.

use bson::oid::ObjectId;
use bson::RawDocumentBuf;
use pitr::engine::replica::store::{Content, Store};
use pitr::engine::IdKey;

/// A field of `/proc/self/status` in KiB (VmRSS, VmHWM).
fn status_kib(field: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    s.lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .expect("a VmRSS/VmHWM line")
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let docs: usize = args.first().map_or(1_000_000, |a| a.parse().expect("DOCS"));
    let bytes: usize = args.get(1).map_or(300, |a| a.parse().expect("BYTES"));
    let oid = args.get(2).is_none_or(|a| a == "oid");

    let mut store = Store::partitioned(Content::Documents, usize::MAX, None, 2);
    let before = status_kib("VmRSS:");
    let mut own = 0usize;
    for n in 0..docs {
        let mut d = RawDocumentBuf::new();
        if oid {
            d.append("_id", ObjectId::new());
        } else {
            d.append("_id", n as i32);
        }
        let pad = bytes.saturating_sub(d.as_bytes().len() + 8);
        d.append("p", "x".repeat(pad));
        let key = IdKey::from_document_id(&d).expect("an _id");
        own += d.as_bytes().len();
        store.put(1, key, d.as_bytes()).expect("in memory");
    }
    let loaded = status_kib("VmRSS:");
    store.flush().expect("in memory");
    let sorted = status_kib("VmRSS:");
    let peak = status_kib("VmHWM:");
    let per = |kib: u64| (kib.saturating_sub(before) * 1024) as f64 / docs as f64;
    let doc_bytes = own as f64 / docs as f64;
    println!(
        "{docs} documents of {doc_bytes:.0} bytes, {} _ids: beyond their bytes, {:.0} bytes each loaded, {:.0} sorted, {:.0} at the peak (estimate counts {:.0})",
        if oid { "ObjectId" } else { "int32" },
        per(loaded) - doc_bytes,
        per(sorted) - doc_bytes,
        per(peak) - doc_bytes,
        store.peak_memory() as f64 / docs as f64 - doc_bytes,
    );
}
