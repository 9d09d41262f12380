//! The stand-in `mongorestore`: restores a mongodump directory through the driver
//! and replays `oplog.bson` (see `replay.rs`), with mongo-tools' argument checks and
//! log lines. Differences from the real tool are listed in the crate README.

use super::cli::{self, ConfigFile, Parsed, Refusal};
use super::connect::{connect, describe};
use super::replay::{parse_oplog_limit, IndexCatalog, Replayer};
use super::Midway;
use crate::bsonfile;
use crate::faults::{self, Fault, Faults, Tool};
use crate::logline::tool_log as log;
use bson::{doc, Bson, Document, Timestamp};
use serde_json::json;
use std::path::{Path, PathBuf};

/// Entry point of the `mongorestore` binary.
pub fn main() -> ! {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    std::process::exit(run(argv))
}

/// What the run did, written to `PITR_STANDIN_RECORD`.
#[derive(Default)]
struct Record {
    password_from_config: bool,
    uri_from_config: bool,
    username: Option<String>,
    dir: Option<String>,
    oplog_file: Option<String>,
    oplog_limit: Option<Timestamp>,
    namespaces: Vec<String>,
    restored: u64,
    failed: u64,
    seen: u64,
    applied: u64,
    last_applied: Option<Timestamp>,
    stopped_at: Option<Timestamp>,
    error: Option<String>,
}

fn ts_json(t: Option<Timestamp>) -> serde_json::Value {
    match t {
        Some(t) => json!({"t": t.time, "i": t.increment}),
        None => serde_json::Value::Null,
    }
}

fn write_record(argv: &[String], p: Option<&Parsed>, r: &Record, code: i32) {
    let flag = |n: &str| p.is_some_and(|p| p.flag(n));
    crate::record::append(&json!({
        "tool": "mongorestore",
        "argv": argv,
        "exit_code": code,
        "password_from_config": r.password_from_config,
        "uri_from_config": r.uri_from_config,
        "username": r.username,
        "dir": r.dir,
        "oplog_replay": flag("oplogReplay"),
        "oplog_file": r.oplog_file,
        "oplog_limit": ts_json(r.oplog_limit),
        "drop": flag("drop"),
        "preserve_uuid": flag("preserveUUID"),
        "dry_run": flag("dryRun"),
        "namespaces": r.namespaces,
        "documents_restored": r.restored,
        "documents_failed": r.failed,
        "oplog_entries_seen": r.seen,
        "entries_applied": r.applied,
        "last_applied_ts": ts_json(r.last_applied),
        "stopped_at_ts": ts_json(r.stopped_at),
        "error": r.error,
    }));
}

fn run(argv: Vec<String>) -> i32 {
    let (p, cfg) = match cli::parse_tool("mongorestore", &argv, cli::MONGORESTORE) {
        Ok(Some(x)) => x,
        Ok(None) => return 0,
        Err(Refusal { code, lines }) => {
            for l in &lines {
                eprintln!("{l}");
            }
            let rec = Record {
                error: Some(lines.join("\n")),
                ..Default::default()
            };
            write_record(&argv, None, &rec, code);
            return code;
        }
    };
    let faults = match faults::from_env(Tool::Mongorestore) {
        Ok(f) => Faults(f),
        Err(e) => {
            eprintln!("pitr stand-in mongorestore: {e}");
            return 2;
        }
    };
    let mut rec = Record {
        password_from_config: cfg.password.is_some(),
        uri_from_config: cfg.uri.is_some(),
        username: p.value("username").map(String::from),
        ..Default::default()
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let res = rt.block_on(restore(&p, &cfg, &faults, &mut rec));
    let code = match res {
        Ok(()) => {
            log(format!(
                "{} document(s) restored successfully. {} document(s) failed to restore.",
                rec.restored, rec.failed
            ));
            0
        }
        Err(e) => {
            log(format!("Failed: {e}"));
            log(format!(
                "{} document(s) restored successfully. {} document(s) failed to restore.",
                rec.restored, rec.failed
            ));
            rec.error = Some(e);
            1
        }
    };
    write_record(&argv, Some(&p), &rec, code);
    code
}

/// Option checks of mongo-tools' `ParseOptions` and `ParseAndValidateOptions`.
/// (The real tool connects first; the stand-in checks first so that refusals
/// need no server.)
fn validate(p: &Parsed) -> Result<(Option<Timestamp>, String), String> {
    let dir_positional: Vec<&String> = p
        .positional
        .iter()
        .filter(|a| !(a.starts_with("mongodb://") || a.starts_with("mongodb+srv://")))
        .collect();
    if dir_positional.len() > 1 {
        return Err("error parsing positional arguments: provide only one polling interval in seconds and only one MongoDB connection string. Connection strings must begin with mongodb:// or mongodb+srv:// schemes".into());
    }
    let target = match (p.value("dir"), dir_positional.first()) {
        (Some(_), Some(_)) => return Err("error parsing positional arguments: cannot use both --dir and a positional argument to set the target directory".into()),
        (Some(d), None) => d.to_string(),
        (None, Some(d)) => d.to_string(),
        (None, None) => String::new(),
    };
    if p.value("db").is_none() && p.value("collection").is_some() {
        return Err("cannot restore a collection without a specified database".into());
    }
    let mut limit = None;
    if let Some(l) = p.value("oplogLimit") {
        if !p.flag("oplogReplay") {
            return Err("cannot use --oplogLimit without --oplogReplay enabled".into());
        }
        limit = Some(
            parse_oplog_limit(l)
                .map_err(|e| format!("error parsing timestamp argument to --oplogLimit: {e}"))?,
        );
    }
    if p.value("oplogFile").is_some() {
        if !p.flag("oplogReplay") {
            return Err("cannot use --oplogFile without --oplogReplay enabled".into());
        }
        if p.value("archive").is_some() {
            return Err("cannot use --oplogFile with --archive specified".into());
        }
    }
    if p.flag("oplogReplay") {
        if !p.all("nsInclude").is_empty() || p.value("db").is_some() {
            return Err("cannot use --oplogReplay with includes specified".into());
        }
        if !p.all("nsExclude").is_empty()
            || !p.all("excludeCollection").is_empty()
            || !p.all("excludeCollectionsWithPrefix").is_empty()
        {
            return Err("cannot use --oplogReplay with excludes specified".into());
        }
        if !p.all("nsFrom").is_empty() {
            return Err("cannot use --oplogReplay with namespace renames specified".into());
        }
    }
    if p.all("nsFrom").len() != p.all("nsTo").len() {
        return Err(
            "--nsFrom and --nsTo arguments must be specified an equal number of times".into(),
        );
    }
    if p.flag("preserveUUID") && !p.flag("drop") {
        return Err("cannot specify --preserveUUID without --drop".into());
    }
    if p.value("archive").is_some() {
        return Err("--archive is not implemented by the pitr stand-in mongorestore".into());
    }
    if target == "-" {
        return Err(
            "restoring from stdin is not implemented by the pitr stand-in mongorestore".into(),
        );
    }
    if !p.all("nsInclude").is_empty()
        || !p.all("nsExclude").is_empty()
        || !p.all("nsFrom").is_empty()
        || p.value("db").is_some()
    {
        return Err("namespace selection (--db, --nsInclude, --nsExclude, --nsFrom) is not implemented by the pitr stand-in mongorestore".into());
    }
    Ok((limit, target))
}

/// One collection found in the dump directory.
struct Intent {
    db: String,
    coll: String,
    bson: Option<PathBuf>,
    metadata: Option<PathBuf>,
}

/// A collection to restore, with what its files held.
struct Work {
    intent: Intent,
    options: Document,
    indexes: Vec<Document>,
    uuid: Option<bson::Uuid>,
    docs: Vec<Document>,
}

/// Namespaces in a dump that mongorestore does not restore as plain collections.
fn skipped_namespace(db: &str, coll: &str) -> Option<&'static str> {
    match (db, coll) {
        ("admin", "system.version") => Some("the auth version of the dump, not data"),
        ("admin", "system.users") | ("admin", "system.roles") => {
            Some("users and roles are not restored by the pitr stand-in")
        }
        ("local", _) => Some("the local database is never restored"),
        ("config", "system.sessions")
        | ("config", "transactions")
        | ("config", "system.indexBuilds") => Some("internal config collection"),
        (_, c) if c == "system.profile" || c == "system.indexes" => Some("system collection"),
        _ => None,
    }
}

fn scan(dir: &Path, gzip: bool) -> Result<Vec<Intent>, String> {
    let bson_ext = if gzip { ".bson.gz" } else { ".bson" };
    let meta_ext = if gzip {
        ".metadata.json.gz"
    } else {
        ".metadata.json"
    };
    let mut out: Vec<Intent> = Vec::new();
    let mut dbs: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| e.to_string())?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    dbs.sort();
    for dbdir in dbs {
        let db = dbdir
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .to_string();
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dbdir)
            .map_err(|e| e.to_string())?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        files.sort();
        for f in files {
            let name = f
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .to_string();
            let (coll, is_meta) = if let Some(c) = name.strip_suffix(meta_ext) {
                (c.to_string(), true)
            } else if let Some(c) = name.strip_suffix(bson_ext) {
                (c.to_string(), false)
            } else {
                continue;
            };
            let pos = match out.iter().position(|i| i.db == db && i.coll == coll) {
                Some(p) => p,
                None => {
                    out.push(Intent {
                        db: db.clone(),
                        coll: coll.clone(),
                        bson: None,
                        metadata: None,
                    });
                    out.len() - 1
                }
            };
            if is_meta {
                out[pos].metadata = Some(f);
            } else {
                out[pos].bson = Some(f);
            }
        }
    }
    Ok(out)
}

/// Parse a `.metadata.json` (canonical or relaxed extended JSON).
fn read_metadata(
    path: &Path,
    gzip: bool,
) -> Result<(Document, Vec<Document>, Option<bson::Uuid>, bool), String> {
    let bytes = bsonfile::read_bytes(path, gzip).map_err(|e| e.to_string())?;
    let v: serde_json::Value = serde_json::from_slice(&bytes)
        .map_err(|e| format!("error parsing metadata from {}: {e}", path.display()))?;
    let options = match v.get("options") {
        Some(o) => match Bson::try_from(o.clone()) {
            Ok(Bson::Document(d)) => d,
            _ => Document::new(),
        },
        None => Document::new(),
    };
    let mut indexes = Vec::new();
    if let Some(serde_json::Value::Array(items)) = v.get("indexes") {
        for i in items {
            if let Ok(Bson::Document(d)) = Bson::try_from(i.clone()) {
                indexes.push(d);
            }
        }
    }
    let uuid = v
        .get("uuid")
        .and_then(|u| u.as_str())
        .and_then(|u| bson::Uuid::parse_str(u).ok());
    let is_view = v.get("type").and_then(|t| t.as_str()) == Some("view");
    Ok((options, indexes, uuid, is_view))
}

async fn restore(
    p: &Parsed,
    cfg: &ConfigFile,
    faults: &Faults,
    rec: &mut Record,
) -> Result<(), String> {
    let (limit, target) = validate(p)?;
    rec.oplog_limit = limit;
    let target = if target.is_empty() {
        log("using default 'dump' directory");
        "dump".to_string()
    } else {
        target
    };
    rec.dir = Some(target.clone());
    let gzip = p.flag("gzip");
    let (client, hello) = connect("mongorestore", p, cfg).await?;
    let is_mongos = hello.get_str("msg") == Ok("isdbgrid");

    let dir = PathBuf::from(&target);
    let meta = std::fs::metadata(&dir).map_err(|e| {
        let why = if e.kind() == std::io::ErrorKind::NotFound {
            "no such file or directory".to_string()
        } else {
            e.to_string()
        };
        format!("mongorestore target '{target}' invalid: stat {target}: {why}")
    })?;
    if !meta.is_dir() {
        return Err(
            "restoring a single .bson file is not implemented by the pitr stand-in mongorestore"
                .into(),
        );
    }
    log("preparing collections to restore from");
    if faults.has(&Fault::IgnoreSigterm) {
        faults::ignore_termination_signals();
        faults::hang_forever();
    }
    if faults.has(&Fault::Hang) {
        faults::hang_forever();
    }
    let intents = scan(&dir, gzip).map_err(|e| format!("error scanning filesystem: {e}"))?;
    if is_mongos && intents.iter().any(|i| i.db == "config") {
        return Err("cannot do a full restore on a sharded system - remove the 'config' directory from the dump directory first".into());
    }

    // The oplog to replay: DIR/oplog.bson, or --oplogFile (not both).
    let mut oplog: Option<PathBuf> = None;
    if p.flag("oplogReplay") {
        let root = dir.join(if gzip { "oplog.bson.gz" } else { "oplog.bson" });
        if root.is_file() {
            oplog = Some(root);
        }
    }
    if let Some(f) = p.value("oplogFile") {
        if oplog.is_some() {
            return Err("cannot provide both an oplog.bson file and an oplog file with --oplogFile, nor can you provide both a local/oplog.rs.bson and a local/oplog.$main.bson file".into());
        }
        let path = PathBuf::from(f);
        std::fs::metadata(&path).map_err(|e| format!("error reading oplog file: {e}"))?;
        oplog = Some(path);
    }
    if p.flag("oplogReplay") && oplog.is_none() {
        return Err("no oplog file to replay; make sure you run mongodump with --oplog".into());
    }
    rec.oplog_file = oplog.as_ref().map(|o| o.display().to_string());
    if p.flag("dryRun") {
        log("dry run completed");
        return Ok(());
    }

    let midway = Midway::from_faults(faults);
    let mut catalog = IndexCatalog::default();
    // Read every collection's data first, so that fail-midway knows where half is.
    let mut work: Vec<Work> = Vec::new();
    for intent in intents {
        if let Some(why) = skipped_namespace(&intent.db, &intent.coll) {
            log(format!(
                "skipping restoring {}.{} ({why})",
                intent.db, intent.coll
            ));
            continue;
        }
        let (options, indexes, uuid) = match &intent.metadata {
            Some(m) => {
                log(format!(
                    "reading metadata for {}.{} from {}",
                    intent.db,
                    intent.coll,
                    m.display()
                ));
                let (o, i, u, view) =
                    read_metadata(m, gzip).map_err(|e| format!("restore error: {e}"))?;
                if view {
                    log(format!(
                        "skipping view {}.{} (views are not implemented by the pitr stand-in)",
                        intent.db, intent.coll
                    ));
                    continue;
                }
                (o, i, u)
            }
            None => (Document::new(), Vec::new(), None),
        };
        let docs = match &intent.bson {
            Some(b) => bsonfile::read_all(b, gzip).map_err(|e| {
                format!(
                    "{}.{}: error reading from {}: {e}",
                    intent.db,
                    intent.coll,
                    b.display()
                )
            })?,
            None => Vec::new(),
        };
        work.push(Work {
            intent,
            options,
            indexes,
            uuid,
            docs,
        });
    }
    let total: usize = work.iter().map(|w| w.docs.len()).sum();
    let mut fail_after_docs = match midway {
        Some(_) if total >= 2 => Some(total / 2),
        _ => None,
    };

    for Work {
        intent,
        options,
        indexes,
        uuid,
        docs,
    } in &work
    {
        let (db, coll) = (&intent.db, &intent.coll);
        let ns = format!("{db}.{coll}");
        rec.namespaces.push(ns.clone());
        let database = client.database(db);
        if p.flag("drop") {
            log(format!("dropping collection {ns} before restoring"));
            database
                .run_command(doc! {"drop": coll.as_str()})
                .await
                .map_err(|e| format!("{ns}: error dropping collection: {}", describe(&e)))?;
        }
        let exists = !database
            .list_collection_names()
            .filter(doc! {"name": coll.as_str()})
            .await
            .map_err(|e| format!("{ns}: error listing collections: {}", describe(&e)))?
            .is_empty();
        if !exists {
            let opts = if p.flag("noOptionsRestore") {
                Document::new()
            } else {
                options.clone()
            };
            if p.flag("preserveUUID") {
                let Some(u) = uuid else {
                    return Err(format!(
                        "--preserveUUID used but no UUID found in {ns} metadata"
                    ));
                };
                let mut o = doc! {"create": coll.as_str()};
                o.extend(opts);
                database
                    .client()
                    .database("admin")
                    .run_command(doc! {"applyOps": [{"op": "c", "ns": format!("{db}.$cmd"), "ui": bson::Binary::from_uuid(*u), "o": o}]})
                    .await
                    .map_err(|e| format!("{ns}: error creating collection: {}", describe(&e)))?;
            } else {
                let mut c = doc! {"create": coll.as_str()};
                c.extend(opts);
                database
                    .run_command(c)
                    .await
                    .map_err(|e| format!("{ns}: error creating collection: {}", describe(&e)))?;
            }
        }
        for i in indexes {
            if i.get_str("name") != Ok("_id_") {
                catalog.add(db, coll, i.clone());
            }
        }
        let source = intent
            .bson
            .as_ref()
            .map(|b| b.display().to_string())
            .unwrap_or_default();
        log(format!("restoring {ns} from {source}"));
        let ordered = p.flag("maintainInsertionOrder") || p.flag("stopOnError");
        let mut ok_here = 0u64;
        let mut failed_here = 0u64;
        let mut batch: Vec<Document> = Vec::new();
        let mut batch_bytes = 0usize;
        let mut iter = docs.iter().peekable();
        while let Some(d) = iter.next() {
            batch_bytes += bson::to_vec(d).map(|v| v.len()).unwrap_or(0);
            batch.push(d.clone());
            let at_fault =
                fail_after_docs.is_some_and(|n| rec.restored as usize + batch.len() >= n);
            if batch.len() >= 1000
                || batch_bytes > 8 * 1024 * 1024
                || iter.peek().is_none()
                || at_fault
            {
                let (ok, errs) = insert_batch(&database, coll, std::mem::take(&mut batch), ordered)
                    .await
                    .map_err(|e| format!("{ns}: error restoring from {source}: {e}"))?;
                batch_bytes = 0;
                ok_here += ok;
                rec.restored += ok;
                for e in &errs {
                    log(format!("continuing through error: {e}"));
                }
                failed_here += errs.len() as u64;
                rec.failed += errs.len() as u64;
                if !errs.is_empty() && ordered {
                    return Err(format!("{ns}: error restoring from {source}: {}", errs[0]));
                }
                if at_fault {
                    fail_after_docs = None;
                    if let Some(m) = midway {
                        m.act()
                            .map_err(|e| format!("{ns}: error restoring from {source}: {e}"))?;
                    }
                }
            }
        }
        log(format!(
            "finished restoring {ns} ({ok_here} document{}, {failed_here} failure{})",
            if ok_here == 1 { "" } else { "s" },
            if failed_here == 1 { "" } else { "s" }
        ));
    }

    if let Some(path) = &oplog {
        log("replaying oplog");
        let entries = bsonfile::read_all(path, gzip && path.extension().is_some_and(|e| e == "gz"))
            .map_err(|e| format!("restore error: error reading oplog bson input: {e}"))?;
        let mut r = Replayer::new(&client, limit, p.flag("preserveUUID"), &mut catalog);
        if total < 2 {
            if let Some(m) = midway {
                r.fault_at = Some((entries.len() / 2, m));
            }
        }
        let res = r.replay(&entries).await;
        rec.seen = r.summary.seen;
        rec.applied = r.summary.applied;
        rec.last_applied = r.summary.last_applied;
        rec.stopped_at = r.summary.stopped_at;
        res.map_err(|e| format!("restore error: {e}"))?;
        log(format!("applied {} oplog entries", r.summary.applied));
    }

    if !p.flag("noIndexRestore") {
        for ((db, coll), specs) in &catalog.specs {
            if specs.is_empty() {
                continue;
            }
            log(format!(
                "restoring indexes for collection {db}.{coll} from metadata"
            ));
            for s in specs {
                log(format!(
                    "\tindex: {}",
                    s.get_str("name").unwrap_or_default()
                ));
            }
            let specs: Vec<Document> = specs
                .iter()
                .map(|s| {
                    let mut s = s.clone();
                    s.remove("ns");
                    s
                })
                .collect();
            client
                .database(db)
                .run_command(doc! {"createIndexes": coll.as_str(), "indexes": specs})
                .await
                .map_err(|e| format!("{db}.{coll}: error creating indexes for {db}.{coll}: createIndex error: {}", describe(&e)))?;
        }
    }
    Ok(())
}

/// Insert a batch with the `insert` command; returns (inserted, write error messages).
async fn insert_batch(
    db: &mongodb::Database,
    coll: &str,
    docs: Vec<Document>,
    ordered: bool,
) -> Result<(u64, Vec<String>), String> {
    if docs.is_empty() {
        return Ok((0, vec![]));
    }
    let reply = db
        .run_command(doc! {"insert": coll, "documents": docs, "ordered": ordered, "bypassDocumentValidation": true})
        .await
        .map_err(|e| describe(&e))?;
    let n = match reply.get("n") {
        Some(Bson::Int32(n)) => *n as u64,
        Some(Bson::Int64(n)) => *n as u64,
        _ => 0,
    };
    let mut errs = Vec::new();
    if let Ok(we) = reply.get_array("writeErrors") {
        for e in we {
            if let Bson::Document(e) = e {
                errs.push(e.get_str("errmsg").unwrap_or("write error").to_string());
            }
        }
    }
    Ok((n, errs))
}
