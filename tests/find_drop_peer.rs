//! find-drop on real oplogs recorded by mongo-tools: the answers the issue names.
//! Skips, saying so, where the peer data is absent.

mod common;

use common::*;
use serde_json::Value;

fn findings(o: &std::process::Output) -> Vec<Value> {
    serde_json::from_slice::<Value>(&o.stdout)
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}", stdout(o)))
        .as_array()
        .expect("a JSON array")
        .clone()
}

#[test]
fn drop_collection_gives_one_drop_with_num_records() {
    let Some(peer) = peer_dir("drop_collection_gives_one_drop_with_num_records") else {
        return;
    };
    let f = peer.join("mongorestore/testdata/oplogs/bson/drop_collection.bson");
    let o = pitr(&["find-drop", "--json", f.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(o.stderr.is_empty(), "nothing on stderr: {}", stderr(&o));
    let v = findings(&o);
    assert_eq!(v.len(), 1);
    assert_eq!(v[0]["kind"], "drop");
    assert_eq!(v[0]["ns"], "test.foo");
    assert_eq!(v[0]["ts"], "1616670362:1");
    assert_eq!(v[0]["oplog_limit"], "1616670362:1");
    assert_eq!(v[0]["num_records"], 1);
    assert_eq!(v[0]["in_transaction"], false);
    assert_eq!(v[0]["wall"], "2021-03-25T11:06:02.564Z");
}

#[test]
fn drop_db_gives_a_drop_database_of_test() {
    let Some(peer) = peer_dir("drop_db_gives_a_drop_database_of_test") else {
        return;
    };
    let f = peer.join("mongorestore/testdata/oplogs/bson/drop_db.bson");
    let o = pitr(&["find-drop", "--json", f.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let v = findings(&o);
    assert_eq!(v.len(), 1);
    assert_eq!(v[0]["kind"], "dropDatabase");
    assert_eq!(v[0]["ns"], "test");
    assert_eq!(v[0]["oplog_limit"], v[0]["ts"]);
}

#[test]
fn extended_json_session_limits_drop_database_at_its_first_drop() {
    let Some(peer) = peer_dir("extended_json_session_limits_drop_database_at_its_first_drop")
    else {
        return;
    };
    let bytes = extjson_lines_to_bson(&peer.join("mongorestore/testdata/oplogs/oplog.json"));
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("oplog.bson"), bytes).unwrap();
    let o = pitr_in(dir.path(), &["find-drop", "--json", "oplog.bson"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let v = findings(&o);
    let summary: Vec<(String, String, String)> = v
        .iter()
        .map(|f| {
            (
                f["kind"].as_str().unwrap().to_string(),
                f["ns"].as_str().unwrap().to_string(),
                f["oplog_limit"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let s = |a: &str, b: &str, c: &str| (a.to_string(), b.to_string(), c.to_string());
    assert_eq!(
        summary,
        vec![
            s("drop", "test2.foo", "1616670362:1"),
            s("dropIndexes", "test2.foo", "1616670738:2"),
            s("dropIndexes", "test2.foo", "1616670937:1"),
            s("dropIndexes", "test2.foo", "1616671031:1"),
            // The per-collection drop at :2 precedes the dropDatabase entry at :3.
            s("dropDatabase", "test2", "1616671599:2"),
            s("drop", "test2.bar", "1616671951:1"),
        ]
    );
    let db = &v[4];
    assert_eq!(db["collections"], serde_json::json!(["test2.foo"]));
    assert_eq!(db["last_ts"], "1616671599:3");
}

#[test]
fn config_system_sessions_deletes_are_not_incidents() {
    let Some(peer) = peer_dir("config_system_sessions_deletes_are_not_incidents") else {
        return;
    };
    let f = peer.join("mongorestore/testdata/oplog_partial_skips/oplog.bson");
    // A burst rule low enough that the 9 deletes in one second would count if they
    // were user deletes.
    let o = pitr(&["find-drop", "--min-count", "2", f.to_str().unwrap()]);
    assert_eq!(code(&o), 1, "nothing found is exit 1: {}", stdout(&o));
    assert!(
        stdout(&o).contains("No destructive operations found in 21 entries"),
        "{}",
        stdout(&o)
    );
    let o = pitr(&["find-drop", "--json", f.to_str().unwrap()]);
    assert_eq!(code(&o), 1);
    assert_eq!(findings(&o).len(), 0);
}
