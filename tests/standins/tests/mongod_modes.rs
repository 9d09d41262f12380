//! The stand-in mongod's modes (replica set with a seeded oplog, mongos, auth) and
//! its fault knobs.

mod common;

use bson::{doc, Bson, Document, Timestamp};
use common::*;
use mongodb::options::CursorType;
use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

const T0: u32 = 1_700_000_000;

fn seeded_oplog(dir: &std::path::Path, n: u32) -> std::path::PathBuf {
    let path = dir.join("seed-oplog.bson");
    let entries: Vec<Document> = (1..=n)
        .map(|i| insert_entry("app.items", T0, i, doc! {"_id": i as i64}))
        .collect();
    write_bson(&path, &entries);
    path
}

async fn oplog_ts(
    c: &mongodb::Client,
    filter: Document,
    batch: u32,
) -> mongodb::error::Result<Vec<Timestamp>> {
    let mut cur = c
        .database("local")
        .collection::<Document>("oplog.rs")
        .find(filter)
        .sort(doc! {"$natural": 1})
        .batch_size(batch)
        .await?;
    let mut out = Vec::new();
    while cur.advance().await? {
        out.push(cur.deserialize_current()?.get_timestamp("ts").unwrap());
    }
    Ok(out)
}

#[tokio::test]
async fn replset_mode_serves_a_seeded_oplog() {
    let seed_dir = tempfile::tempdir().unwrap();
    let seed = seeded_oplog(seed_dir.path(), 300);
    let m = start_mongod(
        &["--replSet", "rs9"],
        &[("PITR_STANDIN_OPLOG", seed.to_str().unwrap())],
    );
    let c = client(m.port).await;

    let hello = admin(&c, doc! {"hello": 1}).await.unwrap();
    assert_eq!(hello.get_str("setName").unwrap(), "rs9");
    assert!(hello.get_bool("isWritablePrimary").unwrap());
    assert_eq!(
        hello.get_array("hosts").unwrap()[0],
        Bson::String(format!("127.0.0.1:{}", m.port))
    );

    let status = admin(&c, doc! {"replSetGetStatus": 1}).await.unwrap();
    let member = status.get_array("members").unwrap()[0]
        .as_document()
        .unwrap()
        .clone();
    assert_eq!(member.get_str("stateStr").unwrap(), "PRIMARY");
    assert_eq!(
        member
            .get_document("optime")
            .unwrap()
            .get_timestamp("ts")
            .unwrap(),
        Timestamp {
            time: T0,
            increment: 300
        }
    );

    // find + getMore with a ts range
    let got = oplog_ts(
        &c,
        doc! {"ts": {"$gt": Timestamp { time: T0, increment: 100 }}},
        50,
    )
    .await
    .unwrap();
    assert_eq!(got.len(), 200);
    assert_eq!(
        got[0],
        Timestamp {
            time: T0,
            increment: 101
        }
    );
    assert!(got
        .windows(2)
        .all(|w| (w[0].time, w[0].increment) < (w[1].time, w[1].increment)));
    let got = oplog_ts(&c, doc! {"ts": {"$gte": Timestamp { time: T0, increment: 10 }, "$lt": Timestamp { time: T0, increment: 20 }}, "op": "i"}, 3).await.unwrap();
    assert_eq!(got.len(), 10);
    let newest = c
        .database("local")
        .collection::<Document>("oplog.rs")
        .find_one(doc! {})
        .sort(doc! {"$natural": -1})
        .await
        .unwrap()
        .unwrap();
    assert_eq!(newest.get_timestamp("ts").unwrap().increment, 300);

    // writes are logged like a primary logs them
    let items = c.database("app").collection::<Document>("items");
    items.insert_one(doc! {"_id": "new", "n": 1}).await.unwrap();
    items
        .update_one(doc! {"_id": "new"}, doc! {"$set": {"n": 2}})
        .await
        .unwrap();
    items.delete_one(doc! {"_id": "new"}).await.unwrap();
    items.insert_one(doc! {"_id": "keep"}).await.unwrap();
    items.drop().await.unwrap();
    let mut cur = c
        .database("local")
        .collection::<Document>("oplog.rs")
        .find(doc! {"ts": {"$gt": Timestamp { time: T0, increment: 300 }}})
        .await
        .unwrap();
    let mut ops = Vec::new();
    while cur.advance().await.unwrap() {
        ops.push(cur.deserialize_current().unwrap());
    }
    let kinds: Vec<String> = ops
        .iter()
        .map(|e| {
            format!(
                "{}:{}",
                e.get_str("op").unwrap(),
                e.get_document("o").unwrap().keys().next().unwrap()
            )
        })
        .collect();
    assert_eq!(
        kinds,
        vec!["c:create", "i:_id", "u:$v", "d:_id", "i:_id", "c:drop"],
        "{ops:?}"
    );
    let drop = ops.last().unwrap();
    assert_eq!(drop.get_str("ns").unwrap(), "app.$cmd");
    assert_eq!(
        drop.get_document("o2")
            .unwrap()
            .get_i64("numRecords")
            .unwrap(),
        1
    );
    assert!(matches!(drop.get("ui"), Some(Bson::Binary(_))));
}

#[tokio::test]
async fn tailable_await_data_cursor_sees_new_entries() {
    let seed_dir = tempfile::tempdir().unwrap();
    let seed = seeded_oplog(seed_dir.path(), 5);
    let m = start_mongod(
        &[],
        &[
            ("PITR_STANDIN_MODE", "replset"),
            ("PITR_STANDIN_OPLOG", seed.to_str().unwrap()),
        ],
    );
    let c = client(m.port).await;
    let mut cur = c
        .database("local")
        .collection::<Document>("oplog.rs")
        .find(doc! {"ts": {"$gt": Timestamp { time: T0, increment: 5 }}})
        .cursor_type(CursorType::TailableAwait)
        .max_await_time(Duration::from_millis(100))
        .await
        .unwrap();
    let writer = c.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        writer
            .database("app")
            .collection::<Document>("late")
            .insert_one(doc! {"_id": 1})
            .await
            .unwrap();
    });
    let first = tokio::time::timeout(Duration::from_secs(5), cur.advance())
        .await
        .expect("tailing returns")
        .unwrap();
    assert!(first);
    assert_eq!(
        cur.deserialize_current().unwrap().get_str("op").unwrap(),
        "c"
    );
    assert!(tokio::time::timeout(Duration::from_secs(5), cur.advance())
        .await
        .unwrap()
        .unwrap());
    assert_eq!(
        cur.deserialize_current().unwrap().get_str("ns").unwrap(),
        "app.late"
    );
}

#[tokio::test]
async fn mongos_mode() {
    let m = start_mongod(&[], &[("PITR_STANDIN_MODE", "mongos")]);
    let c = client(m.port).await;
    let hello = admin(&c, doc! {"hello": 1}).await.unwrap();
    assert_eq!(hello.get_str("msg").unwrap(), "isdbgrid");
    assert!(hello.get("setName").is_none());
    assert_eq!(
        code_of(&admin(&c, doc! {"replSetGetStatus": 1}).await.unwrap_err()),
        Some(59)
    );
    assert_eq!(
        code_of(&admin(&c, doc! {"applyOps": []}).await.unwrap_err()),
        Some(59)
    );
    c.list_database_names()
        .await
        .expect("listDatabases works on mongos");
}

#[tokio::test]
async fn auth_mode_refuses_logins_and_unauthenticated_commands() {
    let m = start_mongod(&[], &[("PITR_STANDIN_MODE", "auth")]);
    let c = client(m.port).await;
    admin(&c, doc! {"ping": 1})
        .await
        .expect("ping needs no auth");
    let err = c.list_database_names().await.unwrap_err();
    assert_eq!(code_of(&err), Some(13), "{err}");
    let withpw = mongodb::Client::with_uri_str(format!(
        "mongodb://u:pw@127.0.0.1:{}/?directConnection=true&serverSelectionTimeoutMS=3000",
        m.port
    ))
    .await
    .unwrap();
    let err = admin(&withpw, doc! {"ping": 1}).await.unwrap_err();
    assert!(err.to_string().contains("Authentication failed"), "{err}");
}

#[test]
fn fault_exit_at_start() {
    let mut m = spawn_mongod(&[], &[("PITR_STANDIN_MONGOD_FAULT", "exit-at-start")]);
    let st = m.proc.wait_for(Duration::from_secs(5)).expect("exits");
    assert_eq!(st.code(), Some(1));
    assert!(m.log().contains("exit-at-start"));
}

#[test]
fn fault_never_listen_then_sigterm() {
    // Through the shared variable, with another tool's entry that mongod skips.
    let mut m = spawn_mongod(&[], &[("PITR_STANDIN_FAULT", "fail-midway,never-listen")]);
    std::thread::sleep(Duration::from_millis(500));
    assert!(!port_open(m.port));
    assert!(m.proc.child.try_wait().unwrap().is_none(), "still running");
    m.proc.signal(libc::SIGTERM);
    assert_eq!(
        m.proc
            .wait_for(Duration::from_secs(5))
            .expect("exits")
            .code(),
        Some(0)
    );
}

#[test]
fn fault_typo_is_refused() {
    let mut m = spawn_mongod(&[], &[("PITR_STANDIN_FAULT", "nevr-listen")]);
    assert_eq!(
        m.proc
            .wait_for(Duration::from_secs(5))
            .expect("exits")
            .code(),
        Some(2)
    );
}

#[test]
fn fault_ignore_sigterm_needs_sigkill() {
    let mut m = start_mongod(&[], &[("PITR_STANDIN_MONGOD_FAULT", "ignore-sigterm")]);
    m.proc.signal(libc::SIGTERM);
    m.proc.signal(libc::SIGINT);
    std::thread::sleep(Duration::from_millis(400));
    assert!(
        m.proc.child.try_wait().unwrap().is_none(),
        "must survive SIGTERM"
    );
    assert!(port_open(m.port));
    m.proc.signal(libc::SIGKILL);
    let st = m
        .proc
        .wait_for(Duration::from_secs(5))
        .expect("SIGKILL stops it");
    assert_eq!(st.signal(), Some(libc::SIGKILL));
}

#[test]
fn fault_crash_after_ms() {
    let mut m = start_mongod(&[], &[("PITR_STANDIN_MONGOD_FAULT", "crash-after-ms=300")]);
    let st = m.proc.wait_for(Duration::from_secs(5)).expect("crashes");
    assert_eq!(st.signal(), Some(libc::SIGABRT));
    assert!(
        std::fs::metadata(m.dbpath().join("mongod.lock")).is_ok_and(|f| f.len() > 0),
        "a crash leaves the pid in the lock file"
    );
}

#[test]
fn fault_slow_start() {
    let m = spawn_mongod(&[], &[("PITR_STANDIN_MONGOD_FAULT", "slow-start-ms=800")]);
    std::thread::sleep(Duration::from_millis(300));
    assert!(!port_open(m.port));
    assert!(wait_port(m.port, Duration::from_secs(5)));
}

#[tokio::test]
async fn fault_rollover_after_getmores() {
    let seed_dir = tempfile::tempdir().unwrap();
    let seed = seeded_oplog(seed_dir.path(), 100);
    let m = start_mongod(
        &["--replSet", "rs0"],
        &[
            ("PITR_STANDIN_OPLOG", seed.to_str().unwrap()),
            ("PITR_STANDIN_MONGOD_FAULT", "rollover-after-getmores=2"),
        ],
    );
    let c = client(m.port).await;
    let mut cur = c
        .database("local")
        .collection::<Document>("oplog.rs")
        .find(doc! {})
        .batch_size(10)
        .await
        .unwrap();
    let mut seen = 0;
    let err = loop {
        match cur.advance().await {
            Ok(true) => seen += 1,
            Ok(false) => panic!("cursor ended without the injected rollover"),
            Err(e) => break e,
        }
    };
    assert_eq!(seen, 30, "first batch and two getMores");
    assert_eq!(code_of(&err), Some(136), "{err}");
    assert!(
        err.to_string().contains("CappedPositionLost")
            || err.to_string().contains("position in capped collection"),
        "{err}"
    );
    // the entries up to where the cursor had got are gone
    let oldest = c
        .database("local")
        .collection::<Document>("oplog.rs")
        .find_one(doc! {})
        .sort(doc! {"$natural": 1})
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        oldest.get_timestamp("ts").unwrap(),
        Timestamp {
            time: T0,
            increment: 31
        }
    );
    // and it happens once: a new read goes through
    let rest = oplog_ts(&c, doc! {}, 10).await.unwrap();
    assert_eq!(rest.len(), 70);
}

#[tokio::test]
async fn fault_drop_connection_after_getmores() {
    let seed_dir = tempfile::tempdir().unwrap();
    let seed = seeded_oplog(seed_dir.path(), 50);
    let m = start_mongod(
        &["--replSet", "rs0"],
        &[
            ("PITR_STANDIN_OPLOG", seed.to_str().unwrap()),
            (
                "PITR_STANDIN_MONGOD_FAULT",
                "drop-connection-after-getmores=1",
            ),
        ],
    );
    let c = client(m.port).await;
    let err = oplog_ts(&c, doc! {}, 10).await.unwrap_err();
    assert!(
        code_of(&err).is_none(),
        "a network error, not a server reply: {err}"
    );
    assert_eq!(
        oplog_ts(&c, doc! {}, 10).await.unwrap().len(),
        50,
        "once only; the client reconnects"
    );
}
