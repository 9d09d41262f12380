//! A scenario whose incident destroys a large collection, for the embedded engine's
//! memory and Ctrl-C tests: the generator's bench (a realistic backup and oplog),
//! plus a collection `bulk.filler` of `documents` documents of `pad` bytes in the
//! backup, dropped by one more oplog entry after the last one (the limit: the
//! replay stops just before it, and its documents are what the drop destroys).
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use bson::{doc, spec::BinarySubtype, Binary, Bson, Timestamp};

pub struct DropScenario {
    pub dir: tempfile::TempDir,
    /// `t:i` of the drop.
    pub until: String,
    pub documents: u64,
}

impl DropScenario {
    pub fn backup(&self) -> PathBuf {
        self.dir.path().join("backup")
    }

    pub fn oplog(&self) -> PathBuf {
        self.dir.path().join("oplog.bson")
    }
}

const FILLER_UUID: [u8; 16] = [0x5a; 16];

/// The bench scenario of `oplog_bytes` (seed 3) with `documents` filler documents of
/// about `pad` bytes each, dropped at the end.
pub fn drop_scenario(oplog_bytes: u64, documents: u64, pad: usize) -> DropScenario {
    let dir = tempfile::tempdir().unwrap();
    pitr_fixturegen::generate(&pitr_fixturegen::Options {
        out: dir.path().to_path_buf(),
        seed: 3,
        scenario: pitr_fixturegen::Scenario::Bench,
        target_bytes: oplog_bytes,
        start: pitr_fixturegen::DEFAULT_START_SECS,
        mix: Default::default(),
    })
    .unwrap();
    let bulk = dir.path().join("backup/bulk");
    std::fs::create_dir_all(&bulk).unwrap();
    let mut data = Vec::new();
    let text = "x".repeat(pad);
    for i in 0..documents {
        let d = doc! { "_id": i as i64, "pad": &text, "n": (i * 7) as i64 };
        data.extend(bson::to_vec(&d).unwrap());
    }
    std::fs::write(bulk.join("filler.bson"), data).unwrap();
    std::fs::write(
        bulk.join("filler.metadata.json"),
        format!(
            r#"{{"indexes":[{{"v":{{"$numberInt":"2"}},"key":{{"_id":{{"$numberInt":"1"}}}},"name":"_id_"}}],"uuid":"{}","collectionName":"filler","type":"collection"}}"#,
            FILLER_UUID.iter().map(|b| format!("{b:02x}")).collect::<String>()
        ),
    )
    .unwrap();
    let oplog = dir.path().join("oplog.bson");
    let last = last_ts(&oplog);
    let t = last.time + 1;
    let drop = doc! {
        "op": "c",
        "ns": "bulk.$cmd",
        "ui": Binary { subtype: BinarySubtype::Uuid, bytes: FILLER_UUID.to_vec() },
        "o": { "drop": "filler" },
        "o2": { "numRecords": documents as i64 },
        "ts": Bson::Timestamp(Timestamp { time: t, increment: 1 }),
        "t": 1_i64,
        "v": 2_i64,
        "wall": bson::DateTime::from_millis(t as i64 * 1000),
    };
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&oplog)
        .unwrap();
    std::io::Write::write_all(&mut f, &bson::to_vec(&drop).unwrap()).unwrap();
    DropScenario {
        dir,
        until: format!("{t}:1"),
        documents,
    }
}

fn last_ts(oplog: &Path) -> Timestamp {
    let bytes = std::fs::read(oplog).unwrap();
    let mut at = 0;
    let mut last = None;
    while at + 4 <= bytes.len() {
        let len = i32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        let d = bson::RawDocument::from_bytes(&bytes[at..at + len]).unwrap();
        last = Some(d.get_timestamp("ts").unwrap());
        at += len;
    }
    last.expect("a non-empty oplog")
}
