//! `pitr rehearse` against the stand-in mongod (tests/standins), which keeps its data's
//! history and answers snapshot reads as of a cluster time (`src/mongod/snapshot.rs`).
//! NOT a real server: the same commands against a real replica set are in
//! docs/rehearse.md.
//!
//! Each test builds production the way production is built: the test writes through
//! the driver (inserts, updates, deletes, indexes, a view, a time-series collection, a
//! capped collection), the REAL mongodump (`../shared/tools`) takes the backup with
//! `--oplog`, more writes follow, and pitr rehearses. Then the chain is damaged in one
//! way at a time (a document altered or deleted in the backup, an index missing from
//! its metadata, a chunk missing from a `pitr archive` directory) and the rehearsal
//! must name the namespace and the `_id`. The stand-in logs every command it receives
//! (`-v`): no command pitr sends may write.

mod common;
mod storage_common;

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use bson::{doc, Bson, Document, RawDocumentBuf};
use serde_json::Value;

// ---------------------------------------------------------------------------------
// the stand-in

struct Mongod {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl Drop for Mongod {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Mongod {
    fn uri(&self) -> String {
        format!("mongodb://127.0.0.1:{}/", self.port)
    }
    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("mongod.log")).unwrap_or_default()
    }

    /// The JSON lines of the log from byte `from` on, whole lines only: the server may
    /// be writing the last one as it is read. A `from` taken while a line was being
    /// written falls inside it: that line began before, and is skipped.
    fn log_entries(&self, from: usize) -> Vec<(String, Value)> {
        let log = self.log();
        let from = match from {
            0 => 0,
            _ if log.as_bytes()[from - 1] == b'\n' => from,
            _ => log[from..].find('\n').map_or(log.len(), |i| from + i + 1),
        };
        let text = &log[from..];
        let whole = &text[..text.rfind('\n').map_or(0, |i| i + 1)];
        whole
            .lines()
            .map(|l| {
                let v = serde_json::from_str(l)
                    .unwrap_or_else(|e| panic!("a log line that is not JSON ({e}): {l}"));
                (l.to_string(), v)
            })
            .collect()
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A one-member replica set `rs0` (unless `env` says another mode) that logs every
/// command (`-v`).
fn mongod(extra: &[&str], env: &[(&str, &str)]) -> Mongod {
    let bin = common::standin_bin_dir().join("mongod");
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("db")).unwrap();
    let port = free_port();
    let mut cmd = Command::new(bin);
    cmd.arg("--port")
        .arg(port.to_string())
        .args(["--bind_ip", "127.0.0.1", "--dbpath"])
        .arg(dir.path().join("db"))
        .arg("--logpath")
        .arg(dir.path().join("mongod.log"))
        .arg("-v")
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    for k in [
        "PITR_STANDIN_MODE",
        "PITR_STANDIN_FAULT",
        "PITR_STANDIN_MONGOD_FAULT",
        "PITR_STANDIN_OPLOG",
        "PITR_STANDIN_VERSION",
    ] {
        cmd.env_remove(k);
    }
    if !env.iter().any(|(k, _)| *k == "PITR_STANDIN_MODE") {
        cmd.args(["--replSet", "rs0"]);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let child = cmd.spawn().expect("spawn the stand-in mongod");
    let mut m = Mongod { child, port, dir };
    let end = Instant::now() + Duration::from_secs(10);
    while Instant::now() < end {
        if TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_millis(100))
            .is_ok()
        {
            return m;
        }
        if let Ok(Some(st)) = m.child.try_wait() {
            panic!("the stand-in mongod exited early ({st}); log:\n{}", m.log());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("the stand-in mongod did not listen; log:\n{}", m.log());
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Runs commands through the real driver.
struct Driver {
    rt: tokio::runtime::Runtime,
    client: mongodb::Client,
}

impl Driver {
    fn new(m: &Mongod) -> Driver {
        let rt = rt();
        let client = rt.block_on(async {
            let mut o = mongodb::options::ClientOptions::parse(format!(
                "mongodb://127.0.0.1:{}/?directConnection=true",
                m.port
            ))
            .await
            .unwrap();
            o.server_selection_timeout = Some(Duration::from_secs(5));
            mongodb::Client::with_options(o).unwrap()
        });
        Driver { rt, client }
    }

    fn run(&self, db: &str, cmd: Document) -> Document {
        self.rt
            .block_on(async { self.client.database(db).run_command(cmd.clone()).await })
            .unwrap_or_else(|e| panic!("{cmd}: {e}"))
    }
}

// ---------------------------------------------------------------------------------
// production: what it holds before and after the backup

/// `shop.orders` (30, varied types, an index), `shop.customers` (20), the view
/// `shop.open_orders`, the time-series `metrics.cpu` (its buckets written as the
/// tools write them), the capped `app.log`.
fn before_backup(d: &Driver) {
    let orders: Vec<Document> = (0..30)
        .map(|i| {
            doc! {
                "_id": i,
                "status": if i % 3 == 0 { "open" } else { "shipped" },
                "total": i as f64 * 1.5,
                "qty": i as i64,
                "items": [{"sku": format!("s{i}"), "n": 1}, {"sku": "x", "n": 2}],
                "at": bson::DateTime::from_millis(1_700_000_000_000 + i as i64),
            }
        })
        .collect();
    d.run("shop", doc! {"insert": "orders", "documents": orders});
    d.run(
        "shop",
        doc! {"createIndexes": "orders", "indexes": [{"key": {"status": 1, "at": -1}, "name": "status_1_at_-1"}]},
    );
    let customers: Vec<Document> = (0..20)
        .map(|i| doc! {"_id": format!("c{i:02}"), "name": format!("Customer {i}"), "tier": i % 4})
        .collect();
    d.run("shop", doc! {"insert": "customers", "documents": customers});
    d.run(
        "shop",
        doc! {"create": "open_orders", "viewOn": "orders", "pipeline": [{"$match": {"status": "open"}}]},
    );
    d.run(
        "metrics",
        doc! {"create": "cpu", "timeseries": {"timeField": "t", "metaField": "host", "granularity": "seconds"}},
    );
    let buckets: Vec<Document> = (0..3)
        .map(|i| {
            let t = bson::DateTime::from_millis(1_700_000_000_000 + i * 60_000);
            doc! {
                "_id": bson::oid::ObjectId::from_bytes([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, i as u8]),
                "control": {"version": 1, "min": {"_id": 1, "t": t}, "max": {"_id": 1, "t": t}},
                "meta": format!("h{i}"),
                "data": {"t": {"0": t}, "v": {"0": i as f64}},
            }
        })
        .collect();
    d.run(
        "metrics",
        doc! {"insert": "system.buckets.cpu", "documents": buckets},
    );
    d.run("app", doc! {"create": "log", "capped": true, "size": 65536});
    d.run(
        "app",
        doc! {"insert": "log", "documents": [{"_id": 1, "m": "started"}]},
    );
}

/// Writes after the backup: inserts, updates of several kinds, deletes, a new
/// collection with an index, a collection dropped.
fn after_backup(d: &Driver) {
    d.run(
        "shop",
        doc! {"insert": "orders", "documents": [{"_id": 100, "status": "open", "total": 9.5}, {"_id": 101, "status": "open", "total": 1}]},
    );
    d.run(
        "shop",
        doc! {"update": "orders", "updates": [
            {"q": {"_id": 3}, "u": {"$set": {"status": "shipped", "note": "late"}}},
            {"q": {"_id": 4}, "u": {"$inc": {"qty": 5}, "$unset": {"items": ""}}},
            {"q": {"_id": 5}, "u": {"_id": 5, "status": "returned", "total": 0.0}},
        ]},
    );
    d.run(
        "shop",
        doc! {"delete": "orders", "deletes": [{"q": {"_id": 7}, "limit": 1}, {"q": {"_id": 8}, "limit": 1}]},
    );
    d.run(
        "shop",
        doc! {"update": "customers", "updates": [{"q": {"_id": "c01"}, "u": {"$set": {"tier": 9}}}]},
    );
    // More than a first batch (101): reads as of the point go on with getMore.
    let events: Vec<Document> = (0..250)
        .map(|i| doc! {"_id": i, "kind": "click", "pad": "p".repeat(200)})
        .collect();
    d.run("web", doc! {"insert": "events", "documents": events});
    d.run(
        "web",
        doc! {"createIndexes": "events", "indexes": [{"key": {"kind": 1}, "name": "kind_1"}]},
    );
    d.run("tmp", doc! {"insert": "scratch", "documents": [{"_id": 1}]});
    d.run("tmp", doc! {"drop": "scratch"});
    d.run(
        "app",
        doc! {"insert": "log", "documents": [{"_id": 2, "m": "more"}]},
    );
}

/// The real mongodump (newest release found), or None after skipping `test`.
fn mongodump(test: &str) -> Option<PathBuf> {
    common::mongo_tools_dirs(test)
        .into_iter()
        .next()
        .map(|d| d.join("mongodump"))
}

/// `mongodump --oplog` of `m` into `out` (a directory, or `--archive=out`).
fn backup(tool: &Path, m: &Mongod, out: &Path, archive: bool) {
    let mut cmd = Command::new(tool);
    cmd.args([
        "--host",
        "127.0.0.1",
        "--port",
        &m.port.to_string(),
        "--oplog",
    ]);
    if archive {
        cmd.arg(format!("--archive={}", out.display()));
    } else {
        cmd.arg("--out").arg(out);
    }
    let o = cmd.stdin(Stdio::null()).output().unwrap();
    assert!(
        o.status.success(),
        "mongodump: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// A stand-in with production before the backup, the backup in `dir/backup`, and the
/// writes after it.
fn production(test: &str, dir: &Path) -> Option<(Mongod, Driver, PathBuf)> {
    let tool = mongodump(test)?;
    let m = mongod(&[], &[]);
    let (d, b) = chain(&tool, &m, &dir.join("backup"));
    Some((m, d, b))
}

/// The usual history on `m`: the writes before the backup, a mongodump of them into
/// `b` (a directory), the writes after it.
fn chain(tool: &Path, m: &Mongod, b: &Path) -> (Driver, PathBuf) {
    let d = Driver::new(m);
    before_backup(&d);
    backup(tool, m, b, false);
    after_backup(&d);
    (d, b.to_path_buf())
}

// ---------------------------------------------------------------------------------
// running pitr

fn pitr(args: &[&str]) -> Output {
    pitr_env(args, &[])
}

fn pitr_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(common::pitr_bin())
        .args(args)
        .env_remove("PITR_URI")
        .env("PITR_PROGRESS_INTERVAL", "1h")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .expect("run pitr")
}

fn rehearse(m: &Mongod, backup: &Path, extra: &[&str]) -> Output {
    let uri = m.uri();
    let mut args = vec![
        "rehearse",
        "--uri",
        &uri,
        "--backup",
        backup.to_str().unwrap(),
        "--margin",
        "0",
    ];
    args.extend_from_slice(extra);
    pitr(&args)
}

fn show(o: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn report(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}\n{}", show(o)))
}

/// The differences of `ns`, as (kind, _id) pairs.
fn diffs(r: &Value, ns: &str) -> Vec<(String, Option<String>)> {
    r["differences"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["ns"] == ns)
        .map(|d| {
            (
                d["kind"].as_str().unwrap().to_string(),
                d["id"].as_str().map(str::to_string),
            )
        })
        .collect()
}

fn assert_passed(o: &Output) -> Value {
    assert_eq!(o.status.code(), Some(0), "{}", show(o));
    let r = report(o);
    assert_eq!(r["result"], "passed", "{}", show(o));
    r
}

// ---------------------------------------------------------------------------------
// a consistent chain passes

#[test]
fn a_consistent_chain_passes_with_the_oplog_read_from_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let Some((m, _d, b)) = production(
        "a_consistent_chain_passes_with_the_oplog_read_from_the_server",
        dir.path(),
    ) else {
        return;
    };
    let o = rehearse(&m, &b, &["--json"]);
    let r = assert_passed(&o);
    assert_eq!(r["server"]["standin"], true);
    assert_eq!(r["oplog"]["source"], "server");
    assert!(r["recovery_window_secs"].as_u64().is_some());
    let names: Vec<&str> = r["namespaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["ns"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "app.log",
            "metrics.cpu",
            "shop.customers",
            "shop.open_orders",
            "shop.orders",
            "web.events"
        ],
        "{}",
        show(&o)
    );
    let orders = r["namespaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["ns"] == "shop.orders")
        .unwrap();
    assert_eq!(orders["rebuild_documents"], 30);
    assert_eq!(orders["production_documents"], 30);
    assert_eq!(
        orders["compared"], 30,
        "a small collection is compared whole"
    );
    let cpu = r["namespaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["ns"] == "metrics.cpu")
        .unwrap();
    assert_eq!(cpu["kind"], "timeseries");
    assert_eq!(cpu["production_documents"], 3, "buckets");
    let not: Vec<&str> = r["not_compared"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["ns"].as_str().unwrap())
        .collect();
    assert_eq!(
        not,
        ["app.log"],
        "capped collections cannot be read as of a time"
    );

    // The text form, and --full.
    let o = rehearse(&m, &b, &["--full"]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("REHEARSAL PASSED"), "{text}");
    // The oplog's size was known (collStats) and its room checked before the read.
    assert!(
        !String::from_utf8_lossy(&o.stderr).contains("size is not known"),
        "{}",
        show(&o)
    );
    assert!(
        text.contains("NOT MongoDB"),
        "a stand-in result says so: {text}"
    );
}

/// An archive backup and a `pitr archive` directory pass; and the same chain kept in
/// a bucket (issue 20), read in place from s3s-fs, gives the same verdict and the
/// same documents compared.
#[test]
fn a_consistent_archive_backup_and_a_pitr_archive_directory_pass() {
    let test = "a_consistent_archive_backup_and_a_pitr_archive_directory_pass";
    let Some(tool) = mongodump(test) else { return };
    let dir = tempfile::tempdir().unwrap();
    let m = mongod(&[], &[]);
    let d = Driver::new(&m);
    before_backup(&d);
    let local = dir.path().join("chain");
    std::fs::create_dir_all(&local).unwrap();
    let archive = local.join("nightly.archive");
    backup(&tool, &m, &archive, true);
    after_backup(&d);
    let arch = local.join("oplog-archive");
    let o = pitr(&[
        "archive",
        "--uri",
        &m.uri(),
        "--dir",
        arch.to_str().unwrap(),
        "--once",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let o = rehearse(
        &m,
        &archive,
        &["--oplog", arch.to_str().unwrap(), "--full", "--json"],
    );
    let r = assert_passed(&o);
    assert_eq!(r["oplog"]["source"], arch.to_str().unwrap());
    assert!(
        r["documents_compared"].as_u64().unwrap() >= 70,
        "{}",
        show(&o)
    );

    let s3 = storage_common::S3Server::start(&dir.path().join("s3"), &["nightly"]);
    storage_common::upload_tree(
        &s3.storage(),
        &local,
        &pitr::storage::Location::parse("s3://nightly/chain").unwrap(),
    );
    let endpoint = s3.endpoint();
    let o = pitr_env(
        &[
            "rehearse",
            "--uri",
            &m.uri(),
            "--backup",
            "s3://nightly/chain/nightly.archive",
            "--oplog",
            "s3://nightly/chain/oplog-archive",
            "--margin",
            "0",
            "--full",
            "--json",
        ],
        &storage_common::env_for(&endpoint),
    );
    let from_bucket = assert_passed(&o);
    assert_eq!(
        from_bucket["oplog"]["source"],
        "s3://nightly/chain/oplog-archive"
    );
    assert_eq!(
        from_bucket["documents_compared"],
        r["documents_compared"],
        "{}",
        show(&o)
    );
}

// ---------------------------------------------------------------------------------
// a damaged chain is caught, with the namespace and the _id

/// Rewrites `file` (a collection's .bson) through `f`.
fn rewrite_bson(file: &Path, f: impl Fn(Vec<Document>) -> Vec<Document>) {
    let bytes = std::fs::read(file).unwrap();
    let mut docs = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let n = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        docs.push(bson::from_slice::<Document>(&bytes[at..at + n]).unwrap());
        at += n;
    }
    let mut out = Vec::new();
    for d in f(docs) {
        out.extend(bson::to_vec(&d).unwrap());
    }
    std::fs::write(file, out).unwrap();
}

#[test]
fn a_document_altered_in_the_backup_is_named_with_its_field() {
    let dir = tempfile::tempdir().unwrap();
    let Some((m, _d, b)) = production(
        "a_document_altered_in_the_backup_is_named_with_its_field",
        dir.path(),
    ) else {
        return;
    };
    rewrite_bson(&b.join("shop/customers.bson"), |mut docs| {
        docs[12].insert("name", "Someone Else");
        docs
    });
    for mode in [&["--json"][..], &["--json", "--full"][..]] {
        let o = rehearse(&m, &b, mode);
        assert_eq!(o.status.code(), Some(1), "{}", show(&o));
        let r = report(&o);
        assert_eq!(r["result"], "differences");
        assert_eq!(
            diffs(&r, "shop.customers"),
            vec![("document_differs".to_string(), Some("\"c12\"".to_string()))],
            "{}",
            show(&o)
        );
        let d = &r["differences"][0];
        assert_eq!(d["paths"], serde_json::json!(["name"]));
        assert!(d.get("values").is_none(), "values only with --show-values");
        assert!(!String::from_utf8_lossy(&o.stdout).contains("Someone Else"));
    }
    let o = rehearse(&m, &b, &["--show-values"]);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("shop.customers _id \"c12\": document"),
        "{text}"
    );
    assert!(
        text.contains("name: rebuild \"Someone Else\"  production \"Customer 12\""),
        "{text}"
    );
    assert!(text.contains("REHEARSAL FAILED"), "{text}");
}

#[test]
fn documents_missing_on_either_side_are_found_by_the_sample() {
    let dir = tempfile::tempdir().unwrap();
    let Some((m, _d, b)) = production(
        "documents_missing_on_either_side_are_found_by_the_sample",
        dir.path(),
    ) else {
        return;
    };
    // One deleted from the backup (production has it), one added (production never had it).
    rewrite_bson(&b.join("shop/customers.bson"), |mut docs| {
        docs.retain(|d| d.get_str("_id") != Ok("c15"));
        docs.push(doc! {"_id": "c99", "name": "Nobody", "tier": 0});
        docs
    });
    let o = rehearse(&m, &b, &["--json", "--sample", "25"]);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    let r = report(&o);
    let mut got = diffs(&r, "shop.customers");
    got.sort();
    assert_eq!(
        got,
        vec![
            (
                "document_missing_in_production".to_string(),
                Some("\"c99\"".to_string())
            ),
            (
                "document_missing_in_rebuild".to_string(),
                Some("\"c15\"".to_string())
            ),
        ],
        "{}",
        show(&o)
    );
}

/// A sample smaller than the collection still draws from both sides: with the same
/// count on each side (so the count cannot tell), the backup's `shop.customers`
/// holds other `_id`s than production's, and `--sample 4` must report documents
/// missing on each side, no more than it drew.
#[test]
fn a_sample_smaller_than_the_collection_draws_from_both_sides() {
    let dir = tempfile::tempdir().unwrap();
    let Some((m, _d, b)) = production(
        "a_sample_smaller_than_the_collection_draws_from_both_sides",
        dir.path(),
    ) else {
        return;
    };
    // `c01` stays (the oplog updates it); every other _id is renamed `xNN`.
    rewrite_bson(&b.join("shop/customers.bson"), |docs| {
        docs.into_iter()
            .map(|mut d| {
                let id = d.get_str("_id").unwrap().to_string();
                if id != "c01" {
                    d.insert("_id", id.replace('c', "x"));
                }
                d
            })
            .collect()
    });
    let o = rehearse(&m, &b, &["--json", "--sample", "4"]);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    let r = report(&o);
    let got = diffs(&r, "shop.customers");
    assert!(
        !got.iter().any(|(k, _)| k == "count"),
        "same count on both sides: {}",
        show(&o)
    );
    let only_rebuild: Vec<_> = got
        .iter()
        .filter(|(k, _)| k == "document_missing_in_production")
        .collect();
    let only_production: Vec<_> = got
        .iter()
        .filter(|(k, _)| k == "document_missing_in_rebuild")
        .collect();
    assert!((3..=4).contains(&only_rebuild.len()), "{got:?}");
    assert!((3..=4).contains(&only_production.len()), "{got:?}");
    assert!(
        only_rebuild
            .iter()
            .all(|(_, id)| id.as_deref().unwrap().starts_with("\"x")),
        "{got:?}"
    );
    assert!(
        only_production
            .iter()
            .all(|(_, id)| id.as_deref().unwrap().starts_with("\"c")),
        "{got:?}"
    );
    let row = r["namespaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["ns"] == "shop.customers")
        .unwrap();
    assert!(row["compared"].as_u64().unwrap() <= 8, "{row}");
}

#[test]
fn an_index_missing_from_the_backup_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let Some((m, _d, b)) = production("an_index_missing_from_the_backup_is_named", dir.path())
    else {
        return;
    };
    let meta = b.join("shop/orders.metadata.json");
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&meta).unwrap()).unwrap();
    v["indexes"]
        .as_array_mut()
        .unwrap()
        .retain(|i| i["name"] != "status_1_at_-1");
    std::fs::write(&meta, serde_json::to_string(&v).unwrap()).unwrap();
    let o = rehearse(&m, &b, &["--json"]);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    let r = report(&o);
    assert_eq!(
        diffs(&r, "shop.orders"),
        vec![("index_missing_in_rebuild".to_string(), None)],
        "{}",
        show(&o)
    );
    assert_eq!(
        r["differences"][0]["paths"],
        serde_json::json!(["status_1_at_-1"])
    );
}

/// The entries of an oplog archive chunk.
fn chunk_entries(path: &Path) -> Vec<Document> {
    let mut r =
        pitr::oplog::open(path.to_str().unwrap(), pitr::oplog::ReadOptions::default()).unwrap();
    let mut out = Vec::new();
    while let Some((doc, _, _)) = r.next_raw().unwrap() {
        out.push(bson::from_slice::<Document>(doc.as_bytes()).unwrap());
    }
    out
}

#[test]
fn an_oplog_archive_missing_a_chunk_is_caught_with_the_documents_it_held() {
    let test = "an_oplog_archive_missing_a_chunk_is_caught_with_the_documents_it_held";
    let dir = tempfile::tempdir().unwrap();
    let Some((m, _d, b)) = production(test, dir.path()) else {
        return;
    };
    let arch = dir.path().join("oplog-archive");
    let o = pitr(&[
        "archive",
        "--uri",
        &m.uri(),
        "--dir",
        arch.to_str().unwrap(),
        "--once",
        "--chunk-size",
        "2KiB",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    // A chunk of inserts into web.events (each ~250 bytes: several chunks of them)
    // goes, manifest entry and all: nothing records that it existed.
    let manifest_path = arch.join("manifest.json");
    let mut manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(&manifest_path).unwrap()).unwrap();
    let chunks = manifest["chunks"].as_array().unwrap().clone();
    let (pos, ids) = chunks
        .iter()
        .enumerate()
        .skip(1)
        .find_map(|(i, c)| {
            let entries = chunk_entries(&arch.join(c["file"].as_str().unwrap()));
            let only_events = !entries.is_empty()
                && entries
                    .iter()
                    .all(|e| e.get_str("ns") == Ok("web.events") && e.get_str("op") == Ok("i"));
            only_events.then(|| {
                (
                    i,
                    entries
                        .iter()
                        .map(|e| e.get_document("o").unwrap().get_i32("_id").unwrap())
                        .collect::<Vec<_>>(),
                )
            })
        })
        .unwrap_or_else(|| panic!("no chunk of web.events inserts: {manifest}"));
    assert!(pos + 1 < chunks.len(), "the chunk is not the last one");
    std::fs::remove_file(arch.join(chunks[pos]["file"].as_str().unwrap())).unwrap();
    manifest["chunks"].as_array_mut().unwrap().remove(pos);
    std::fs::write(
        &manifest_path,
        serde_json::to_string_pretty(&manifest).unwrap(),
    )
    .unwrap();

    let o = rehearse(&m, &b, &["--oplog", arch.to_str().unwrap(), "--json"]);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    let r = report(&o);
    let got = diffs(&r, "web.events");
    assert!(got.contains(&("count".to_string(), None)), "{}", show(&o));
    let missing: Vec<String> = got
        .iter()
        .filter(|(k, _)| k == "document_missing_in_rebuild")
        .filter_map(|(_, id)| id.clone())
        .collect();
    let want: Vec<String> = ids.iter().map(|i| i.to_string()).collect();
    assert_eq!(missing, want, "{}", show(&o));
}

// ---------------------------------------------------------------------------------
// read-only

/// Commands a rehearsal may send, and nothing else.
const READ_ONLY: &[&str] = &[
    "hello",
    "isMaster",
    "ismaster",
    "ping",
    "buildInfo",
    "getParameter",
    // The oplog's size, to estimate the room the oplog read from the server takes.
    "collStats",
    "listDatabases",
    "listCollections",
    "listIndexes",
    "find",
    "getMore",
    "killCursors",
    "aggregate",
    "endSessions",
];

#[test]
fn no_write_command_reaches_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let Some((m, _d, b)) = production("no_write_command_reaches_the_server", dir.path()) else {
        return;
    };
    let before = m.log().len();
    for extra in [
        &["--json"][..],
        &["--json", "--full", "--batch-size", "50"][..],
    ] {
        let o = rehearse(&m, &b, extra);
        assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    }
    let mut seen = std::collections::BTreeSet::new();
    for (line, v) in m.log_entries(before) {
        if v["id"] != 51803 {
            continue;
        }
        let cmd = &v["attr"]["command"];
        let name = cmd.as_object().unwrap().keys().next().unwrap().clone();
        assert!(
            READ_ONLY.contains(&name.as_str()),
            "pitr sent `{name}`: {line}"
        );
        if name == "aggregate" {
            for stage in cmd["pipeline"].as_array().unwrap() {
                let s = stage.as_object().unwrap().keys().next().unwrap();
                assert!(
                    ["$count", "$sample", "$project"].contains(&s.as_str()),
                    "{line}"
                );
            }
        }
        if name == "find" && cmd["find"] != "oplog.rs" {
            assert_eq!(cmd["readConcern"]["level"], "snapshot", "{line}");
            assert!(cmd["readConcern"]["atClusterTime"].is_object(), "{line}");
        }
        seen.insert(name);
    }
    assert!(
        seen.contains("find") && seen.contains("aggregate"),
        "{seen:?}"
    );
}

// ---------------------------------------------------------------------------------
// refusals: exit 2 with a hint

fn assert_refused(o: &Output, message: &str, hint: &str) {
    assert_eq!(o.status.code(), Some(2), "{}", show(o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(message), "want `{message}` in:\n{err}");
    assert!(
        err.contains("hint:") && err.contains(hint),
        "want hint `{hint}` in:\n{err}"
    );
}

/// A work dir without room for the engine's on-disk store (past `--memory`) is
/// refused before the server is even reached (nothing listens at the URI: a
/// rehearsal that went on would fail connecting instead). The backup's files add up
/// to 8 TiB: a sparse file beside its dumps, whose apparent size is what is counted.
#[test]
fn a_work_dir_without_room_for_the_store_is_refused_before_anything_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let b = dir.path().join("backup");
    std::fs::create_dir(&b).unwrap();
    let f = std::fs::File::create(b.join("notes.sparse")).unwrap();
    f.set_len(8 << 40).unwrap();
    let uri = format!(
        "mongodb://127.0.0.1:{}/?serverSelectionTimeoutMS=500",
        free_port()
    );
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let args = |extra: &[&str]| {
        let mut v = vec![
            "rehearse",
            "--uri",
            &uri,
            "--backup",
            b.to_str().unwrap(),
            "--work-dir",
            work.to_str().unwrap(),
            "--memory",
            "64MiB",
        ];
        v.extend_from_slice(extra);
        pitr(&v)
    };
    let o = args(&[]);
    assert_refused(
        &o,
        "the rehearsal writes about 16.0 TiB there (the engine's on-disk store)",
        "give --work-dir (and --out) on a larger filesystem",
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!("`{}`", work.display())) && err.contains("16.0 TiB"),
        "{err}"
    );
    // Skipped, the rehearsal goes on to the server (and finds nothing there).
    let o = args(&["--no-space-check"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("on-disk store"), "{}", show(&o));
    assert_ne!(o.status.code(), Some(0), "{}", show(&o));
}

/// An oplog read from the server is counted before it is read, from the oplog's size
/// (`collStats`) and the share of its time the range covers: a server whose oplog
/// holds 8 TiB (as the stand-in is told to report) is refused before the read, with
/// the estimate in the message; nothing is left in the work dir.
#[test]
fn an_oplog_from_the_server_without_room_in_the_work_dir_is_refused_before_it_is_read() {
    let test = "an_oplog_from_the_server_without_room_in_the_work_dir_is_refused_before_it_is_read";
    let Some(tool) = mongodump(test) else { return };
    let dir = tempfile::tempdir().unwrap();
    let m = mongod(
        &[],
        &[("PITR_STANDIN_OPLOG_SIZE", &(8u64 << 40).to_string())],
    );
    let (_d, b) = chain(&tool, &m, &dir.path().join("backup"));
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let o = rehearse(&m, &b, &["--work-dir", work.to_str().unwrap()]);
    assert_refused(
        &o,
        "the oplog read from the server (estimated from its size and the time it spans) and the engine's on-disk store",
        "give --work-dir (and --out) on a larger filesystem",
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!("`{}`", work.display())) && !err.contains("reading the oplog from"),
        "refused before the read: {err}"
    );
    assert_eq!(
        std::fs::read_dir(&work).unwrap().count(),
        0,
        "nothing left in the work dir"
    );
    // Skipped, it reads the oplog and passes.
    let o = rehearse(
        &m,
        &b,
        &["--work-dir", work.to_str().unwrap(), "--no-space-check"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
}

#[test]
fn a_mongos_is_refused() {
    let m = mongod(&[], &[("PITR_STANDIN_MODE", "mongos")]);
    let o = rehearse(&m, Path::new("no-backup"), &[]);
    assert_refused(
        &o,
        "is a mongos",
        "rehearse each shard's replica set on its own",
    );
}

#[test]
fn a_standalone_is_refused() {
    let m = spare_mongod();
    let o = rehearse(&m, Path::new("no-backup"), &[]);
    assert_refused(
        &o,
        "is a standalone mongod",
        "point --uri at a replica set member",
    );
}

#[test]
fn a_4_4_server_is_refused_before_anything_is_read() {
    let m = mongod(&[], &[("PITR_STANDIN_VERSION", "4.4.29")]);
    let o = rehearse(&m, Path::new("no-backup"), &["--json"]);
    assert_refused(&o, "runs MongoDB 4.4.29", "upgrade to MongoDB 5.0");
    let r = report(&o);
    assert_eq!(r["result"], "error");
    assert_eq!(r["exit_code"], 2);
}

#[test]
fn a_point_the_server_no_longer_holds_is_refused() {
    let test = "a_point_the_server_no_longer_holds_is_refused";
    let Some(tool) = mongodump(test) else { return };
    let dir = tempfile::tempdir().unwrap();
    // Before the rehearsal: a point older than the history window.
    let m = mongod(
        &["--setParameter", "minSnapshotHistoryWindowInSeconds=1"],
        &[],
    );
    let d = Driver::new(&m);
    before_backup(&d);
    let b = dir.path().join("backup");
    backup(&tool, &m, &b, false);
    let old = pitr::oplog::Ts::new(now_secs() as u32, u32::MAX);
    std::thread::sleep(Duration::from_millis(2100));
    after_backup(&d);
    let o = rehearse(&m, &b, &["--at", &old.to_string()]);
    assert_refused(
        &o,
        "is older than the server keeps history for",
        "choose a point within the last 1 s",
    );

    // During it: the server drops its history (the fault), and answers SnapshotTooOld.
    let m = mongod(&[], &[("PITR_STANDIN_FAULT", "history-lost-after-reads=0")]);
    let (d, b) = chain(&tool, &m, &dir.path().join("backup2"));
    d.run("shop", doc! {"insert": "late", "documents": [{"_id": 1}]});
    let newest = newest_ts(&d);
    let at = pitr::oplog::Ts::new(newest.t, newest.i - 1);
    let o = rehearse(
        &m,
        &b,
        &[
            "--at",
            &at.to_string(),
            "--metrics",
            dir.path().join("pitr.prom").to_str().unwrap(),
        ],
    );
    assert_refused(
        &o,
        "no longer holds history for",
        "minSnapshotHistoryWindowInSeconds",
    );
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("SnapshotTooOld"),
        "{}",
        show(&o)
    );
    let prom = std::fs::read_to_string(dir.path().join("pitr.prom")).unwrap();
    assert!(prom.contains("pitr_rehearse_success 0\n"), "{prom}");
    assert!(prom.contains("pitr_rehearse_exit_code 2\n"), "{prom}");
}

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn newest_ts(d: &Driver) -> pitr::oplog::Ts {
    let r = d.run(
        "local",
        doc! {"find": "oplog.rs", "sort": {"$natural": -1}, "limit": 1},
    );
    let e = r
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap()[0]
        .as_document()
        .unwrap()
        .clone();
    pitr::oplog::Ts::from(e.get_timestamp("ts").unwrap())
}

#[test]
fn a_gap_between_the_backup_and_the_oplog_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let Some((m, d, b)) = production(
        "a_gap_between_the_backup_and_the_oplog_is_refused",
        dir.path(),
    ) else {
        return;
    };
    // An oplog that starts after entries the backup does not have.
    let from = newest_ts(&d);
    d.run(
        "shop",
        doc! {"insert": "late", "documents": [{"_id": 1}, {"_id": 2}]},
    );
    let out = dir.path().join("partial-oplog");
    let o = pitr(&[
        "dump-oplog",
        "--uri",
        &m.uri(),
        "--out",
        out.to_str().unwrap(),
        "--since",
        &pitr::oplog::Ts::new(from.t, from.i + 1).to_string(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let o = rehearse(
        &m,
        &b,
        &["--oplog", out.join("oplog.bson").to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("cannot rebuild the state"), "{err}");
    assert!(err.contains("hint:"), "{err}");
}

// ---------------------------------------------------------------------------------
// metrics

#[test]
fn metrics_are_written_for_the_textfile_collector() {
    let dir = tempfile::tempdir().unwrap();
    let Some((m, _d, b)) = production("metrics_are_written_for_the_textfile_collector", dir.path())
    else {
        return;
    };
    let prom = dir.path().join("textfile/pitr_rehearse.prom");
    std::fs::create_dir_all(prom.parent().unwrap()).unwrap();
    let o = rehearse(&m, &b, &["--metrics", prom.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let text = std::fs::read_to_string(&prom).unwrap();
    for name in [
        "pitr_rehearse_success 1",
        "pitr_rehearse_exit_code 0",
        "pitr_rehearse_recovery_window_seconds ",
        "pitr_rehearse_backup_age_seconds ",
        "pitr_rehearse_duration_seconds ",
        "pitr_rehearse_documents_compared ",
    ] {
        assert!(text.contains(name), "{name} in:\n{text}");
    }
    let files: Vec<_> = std::fs::read_dir(prom.parent().unwrap())
        .unwrap()
        .flatten()
        .collect();
    assert_eq!(files.len(), 1, "only the .prom file is left");
    let _ = (Bson::Null, RawDocumentBuf::new());
}

/// A metrics file that cannot be written is an error, not a warning: a nightly job
/// whose `.prom` stays as it was would read as last night's result. The report is
/// still printed; the exit code is 2 and the error names the path.
#[test]
fn metrics_that_cannot_be_written_fail_the_run_after_the_report() {
    let dir = tempfile::tempdir().unwrap();
    let Some((m, _d, b)) = production(
        "metrics_that_cannot_be_written_fail_the_run_after_the_report",
        dir.path(),
    ) else {
        return;
    };
    // Its directory can be written, but the name is taken by a directory: the
    // rename at the end fails, after the whole rehearsal.
    let prom = dir.path().join("pitr_rehearse.prom");
    std::fs::create_dir(&prom).unwrap();
    let o = rehearse(&m, &b, &["--metrics", prom.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("REHEARSAL PASSED"),
        "the report first: {}",
        show(&o)
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!("cannot write the metrics to `{}`", prom.display())),
        "{}",
        show(&o)
    );
    assert!(err.contains("hint:"), "{}", show(&o));
    assert!(!err.contains("warning: cannot write the metrics"), "{err}");
    // The JSON says so too.
    let o = rehearse(&m, &b, &["--json", "--metrics", prom.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    let r = report(&o);
    assert_eq!(r["result"], "passed", "the rehearsal's own verdict");
    assert_eq!(r["exit_code"], 2, "{}", show(&o));
    assert_eq!(r["metrics"]["written"], false, "{}", show(&o));
    assert_eq!(r["metrics"]["path"], prom.to_str().unwrap());

    // A directory that does not exist is refused before anything is read.
    let missing = dir.path().join("no-such-dir/pitr.prom");
    let before = m.log().len();
    let o = rehearse(&m, &b, &["--metrics", missing.to_str().unwrap()]);
    assert_refused(&o, "no-such-dir", "node_exporter");
    assert!(
        !m.log()[before..].contains("\"find\""),
        "nothing read: {}",
        &m.log()[before..]
    );
}

/// Before the rebuild starts, the estimate from the backup's size and the read rate
/// says the reads would outlive the server's history window: exit 2 at once, with
/// the `setParameter` that would make room, and nothing read as of the point.
#[test]
fn a_rehearsal_that_would_outlive_the_history_window_says_so_before_it_starts() {
    let test = "a_rehearsal_that_would_outlive_the_history_window_says_so_before_it_starts";
    let Some(tool) = mongodump(test) else { return };
    let dir = tempfile::tempdir().unwrap();
    let m = mongod(
        &["--setParameter", "minSnapshotHistoryWindowInSeconds=3"],
        &[],
    );
    let (_, b) = chain(&tool, &m, &dir.path().join("backup"));
    let before = m.log().len();
    // --full at one document a second: the backup's KiBs are as many documents
    // estimated (1 KiB each), more than the 3 s the point stays readable.
    let o = rehearse(&m, &b, &["--full", "--max-read-rate", "1", "--json"]);
    assert_refused(
        &o,
        "the rehearsal would outlive the server's history",
        "minSnapshotHistoryWindowInSeconds",
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("estimated from their sizes"), "{err}");
    assert!(
        !err.contains("rebuilt the state"),
        "before the rebuild: {err}"
    );
    let r = report(&o);
    assert_eq!(r["result"], "error");
    assert_eq!(r["timing"]["rebuild_secs"], 0.0, "{}", show(&o));
    for (line, v) in m.log_entries(before) {
        if v["id"] != 51803 {
            continue;
        }
        let cmd = &v["attr"]["command"];
        assert!(
            cmd.get("readConcern")
                .is_none_or(|rc| rc["level"] != "snapshot"),
            "nothing is read as of the point: {line}"
        );
    }
}

// ---------------------------------------------------------------------------------
// --out: the rebuilt state as a dump

/// A stand-in without replica set (what mongorestore restores into).
fn spare_mongod() -> Mongod {
    mongod(&[], &[("PITR_STANDIN_MODE", "standalone")])
}

/// `dbHash` of one collection and its count, on `m`.
fn db_hash(m: &Mongod, db: &str, coll: &str) -> (String, i64) {
    let d = Driver::new(m);
    let reply = d.run(db, doc! {"dbHash": 1, "collections": [coll]});
    let md5 = reply
        .get_document("collections")
        .unwrap()
        .get_str(coll)
        .unwrap_or_else(|_| panic!("no dbHash of {db}.{coll}: {reply}"))
        .to_string();
    let n = d.run(db, doc! {"count": coll});
    (
        md5,
        n.get_i32("n")
            .map(i64::from)
            .unwrap_or_else(|_| n.get_i64("n").unwrap()),
    )
}

/// `--out` writes the state at the point as mongodump does (a directory, `--gzip`,
/// `--archive --gzip`); the REAL mongorestore restores it into a spare stand-in
/// whose counts and `dbHash`es are those the report gives.
#[test]
fn out_writes_the_rebuilt_state_and_the_real_mongorestore_restores_it() {
    let test = "out_writes_the_rebuilt_state_and_the_real_mongorestore_restores_it";
    let dir = tempfile::tempdir().unwrap();
    let Some((m, _d, b)) = production(test, dir.path()) else {
        return;
    };
    let restore_bin = mongodump(test).unwrap().with_file_name("mongorestore");
    for (name, flags, restore_args) in [
        ("state", &[][..], &["--dir"][..]),
        ("state-gz", &["--gzip"][..], &["--gzip", "--dir"][..]),
        (
            "state.archive.gz",
            &["--archive", "--gzip"][..],
            &["--gzip", "--archive"][..],
        ),
    ] {
        let out = dir.path().join(name);
        let mut args = vec!["--json", "--out", out.to_str().unwrap()];
        args.extend_from_slice(flags);
        let o = rehearse(&m, &b, &args);
        let r = assert_passed(&o);
        assert_eq!(r["out"]["path"], out.to_str().unwrap(), "{}", show(&o));
        let dumped = r["out"]["namespaces"].as_array().unwrap().clone();
        let names: Vec<&str> = dumped.iter().map(|n| n["ns"].as_str().unwrap()).collect();
        for want in ["shop.orders", "shop.customers", "web.events", "metrics.cpu"] {
            assert!(names.contains(&want), "{want} in {names:?}");
        }
        assert!(
            !names.iter().any(|n| n.starts_with("tmp.")),
            "dropped: {names:?}"
        );

        let spare = spare_mongod();
        let mut cmd = Command::new(&restore_bin);
        cmd.args(["--host", "127.0.0.1", "--port", &spare.port.to_string()]);
        match restore_args {
            [first, "--archive"] => {
                cmd.arg(first).arg(format!("--archive={}", out.display()));
            }
            _ => {
                cmd.args(restore_args).arg(&out);
            }
        }
        let ro = cmd.stdin(Stdio::null()).output().unwrap();
        assert!(
            ro.status.success(),
            "mongorestore ({name}): {}",
            String::from_utf8_lossy(&ro.stderr)
        );
        for n in &dumped {
            let Some(md5) = n["dbhash"].as_str() else {
                continue;
            };
            let data_ns = n["data_ns"].as_str().unwrap();
            let (db, coll) = data_ns.split_once('.').unwrap();
            let (got, count) = db_hash(&spare, db, coll);
            assert_eq!(got, md5, "{data_ns} ({name})");
            assert_eq!(
                count,
                n["documents"].as_i64().unwrap(),
                "{data_ns} ({name})"
            );
        }
        let orders = dumped.iter().find(|n| n["ns"] == "shop.orders").unwrap();
        assert_eq!(orders["documents"], 30, "30 + 2 inserted - 2 deleted");
    }

    // An --out that exists and is not empty is refused before anything is read.
    let before = m.log().len();
    let o = rehearse(
        &m,
        &b,
        &["--out", dir.path().join("state").to_str().unwrap()],
    );
    assert_refused(&o, "state", "choose another --out");
    assert!(
        !m.log()[before..].contains("\"find\""),
        "nothing read: {}",
        &m.log()[before..]
    );
    // An empty directory may be named (mongodump's own --out may be one).
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let o = rehearse(&m, &b, &["--out", empty.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert!(empty.join("shop/orders.bson").is_file());
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains(&format!("Dump        {}", empty.display())),
        "{text}"
    );
}

/// `--out` in a bucket: the dump a local `--out` writes, uploaded all or nothing
/// (a directory object by object with its manifest last, an archive as one
/// object), nothing left in the work dir; a prefix that holds objects, or a bucket
/// that does not exist, refused before anything is read.
#[test]
fn out_to_a_bucket_uploads_what_a_local_out_writes() {
    let test = "out_to_a_bucket_uploads_what_a_local_out_writes";
    let dir = tempfile::tempdir().unwrap();
    let Some((m, _d, b)) = production(test, dir.path()) else {
        return;
    };
    let s3 = storage_common::S3Server::start(&dir.path().join("s3"), &["nightly"]);
    let endpoint = s3.endpoint();
    let env = storage_common::env_for(&endpoint);
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let uri = m.uri();
    let to_bucket = |out: &str, flags: &[&str]| {
        let mut args = vec![
            "rehearse",
            "--uri",
            &uri,
            "--backup",
            b.to_str().unwrap(),
            "--margin",
            "0",
            "--json",
            "--work-dir",
            work.to_str().unwrap(),
            "--out",
            out,
        ];
        args.extend_from_slice(flags);
        pitr_env(&args, &env)
    };
    let storage = s3.storage();
    for (name, flags) in [
        ("state", &[][..]),
        ("state.archive.gz", &["--archive", "--gzip"][..]),
    ] {
        let local = dir.path().join(name);
        let mut args = vec!["--json", "--out", local.to_str().unwrap()];
        args.extend_from_slice(flags);
        assert_passed(&rehearse(&m, &b, &args));
        let url = format!("s3://nightly/rehearsed/{name}");
        let o = to_bucket(&url, flags);
        let r = assert_passed(&o);
        assert_eq!(r["out"]["path"], url.as_str(), "{}", show(&o));
        let at = pitr::storage::Location::parse(&url).unwrap();
        let mut got = storage_common::objects(&storage, &at);
        if local.is_file() {
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(&mut storage.open_read(&at).unwrap(), &mut bytes).unwrap();
            assert_eq!(bytes, std::fs::read(&local).unwrap(), "{name}");
            assert!(got.is_empty(), "one object, nothing under it");
        } else {
            storage_common::take_manifest(&mut got);
            assert_eq!(
                got,
                common::files_under(&local).into_iter().collect::<Vec<_>>(),
                "{name}"
            );
        }
        assert!(
            std::fs::read_dir(&work).unwrap().next().is_none(),
            "the work dir is left empty"
        );
    }

    // Never over what a prefix holds, nor into a bucket that does not exist:
    // refused before anything is read.
    for (out, says) in [
        ("s3://nightly/rehearsed/state", "already holds"),
        ("s3://no-such-bucket/state", "no-such-bucket"),
    ] {
        let before = m.log().len();
        let o = to_bucket(out, &[]);
        assert_eq!(o.status.code(), Some(2), "{}", show(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(says) && err.contains("hint:"), "{err}");
        assert!(
            !m.log()[before..].contains("\"find\""),
            "nothing read: {}",
            &m.log()[before..]
        );
    }
}

// ---------------------------------------------------------------------------------
// collection options and view definitions

/// Rewrites the backup's `NAME.metadata.json` through `f`.
fn rewrite_metadata(file: &Path, f: impl Fn(&mut Value)) {
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    f(&mut v);
    std::fs::write(file, serde_json::to_string(&v).unwrap()).unwrap();
}

/// The paths of the one difference of `kind` in `ns`.
/// The paths of the one difference of `ns`, which must be of `kind` (and no other
/// difference of `ns`).
fn only_difference(r: &Value, ns: &str, kind: &str) -> Value {
    assert_eq!(diffs(r, ns), vec![(kind.to_string(), None)], "{r}");
    diff_paths(r, ns, kind)
}

fn diff_paths(r: &Value, ns: &str, kind: &str) -> Value {
    let found: Vec<&Value> = r["differences"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["ns"] == ns && d["kind"] == kind)
        .collect();
    assert_eq!(found.len(), 1, "one {kind} of {ns}: {r}");
    found[0]["paths"].clone()
}

/// Options the backup's metadata gives a collection but production's has not (a
/// validator), and one that differs (a capped collection's size), are each named
/// with the namespace and the option; `--show-values` shows both sides. A validator
/// set on the server after the backup (a `collMod` in the oplog before the point) is
/// rebuilt and matches.
#[test]
fn collection_options_that_differ_are_named_with_the_namespace() {
    let dir = tempfile::tempdir().unwrap();
    let Some((m, d, b)) = production(
        "collection_options_that_differ_are_named_with_the_namespace",
        dir.path(),
    ) else {
        return;
    };
    d.run(
        "web",
        doc! {"collMod": "events", "validator": {"kind": {"$type": "string"}}},
    );
    let o = rehearse(&m, &b, &["--json"]);
    let r = assert_passed(&o);
    assert!(
        r["not_compared"]
            .as_array()
            .unwrap()
            .iter()
            .all(|n| n["ns"] != "web.events"),
        "the collMod is before the point: web.events' options are compared: {}",
        show(&o)
    );
    // Only a capped collection (its documents cannot be read as of a time): a pass
    // that says no document was compared.
    let o = rehearse(&m, &b, &["--json", "--ns", "app.*"]);
    let r = assert_passed(&o);
    assert_eq!(r["nothing_compared"], true, "{}", show(&o));
    let o = rehearse(&m, &b, &["--ns", "app.*"]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("REHEARSAL PASSED, BUT NO DOCUMENTS WERE COMPARED"),
        "{text}"
    );

    rewrite_metadata(&b.join("shop/customers.metadata.json"), |v| {
        v["options"]["validator"] = serde_json::json!({"tier": {"$gte": 0}});
    });
    rewrite_metadata(&b.join("app/log.metadata.json"), |v| {
        assert_eq!(v["options"]["capped"], true, "{v}");
        v["options"]["size"] = serde_json::json!(131072);
    });
    let o = rehearse(&m, &b, &["--json"]);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    let r = report(&o);
    assert_eq!(r["result"], "differences");
    assert_eq!(
        only_difference(&r, "shop.customers", "options"),
        serde_json::json!(["validator"])
    );
    assert_eq!(
        only_difference(&r, "app.log", "options"),
        serde_json::json!(["size"])
    );
    let o = rehearse(&m, &b, &["--show-values"]);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("app.log: "), "{text}");
    assert!(
        text.contains("size: rebuild 131072  production 65536"),
        "{text}"
    );
    assert!(
        text.contains("validator: rebuild {\"tier\":{\"$gte\":0}}  production (absent)"),
        "{text}"
    );
}

/// A view whose pipeline differs in the backup's metadata is caught by its
/// definition, with the namespace and the field.
#[test]
fn a_view_definition_that_differs_is_caught() {
    let dir = tempfile::tempdir().unwrap();
    let Some((m, _d, b)) = production("a_view_definition_that_differs_is_caught", dir.path())
    else {
        return;
    };
    rewrite_metadata(&b.join("shop/open_orders.metadata.json"), |v| {
        assert_eq!(v["options"]["viewOn"], "orders", "{v}");
        v["options"]["pipeline"] = serde_json::json!([{"$match": {"status": "closed"}}]);
    });
    let o = rehearse(&m, &b, &["--json"]);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    let r = report(&o);
    assert_eq!(
        only_difference(&r, "shop.open_orders", "view_definition"),
        serde_json::json!(["pipeline"])
    );
    assert_eq!(r["differences_total"], 1, "{}", show(&o));
}

// ---------------------------------------------------------------------------------
// --ns

/// The commands of the stand-in's log since `from`, as (db, command name, command).
fn commands_since(m: &Mongod, from: usize) -> Vec<(String, String, Value)> {
    let mut out = Vec::new();
    for (_, v) in m.log_entries(from) {
        if v["id"] != 51803 {
            continue;
        }
        let cmd = v["attr"]["command"].clone();
        let name = cmd.as_object().unwrap().keys().next().unwrap().clone();
        let db = v["attr"]["ns"]
            .as_str()
            .unwrap()
            .trim_end_matches(".$cmd")
            .to_string();
        out.push((db, name, v));
    }
    out
}

/// `--ns` keeps the comparison to the namespaces it matches (a difference elsewhere
/// does not count, and nothing elsewhere is read); a glob matching nothing is an
/// error (exit 2), not a pass that compared nothing.
#[test]
fn ns_restricts_the_comparison_and_a_glob_matching_nothing_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let Some((m, _d, b)) = production(
        "ns_restricts_the_comparison_and_a_glob_matching_nothing_is_an_error",
        dir.path(),
    ) else {
        return;
    };
    // A difference outside shop.* (and one outside web.events).
    rewrite_metadata(&b.join("app/log.metadata.json"), |v| {
        v["options"]["size"] = serde_json::json!(131072);
    });
    let o = rehearse(&m, &b, &["--json"]);
    assert_eq!(o.status.code(), Some(1), "unrestricted: {}", show(&o));

    let before = m.log().len();
    let o = rehearse(&m, &b, &["--json", "--full", "--ns", "shop.*"]);
    let r = assert_passed(&o);
    let names: Vec<&str> = r["namespaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["ns"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["shop.customers", "shop.open_orders", "shop.orders"],
        "{}",
        show(&o)
    );
    assert_eq!(r["documents_compared"], 50, "{}", show(&o));
    for (db, name, line) in commands_since(&m, before) {
        if ["find", "aggregate", "getMore", "listIndexes"].contains(&name.as_str())
            && !["local", "admin"].contains(&db.as_str())
        {
            assert_eq!(db, "shop", "only shop.* is read: {line}");
        }
    }

    let o = rehearse(&m, &b, &["--json", "--ns", "shop.orders", "--ns", "web.*"]);
    let r = assert_passed(&o);
    let names: Vec<&str> = r["namespaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["ns"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["shop.orders", "web.events"], "{}", show(&o));
    assert_eq!(r["nothing_compared"], false);

    let o = rehearse(&m, &b, &["--json", "--ns", "nosuch.*"]);
    assert_refused(
        &o,
        "--ns `nosuch.*` matches no namespace of the rebuild or of production",
        "shop.orders",
    );
    let r = report(&o);
    assert_eq!(r["result"], "error");
    assert_eq!(r["exit_code"], 2);
    // One glob of several matching nothing: that one is named.
    let o = rehearse(&m, &b, &["--ns", "shop.orders", "--ns", "shop.ordrs"]);
    assert_refused(
        &o,
        "--ns `shop.ordrs` matches no namespace of the rebuild or of production",
        "shop.orders",
    );
    assert!(
        !String::from_utf8_lossy(&o.stderr).contains("`shop.orders` matches"),
        "{}",
        show(&o)
    );
    // Matching nothing the chain rebuilds, but something production has: said so.
    // (metrics.cpu is not written after the backup.)
    std::fs::remove_dir_all(b.join("metrics")).unwrap();
    let o = rehearse(&m, &b, &["--ns", "metrics.*"]);
    assert_refused(
        &o,
        "--ns `metrics.*` matches nothing the backup and the oplog rebuild, but production has metrics.cpu",
        "`pitr plan` lists the backup's namespaces",
    );
}

// ---------------------------------------------------------------------------------
// --memory

/// A `--memory` smaller than the rebuilt documents moves them to the on-disk store;
/// the rehearsal still passes (sampled and `--full`, every document read back from
/// disk), and the report says they moved.
#[test]
fn a_rebuild_past_memory_moves_to_disk_and_still_passes() {
    let dir = tempfile::tempdir().unwrap();
    let Some((m, d, b)) = production(
        "a_rebuild_past_memory_moves_to_disk_and_still_passes",
        dir.path(),
    ) else {
        return;
    };
    // About 300 KB of documents after the backup (--memory is at least 64 KiB).
    let big: Vec<Document> = (0..1000)
        .map(|i| doc! {"_id": i, "pad": "b".repeat(300)})
        .collect();
    d.run("web", doc! {"insert": "big", "documents": big});
    let o = rehearse(&m, &b, &["--json"]);
    let r = assert_passed(&o);
    assert_eq!(r["rebuild"]["spilled_to_disk"], false, "{}", show(&o));

    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    for extra in [&[][..], &["--full"][..]] {
        let mut args = vec![
            "--json",
            "--memory",
            "64KiB",
            "--work-dir",
            work.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let o = rehearse(&m, &b, &args);
        let r = assert_passed(&o);
        assert_eq!(r["rebuild"]["spilled_to_disk"], true, "{}", show(&o));
        assert_eq!(r["rebuild"]["memory_bytes"], 65536, "{}", show(&o));
        assert!(
            r["rebuild"]["documents"].as_u64().unwrap() >= 1300,
            "{}",
            show(&o)
        );
        if extra.contains(&"--full") {
            assert!(
                r["documents_compared"].as_u64().unwrap() >= 1300,
                "{}",
                show(&o)
            );
        }
    }
    let o = rehearse(
        &m,
        &b,
        &["--memory", "64KiB", "--work-dir", work.to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("past --memory (64.0 KiB) they moved to disk"),
        "{text}"
    );
    assert!(
        std::fs::read_dir(&work).unwrap().next().is_none(),
        "the work files are gone"
    );
}

// ---------------------------------------------------------------------------------
// transient errors and --max-read-rate

/// A server that fails some snapshot reads (`fail-snapshot-reads=N:K:CODE`).
fn production_failing_reads(test: &str, dir: &Path, fault: &str) -> Option<(Mongod, PathBuf)> {
    let tool = mongodump(test)?;
    let m = mongod(&[], &[("PITR_STANDIN_MONGOD_FAULT", fault)]);
    let (_, b) = chain(&tool, &m, &dir.join("backup"));
    Some((m, b))
}

/// The stand-in's log lines of the faults it acted out.
fn faults_fired(m: &Mongod) -> usize {
    m.log()
        .lines()
        .filter(|l| l.contains("Stand-in fault: failing a read"))
        .count()
}

/// An election during the reads (11602 on a count, twice: the driver's own retry
/// fails too) and a connection dropped in the middle of a `--full` scan (the scan
/// reopens after the last `_id` it had): the rehearsal passes, compares every
/// document once, and counts and lists the retries.
#[test]
fn transient_read_errors_are_retried_and_counted() {
    let test = "transient_read_errors_are_retried_and_counted";
    let dir = tempfile::tempdir().unwrap();
    let Some((m, b)) = production_failing_reads(test, dir.path(), "fail-snapshot-reads=1:2:11602")
    else {
        return;
    };
    let o = rehearse(&m, &b, &["--json"]);
    let r = assert_passed(&o);
    assert_eq!(faults_fired(&m), 2, "{}", m.log());
    assert_eq!(r["reads"]["retries"], 1, "{}", show(&o));
    let why = r["reads"]["retried"][0].as_str().unwrap();
    assert!(
        why.contains("InterruptedDueToReplStateChange") && why.contains("counting"),
        "{why}"
    );

    // The 3rd snapshot read of `--ns web.* --full --batch-size 50` is the first
    // getMore (after the count and the find): the connection drops.
    let dir = tempfile::tempdir().unwrap();
    let Some((m, b)) = production_failing_reads(test, dir.path(), "fail-snapshot-reads=3:1:0")
    else {
        return;
    };
    let o = rehearse(&m, &b, &["--full", "--ns", "web.*", "--batch-size", "50"]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert_eq!(faults_fired(&m), 1, "{}", m.log());
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("Retried     1 reads after transient errors"),
        "{text}"
    );
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("retried a read: reading `web.events`"),
        "{}",
        show(&o)
    );
    let o = rehearse(
        &m,
        &b,
        &["--json", "--full", "--ns", "web.*", "--batch-size", "50"],
    );
    let r = assert_passed(&o);
    assert_eq!(r["documents_compared"], 250, "{}", show(&o));
    assert_eq!(
        r["reads"]["retries"],
        0,
        "the fault fires once: {}",
        show(&o)
    );
}

/// An error that does not go away by trying again (BadValue) is not retried: exit 2
/// naming the read, the server's error and a hint.
#[test]
fn a_read_error_that_is_not_transient_fails_the_rehearsal_clearly() {
    let test = "a_read_error_that_is_not_transient_fails_the_rehearsal_clearly";
    let dir = tempfile::tempdir().unwrap();
    let Some((m, b)) = production_failing_reads(test, dir.path(), "fail-snapshot-reads=1:1:2")
    else {
        return;
    };
    let o = rehearse(&m, &b, &["--ns", "shop.orders"]);
    assert_refused(
        &o,
        "reading production failed: counting `shop.orders`",
        "not one that goes away by trying again",
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("BadValue"), "{err}");
    assert_eq!(faults_fired(&m), 1, "not retried: {}", m.log());
}

/// `--max-read-rate N`, measured on the server's side: the documents its `find`s and
/// `getMore`s returned (`nreturned` in its log) over the time between the first and
/// the last of them stay under twice the rate, on a run of several seconds. A
/// behaviour check with a generous bound, not a benchmark.
#[test]
fn max_read_rate_is_honoured_as_the_server_sees_it() {
    let dir = tempfile::tempdir().unwrap();
    let Some((m, _d, b)) = production(
        "max_read_rate_is_honoured_as_the_server_sees_it",
        dir.path(),
    ) else {
        return;
    };
    let rate = 50.0;
    let before = m.log().len();
    let o = rehearse(
        &m,
        &b,
        &["--json", "--full", "--ns", "web.*", "--max-read-rate", "50"],
    );
    let r = assert_passed(&o);
    assert_eq!(r["documents_compared"], 250, "{}", show(&o));
    let reads: Vec<(f64, u64)> = commands_since(&m, before)
        .into_iter()
        .filter(|(db, name, _)| db == "web" && (name == "find" || name == "getMore"))
        .map(|(_, _, line)| {
            let t =
                chrono::DateTime::parse_from_rfc3339(line["t"]["$date"].as_str().unwrap()).unwrap();
            let n = line["attr"]["nreturned"]
                .as_u64()
                .unwrap_or_else(|| panic!("nreturned in {line}"));
            (t.timestamp_millis() as f64 / 1000.0, n)
        })
        .collect();
    let total: u64 = reads.iter().map(|(_, n)| n).sum();
    assert_eq!(total, 250, "{reads:?}");
    assert!(
        reads.iter().all(|(_, n)| *n <= 50),
        "batches no larger than a second's worth: {reads:?}"
    );
    let span = reads.last().unwrap().0 - reads[0].0;
    assert!(span >= 2.0, "a run of a few seconds: {span} s, {reads:?}");
    // The last batch's documents arrive at the end of the span: not counted.
    let before_last: u64 = reads[..reads.len() - 1].iter().map(|(_, n)| n).sum();
    let measured = before_last as f64 / span;
    assert!(
        measured < 2.0 * rate,
        "{measured:.1} documents/s read at --max-read-rate {rate}: {reads:?}"
    );
}

/// Options, indexes and namespaces changed in production AFTER the point cannot be
/// compared (its catalog is only readable as it is now): each is listed under "not
/// compared" with the command that changed it, the documents of a collection whose
/// options or indexes changed are still compared, and the rehearsal passes.
#[test]
fn catalog_changes_after_the_point_are_listed_not_reported_as_differences() {
    let dir = tempfile::tempdir().unwrap();
    let Some((m, d, b)) = production(
        "catalog_changes_after_the_point_are_listed_not_reported_as_differences",
        dir.path(),
    ) else {
        return;
    };
    let at = newest_ts(&d);
    d.run(
        "shop",
        doc! {"collMod": "customers", "validator": {"tier": {"$gte": 0}}},
    );
    d.run(
        "shop",
        doc! {"createIndexes": "orders", "indexes": [{"key": {"total": 1}, "name": "total_1"}]},
    );
    d.run("late", doc! {"insert": "things", "documents": [{"_id": 1}]});
    let o = rehearse(&m, &b, &["--json", "--at", &at.to_string()]);
    let r = assert_passed(&o);
    let why = |ns: &str| -> String {
        r["not_compared"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["ns"] == ns)
            .unwrap_or_else(|| panic!("{ns} not compared: {}", show(&o)))["why"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert!(why("shop.customers").contains("`collMod`"), "{}", show(&o));
    assert!(
        why("shop.orders").contains("`createIndexes`"),
        "{}",
        show(&o)
    );
    assert!(why("late.things").contains("`create`"), "{}", show(&o));
    let row = r["namespaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["ns"] == "shop.customers")
        .unwrap();
    assert_eq!(row["compared"], 20, "its documents are compared: {row}");
}
