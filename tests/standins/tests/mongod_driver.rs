//! The stand-in mongod serves the real `mongodb` driver: handshake, CRUD, counts,
//! listings, indexes, aggregation, errors, and `shutdown`.

mod common;

use bson::{doc, Bson, Document};
use common::*;
use std::io::{Read, Write};
use std::time::Duration;

#[tokio::test]
async fn driver_crud_and_listings() {
    let m = start_mongod(&[], &[]);
    let c = client(m.port).await;

    admin(&c, doc! {"ping": 1}).await.expect("ping");
    let bi = admin(&c, doc! {"buildInfo": 1}).await.expect("buildInfo");
    assert_eq!(bi.get_str("version").unwrap(), "7.0.14");
    assert_eq!(bi.get_array("versionArray").unwrap()[0], Bson::Int32(7));

    let coll = c.database("shop").collection::<Document>("orders");
    coll.insert_many(
        (0..250).map(
            |i| doc! {"_id": i, "qty": i % 10, "tag": if i % 2 == 0 { "even" } else { "odd" }},
        ),
    )
    .await
    .expect("insert_many");
    coll.insert_one(doc! {"note": "no _id given"})
        .await
        .expect("insert without _id");
    let dup = coll
        .insert_one(doc! {"_id": 3})
        .await
        .expect_err("duplicate _id");
    assert!(dup.to_string().contains("E11000"), "{dup}");

    assert_eq!(coll.count_documents(doc! {}).await.unwrap(), 251);
    assert_eq!(
        coll.count_documents(doc! {"qty": {"$gte": 5}, "tag": "odd"})
            .await
            .unwrap(),
        75
    );
    assert_eq!(coll.count_documents(doc! {"nothing": 1}).await.unwrap(), 0);
    assert_eq!(coll.estimated_document_count().await.unwrap(), 251);

    // find with sort, limit, batchSize: more than one batch goes through getMore
    let mut cur = coll
        .find(doc! {"_id": {"$lt": 200}})
        .sort(doc! {"_id": -1})
        .batch_size(7)
        .await
        .unwrap();
    let mut seen = Vec::new();
    while cur.advance().await.unwrap() {
        seen.push(cur.deserialize_current().unwrap().get_i32("_id").unwrap());
    }
    assert_eq!(seen.len(), 200);
    assert_eq!(seen[0], 199);
    assert_eq!(*seen.last().unwrap(), 0);
    let one = coll.find_one(doc! {"_id": 42}).await.unwrap().unwrap();
    assert_eq!(one.get_i32("qty").unwrap(), 2);
    let limited: Vec<_> = {
        let mut cur = coll
            .find(doc! {})
            .limit(3)
            .projection(doc! {"qty": 1})
            .await
            .unwrap();
        let mut v = Vec::new();
        while cur.advance().await.unwrap() {
            v.push(cur.deserialize_current().unwrap());
        }
        v
    };
    assert_eq!(limited.len(), 3);
    assert!(limited[0].get("tag").is_none() && limited[0].get("qty").is_some());

    // update: $set, replacement, upsert; delete one and many
    let r = coll
        .update_many(doc! {"tag": "even"}, doc! {"$set": {"flag": true}})
        .await
        .unwrap();
    assert_eq!((r.matched_count, r.modified_count), (125, 125));
    coll.replace_one(doc! {"_id": 1}, doc! {"replaced": 1})
        .await
        .unwrap();
    assert_eq!(
        coll.find_one(doc! {"_id": 1}).await.unwrap().unwrap(),
        doc! {"_id": 1, "replaced": 1}
    );
    let up = coll
        .update_one(doc! {"_id": 1000}, doc! {"$set": {"x": 1}})
        .upsert(true)
        .await
        .unwrap();
    assert_eq!(up.upserted_id, Some(Bson::Int32(1000)));
    assert_eq!(
        coll.delete_one(doc! {"tag": "odd"})
            .await
            .unwrap()
            .deleted_count,
        1
    );
    assert_eq!(
        coll.delete_many(doc! {"tag": "odd"})
            .await
            .unwrap()
            .deleted_count,
        123
    );

    // listings
    let dbs = c.list_database_names().await.unwrap();
    for d in ["admin", "config", "local", "shop"] {
        assert!(dbs.contains(&d.to_string()), "{dbs:?}");
    }
    let full = c.list_databases().await.unwrap();
    assert!(full.iter().any(|d| d.name == "shop" && d.size_on_disk > 0));
    c.database("shop")
        .create_collection("customers")
        .await
        .unwrap();
    let err = c
        .database("shop")
        .create_collection("customers")
        .await
        .unwrap_err();
    assert_eq!(code_of(&err), Some(48));
    let mut names = c.database("shop").list_collection_names().await.unwrap();
    names.sort();
    assert_eq!(names, vec!["customers", "orders"]);
    let specs = c
        .database("shop")
        .run_command(doc! {"listCollections": 1, "filter": {"name": "orders"}})
        .await
        .unwrap();
    let first = specs
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap()[0]
        .as_document()
        .unwrap()
        .clone();
    assert_eq!(first.get_str("type").unwrap(), "collection");
    assert!(matches!(
        first.get_document("info").unwrap().get("uuid"),
        Some(Bson::Binary(_))
    ));

    // indexes
    coll.create_index(mongodb::IndexModel::builder().keys(doc! {"qty": 1}).build())
        .await
        .unwrap();
    let idx = coll.list_index_names().await.unwrap();
    assert_eq!(idx, vec!["_id_", "qty_1"]);

    // aggregation: the stages count_documents uses work, others are refused clearly
    let err = c
        .database("shop")
        .run_command(doc! {"aggregate": "orders", "pipeline": [{"$collStats": {}}], "cursor": {}})
        .await
        .unwrap_err();
    assert_eq!(code_of(&err), Some(40324), "{err}");
    assert!(err.to_string().contains("$collStats"));

    // unknown command
    let err = admin(&c, doc! {"frobnicate": 1}).await.unwrap_err();
    assert_eq!(code_of(&err), Some(59));
    assert!(
        err.to_string().contains("no such command: 'frobnicate'"),
        "{err}"
    );

    // rename and drops
    admin(
        &c,
        doc! {"renameCollection": "shop.customers", "to": "shop.clients"},
    )
    .await
    .unwrap();
    coll.drop().await.unwrap();
    coll.drop()
        .await
        .expect("dropping a missing collection is fine on 7.0");
    assert_eq!(
        c.database("shop").list_collection_names().await.unwrap(),
        vec!["clients"]
    );
    c.database("shop").drop().await.unwrap();
    assert!(!c
        .list_database_names()
        .await
        .unwrap()
        .contains(&"shop".to_string()));

    // getParameter reflects --setParameter defaults; standalone has no replication
    let p = admin(&c, doc! {"getParameter": 1, "ttlMonitorEnabled": 1})
        .await
        .unwrap();
    assert!(p.get_bool("ttlMonitorEnabled").unwrap());
    let err = admin(&c, doc! {"replSetGetStatus": 1}).await.unwrap_err();
    assert_eq!(code_of(&err), Some(76));
    assert!(err.to_string().contains("not running with --replSet"));
}

#[tokio::test]
async fn shutdown_command_stops_the_server_and_empties_the_lock() {
    let mut m = start_mongod(&["--setParameter", "ttlMonitorEnabled=false"], &[]);
    let lock = m.dbpath().join("mongod.lock");
    assert_eq!(
        std::fs::read_to_string(&lock).unwrap().trim(),
        m.proc.pid().to_string()
    );
    let c = client(m.port).await;
    let p = admin(&c, doc! {"getParameter": 1, "ttlMonitorEnabled": 1})
        .await
        .unwrap();
    assert!(!p.get_bool("ttlMonitorEnabled").unwrap());
    // Like the real server, shutdown closes the connection instead of replying.
    let res = admin(&c, doc! {"shutdown": 1}).await;
    assert!(
        res.is_err(),
        "shutdown should end with a network error, got {res:?}"
    );
    let st = m
        .proc
        .wait_for(Duration::from_secs(5))
        .expect("mongod exits after shutdown");
    assert_eq!(st.code(), Some(0));
    // Emptied, not removed (`clearPidAndUnlock`): an empty lock is a clean shutdown.
    assert_eq!(std::fs::read(&lock).unwrap(), b"");
    assert!(m.log().contains("Received shutdown command"));
}

/// A legacy OP_QUERY isMaster (what old drivers and some probes send) gets an
/// OP_REPLY; any other OP_QUERY command is refused like on 5.1+.
#[test]
fn op_query_is_master_is_answered() {
    let m = start_mongod(&[], &[]);
    let mut s = std::net::TcpStream::connect(("127.0.0.1", m.port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let query = bson::to_vec(&doc! {"isMaster": 1}).unwrap();
    let mut body = Vec::new();
    body.extend_from_slice(&0i32.to_le_bytes());
    body.extend_from_slice(b"admin.$cmd\0");
    body.extend_from_slice(&0i32.to_le_bytes());
    body.extend_from_slice(&(-1i32).to_le_bytes());
    body.extend_from_slice(&query);
    let mut msg = Vec::new();
    msg.extend_from_slice(&((16 + body.len()) as i32).to_le_bytes());
    msg.extend_from_slice(&7i32.to_le_bytes());
    msg.extend_from_slice(&0i32.to_le_bytes());
    msg.extend_from_slice(&2004i32.to_le_bytes());
    msg.extend_from_slice(&body);
    s.write_all(&msg).unwrap();
    let mut header = [0u8; 16];
    s.read_exact(&mut header).unwrap();
    let len = i32::from_le_bytes(header[0..4].try_into().unwrap()) as usize;
    assert_eq!(
        i32::from_le_bytes(header[8..12].try_into().unwrap()),
        7,
        "responseTo"
    );
    assert_eq!(
        i32::from_le_bytes(header[12..16].try_into().unwrap()),
        1,
        "OP_REPLY"
    );
    let mut rest = vec![0u8; len - 16];
    s.read_exact(&mut rest).unwrap();
    let reply = Document::from_reader(&mut &rest[20..]).unwrap();
    assert!(reply.get_bool("ismaster").unwrap());
    assert_eq!(reply.get_i32("maxWireVersion").unwrap(), 21);
}

#[test]
fn command_line_contract() {
    let out = run_tool(MONGOD, &["--version"], &[]);
    assert!(out.status.success());
    let t = text(&out);
    assert!(t.starts_with("db version v7.0.14\nBuild Info: {"), "{t}");

    let out = run_tool(MONGOD, &["--port", "1", "--frobnicate"], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out).contains("Error parsing command line: unrecognised option '--frobnicate'"),
        "{}",
        text(&out)
    );

    let out = run_tool(MONGOD, &["--bind_ip", "127.0.0.1", "--dbpath", "/tmp"], &[]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "--port is required: {}",
        text(&out)
    );

    let out = run_tool(MONGOD, &["--port", "1", "--bind_ip", "0.0.0.0"], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("only loopback"));
    let out = run_tool(MONGOD, &["--port", "1", "--bind_ip_all"], &[]);
    assert_eq!(out.status.code(), Some(2));

    let out = run_tool(
        MONGOD,
        &["--port", "1", "--fork", "--logpath", "/dev/null"],
        &[],
    );
    assert_eq!(out.status.code(), Some(2));

    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    let log = dir.path().join("log");
    let out = run_tool(
        MONGOD,
        &[
            "--port",
            &free_port().to_string(),
            "--dbpath",
            missing.to_str().unwrap(),
            "--logpath",
            log.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(100));
    let l = std::fs::read_to_string(&log).unwrap();
    assert!(
        l.contains(&format!("Data directory {} not found", missing.display())),
        "{l}"
    );
}

#[test]
fn port_in_use_exits_48_and_argv_is_recorded() {
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = busy.local_addr().unwrap().port();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let out = run_tool(
        MONGOD,
        &[
            "--port",
            &port.to_string(),
            "--bind_ip",
            "127.0.0.1",
            "--dbpath",
            dir.path().to_str().unwrap(),
            "--logpath",
            log.to_str().unwrap(),
            "--setParameter",
            "ttlMonitorEnabled=false",
            "--nounixsocket",
            "--quiet",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(48));
    assert!(std::fs::read_to_string(&log)
        .unwrap()
        .contains("Address already in use"));
    let argv: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("standin-argv.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(argv["bind_ip"], "127.0.0.1");
    assert_eq!(argv["setParameter"]["ttlMonitorEnabled"], "false");
    assert!(argv["argv"]
        .as_array()
        .unwrap()
        .iter()
        .any(|a| a == "--nounixsocket"));
    assert_eq!(std::fs::read(dir.path().join("mongod.lock")).unwrap(), b"");
}

#[test]
fn sigterm_is_a_clean_shutdown() {
    let mut m = start_mongod(&[], &[]);
    m.proc.signal(libc::SIGTERM);
    let st = m
        .proc
        .wait_for(Duration::from_secs(5))
        .expect("exits on SIGTERM");
    assert_eq!(st.code(), Some(0));
    assert_eq!(std::fs::read(m.dbpath().join("mongod.lock")).unwrap(), b"");
    let log = m.log();
    assert!(
        log.contains("Waiting for connections") && log.contains("Received signal"),
        "{log}"
    );
}

#[test]
fn a_second_mongod_on_the_same_dbpath_is_refused() {
    let m = start_mongod(&[], &[]);
    let log = m.dir.path().join("second.log");
    let out = run_tool(
        MONGOD,
        &[
            "--port",
            &free_port().to_string(),
            "--dbpath",
            m.dbpath().to_str().unwrap(),
            "--logpath",
            log.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(100));
    assert!(std::fs::read_to_string(&log)
        .unwrap()
        .contains("DBPathInUse"));
}
