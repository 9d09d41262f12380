//! The cluster generator (`pitr-gen --scenario cluster`): every member's oplog is a
//! real, ordered oplog; the planted drop has the shape of its server generation on
//! every member; the clocks are gossiped (the drop's entries are causally ordered
//! across members); the idle shard writes only no-ops; backups end at different
//! times; the same seed gives the same bytes.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use pitr::oplog::{self, Entry, ReadOptions, Ts};
use pitr_fixturegen::cluster::{
    ddl::{Ddl, DdlShape},
    generate, ClusterOptions,
};
use serde_json::Value;

const START: u32 = 1_795_222_800;

fn gen(dir: &Path, shape: DdlShape, seed: u64) -> Value {
    gen_ddl(dir, shape, seed, Ddl::Drop)
}

fn gen_ddl(dir: &Path, shape: DdlShape, seed: u64, ddl: Ddl) -> Value {
    generate(&ClusterOptions {
        out: dir.to_path_buf(),
        seed,
        start: START,
        shards: 2,
        idle_shards: 1,
        shape,
        ddl,
    })
    .unwrap();
    serde_json::from_slice(&fs::read(dir.join("truth.json")).unwrap()).unwrap()
}

/// (ts, op, ns, command name, fromMigrate, ui as hex) of every entry of a file.
type Row = (Ts, String, String, Option<String>, bool, Option<String>);

fn rows(path: &Path) -> Vec<Row> {
    let mut r = oplog::open(path.to_str().unwrap(), ReadOptions::default()).unwrap();
    let mut out = Vec::new();
    while let Some(e) = r.next_entry().unwrap() {
        let e: Entry<'_> = e;
        out.push((
            e.ts,
            e.op.as_str().to_string(),
            e.ns.to_string(),
            e.command_name().map(str::to_string),
            e.from_migrate,
            e.ui_string(),
        ));
    }
    out
}

fn ts_of(v: &Value) -> Ts {
    let (t, i) = v.as_str().unwrap().split_once(':').unwrap();
    Ts::new(t.parse().unwrap(), i.parse().unwrap())
}

fn tree(dir: &Path, base: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
    for e in fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            tree(&p, base, out);
        } else {
            let rel = p.strip_prefix(base).unwrap().to_string_lossy().into_owned();
            out.insert(rel, fs::read(&p).unwrap());
        }
    }
}

#[test]
fn members_oplogs_are_ordered_and_backups_end_apart() {
    let dir = tempfile::tempdir().unwrap();
    let truth = gen(dir.path(), DdlShape::V7, 7);
    let members = truth["members"].as_array().unwrap();
    assert_eq!(
        members
            .iter()
            .map(|m| m["id"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["config", "shard0", "shard1", "shard2"]
    );
    let toml = fs::read_to_string(dir.path().join("cluster.toml")).unwrap();
    for m in members {
        let id = m["id"].as_str().unwrap();
        assert!(toml.contains(&format!("\"{id}/backup\"")), "{toml}");
        for file in [
            format!("{id}/oplog.bson"),
            format!("{id}/backup/oplog.bson"),
        ] {
            let r = rows(&dir.path().join(&file));
            assert!(!r.is_empty(), "{file}");
            assert!(
                r.windows(2).all(|w| w[0].0 < w[1].0),
                "{file} is not in strict ts order"
            );
        }
        // The oplog dump overlaps the backup's end: no gap between them.
        let backup_end = ts_of(&m["backup_end_ts"]);
        assert!(ts_of(&m["oplog_first_ts"]) <= backup_end, "{id}");
    }
    let ends: std::collections::BTreeSet<Ts> =
        members.iter().map(|m| ts_of(&m["backup_end_ts"])).collect();
    assert!(
        ends.len() >= 3,
        "backups should end at different times: {ends:?}"
    );
    // The idle shard writes nothing but periodic no-ops.
    let idle = rows(&dir.path().join("shard2/oplog.bson"));
    assert!(idle.len() >= 20);
    assert!(idle.iter().all(|r| r.1 == "n"), "{idle:?}");
    // Decoys: migration clones and range deletions are fromMigrate CRUD.
    let shard0 = rows(&dir.path().join("shard0/oplog.bson"));
    let shard1 = rows(&dir.path().join("shard1/oplog.bson"));
    let range_deletes = shard0.iter().filter(|r| r.1 == "d" && r.4).count();
    let clones = shard1.iter().filter(|r| r.1 == "i" && r.4).count();
    assert_eq!((range_deletes, clones), (200, 200));
}

#[test]
fn sharded_drop_7x_shape_on_every_member() {
    let dir = tempfile::tempdir().unwrap();
    let truth = gen(dir.path(), DdlShape::V7, 7);
    let drop = &truth["incidents"][1];
    assert_eq!(drop["kind"], "drop");
    let config = rows(&dir.path().join("config/oplog.bson"));
    let limit = ts_of(&drop["cluster_limit"]);
    // The first destructive entry is the config server's applyOps deleting the
    // config.collections document (with the placementHistory insert).
    let first = config.iter().find(|r| r.0 == limit).unwrap();
    assert_eq!(
        (first.1.as_str(), first.3.as_deref()),
        ("c", Some("applyOps"))
    );
    let moved = move_primary_drops(&truth);
    assert_eq!(moved.len(), 1);
    let mut uis = Vec::new();
    let mut drops = Vec::new();
    for (k, shard) in ["shard0", "shard1"].iter().enumerate() {
        let r = rows(&dir.path().join(format!("{shard}/oplog.bson")));
        let d: Vec<&Row> = r
            .iter()
            .filter(|r| r.3.as_deref() == Some("drop") && !moved.contains(&r.0))
            .collect();
        assert_eq!(d.len(), 1, "{shard}");
        // shard0 is the database's primary: plain drop; the other one fromMigrate.
        assert_eq!(d[0].4, k != 0, "{shard}");
        assert!(
            d[0].0 > limit,
            "the shard drops follow the metadata delete in cluster time"
        );
        uis.push(d[0].5.clone().unwrap());
        drops.push(d[0].0);
    }
    assert_eq!(
        uis[0], uis[1],
        "every shard's drop carries the collection's uuid"
    );
    // Non-primary first, primary last.
    assert!(drops[1] < drops[0]);
    assert_eq!(drop["num_records"].as_u64().unwrap(), {
        drop["members"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|m| m["num_records"].as_u64())
            .sum::<u64>()
    });
    assert!(rows(&dir.path().join("shard2/oplog.bson"))
        .iter()
        .all(|r| r.1 == "n"));
}

/// The ts of the old primary's drops after the `movePrimary` (a decoy, not the
/// sharded drop).
fn move_primary_drops(truth: &Value) -> Vec<Ts> {
    truth["decoys"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["what"].as_str().unwrap().starts_with("movePrimary"))
        .map(|d| ts_of(&d["first_ts"]))
        .collect()
}

#[test]
fn sharded_drop_5_0_shape_is_plain_everywhere() {
    let dir = tempfile::tempdir().unwrap();
    let truth = gen(dir.path(), DdlShape::V5, 7);
    assert_eq!(truth["ddl_shape"], "v5");
    let config = rows(&dir.path().join("config/oplog.bson"));
    let limit = ts_of(&truth["incidents"][1]["cluster_limit"]);
    let first = config.iter().find(|r| r.0 == limit).unwrap();
    assert_eq!(
        (first.1.as_str(), first.2.as_str()),
        ("d", "config.collections")
    );
    assert!(!config.iter().any(|r| r.2 == "config.placementHistory"));
    let moved = move_primary_drops(&truth);
    for shard in ["shard0", "shard1"] {
        let r = rows(&dir.path().join(format!("{shard}/oplog.bson")));
        let d: Vec<&Row> = r
            .iter()
            .filter(|r| r.3.as_deref() == Some("drop") && !moved.contains(&r.0))
            .collect();
        assert_eq!(d.len(), 1);
        assert!(!d[0].4, "5.0 drops are plain on {shard}");
    }
}

/// `dropDatabase` of `shop` through mongos (`drop_database_coordinator.cpp`): each
/// sharded collection dropped as a sharded drop, then the database on its primary
/// (shard0: its unsharded collection's drop, then `dropDatabase`), then on the other
/// data shard; the config server's `config.databases` delete last in 7.x, before the
/// shards' `dropDatabase`s in 5.0; the idle shard logs nothing, and no movePrimary
/// follows.
#[test]
fn drop_database_shape_on_every_member() {
    for shape in [DdlShape::V7, DdlShape::V5] {
        let dir = tempfile::tempdir().unwrap();
        let truth = gen_ddl(dir.path(), shape, 7, Ddl::DropDatabase);
        let inc = &truth["incidents"][1];
        assert_eq!(
            (inc["kind"].as_str(), inc["ns"].as_str()),
            (Some("dropDatabase"), Some("shop"))
        );
        assert!(move_primary_drops(&truth).is_empty(), "{shape:?}");
        let limit = ts_of(&inc["cluster_limit"]);
        let config = rows(&dir.path().join("config/oplog.bson"));
        let deleted = |ns: &str| config.iter().filter(|r| r.1 == "d" && r.2 == ns).count();
        // Three sharded collections: three config.collections deletes (in an
        // applyOps in 7.x) and their chunks.
        let colls = match shape {
            DdlShape::V7 => config
                .iter()
                .filter(|r| r.0 >= limit && r.3.as_deref() == Some("applyOps"))
                .count(),
            DdlShape::V5 => deleted("config.collections"),
        };
        assert_eq!(colls, 3, "{shape:?}");
        assert!(deleted("config.chunks") >= 6, "{shape:?}");
        let db_delete = config
            .iter()
            .find(|r| r.1 == "d" && r.2 == "config.databases")
            .unwrap()
            .0;
        let mut db_drops = Vec::new();
        for (k, shard) in ["shard0", "shard1"].iter().enumerate() {
            let r = rows(&dir.path().join(format!("{shard}/oplog.bson")));
            let drops: Vec<&Row> = r
                .iter()
                .filter(|r| r.3.as_deref() == Some("drop"))
                .collect();
            let db: Vec<&Row> = r
                .iter()
                .filter(|r| r.3.as_deref() == Some("dropDatabase"))
                .collect();
            assert_eq!(db.len(), 1, "{shard} {shape:?}");
            assert!(!db[0].4, "dropDatabase is plain on {shard}");
            assert!(
                drops.iter().all(|d| d.0 > limit && d.0 < db[0].0),
                "{shard}"
            );
            // shard0, the primary, also drops the unsharded shop.customers.
            let want = if k == 0 { 4 } else { 3 };
            assert_eq!(drops.len(), want, "{shard} {shape:?}");
            let marked = drops.iter().filter(|d| d.4).count();
            match (shape, k) {
                (DdlShape::V7, 1) => {
                    assert_eq!(marked, 3, "non-primary sharded drops are fromMigrate")
                }
                _ => assert_eq!(marked, 0, "{shard} {shape:?}"),
            }
            db_drops.push(db[0].0);
        }
        assert!(
            db_drops[0] < db_drops[1],
            "the primary drops the database first"
        );
        match shape {
            DdlShape::V7 => assert!(db_delete > db_drops[1]),
            DdlShape::V5 => assert!(db_delete < db_drops[0]),
        }
        assert_eq!(ts_of(&inc["last_ts"]), db_delete.max(db_drops[1]));
        assert!(rows(&dir.path().join("shard2/oplog.bson"))
            .iter()
            .all(|r| r.1 == "n"));
    }
}

/// `shop.events` renamed over `shop.orders` (`rename_collection_coordinator.cpp`):
/// one rename per data shard with the source's `ui` and the target's uuid as
/// `dropTarget`; in 7.x the non-primary shard first and `fromMigrate`, then the
/// config server's one transaction; in 5.0 the primary first, all plain, then the
/// config server's separate deletes.
#[test]
fn rename_over_shape_on_every_member() {
    for shape in [DdlShape::V7, DdlShape::V5] {
        let dir = tempfile::tempdir().unwrap();
        let truth = gen_ddl(dir.path(), shape, 7, Ddl::RenameOver);
        let inc = &truth["incidents"][1];
        assert_eq!(inc["kind"], "renameDropTarget");
        let limit = ts_of(&inc["cluster_limit"]);
        let mut renames = Vec::new();
        for shard in ["shard0", "shard1"] {
            let r = rows(&dir.path().join(format!("{shard}/oplog.bson")));
            let mine: Vec<&Row> = r
                .iter()
                .filter(|r| r.3.as_deref() == Some("renameCollection"))
                .collect();
            assert_eq!(mine.len(), 1, "{shard} {shape:?}");
            renames.push((mine[0].0, mine[0].4, mine[0].5.clone()));
        }
        assert_eq!(
            renames[0].2, renames[1].2,
            "the source's uuid on every shard"
        );
        assert_eq!(limit, renames.iter().map(|r| r.0).min().unwrap());
        let config = rows(&dir.path().join("config/oplog.bson"));
        let after: Vec<&Row> = config.iter().filter(|r| r.0 > limit).collect();
        match shape {
            DdlShape::V7 => {
                // shard0 is the primary: it renames last, plain.
                assert!(renames[1].0 < renames[0].0 && renames[1].1 && !renames[0].1);
                assert_eq!(after[0].3.as_deref(), Some("applyOps"));
            }
            DdlShape::V5 => {
                assert!(renames[0].0 < renames[1].0 && !renames[0].1 && !renames[1].1);
                assert_eq!(
                    (after[0].1.as_str(), after[0].2.as_str()),
                    ("d", "config.collections")
                );
            }
        }
    }
}

#[test]
fn same_seed_same_bytes_other_seed_other_bytes() {
    let (a, b, c) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    gen(a.path(), DdlShape::V7, 3);
    gen(b.path(), DdlShape::V7, 3);
    gen(c.path(), DdlShape::V7, 4);
    let (mut ta, mut tb, mut tc) = (BTreeMap::new(), BTreeMap::new(), BTreeMap::new());
    tree(a.path(), a.path(), &mut ta);
    tree(b.path(), b.path(), &mut tb);
    tree(c.path(), c.path(), &mut tc);
    assert_eq!(ta, tb);
    assert_ne!(ta, tc);
    // A second run into the same directory replaces the first one's files.
    gen(a.path(), DdlShape::V5, 3);
    let truth: Value =
        serde_json::from_slice(&fs::read(a.path().join("truth.json")).unwrap()).unwrap();
    assert_eq!(truth["ddl_shape"], "v5");
}

#[test]
fn refuses_a_foreign_directory() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("notes.txt"), "mine").unwrap();
    let err = generate(&ClusterOptions {
        out: dir.path().to_path_buf(),
        seed: 1,
        start: START,
        shards: 2,
        idle_shards: 1,
        shape: DdlShape::V7,
        ddl: Ddl::Drop,
    })
    .unwrap_err();
    assert!(err.to_string().contains("notes.txt"), "{err}");
}

/// The committed fixtures/cluster/ is exactly what scripts/gen-fixtures.sh writes
/// (seed 7, start 2026-11-21T01:00:00Z, the defaults of `--scenario cluster`).
#[test]
fn committed_cluster_fixture_is_reproducible() {
    let committed = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/cluster"
    ));
    let dir = tempfile::tempdir().unwrap();
    gen(dir.path(), DdlShape::V7, 7);
    let (mut want, mut got) = (BTreeMap::new(), BTreeMap::new());
    tree(dir.path(), dir.path(), &mut want);
    tree(committed, committed, &mut got);
    let names = |t: &BTreeMap<String, Vec<u8>>| t.keys().cloned().collect::<Vec<_>>();
    assert_eq!(
        names(&got),
        names(&want),
        "run scripts/gen-fixtures.sh and commit fixtures/cluster"
    );
    for (name, bytes) in &want {
        assert!(
            got[name] == *bytes,
            "fixtures/cluster/{name} differs: run scripts/gen-fixtures.sh"
        );
    }
}
