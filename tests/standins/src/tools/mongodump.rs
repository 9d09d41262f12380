//! The stand-in `mongodump`: writes `DIR/<db>/<coll>.bson` and `.metadata.json`
//! through the driver, and with `--oplog` the oplog written during the dump to
//! `DIR/oplog.bson`, with mongo-tools' option checks and messages.

use super::cli::{self, ConfigFile, Parsed, Refusal};
use super::connect::{connect, describe};
use super::Midway;
use crate::bsonfile::{self, BsonWriter};
use crate::faults::{self, Fault, Faults, Tool};
use crate::logline::tool_log as log;
use bson::{doc, Bson, Document, Timestamp};
use serde_json::json;
use std::path::PathBuf;

/// Entry point of the `mongodump` binary.
pub fn main() -> ! {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    std::process::exit(run(argv))
}

#[derive(Default)]
struct Record {
    password_from_config: bool,
    out: Option<String>,
    namespaces: Vec<String>,
    documents: u64,
    oplog_entries: u64,
    error: Option<String>,
}

fn run(argv: Vec<String>) -> i32 {
    let (p, cfg) = match cli::parse_tool("mongodump", &argv, cli::MONGODUMP) {
        Ok(Some(x)) => x,
        Ok(None) => return 0,
        Err(Refusal { code, lines }) => {
            for l in &lines {
                eprintln!("{l}");
            }
            crate::record::append(
                &json!({"tool": "mongodump", "argv": argv, "exit_code": code, "error": lines.join("\n")}),
            );
            return code;
        }
    };
    let faults = match faults::from_env(Tool::Mongodump) {
        Ok(f) => Faults(f),
        Err(e) => {
            eprintln!("pitr stand-in mongodump: {e}");
            return 2;
        }
    };
    let mut rec = Record {
        password_from_config: cfg.password.is_some(),
        ..Default::default()
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let code = match rt.block_on(dump(&p, &cfg, &faults, &mut rec)) {
        Ok(()) => 0,
        Err(e) => {
            log(format!("Failed: {e}"));
            rec.error = Some(e);
            1
        }
    };
    crate::record::append(&json!({
        "tool": "mongodump",
        "argv": argv,
        "exit_code": code,
        "password_from_config": rec.password_from_config,
        "out": rec.out,
        "oplog": p.flag("oplog"),
        "gzip": p.flag("gzip"),
        "namespaces": rec.namespaces,
        "documents": rec.documents,
        "oplog_entries": rec.oplog_entries,
        "error": rec.error,
    }));
    code
}

fn validate(p: &Parsed) -> Result<(), String> {
    if !p
        .positional
        .iter()
        .all(|a| a.starts_with("mongodb://") || a.starts_with("mongodb+srv://"))
        || p.positional.len() > 1
    {
        return Err(format!(
            "error parsing positional arguments: positional arguments not allowed: {:?}",
            p.positional
        ));
    }
    let bad = |m: &str| Err(format!("bad option: {m}"));
    if p.value("collection").is_some() && p.value("db").is_none() {
        return bad("cannot dump a collection without a specified database");
    }
    if (p.value("query").is_some() || p.value("queryFile").is_some())
        && p.value("collection").is_none()
    {
        return bad("cannot dump using a query without a specified collection");
    }
    if p.flag("oplog") && p.value("db").is_some() {
        return bad("--oplog mode only supported on full dumps");
    }
    if p.value("archive").is_some() {
        return Err("--archive is not implemented by the pitr stand-in mongodump".into());
    }
    if p.value("out") == Some("-") {
        return Err("--out - (stdout) is not implemented by the pitr stand-in mongodump".into());
    }
    Ok(())
}

/// Collections a dump leaves out unless asked for by name.
fn skip_collection(db: &str, coll: &str) -> bool {
    if !coll.starts_with("system.") {
        return false;
    }
    !matches!(
        (db, coll),
        ("admin", "system.users")
            | ("admin", "system.roles")
            | ("admin", "system.version")
            | (_, "system.js")
            | (_, "system.views")
    )
}

async fn latest_oplog_ts(
    client: &mongodb::Client,
    coll: &str,
    newest: bool,
) -> Result<Option<Timestamp>, String> {
    let c = client.database("local").collection::<Document>(coll);
    let d = c
        .find_one(doc! {})
        .sort(doc! {"$natural": if newest { -1 } else { 1 }})
        .await
        .map_err(|e| describe(&e))?;
    Ok(d.and_then(|d| match d.get("ts") {
        Some(Bson::Timestamp(t)) => Some(*t),
        _ => None,
    }))
}

fn metadata_json(
    name: &str,
    options: &Document,
    indexes: &[Document],
    uuid: Option<&bson::Uuid>,
) -> String {
    let mut m = serde_json::Map::new();
    m.insert(
        "options".into(),
        Bson::Document(options.clone()).into_canonical_extjson(),
    );
    m.insert(
        "indexes".into(),
        serde_json::Value::Array(
            indexes
                .iter()
                .map(|i| Bson::Document(i.clone()).into_canonical_extjson())
                .collect(),
        ),
    );
    if let Some(u) = uuid {
        m.insert("uuid".into(), json!(u.to_string().replace('-', "")));
    }
    m.insert("collectionName".into(), json!(name));
    m.insert("type".into(), json!("collection"));
    serde_json::Value::Object(m).to_string()
}

async fn dump(
    p: &Parsed,
    cfg: &ConfigFile,
    faults: &Faults,
    rec: &mut Record,
) -> Result<(), String> {
    validate(p)?;
    let out = PathBuf::from(p.value("out").unwrap_or("dump"));
    rec.out = Some(out.display().to_string());
    let gzip = p.flag("gzip");
    let (client, hello) = connect("mongodump", p, cfg).await?;
    if hello.get_str("msg") == Ok("isdbgrid") && p.flag("oplog") {
        return Err("can't use --oplog option when dumping from a mongos".into());
    }
    if faults.has(&Fault::IgnoreSigterm) {
        faults::ignore_termination_signals();
        faults::hang_forever();
    }
    if faults.has(&Fault::Hang) {
        faults::hang_forever();
    }
    // The oplog position before the dump (mongo-tools: determineOplogCollectionName,
    // then the newest entry).
    let mut oplog_coll = None;
    let mut start = None;
    if p.flag("oplog") {
        let coll = if hello.contains_key("hosts") {
            "oplog.rs"
        } else if matches!(
            hello.get("isWritablePrimary").or(hello.get("ismaster")),
            Some(Bson::Boolean(true))
        ) {
            "oplog.$main"
        } else {
            return Err("error getting oplog start: not connected to master".into());
        };
        let ts = latest_oplog_ts(&client, coll, true)
            .await
            .map_err(|e| format!("error getting oplog start: error getting recent oplog entry: {e}"))?
            .ok_or("error getting oplog start: error getting recent oplog entry: mongo: no documents in result")?;
        oplog_coll = Some(coll);
        start = Some(ts);
    }

    // What to dump.
    let mut targets: Vec<(String, String)> = Vec::new();
    let dbs: Vec<String> = match p.value("db") {
        Some(db) => vec![db.to_string()],
        None => client
            .list_database_names()
            .await
            .map_err(|e| format!("error getting database names: {}", describe(&e)))?
            .into_iter()
            .filter(|d| d != "local" && d != "config")
            .collect(),
    };
    for db in &dbs {
        match p.value("collection") {
            Some(c) => targets.push((db.clone(), c.to_string())),
            None => {
                let mut names = client
                    .database(db)
                    .list_collection_names()
                    .await
                    .map_err(|e| {
                        format!("error getting collection names for {db}: {}", describe(&e))
                    })?;
                names.sort();
                for n in names {
                    if !skip_collection(db, &n)
                        && !p.all("excludeCollection").contains(&n)
                        && !p
                            .all("excludeCollectionsWithPrefix")
                            .iter()
                            .any(|x| n.starts_with(x.as_str()))
                    {
                        targets.push((db.clone(), n));
                    }
                }
            }
        }
    }
    let query = match (p.value("query"), p.value("queryFile")) {
        (Some(q), _) => Some(q.to_string()),
        (None, Some(f)) => {
            Some(std::fs::read_to_string(f).map_err(|e| format!("error reading queryFile: {e}"))?)
        }
        _ => None,
    };
    let filter = match query {
        Some(q) => {
            let v: serde_json::Value = serde_json::from_str(&q)
                .map_err(|e| format!("error parsing query as Extended JSON: {e}"))?;
            match Bson::try_from(v) {
                Ok(Bson::Document(d)) => d,
                _ => return Err("error parsing query as Extended JSON: not an object".into()),
            }
        }
        None => Document::new(),
    };

    let midway = Midway::from_faults(faults);
    let half = targets.len() / 2;
    for (n, (db, coll)) in targets.iter().enumerate() {
        if n == half && n > 0 {
            if let Some(m) = midway {
                m.act()?;
            }
        }
        let ns = format!("{db}.{coll}");
        let dir = out.join(db);
        std::fs::create_dir_all(&dir).map_err(|e| {
            format!(
                "error creating directory for metadata file {}: {e}",
                dir.display()
            )
        })?;
        let bson_path = dir.join(format!("{coll}.bson{}", if gzip { ".gz" } else { "" }));
        log(format!("writing {ns} to {}", bson_path.display()));
        let info = client
            .database(db)
            .run_command(doc! {"listCollections": 1, "filter": {"name": coll.as_str()}})
            .await
            .map_err(|e| describe(&e))?;
        let entry = info
            .get_document("cursor")
            .ok()
            .and_then(|c| c.get_array("firstBatch").ok())
            .and_then(|b| b.first())
            .and_then(|e| e.as_document())
            .cloned();
        let Some(entry) = entry else {
            log(format!("collection {ns} does not exist, skipping"));
            continue;
        };
        let options = entry.get_document("options").cloned().unwrap_or_default();
        let uuid = entry
            .get_document("info")
            .ok()
            .and_then(|i| match i.get("uuid") {
                Some(Bson::Binary(b)) => b.to_uuid().ok(),
                _ => None,
            });
        let indexes = first_batch(&client, db, doc! {"listIndexes": coll.as_str()})
            .await
            .unwrap_or_default();
        let meta_path = dir.join(format!(
            "{coll}.metadata.json{}",
            if gzip { ".gz" } else { "" }
        ));
        bsonfile::write_bytes(
            &meta_path,
            metadata_json(coll, &options, &indexes, uuid.as_ref()).as_bytes(),
            gzip,
        )
        .map_err(|e| format!("error writing metadata for {ns}: {e}"))?;
        let docs = client
            .database(db)
            .collection::<Document>(coll)
            .find(filter.clone())
            .await
            .map_err(|e| format!("error reading from db: {}", describe(&e)))?;
        let docs = collect(docs)
            .await
            .map_err(|e| format!("error reading collection: {e}"))?;
        let mut w = BsonWriter::create(&bson_path, gzip)
            .map_err(|e| format!("error opening output file {}: {e}", bson_path.display()))?;
        for d in &docs {
            w.write(d).map_err(|e| e.to_string())?;
        }
        w.finish().map_err(|e| e.to_string())?;
        rec.documents += docs.len() as u64;
        rec.namespaces.push(ns.clone());
        log(format!(
            "done dumping {ns} ({} document{})",
            docs.len(),
            if docs.len() == 1 { "" } else { "s" }
        ));
    }

    if let (Some(coll), Some(start)) = (oplog_coll, start) {
        let end = latest_oplog_ts(&client, coll, true)
            .await
            .map_err(|e| format!("error getting oplog end: {e}"))?
            .unwrap_or(start);
        let oldest = latest_oplog_ts(&client, coll, false)
            .await
            .map_err(|e| format!("unable to read entry from oplog: {e}"))?;
        if oldest.is_some_and(|o| (o.time, o.increment) > (start.time, start.increment)) {
            return Err("oplog overflow: mongodump was unable to capture all new oplog entries during execution".into());
        }
        std::fs::create_dir_all(&out).map_err(|e| e.to_string())?;
        let path = out.join(if gzip { "oplog.bson.gz" } else { "oplog.bson" });
        log(format!("writing captured oplog to {}", path.display()));
        let cursor = client
            .database("local")
            .collection::<Document>(coll)
            .find(doc! {"$and": [{"ts": {"$gte": start}}, {"ts": {"$lte": end}}]})
            .await
            .map_err(|e| format!("error dumping oplog: {}", describe(&e)))?;
        let entries = collect(cursor)
            .await
            .map_err(|e| format!("error dumping oplog: {e}"))?;
        let mut w = BsonWriter::create(&path, gzip).map_err(|e| e.to_string())?;
        for e in &entries {
            w.write(e).map_err(|e| e.to_string())?;
        }
        w.finish().map_err(|e| e.to_string())?;
        rec.oplog_entries = entries.len() as u64;
        log(format!(
            "\tdumped {} oplog {}",
            entries.len(),
            if entries.len() == 1 {
                "entry"
            } else {
                "entries"
            }
        ));
    }
    Ok(())
}

async fn collect(mut cursor: mongodb::Cursor<Document>) -> Result<Vec<Document>, String> {
    let mut out = Vec::new();
    while cursor.advance().await.map_err(|e| describe(&e))? {
        out.push(cursor.deserialize_current().map_err(|e| describe(&e))?);
    }
    Ok(out)
}

/// The `firstBatch` of a cursor-returning command (listIndexes answers in one batch).
async fn first_batch(client: &mongodb::Client, db: &str, cmd: Document) -> Option<Vec<Document>> {
    let reply = client.database(db).run_command(cmd).await.ok()?;
    let batch = reply
        .get_document("cursor")
        .ok()?
        .get_array("firstBatch")
        .ok()?;
    Some(
        batch
            .iter()
            .filter_map(|b| b.as_document().cloned())
            .collect(),
    )
}
