//! `pitr verify --cluster DIR`: a sharded cluster restored from `pitr replay --cluster`'s
//! merged dump, checked through its `mongos` against that dump. mongos has no
//! `dbHash` (it is a per-`mongod` command, `src/mongo/db/commands/dbhash.cpp`), so the
//! content is compared by pitr itself: the md5 of a collection's documents in `_id`
//! order, read through mongos (`find`, sorted by `_id`, as raw BSON) against the same
//! over the dump's documents sorted as the server sorts `_id`
//! ([`crate::engine::compare_values`]). The counts are `countDocuments`, as for a
//! single server. The `admin` database (users and roles) is not compared: reading
//! `admin.system.users` takes privileges a verifying user need not have.

use std::path::{Path, PathBuf};
use std::time::Duration;

use bson::{doc, RawDocumentBuf};
use futures_util::TryStreamExt;
use md5::{Digest, Md5};

use super::compare::{compare, Check, Expectation};
use super::connect::{connect, driver_message};
use super::error::VerifyError;
use super::observe::{observe, ContentKind};
use super::{redact_uri, VerifyReport};
use crate::oplog::Ts;

/// What the merged dump holds: per namespace, its count and content md5.
pub fn expectations_from_dump(dir: &Path) -> Result<(Vec<Expectation>, Ts), VerifyError> {
    let bad = |path: &Path, why: String| VerifyError::NotAMergedDump {
        dir: dir.to_path_buf(),
        why: format!("`{}`: {why}", path.display()),
    };
    let sharding = dir.join(crate::cluster::restore::SHARDING_FILE);
    let text = std::fs::read_to_string(&sharding).map_err(|e| bad(&sharding, e.to_string()))?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        bad(
            &sharding,
            format!("not the sharding.json of `pitr replay --cluster`: {e}"),
        )
    })?;
    let limit = v["limit"]
        .as_str()
        .and_then(|s| crate::time::parse_time(s).ok())
        .map(|t| t.ts)
        .ok_or_else(|| bad(&sharding, "it names no `limit`".into()))?;
    let mut exps = Vec::new();
    for db in sorted_entries(dir).map_err(|e| bad(dir, e.to_string()))? {
        let name = db
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if !db.is_dir() || name == crate::cluster::restore::MEMBERS_DIR || name == "admin" {
            continue;
        }
        for f in sorted_entries(&db).map_err(|e| bad(&db, e.to_string()))? {
            let file = f
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let Some(coll) = file.strip_suffix(".bson") else {
                continue;
            };
            let (documents, md5) = count_and_md5(&f).map_err(|why| bad(&f, why))?;
            exps.push(Expectation {
                ns: format!("{name}.{coll}"),
                check: Check::Count,
                documents: Some(documents),
                num_records: None,
                md5: Some(md5),
                md5_not_predicted: None,
            });
        }
    }
    Ok((exps, limit))
}

fn sorted_entries(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    v.sort();
    Ok(v)
}

/// The count of a `.bson` file's documents and their md5 in `_id` order, streamed:
/// the merged dump is written in `_id` order, which is checked as the file is read
/// (memory stays one document); a file that is not in that order is read whole and
/// sorted.
fn count_and_md5(file: &Path) -> Result<(u64, String), String> {
    use std::io::Read;
    let mut r = std::io::BufReader::with_capacity(
        1 << 20,
        std::fs::File::open(file).map_err(|e| e.to_string())?,
    );
    let (mut h, mut n, mut prev) = (Md5::new(), 0u64, Vec::new());
    loop {
        let mut len = [0u8; 4];
        match r.read(&mut len[..1]).map_err(|e| e.to_string())? {
            0 => return Ok((n, hex(&h.finalize()))),
            _ => r.read_exact(&mut len[1..]).map_err(|e| e.to_string())?,
        }
        let size = i32::from_le_bytes(len) as usize;
        if !(5..=crate::stream::MAX_DOCUMENT_BYTES).contains(&size) {
            return Err(format!("document {n} has an impossible length {size}"));
        }
        let mut doc = len.to_vec();
        doc.resize(size, 0);
        r.read_exact(&mut doc[4..])
            .map_err(|e| format!("document {n} is cut: {e}"))?;
        if n > 0 && id_order(&prev, &doc) == std::cmp::Ordering::Greater {
            let bytes = std::fs::read(file).map_err(|e| e.to_string())?;
            let docs = split_documents(&bytes)?;
            return Ok((docs.len() as u64, content_md5(docs)));
        }
        h.update(&doc);
        n += 1;
        prev = doc;
    }
}

/// The order of two documents by `_id`, as the server sorts them.
fn id_order(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    fn id(d: &[u8]) -> Option<bson::RawBsonRef<'_>> {
        bson::RawDocument::from_bytes(d)
            .ok()
            .and_then(|r| r.get("_id").ok().flatten())
    }
    match (id(a), id(b)) {
        (Some(x), Some(y)) => crate::engine::compare_values(x, y),
        _ => std::cmp::Ordering::Equal,
    }
}

/// The documents of a `.bson` file, each checked to be one whole document.
fn split_documents(bytes: &[u8]) -> Result<Vec<&[u8]>, String> {
    let mut out = Vec::new();
    let mut at = 0usize;
    while at < bytes.len() {
        let len = bytes
            .get(at..at + 4)
            .map(|b| i32::from_le_bytes(b.try_into().expect("4 bytes")) as usize)
            .filter(|n| *n >= 5 && at + n <= bytes.len())
            .ok_or_else(|| format!("a document at byte {at} is cut or damaged"))?;
        out.push(&bytes[at..at + len]);
        at += len;
    }
    Ok(out)
}

/// md5 over the documents in `_id` order, as the server returns them sorted by `_id`.
fn content_md5(mut docs: Vec<&[u8]>) -> String {
    docs.sort_by(|a, b| id_order(a, b));
    let mut h = Md5::new();
    for d in docs {
        h.update(d);
    }
    hex(&h.finalize())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Checks the cluster at `uri` (its mongos) against the merged dump in `dir`.
pub async fn verify_cluster(
    uri: &str,
    dir: &Path,
    timeout: Duration,
    progress: &dyn crate::plan::Progress,
) -> Result<VerifyReport, VerifyError> {
    let (exps, limit) = expectations_from_dump(dir)?;
    let client = connect(uri, timeout).await?;
    let wanted: Vec<String> = exps.iter().map(|e| e.ns.clone()).collect();
    let observed = read_cluster(&client, uri, &wanted, progress).await;
    super::connect::close(client).await;
    let observed = observed?;
    let outcome = compare(&exps, &observed);
    Ok(VerifyReport::of(
        uri,
        observed.server.clone(),
        Some(dir.join(crate::cluster::restore::SHARDING_FILE).display().to_string()),
        limit,
        outcome,
        Some(
            "checked against the merged dump of `pitr replay --cluster`: counts, and each collection's documents in _id order \
             (md5) read through the server; the admin database (users, roles) is not compared"
                .into(),
        ),
    ))
}

/// The counts of `wanted`, and each collection's documents in `_id` order hashed,
/// read through the cluster's mongos.
async fn read_cluster(
    client: &mongodb::Client,
    uri: &str,
    wanted: &[String],
    progress: &dyn crate::plan::Progress,
) -> Result<super::observe::Observed, VerifyError> {
    let mut observed = observe(client, uri, wanted, &[], progress).await?;
    observed.content = ContentKind::DocumentsInIdOrder;
    // Every document is read back through mongos: on a large cluster, the long part.
    let meter = crate::engine::replica::Meter::new();
    let total = observed.counts.values().sum();
    let _reading = progress.phase(
        "reading the restored cluster's documents through mongos",
        crate::plan::Unit::Documents,
        Some(total),
        &meter,
    );
    for ns in wanted.iter().filter(|ns| observed.namespaces.contains(*ns)) {
        let (db, coll) = ns.split_once('.').unwrap_or((ns.as_str(), ""));
        let mut cursor = client
            .database(db)
            .collection::<RawDocumentBuf>(coll)
            .find(doc! {})
            .sort(doc! {"_id": 1})
            .await
            .map_err(|e| VerifyError::Command {
                what: format!("reading `{ns}` in _id order"),
                uri: redact_uri(uri),
                detail: driver_message(uri, &e),
            })?;
        let mut h = Md5::new();
        while let Some(d) = cursor.try_next().await.map_err(|e| VerifyError::Command {
            what: format!("reading `{ns}` in _id order"),
            uri: redact_uri(uri),
            detail: driver_message(uri, &e),
        })? {
            h.update(d.as_bytes());
            meter.add(1);
        }
        observed.hashes.insert(ns.clone(), hex(&h.finalize()));
    }
    Ok(observed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_content_md5_does_not_depend_on_the_dumps_order() {
        let a = bson::to_vec(&doc! {"_id": 2, "x": 1}).unwrap();
        let b = bson::to_vec(&doc! {"_id": 10, "x": 2}).unwrap();
        let c = bson::to_vec(&doc! {"_id": "s", "x": 3}).unwrap();
        let one = content_md5(vec![&a, &b, &c]);
        assert_eq!(one, content_md5(vec![&c, &b, &a]));
        // Numbers before strings, 2 before 10 (not as text).
        let mut h = Md5::new();
        for d in [&a, &b, &c] {
            h.update(d);
        }
        assert_eq!(one, hex(&h.finalize()));
        assert!(split_documents(&a[..a.len() - 1]).is_err());
        // Streamed from a file in _id order, or sorted from one that is not: the same.
        let d = tempfile::tempdir().unwrap();
        for (name, order) in [("sorted", [&a, &b, &c]), ("unsorted", [&c, &a, &b])] {
            let f = d.path().join(name);
            std::fs::write(
                &f,
                order
                    .iter()
                    .flat_map(|x| x.iter().copied())
                    .collect::<Vec<u8>>(),
            )
            .unwrap();
            assert_eq!(count_and_md5(&f).unwrap(), (3, one.clone()), "{name}");
        }
        let cut = d.path().join("cut");
        std::fs::write(&cut, &a[..a.len() - 1]).unwrap();
        assert!(count_and_md5(&cut).unwrap_err().contains("cut"));
    }
}
