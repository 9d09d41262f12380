//! Micro-benchmark of the replay engine's update appliers.
//!
//! Run with `cargo run --release --example engine_update_bench`. Prints the CPU time
//! per update (classification + application into a reused buffer) for typical oplog
//! `u` entries against a ~400-byte document. CPU time of this thread, not wall time,
//! so that other processes on a shared machine do not inflate the numbers.

/// CPU time consumed by this thread, in nanoseconds.
fn cpu_ns() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 * 1e9 + ts.tv_nsec as f64
}

use std::hint::black_box;

use bson::oid::ObjectId;
use bson::{rawdoc, DateTime, RawDocumentBuf};
use pitr::engine::{apply_oplog_update, ApplyOptions, IdKey};

fn document() -> RawDocumentBuf {
    rawdoc! {
        "_id": ObjectId::parse_str("65f0a1b2c3d4e5f601234567").unwrap(),
        "name": "Ada Lovelace",
        "email": "ada@example.com",
        "age": 36,
        "active": true,
        "score": 3.25,
        "created": DateTime::from_millis(1_700_000_000_000),
        "counter": 17i64,
        "address": {"street": "12 St James's Square", "city": "London", "zip": "SW1Y 4JH", "geo": {"lat": 51.507, "lng": -0.134}},
        "tags": ["math", "poetry", "engines"],
        "prefs": {"lang": "en", "tz": "Europe/London", "mail": false},
        "notes": "first programmer",
    }
}

fn bench(name: &str, pre: &RawDocumentBuf, o: &RawDocumentBuf) {
    // `ENGINE_BENCH=<text>` runs only the cases whose name contains it.
    if std::env::var("ENGINE_BENCH").is_ok_and(|f| !name.contains(&f)) {
        return;
    }
    let opts = ApplyOptions::default();
    let mut out = Vec::with_capacity(1024);
    // Check once, and warm up.
    apply_oplog_update(pre, o, opts, &mut out).expect("the update applies");
    let post_len = out.len();
    let iters = 2_000_000u32;
    let start = cpu_ns();
    for _ in 0..iters {
        out.clear();
        apply_oplog_update(black_box(pre), black_box(o), opts, &mut out).unwrap();
        black_box(&out);
    }
    let ns = (cpu_ns() - start) / f64::from(iters);
    println!(
        "{name:<40} {ns:>7.1} ns/update   ({} -> {post_len} bytes)",
        pre.as_bytes().len()
    );
}

fn main() {
    let pre = document();
    // Calibration: the cost of merely copying the document on this machine.
    {
        let mut out = Vec::with_capacity(1024);
        let iters = 2_000_000u32;
        let start = cpu_ns();
        for _ in 0..iters {
            out.clear();
            out.extend_from_slice(black_box(pre.as_bytes()));
            black_box(&out);
        }
        let ns = (cpu_ns() - start) / f64::from(iters);
        println!(
            "{:<40} {ns:>7.1} ns/copy",
            "(calibration: memcpy of the document)"
        );
    }
    bench(
        "$v:2 diff, 3 fields in `u`",
        &pre,
        &rawdoc! {"$v": 2, "diff": {"u": {"age": 37, "score": 4.5, "counter": 18i64}}},
    );
    bench(
        "$v:2 diff, nested `s` sub-diff",
        &pre,
        &rawdoc! {"$v": 2, "diff": {"saddress": {"u": {"city": "Marylebone"}, "sgeo": {"u": {"lat": 51.52}}}}},
    );
    bench(
        "$v:2 diff, array append",
        &pre,
        &rawdoc! {"$v": 2, "diff": {"stags": {"a": true, "u3": "analysis"}}},
    );
    bench(
        "$v:1 $set of a dotted path",
        &pre,
        &rawdoc! {"$v": 1, "$set": {"address.geo.lat": 51.52}},
    );
    bench(
        "replacement",
        &pre,
        &rawdoc! {
            "_id": ObjectId::parse_str("65f0a1b2c3d4e5f601234567").unwrap(),
            "name": "Ada King", "email": "ada@example.com", "age": 37, "active": true,
            "score": 4.5, "created": DateTime::from_millis(1_700_000_000_000), "counter": 18i64,
            "address": {"street": "12 St James's Square", "city": "London", "zip": "SW1Y 4JH"},
            "tags": ["math", "poetry", "engines", "analysis"], "notes": "first programmer",
        },
    );

    // The `_id` key of each entry: built from the document's bytes, then looked up.
    if std::env::var("ENGINE_BENCH").is_ok_and(|f| !"IdKey".contains(&f)) {
        return;
    }
    let iters = 5_000_000u32;
    let start = cpu_ns();
    let mut keys = std::collections::BTreeMap::new();
    for i in 0..1000u32 {
        let mut bytes = [0u8; 12];
        bytes[8..].copy_from_slice(&i.to_be_bytes());
        let d = rawdoc! {"_id": ObjectId::from_bytes(bytes)};
        keys.insert(IdKey::from_document_id(&d).unwrap(), i);
    }
    let probe = rawdoc! {"_id": ObjectId::from_bytes([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 244])};
    let mut found = 0u64;
    for _ in 0..iters {
        let k = IdKey::from_document_id(black_box(&probe)).unwrap();
        found += u64::from(*keys.get(&k).unwrap());
    }
    black_box(found);
    let ns = (cpu_ns() - start) / f64::from(iters);
    println!(
        "{:<40} {ns:>7.1} ns/lookup",
        "IdKey from document + BTreeMap (1000)"
    );
}
