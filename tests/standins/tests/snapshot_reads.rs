//! Snapshot reads of the stand-in mongod (`src/mongod/snapshot.rs`), through the real
//! driver: the data as of a cluster time, with the server's refusals. What `pitr
//! rehearse` reads production with.

mod common;

use bson::{doc, Bson, Document, Timestamp};
use common::*;

fn start(version: Option<&str>, window: Option<u32>) -> Mongod {
    let mut env = vec![("PITR_STANDIN_MODE", "replset")];
    if let Some(v) = version {
        env.push(("PITR_STANDIN_VERSION", v));
    }
    let param = window.map(|w| format!("minSnapshotHistoryWindowInSeconds={w}"));
    let mut extra = Vec::new();
    if let Some(p) = &param {
        extra.push("--setParameter");
        extra.push(p.as_str());
    }
    start_mongod(&extra, &env)
}

async fn cmd(c: &mongodb::Client, db: &str, command: Document) -> mongodb::error::Result<Document> {
    c.database(db).run_command(command).await
}

fn err_of(r: mongodb::error::Result<Document>) -> (i32, String) {
    match r {
        Ok(d) => panic!("expected an error, got {d}"),
        Err(e) => match &*e.kind {
            mongodb::error::ErrorKind::Command(ce) => (ce.code, ce.message.clone()),
            other => panic!("not a command error: {other:?}"),
        },
    }
}

/// The newest oplog entry's ts.
async fn newest(c: &mongodb::Client) -> Timestamp {
    let r = cmd(
        c,
        "local",
        doc! {"find": "oplog.rs", "sort": {"$natural": -1}, "limit": 1},
    )
    .await
    .unwrap();
    let e = r
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap()[0]
        .as_document()
        .unwrap()
        .clone();
    e.get_timestamp("ts").unwrap()
}

fn batch(r: &Document) -> Vec<Document> {
    let c = r.get_document("cursor").unwrap();
    c.get_array("firstBatch")
        .or_else(|_| c.get_array("nextBatch"))
        .unwrap()
        .iter()
        .map(|b| b.as_document().unwrap().clone())
        .collect()
}

fn at(t: Timestamp) -> Document {
    doc! {"level": "snapshot", "atClusterTime": t}
}

#[tokio::test]
async fn reads_as_of_a_cluster_time_follow_inserts_updates_deletes_and_drops() {
    let m = start(None, None);
    let c = client(m.port).await;
    cmd(
        &c,
        "app",
        doc! {"insert": "c", "documents": [{"_id": 1, "v": 1}, {"_id": 2, "v": 2}]},
    )
    .await
    .unwrap();
    let t1 = newest(&c).await;
    cmd(
        &c,
        "app",
        doc! {"update": "c", "updates": [{"q": {"_id": 1}, "u": {"$set": {"v": 10.0}}}]},
    )
    .await
    .unwrap();
    cmd(
        &c,
        "app",
        doc! {"delete": "c", "deletes": [{"q": {"_id": 2}, "limit": 1}]},
    )
    .await
    .unwrap();
    cmd(
        &c,
        "app",
        doc! {"createIndexes": "c", "indexes": [{"key": {"v": 1}, "name": "v_1"}]},
    )
    .await
    .unwrap();
    let t2 = newest(&c).await;
    cmd(&c, "app", doc! {"drop": "c"}).await.unwrap();

    let r = cmd(
        &c,
        "app",
        doc! {"find": "c", "sort": {"_id": 1}, "readConcern": at(t1)},
    )
    .await
    .unwrap();
    assert_eq!(
        batch(&r),
        vec![doc! {"_id": 1, "v": 1}, doc! {"_id": 2, "v": 2}]
    );
    assert_eq!(
        r.get_document("cursor")
            .unwrap()
            .get_timestamp("atClusterTime")
            .unwrap(),
        t1
    );
    // The update changed the number's type: the history keeps it exactly.
    let r = cmd(&c, "app", doc! {"find": "c", "readConcern": at(t2)})
        .await
        .unwrap();
    assert_eq!(batch(&r), vec![doc! {"_id": 1, "v": 10.0}]);
    let r = cmd(
        &c,
        "app",
        doc! {"aggregate": "c", "pipeline": [{"$count": "n"}], "cursor": {}, "readConcern": at(t1)},
    )
    .await
    .unwrap();
    assert_eq!(batch(&r), vec![doc! {"n": 2}]);
    // Now the collection is gone; without atClusterTime the read is at the newest point.
    let r = cmd(
        &c,
        "app",
        doc! {"find": "c", "readConcern": {"level": "snapshot"}},
    )
    .await
    .unwrap();
    assert!(batch(&r).is_empty());
    assert!(r
        .get_document("cursor")
        .unwrap()
        .get_timestamp("atClusterTime")
        .is_ok());

    // A cursor keeps its point, and each getMore says it.
    let r = cmd(
        &c,
        "app",
        doc! {"find": "c", "batchSize": 1, "readConcern": at(t1)},
    )
    .await
    .unwrap();
    let id = r.get_document("cursor").unwrap().get_i64("id").unwrap();
    assert_ne!(id, 0);
    let r = cmd(&c, "app", doc! {"getMore": id, "collection": "c"})
        .await
        .unwrap();
    assert_eq!(batch(&r), vec![doc! {"_id": 2, "v": 2}]);
    assert_eq!(
        r.get_document("cursor")
            .unwrap()
            .get_timestamp("atClusterTime")
            .unwrap(),
        t1
    );
}

#[tokio::test]
async fn refusals_are_the_servers() {
    let m = start(None, None);
    let c = client(m.port).await;
    cmd(&c, "app", doc! {"insert": "c", "documents": [{"_id": 1}]})
        .await
        .unwrap();
    let now = newest(&c).await;
    let future = Timestamp {
        time: now.time + 100,
        increment: 1,
    };
    let (code, msg) = err_of(cmd(&c, "app", doc! {"find": "c", "readConcern": at(future)}).await);
    assert_eq!(code, 72, "{msg}");
    assert!(
        msg.contains("must not be greater than the current clusterTime"),
        "{msg}"
    );
    // Before the server started: no history.
    let old = Timestamp {
        time: 1000,
        increment: 1,
    };
    let (code, msg) = err_of(cmd(&c, "app", doc! {"find": "c", "readConcern": at(old)}).await);
    assert_eq!(code, 239, "{msg}");
    assert_eq!(
        msg,
        "Read timestamp Timestamp(1000, 1) is older than the oldest available timestamp."
    );
    // Commands that cannot read as of a time.
    let (code, _) = err_of(cmd(&c, "app", doc! {"count": "c", "readConcern": at(now)}).await);
    assert_eq!(code, 72);
    let (code, _) = err_of(
        cmd(
            &c,
            "app",
            doc! {"listCollections": 1, "readConcern": at(now)},
        )
        .await,
    );
    assert_eq!(code, 72);
    // Capped collections.
    cmd(
        &c,
        "app",
        doc! {"create": "capped", "capped": true, "size": 4096},
    )
    .await
    .unwrap();
    let now = newest(&c).await;
    let (code, _) = err_of(cmd(&c, "app", doc! {"find": "capped", "readConcern": at(now)}).await);
    assert_eq!(code, 246);
}

#[tokio::test]
async fn the_history_window_moves_with_the_newest_write() {
    let m = start(None, Some(1));
    let c = client(m.port).await;
    cmd(&c, "app", doc! {"insert": "c", "documents": [{"_id": 1}]})
        .await
        .unwrap();
    let t1 = newest(&c).await;
    let r = cmd(&c, "app", doc! {"find": "c", "readConcern": at(t1)})
        .await
        .unwrap();
    assert_eq!(batch(&r).len(), 1);
    std::thread::sleep(std::time::Duration::from_millis(2100));
    cmd(&c, "app", doc! {"insert": "c", "documents": [{"_id": 2}]})
        .await
        .unwrap();
    let (code, _) = err_of(cmd(&c, "app", doc! {"find": "c", "readConcern": at(t1)}).await);
    assert_eq!(code, 239);
    let p = cmd(
        &c,
        "admin",
        doc! {"getParameter": 1, "minSnapshotHistoryWindowInSeconds": 1},
    )
    .await
    .unwrap();
    assert_eq!(
        p.get("minSnapshotHistoryWindowInSeconds"),
        Some(&Bson::Int32(1))
    );
    // The newest state is still there, built from the folded base.
    let t2 = newest(&c).await;
    let r = cmd(
        &c,
        "app",
        doc! {"find": "c", "sort": {"_id": 1}, "readConcern": at(t2)},
    )
    .await
    .unwrap();
    assert_eq!(batch(&r), vec![doc! {"_id": 1}, doc! {"_id": 2}]);
}

#[tokio::test]
async fn a_4_4_server_refuses_snapshot_reads_outside_transactions() {
    let m = start(Some("4.4.29"), None);
    let c = client(m.port).await;
    let r = cmd(&c, "admin", doc! {"buildInfo": 1}).await.unwrap();
    assert_eq!(r.get_str("version").unwrap(), "4.4.29");
    let (code, msg) = err_of(
        cmd(&c, "app", doc! {"find": "c", "readConcern": {"level": "snapshot", "atClusterTime": Timestamp {time: 1, increment: 1}}})
            .await,
    );
    assert_eq!(code, 72);
    assert_eq!(
        msg,
        "readConcern level snapshot is only valid in multi-statement transactions"
    );
}

#[tokio::test]
async fn a_standalone_refuses_snapshot_reads() {
    let m = start_mongod(&[], &[]);
    let c = client(m.port).await;
    let (code, _) = err_of(
        cmd(
            &c,
            "app",
            doc! {"find": "c", "readConcern": {"level": "snapshot"}},
        )
        .await,
    );
    assert_eq!(code, 123);
}

#[tokio::test]
async fn sample_draws_without_replacement() {
    let m = start(None, None);
    let c = client(m.port).await;
    let docs: Vec<Document> = (0..50).map(|i| doc! {"_id": i}).collect();
    cmd(&c, "app", doc! {"insert": "c", "documents": docs})
        .await
        .unwrap();
    let r = cmd(
        &c,
        "app",
        doc! {"aggregate": "c", "pipeline": [{"$sample": {"size": 10}}, {"$project": {"_id": 1}}], "cursor": {}},
    )
    .await
    .unwrap();
    let mut got: Vec<i32> = batch(&r)
        .iter()
        .map(|d| d.get_i32("_id").unwrap())
        .collect();
    assert_eq!(got.len(), 10);
    got.sort();
    got.dedup();
    assert_eq!(got.len(), 10);
    let r = cmd(
        &c,
        "app",
        doc! {"aggregate": "c", "pipeline": [{"$sample": {"size": 100}}], "cursor": {"batchSize": 1000}},
    )
    .await
    .unwrap();
    assert_eq!(batch(&r).len(), 50);
}
