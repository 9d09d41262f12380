//! `pitr find-drop --cluster` on generated sharded clusters (pitr-gen --scenario
//! cluster, in its 7.x and 5.0 DDL shapes): the planted sharded drop is found once,
//! with the cluster limit at the config server's metadata delete and every member's
//! part; the fan-out deleteMany is one burst; migration traffic and the idle shard
//! stay silent; cluster files with a missing member, a bad path, an unknown key or a
//! duplicate id are refused with exit 2, naming the file and the key.

mod common;

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

use common::*;
use pitr_fixturegen::cluster::{
    ddl::{Ddl, DdlShape},
    generate, ClusterOptions,
};
use serde_json::Value;

fn parse_ts(v: &Value) -> pitr::oplog::Ts {
    let (t, i) = v.as_str().unwrap().split_once(':').unwrap();
    pitr::oplog::Ts::new(t.parse().unwrap(), i.parse().unwrap())
}

fn cluster(dir: &Path, shape: DdlShape) -> Value {
    cluster_with(dir, shape, Ddl::Drop)
}

fn cluster_with(dir: &Path, shape: DdlShape, ddl: Ddl) -> Value {
    generate(&ClusterOptions {
        out: dir.to_path_buf(),
        seed: 11,
        start: 1_795_222_800,
        shards: 2,
        idle_shards: 1,
        shape,
        ddl,
    })
    .unwrap();
    serde_json::from_slice(&fs::read(dir.join("truth.json")).unwrap()).unwrap()
}

fn json(o: &std::process::Output) -> Value {
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}\n{}", stdout(o), stderr(o)))
}

/// (member, ts) of every part of an incident, from find-drop's `members` or the truth's.
fn parts(v: &Value) -> BTreeSet<(String, String)> {
    v["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["member"].as_str().unwrap().to_string(),
                m["ts"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn check_shape(shape: DdlShape) {
    let dir = tempfile::tempdir().unwrap();
    let truth = cluster(dir.path(), shape);
    let o = pitr_in(
        dir.path(),
        &["find-drop", "--cluster", "cluster.toml", "--json"],
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let found = json(&o);
    let found = found.as_array().unwrap();
    // Exactly the planted incidents: one burst, one drop (the drop NOT once per member).
    assert_eq!(found.len(), 2, "{found:#?}");
    let (burst, drop) = (&found[0], &found[1]);
    let (t_burst, t_drop) = (&truth["incidents"][0], &truth["incidents"][1]);

    assert_eq!(drop["kind"], "drop");
    assert_eq!(drop["ns"], "shop.orders");
    assert_eq!(
        drop["oplog_limit"], t_drop["cluster_limit"],
        "the limit is the config server's metadata delete"
    );
    assert_eq!(drop["ts"], t_drop["cluster_limit"]);
    assert_eq!(drop["last_ts"], t_drop["last_ts"]);
    assert_eq!(drop["num_records"], t_drop["num_records"]);
    // Every planted part is listed, at its own ts; the config server's chunk deletes
    // come as a further part of the config member.
    let want = parts(t_drop);
    let got = parts(drop);
    assert!(want.is_subset(&got), "missing parts: {want:?} vs {got:?}");
    let members: BTreeSet<&str> = drop["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["member"].as_str().unwrap())
        .collect();
    assert_eq!(
        members,
        BTreeSet::from(["config", "shard0", "shard1"]),
        "the idle shard has no part"
    );
    let from_migrate: Vec<&str> = drop["members"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["from_migrate"] == true)
        .map(|m| m["member"].as_str().unwrap())
        .collect();
    match shape {
        DdlShape::V7 => assert_eq!(from_migrate, ["shard1"]),
        DdlShape::V5 => assert!(from_migrate.is_empty()),
    }

    assert_eq!(burst["kind"], "deleteBurst");
    assert_eq!(burst["oplog_limit"], t_burst["cluster_limit"]);
    assert_eq!(burst["count"], t_burst["count"]);
    assert_eq!(parts(burst), parts(t_burst));

    // Decoys: migration clones and range deletions on shop.events never show.
    for d in truth["decoys"].as_array().unwrap() {
        assert!(
            found.iter().all(|f| f["ns"] != d["ns"]),
            "decoy reported: {d}"
        );
    }
}

#[test]
fn sharded_drop_7x_is_one_incident_at_the_cluster_limit() {
    check_shape(DdlShape::V7);
}

#[test]
fn sharded_drop_5_0_is_one_incident_at_the_cluster_limit() {
    check_shape(DdlShape::V5);
}

/// `dropDatabase` of `shop` through mongos, in both shapes: three sharded
/// collections dropped on every shard (their metadata off the config server first),
/// the unsharded one on the primary, each data shard's `dropDatabase`, and the config
/// server's `config.databases` delete: one incident, at the first metadata delete,
/// lasting until the last destructive entry on any member.
#[test]
fn sharded_drop_database_is_one_incident_at_the_cluster_limit() {
    check_cluster_ddl(Ddl::DropDatabase, "dropDatabase", "shop");
}

/// `shop.events` renamed over `shop.orders` (both sharded) through mongos, in both
/// shapes: every shard's rename (the non-primary ones `fromMigrate` in 7.x), the
/// config server's delete of the target's metadata and re-key of the source's: one
/// incident at the first shard's rename, whose span includes the re-key (no note
/// about an unexplained metadata delete).
#[test]
fn sharded_rename_over_a_sharded_target_is_one_incident() {
    check_cluster_ddl(Ddl::RenameOver, "renameDropTarget", "shop.orders");
}

fn check_cluster_ddl(ddl: Ddl, kind: &str, ns: &str) {
    for shape in [DdlShape::V7, DdlShape::V5] {
        let dir = tempfile::tempdir().unwrap();
        let truth = cluster_with(dir.path(), shape, ddl);
        let o = pitr_in(
            dir.path(),
            &["find-drop", "--cluster", "cluster.toml", "--json"],
        );
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        assert!(
            !stderr(&o).contains("no shard's oplog shows"),
            "{shape:?}: {}",
            stderr(&o)
        );
        let found = json(&o);
        let found = found.as_array().unwrap();
        assert_eq!(found.len(), 2, "{shape:?}: {found:#?}");
        let (f, t) = (&found[1], &truth["incidents"][1]);
        assert_eq!(f["kind"], kind, "{shape:?}");
        assert_eq!(f["ns"], ns);
        assert_eq!(f["oplog_limit"], t["cluster_limit"], "{shape:?}");
        assert_eq!(f["last_ts"], t["last_ts"], "{shape:?}");
        // Each member's part spans its first to its last destructive entry (pitr
        // may list a member's metadata deletes one by one).
        for m in t["members"].as_array().unwrap() {
            let id = m["member"].as_str().unwrap();
            let mine: Vec<&Value> = f["members"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|p| p["member"] == id)
                .collect();
            let first = mine.iter().map(|p| parse_ts(&p["ts"])).min();
            let last = mine.iter().map(|p| parse_ts(&p["last_ts"])).max();
            assert_eq!(first, Some(parse_ts(&m["ts"])), "{shape:?} {id}: {mine:?}");
            assert_eq!(
                last,
                Some(parse_ts(&m["last_ts"])),
                "{shape:?} {id}: {mine:?}"
            );
        }
        let members: BTreeSet<&str> = f["members"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["member"].as_str().unwrap())
            .collect();
        assert_eq!(members, BTreeSet::from(["config", "shard0", "shard1"]));
    }
}

/// Regression guard for the cluster path's change to fromMigrate (research note §8
/// trap 1): scanned as a single replica set, the non-primary shard's 7.x drop is still
/// ignored exactly as before, and the table of one member is what it was.
#[test]
fn single_replica_set_results_do_not_change() {
    let dir = tempfile::tempdir().unwrap();
    cluster(dir.path(), DdlShape::V7);
    let o = pitr_in(
        dir.path(),
        &["find-drop", "--json", "shard1/backup", "shard1/oplog.bson"],
    );
    let found = json(&o);
    let kinds: Vec<&str> = found
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["deleteBurst"], "{found:#}");
    assert!(found[0].get("members").is_none());
}

#[test]
fn table_lists_each_members_part() {
    let dir = tempfile::tempdir().unwrap();
    cluster(dir.path(), DdlShape::V7);
    let o = pitr_in(dir.path(), &["find-drop", "--cluster", "cluster.toml"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("drop (fromMigrate)"), "{out}");
    assert!(out.contains("config.collections `shop.orders`"), "{out}");
    assert!(out.contains("of the 4 members of `cluster.toml`"), "{out}");
    // --kind filters the merged incidents; a --ns matching nothing is refused.
    let o = pitr_in(
        dir.path(),
        &[
            "find-drop",
            "--cluster",
            "cluster.toml",
            "--kind",
            "drop",
            "--json",
        ],
    );
    assert_eq!(json(&o).as_array().unwrap().len(), 1);
    let o = pitr_in(
        dir.path(),
        &[
            "find-drop",
            "--cluster",
            "cluster.toml",
            "--ns",
            "shop.ordrs",
        ],
    );
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("shop.orders"), "{}", stderr(&o));
    // Only the idle shard: nothing found, exit 1.
    let o = pitr_in(
        dir.path(),
        &[
            "find-drop",
            "--cluster",
            "cluster.toml",
            "--ns",
            "shop.events",
        ],
    );
    assert_eq!(code(&o), 1, "{}\n{}", stdout(&o), stderr(&o));
}

#[test]
fn bad_cluster_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    cluster(dir.path(), DdlShape::V7);
    let good = fs::read_to_string(dir.path().join("cluster.toml")).unwrap();
    let idle = "\n[[shard]]\nid = \"shard2\"\nbackup = \"shard2/backup\"\noplog = [\"shard2/oplog.bson\"]\n";
    assert!(good.contains(idle));
    let cases: Vec<(String, &[&str])> = vec![
        (
            good.replace(idle, ""),
            &["does not list shard `shard2`", "config.shards"],
        ),
        (
            good.replace("shard1/oplog.bson", "shard1/oplog.bsn"),
            &["shard[1].oplog[0]", "`shard1/oplog.bsn`"],
        ),
        (
            good.replace("id = \"shard1\"", "id = \"shard0\""),
            &["`shard0` appears twice"],
        ),
        (
            good.replace("[config]\n", "[config]\nalso_shard = true\n"),
            &["unknown field `also_shard`", "line"],
        ),
        (
            good.replace("id = \"shard2\"", "id = \"shard9\""),
            &["shard[2]", "`shard9`"],
        ),
    ];
    for (text, wanted) in cases {
        fs::write(dir.path().join("bad.toml"), &text).unwrap();
        let o = pitr_in(dir.path(), &["find-drop", "--cluster", "bad.toml"]);
        let err = stderr(&o);
        assert_eq!(code(&o), 2, "{err}");
        assert!(err.contains("bad.toml"), "{err}");
        assert!(err.contains("hint:"), "{err}");
        for w in wanted {
            assert!(err.contains(w), "`{w}` not in: {err}");
        }
    }
    let o = pitr_in(dir.path(), &["find-drop", "--cluster", "nope.toml"]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("nope.toml"));
    // --cluster replaces OPLOG and --backup.
    let o = pitr_in(
        dir.path(),
        &[
            "find-drop",
            "--cluster",
            "cluster.toml",
            "shard0/oplog.bson",
        ],
    );
    assert_eq!(code(&o), 2);
}
