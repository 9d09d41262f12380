//! The backup: a directory laid out the way `mongodump --oplog` writes it.
//!
//! ```text
//! backup/
//!   admin/system.version.bson           featureCompatibilityVersion
//!   admin/system.version.metadata.json
//!   <db>/<coll>.bson                    the collection's documents, one after another
//!   <db>/<coll>.metadata.json           {"indexes":[...],"uuid":"<32 hex>","collectionName":...,"type":"collection"}
//!   oplog.bson                          the entries written while the dump ran
//! ```
//!
//! Each collection is written from its live ids at the moment the simulated dump
//! reaches it (a real dump is not a point-in-time snapshot: replaying the backup's
//! own `oplog.bson` makes it consistent at its end).

use std::fs;
use std::io::{self, Write};
use std::path::Path;

use super::bsonw::BsonW;
use super::files::{write_atomic, AtomicFile};
use super::rng::hex;
use super::world::{Coll, IndexSpec};

/// The `featureCompatibilityVersion` recorded in `admin.system.version`.
pub const FCV: &str = "7.0";

fn index_json(name: &str, key: &[(&str, i32)], unique: bool, ttl: Option<i32>) -> String {
    let key: Vec<String> = key
        .iter()
        .map(|(f, d)| format!("{}:{d}", serde_json::to_string(f).unwrap_or_default()))
        .collect();
    let mut s = format!(
        "{{\"v\":2,\"key\":{{{}}},\"name\":{}",
        key.join(","),
        serde_json::to_string(name).unwrap_or_default()
    );
    if unique {
        s.push_str(",\"unique\":true");
    }
    if let Some(t) = ttl {
        s.push_str(&format!(",\"expireAfterSeconds\":{t}"));
    }
    s.push('}');
    s
}

/// mongodump's `<coll>.metadata.json` for a collection.
pub fn metadata_json(
    name: &str,
    uuid: &[u8; 16],
    indexes: &[IndexSpec],
    capped_size: Option<i64>,
) -> String {
    let mut idx = vec![index_json("_id_", &[("_id", 1)], false, None)];
    idx.extend(
        indexes
            .iter()
            .map(|i| index_json(i.name, i.key, i.unique, i.ttl)),
    );
    let options = match capped_size {
        Some(size) => format!("\"options\":{{\"capped\":true,\"size\":{size}}},"),
        None => String::new(),
    };
    format!(
        "{{{options}\"indexes\":[{}],\"uuid\":\"{}\",\"collectionName\":{},\"type\":\"collection\"}}",
        idx.join(","),
        hex(uuid),
        serde_json::to_string(name).unwrap_or_default()
    )
}

/// Writes `<db>/<coll>.bson` and its metadata; returns the number of documents.
pub fn write_collection(root: &Path, c: &Coll, seed: u64, w: &mut BsonW) -> io::Result<u64> {
    let dir = root.join(&c.db);
    fs::create_dir_all(&dir)?;
    let mut f = AtomicFile::create(&dir.join(format!("{}.bson", c.name)))?;
    w.clear();
    let mut n = 0u64;
    for l in c.pool.items() {
        c.shape.write_doc(w, seed, *l);
        n += 1;
        if w.buf.len() >= 1 << 20 {
            f.write_all(&w.buf)?;
            w.clear();
        }
    }
    f.write_all(&w.buf)?;
    w.clear();
    f.commit()?;
    let meta = metadata_json(&c.name, &c.uuid, &c.indexes, None);
    write_atomic(
        &dir.join(format!("{}.metadata.json", c.name)),
        meta.as_bytes(),
    )?;
    Ok(n)
}

/// Writes `admin/system.version.bson` (one document) and its metadata.
pub fn write_system_version(root: &Path, uuid: &[u8; 16], w: &mut BsonW) -> io::Result<u64> {
    let dir = root.join("admin");
    fs::create_dir_all(&dir)?;
    w.clear();
    w.start();
    w.str("_id", "featureCompatibilityVersion");
    w.str("version", FCV);
    w.end();
    write_atomic(&dir.join("system.version.bson"), &w.buf)?;
    w.clear();
    let meta = metadata_json("system.version", uuid, &[], None);
    write_atomic(&dir.join("system.version.metadata.json"), meta.as_bytes())?;
    Ok(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_has_mongodumps_shape() {
        let idx = [IndexSpec {
            name: "createdAt_1",
            key: &[("createdAt", 1)],
            unique: false,
            ttl: Some(604_800),
        }];
        let s = metadata_json("sessions_log", &[0xab; 16], &idx, None);
        assert_eq!(
            s,
            "{\"indexes\":[{\"v\":2,\"key\":{\"_id\":1},\"name\":\"_id_\"},\
             {\"v\":2,\"key\":{\"createdAt\":1},\"name\":\"createdAt_1\",\"expireAfterSeconds\":604800}],\
             \"uuid\":\"abababababababababababababababab\",\"collectionName\":\"sessions_log\",\"type\":\"collection\"}"
        );
        let v: serde_json::Value = serde_json::from_str(&s).unwrap();
        assert_eq!(v["indexes"][0]["name"], "_id_");
        let capped = metadata_json("events", &[1; 16], &[], Some(4096));
        let v: serde_json::Value = serde_json::from_str(&capped).unwrap();
        assert_eq!(v["options"]["capped"], true);
    }
}
