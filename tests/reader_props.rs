//! Property tests: whatever bytes the reader is fed (arbitrary, or real entries
//! mutated, truncated and spliced), it returns entries or an error; it never
//! panics, never loops, and never hands out more entries than the bytes can hold.

use std::io::Cursor;

use bson::{doc, spec::BinarySubtype, Binary, DateTime, Timestamp};
use pitr::oplog::{OplogReader, ReadOptions};
use proptest::prelude::*;

/// A few realistic entries of different shapes.
fn sample_entries() -> Vec<u8> {
    let ui = Binary {
        subtype: BinarySubtype::Uuid,
        bytes: vec![7; 16],
    };
    let docs = [
        doc! { "op": "i", "ns": "shop.orders", "ui": ui.clone(), "o": { "_id": 1, "qty": 3, "items": ["a", "b"] },
        "ts": Timestamp { time: 1_700_000_000, increment: 1 }, "t": 3i64, "v": 2i64, "wall": DateTime::from_millis(1_700_000_000_100) },
        doc! { "op": "u", "ns": "shop.orders", "ui": ui.clone(), "o": { "$v": 2, "diff": { "u": { "qty": 4 }, "d": { "x": false } } },
        "o2": { "_id": 1 }, "ts": Timestamp { time: 1_700_000_000, increment: 2 }, "t": 3i64, "v": 2i64 },
        doc! { "op": "c", "ns": "admin.$cmd", "o": { "applyOps": [ { "op": "d", "ns": "shop.orders", "ui": ui.clone(), "o": { "_id": 1 } } ] },
        "lsid": { "id": ui.clone() }, "txnNumber": 1i64, "ts": Timestamp { time: 1_700_000_001, increment: 1 }, "t": 3i64, "v": 2i64 },
        doc! { "op": "c", "ns": "shop.$cmd", "ui": ui, "o": { "drop": "orders" }, "o2": { "numRecords": 0 },
        "ts": Timestamp { time: 1_700_000_002, increment: 1 }, "t": 3i64, "v": 2i64 },
        doc! { "op": "n", "ns": "", "o": { "msg": "periodic noop" }, "ts": Timestamp { time: 1_700_000_003, increment: 1 }, "v": 2.0 },
    ];
    docs.iter().flat_map(|d| bson::to_vec(d).unwrap()).collect()
}

/// Reads everything, walking applyOps too. Returns the number of entries read.
fn drain(bytes: Vec<u8>, allow_truncated: bool) -> Result<u64, String> {
    let len = bytes.len();
    let mut r = OplogReader::new(
        "prop.bson",
        Cursor::new(bytes),
        ReadOptions { allow_truncated },
    );
    let mut n = 0u64;
    loop {
        match r.next_entry() {
            Ok(Some(e)) => {
                n += 1;
                // Walking nested operations must not panic either.
                let _ = e.for_each_leaf(
                    &mut |l: &pitr::oplog::Entry<'_>| -> Result<(), pitr::oplog::EntryError> {
                        let _ = (l.command_name(), l.db(), l.coll(), l.wall(), l.ui_string());
                        Ok(())
                    },
                );
                // Each entry is at least 5 bytes: more entries than that means a loop.
                assert!(
                    n <= (len / 5) as u64 + 1,
                    "read {n} entries from {len} bytes"
                );
            }
            Ok(None) => return Ok(n),
            Err(e) => return Err(e.to_string()),
        }
    }
}

/// Frames `bodies` as BSON documents: a correct length prefix and the trailing NUL,
/// so that every case gets past the framing checks into element parsing (random
/// bytes almost never have a plausible length prefix).
fn framed(bodies: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for b in bodies {
        out.extend(((b.len() + 5) as i32).to_le_bytes());
        out.extend(b);
        out.push(0);
    }
    out
}

/// An element with a real BSON type byte (or any byte), a name, and random value
/// bytes: the parser has to walk into values of every type.
fn element() -> impl Strategy<Value = Vec<u8>> {
    let types = prop_oneof![
        prop::sample::select(vec![
            0x01u8, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e,
            0x0f, 0x10, 0x11, 0x12, 0x13, 0x7f, 0xff,
        ]),
        any::<u8>(),
    ];
    let names = prop::sample::select(vec![
        "ts",
        "op",
        "ns",
        "o",
        "o2",
        "ui",
        "t",
        "v",
        "wall",
        "lsid",
        "txnNumber",
        "applyOps",
        "drop",
        "x",
    ]);
    (types, names, proptest::collection::vec(any::<u8>(), 0..24)).prop_map(|(t, n, v)| {
        let mut e = vec![t];
        e.extend(n.as_bytes());
        e.push(0);
        e.extend(v);
        e
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn framed_random_bodies_never_panic(
        bodies in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..200), 0..6),
        allow in any::<bool>(),
    ) {
        let bytes = framed(&bodies);
        if let Ok(n) = drain(bytes, allow) {
            // Every framed document was handed out: none skipped, none invented.
            prop_assert_eq!(n, bodies.len() as u64);
        }
    }

    #[test]
    fn framed_element_soup_never_panics(
        docs in proptest::collection::vec(proptest::collection::vec(element(), 0..8), 0..5),
        allow in any::<bool>(),
    ) {
        let bodies: Vec<Vec<u8>> = docs.into_iter().map(|els| els.concat()).collect();
        let bytes = framed(&bodies);
        if let Ok(n) = drain(bytes, allow) {
            prop_assert_eq!(n, bodies.len() as u64);
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2048), allow in any::<bool>()) {
        let _ = drain(bytes, allow);
    }

    #[test]
    fn mutated_real_entries_never_panic(
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..8),
        cut in any::<prop::sample::Index>(),
        do_cut in any::<bool>(),
        allow in any::<bool>(),
    ) {
        let mut bytes = sample_entries();
        for (at, val) in flips {
            let i = at.index(bytes.len());
            bytes[i] = val;
        }
        if do_cut {
            let n = cut.index(bytes.len());
            bytes.truncate(n);
        }
        let _ = drain(bytes, allow);
    }

    #[test]
    fn any_prefix_of_valid_entries_reads_its_complete_entries(cut in any::<prop::sample::Index>()) {
        let bytes = sample_entries();
        let n = cut.index(bytes.len() + 1);
        let mut sizes = Vec::new();
        let mut off = 0;
        while off < bytes.len() {
            let l = i32::from_le_bytes(bytes[off..off + 4].try_into().unwrap()) as usize;
            sizes.push(off + l);
            off += l;
        }
        let complete = sizes.iter().filter(|end| **end <= n).count() as u64;
        let prefix = bytes[..n].to_vec();
        // With --allow-truncated: exactly the complete entries, no error.
        prop_assert_eq!(drain(prefix.clone(), true), Ok(complete));
        // Without: an error unless the cut falls on an entry boundary.
        let on_boundary = n == 0 || sizes.contains(&n);
        prop_assert_eq!(drain(prefix, false).is_ok(), on_boundary);
    }
}
