//! `pitr plan/replay --cluster` (issue 19, phase B): one limit for every member of a
//! sharded cluster, the members' states at it merged into one logical dump.
//!
//! The truth is the generator's logical model (`pitr_fixturegen::cluster::truth::
//! Logical::at`): every routed write at its cluster time, independent of backups,
//! oplogs, chunks and migrations. The merged dump must hold exactly its documents,
//! byte for byte after sorting by `_id`, on the committed fixture at `auto` and at
//! several other limits, and on small generated clusters at random limits. Refusals:
//! a member missing, a member's oplog ending before the limit, a backup ending after
//! it, a limit inside the sharded drop, `--engine mongod`. The dump is restored by
//! the real mongorestore into the stand-in mongod.

mod cluster_common;
mod common;
mod replay_common;

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use cluster_common::{
    fixture_model, options, parse_ts, replay, replay_with, FIXTURE, FIXTURE_START,
};
use pitr::oplog::Ts;
use pitr_fixturegen::cluster::ddl::{Ddl, DdlShape};
use pitr_fixturegen::cluster::truth::Logical;
use pitr_fixturegen::cluster::{generate, ClusterOptions};
use proptest::prelude::*;
use replay_common::{code, run_pitr, show, stderr, tool_sets};
use serde_json::Value;

/// The documents of a dump directory, per namespace, as BSON bytes sorted by `_id`.
fn dump_content(out: &Path) -> BTreeMap<String, Vec<Vec<u8>>> {
    let mut m = BTreeMap::new();
    for db in fs::read_dir(out).unwrap() {
        let db = db.unwrap().path();
        if !db.is_dir() {
            continue;
        }
        for f in fs::read_dir(&db).unwrap() {
            let f = f.unwrap().path();
            let name = f.file_name().unwrap().to_string_lossy().into_owned();
            let Some(coll) = name.strip_suffix(".bson") else {
                continue;
            };
            let bytes = fs::read(&f).unwrap();
            let mut docs = Vec::new();
            let mut at = 0;
            while at < bytes.len() {
                let n = i32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
                docs.push(bytes[at..at + n].to_vec());
                at += n;
            }
            docs.sort_by_key(|d| id_key(d));
            let ns = format!("{}.{coll}", db.file_name().unwrap().to_string_lossy());
            m.insert(ns, docs);
        }
    }
    m
}

fn id_key(d: &[u8]) -> String {
    let doc: bson::Document = bson::from_slice(d).unwrap();
    pitr_fixturegen::cluster::member::doc_key(doc.get("_id").unwrap())
}

/// The truth at `limit`, in the same form.
fn truth_content(model: &Logical, limit: Ts) -> BTreeMap<String, Vec<Vec<u8>>> {
    model
        .at(limit)
        .into_iter()
        .map(|(ns, docs)| {
            let mut v: Vec<Vec<u8>> = docs.iter().map(|d| bson::to_vec(d).unwrap()).collect();
            v.sort_by_key(|d| id_key(d));
            (ns, v)
        })
        .collect()
}

/// The merged dump equals the truth at the report's limit; returns the limit.
fn check_equals_truth(what: &str, cwd: &Path, report: &Value, model: &Logical) -> Ts {
    let limit = parse_ts(&report["limit"]);
    let got = dump_content(&cwd.join("out"));
    let want = truth_content(model, limit);
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        want.keys().collect::<Vec<_>>(),
        "{what} at {limit}: namespaces"
    );
    for (ns, docs) in &want {
        let g = &got[ns];
        assert_eq!(g.len(), docs.len(), "{what} at {limit}: {ns} count");
        for (a, b) in g.iter().zip(docs) {
            assert!(
                a == b,
                "{what} at {limit}: {ns} differs: {:?} vs truth {:?}",
                bson::from_slice::<bson::Document>(a),
                bson::from_slice::<bson::Document>(b)
            );
        }
        let reported = report["namespaces"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["ns"] == ns.as_str())
            .unwrap_or_else(|| panic!("{what}: {ns} not in the report"));
        assert_eq!(reported["documents"].as_u64(), Some(docs.len() as u64));
    }
    let sharding: Value =
        serde_json::from_slice(&fs::read(cwd.join("out/sharding.json")).unwrap()).unwrap();
    assert_eq!(sharding["limit"], report["limit"]);
    limit
}

#[test]
fn fixture_at_auto_and_other_limits_equals_the_truth() {
    let model = fixture_model();
    let truth: Value =
        serde_json::from_slice(&fs::read(Path::new(FIXTURE).join("truth.json")).unwrap()).unwrap();
    let drop = &truth["incidents"][1];
    let after_drop = {
        let l = parse_ts(&drop["last_ts"]);
        format!("{}:{}", l.t, l.i + 1)
    };
    let cluster = Path::new(FIXTURE).join("cluster.toml");
    let limits = [
        "auto",
        drop["cluster_limit"].as_str().unwrap(),
        after_drop.as_str(),
        // During the chunk migration's clone (at 40 s), before the range deletion
        // (70 s), during it, inside the fan-out delete (120 s), at the end.
        "2026-11-21T01:00:40.500Z",
        "2026-11-21T01:00:55Z",
        "1795222870",
        // The clone's last insert: 199 clones on shard1 that it does not own yet.
        "1795222841:28",
        "1795222921:10",
        "1795223030:1",
    ];
    let mut seen = Vec::new();
    for until in limits {
        let tmp = tempfile::tempdir().unwrap();
        let report = replay(tmp.path(), &cluster, until)
            .unwrap_or_else(|o| panic!("--until {until}: {}", show(&o)));
        let limit = check_equals_truth(until, tmp.path(), &report, &model);
        if until == "auto" {
            assert_eq!(
                report["limit"], truth["incidents"][0]["cluster_limit"],
                "auto: the first critical or high incident (the fan-out delete)"
            );
        }
        assert_eq!(report["members"].as_array().unwrap().len(), 4);
        // The members' slices were applied as they were read: none kept.
        let kept = kept_slices(tmp.path());
        assert!(kept.is_empty(), "--until {until}: {kept:?}");
        seen.push(limit);
    }
    // The limits are different points: the test is not comparing one state nine times.
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), limits.len());
}

/// The fixture copied into `dir` with `edit` applied to its cluster.toml.
fn edited_fixture(dir: &Path, edit: impl Fn(String) -> String) -> std::path::PathBuf {
    generate(&options(dir, 7, 2, 1, DdlShape::V7)).unwrap();
    let p = dir.join("cluster.toml");
    let text = fs::read_to_string(&p).unwrap();
    fs::write(&p, edit(text)).unwrap();
    p
}

fn refused(cluster: &Path, args: &[&str], wanted: &[&str]) {
    let tmp = tempfile::tempdir().unwrap();
    let mut all = vec!["--cluster", cluster.to_str().unwrap()];
    all.extend_from_slice(args);
    for cmd in ["plan", "replay"] {
        let mut a = vec![cmd];
        a.extend_from_slice(&all);
        a.extend_from_slice(&["--out", "out"]);
        let o = run_pitr(tmp.path(), &a, &[]);
        assert_eq!(code(&o), 2, "{a:?}: {}", show(&o));
        let e = stderr(&o);
        for w in wanted {
            assert!(e.contains(w), "{a:?}: `{w}` not in: {e}");
        }
        assert!(e.contains("hint:"), "{a:?}: {e}");
        assert!(!tmp.path().join("out").exists(), "{a:?}: output left");
    }
}

/// A cluster whose inputs cannot fit beside `--out` is refused before any member is
/// read, by `pitr plan --cluster` (every member's slice) as by `replay --cluster`
/// (the merged dump): one member's oplog has a second file of 8 TiB, a sparse file
/// whose apparent size is what is counted (no oplog at all, and a second source,
/// which a member may not list yet: a run that went on would be refused anyway).
#[test]
fn a_cluster_without_room_beside_its_output_is_refused_before_anything_is_read() {
    let tmp = tempfile::tempdir().unwrap();
    let cluster = edited_fixture(tmp.path(), |t| {
        t.replace(
            "oplog = [\"shard1/oplog.bson\"]",
            "oplog = [\"shard1/oplog.bson\", \"shard1/huge.bson\"]",
        )
    });
    fs::File::create(tmp.path().join("shard1/huge.bson"))
        .unwrap()
        .set_len(8 << 40)
        .unwrap();
    refused(
        &cluster,
        &["--until", "auto"],
        &[
            "not enough free space on the filesystem of",
            "TiB there",
            "--no-space-check",
        ],
    );
    // The plan's own words and bytes: every slice, 8 TiB and the fixture's oplogs.
    let o = run_pitr(
        tmp.path(),
        &[
            "plan",
            "--cluster",
            cluster.to_str().unwrap(),
            "--until",
            "auto",
        ],
        &[],
    );
    assert!(
        stderr(&o).contains("the plan writes about 8.0 TiB there (every member's slice)"),
        "{}",
        show(&o)
    );
}

/// A limit after the fan-out delete: the dump is written, the report lists the
/// incident, and the exit is 1 unless --accept-incidents.
#[test]
fn incidents_replayed_exit_1_unless_accepted() {
    let tmp = tempfile::tempdir().unwrap();
    let cluster = Path::new(FIXTURE).join("cluster.toml");
    let o = replay_with(tmp.path(), &cluster, "1795223000:7", &[]).expect_err("exit 1");
    assert_eq!(code(&o), 1, "{}", show(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["result"], "incident_replayed");
    assert_eq!(v["incidents_replayed"][0]["kind"], "deleteBurst");
    assert_eq!(v["incidents_replayed"][0]["oplog_limit"], "1795222920:2");
    assert!(tmp.path().join("out/shop/orders.bson").is_file());
    let tmp = tempfile::tempdir().unwrap();
    let v = replay(tmp.path(), &cluster, "1795223000:7").unwrap();
    assert_eq!(v["result"], "restored");
    assert_eq!(v["exit_code"], 0);
}

/// The files named `oplog.bson` under `dir` (any depth) outside `dir/out`.
fn kept_slices(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() && p != dir.join("out") {
                dirs.push(p);
            } else if p.file_name().is_some_and(|n| n == "oplog.bson") {
                found.push(p);
            }
        }
    }
    found
}

/// `--per-member`: each member's own dump at the limit under out/members/<id>/: the
/// shards' documents of a sharded namespace are the merged dump's plus what was
/// left out (orphans, clones), and the config server's holds its routing table.
/// `--keep-slice` is refused with `--cluster` (the member plans are temporary).
#[test]
fn per_member_dumps_hold_each_members_state() {
    let tmp = tempfile::tempdir().unwrap();
    let cluster = Path::new(FIXTURE).join("cluster.toml");
    // During the migration's clone (the truth's decoy: the clone's last insert):
    // shard1 holds clones it does not own yet.
    let o = replay_with(tmp.path(), &cluster, "1795222841:28", &["--keep-slice"]).unwrap_err();
    assert_eq!(code(&o), 2, "{}", show(&o));
    assert!(stderr(&o).contains("--keep-slice"), "{}", show(&o));
    assert!(!tmp.path().join("out").exists());
    let report = replay_with(tmp.path(), &cluster, "1795222841:28", &["--per-member"])
        .unwrap_or_else(|o| panic!("{}", show(&o)));
    let merged = dump_content(&tmp.path().join("out"));
    let members = tmp.path().join("out/members");
    assert!(members.join("config/config/chunks.bson").is_file());
    assert!(members.join("config/config/collections.bson").is_file());
    for n in report["namespaces"].as_array().unwrap() {
        let ns = n["ns"].as_str().unwrap();
        let on_shards: usize = ["shard0", "shard1", "shard2"]
            .iter()
            .map(|m| {
                dump_content(&members.join(m))
                    .get(ns)
                    .map_or(0, |d| d.len())
            })
            .sum();
        assert_eq!(
            on_shards as u64,
            merged[ns].len() as u64 + n["left_out"].as_u64().unwrap(),
            "{ns}"
        );
    }
    let events = report["namespaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["ns"] == "shop.events")
        .unwrap();
    assert!(
        events["left_out"].as_u64().unwrap() > 0,
        "clones in flight: {events}"
    );
    for m in report["members"].as_array().unwrap() {
        assert!(m["dump_documents"].as_u64().is_some(), "{m}");
    }
}

/// Users and roles live on the config server: the merged dump takes the config
/// server's `admin.system.users` and `admin.system.roles` (with `system.version`)
/// at the limit, and leaves a shard's local maintenance user out; the user data is
/// still the truth.
#[test]
fn the_clusters_users_and_roles_come_from_the_config_server() {
    let tmp = tempfile::tempdir().unwrap();
    let cluster = edited_fixture(tmp.path(), |t| t);
    let write = |dir: &str, coll: &str, docs: &[bson::Document]| {
        let d = tmp.path().join(dir).join("backup/admin");
        fs::create_dir_all(&d).unwrap();
        let mut bytes = Vec::new();
        for doc in docs {
            bytes.extend(bson::to_vec(doc).unwrap());
        }
        fs::write(d.join(format!("{coll}.bson")), bytes).unwrap();
    };
    let user = |name: &str| {
        bson::doc! {"_id": format!("admin.{name}"), "user": name, "db": "admin",
        "credentials": {"SCRAM-SHA-256": {"iterationCount": 15000, "salt": "c2FsdA==", "storedKey": "a2V5", "serverKey": "a2V5"}},
        "roles": [{"role": "readWrite", "db": "shop"}]}
    };
    write("config", "system.users", &[user("alice"), user("bob")]);
    write(
        "config",
        "system.roles",
        &[
            bson::doc! {"_id": "admin.auditor", "role": "auditor", "db": "admin", "privileges": [], "roles": []},
        ],
    );
    write("shard0", "system.users", &[user("shard0-maintenance")]);
    let work = tmp.path().join("run");
    fs::create_dir_all(&work).unwrap();
    let report = replay(&work, &cluster, "auto").unwrap_or_else(|o| panic!("{}", show(&o)));
    let got = dump_content(&work.join("out"));
    let names = |ns: &str| -> Vec<String> {
        got.get(ns)
            .unwrap_or_else(|| panic!("{ns} not in the merged dump: {:?}", got.keys()))
            .iter()
            .map(|d| {
                bson::from_slice::<bson::Document>(d)
                    .unwrap()
                    .get_str("_id")
                    .unwrap()
                    .to_string()
            })
            .collect()
    };
    assert_eq!(names("admin.system.users"), ["admin.alice", "admin.bob"]);
    assert_eq!(names("admin.system.roles"), ["admin.auditor"]);
    assert!(got.contains_key("admin.system.version"), "{:?}", got.keys());
    let row = report["namespaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["ns"] == "admin.system.users")
        .unwrap_or_else(|| panic!("no admin.system.users row: {report}"));
    assert_eq!(row["documents"].as_u64(), Some(2), "{row}");
    // Without users or roles on the config server, no admin namespace at all (the
    // fixture's truth tests hold the rest).
    let plain = tempfile::tempdir().unwrap();
    let report = replay(
        plain.path(),
        &Path::new(FIXTURE).join("cluster.toml"),
        "auto",
    )
    .unwrap_or_else(|o| panic!("{}", show(&o)));
    assert!(
        !dump_content(&plain.path().join("out"))
            .keys()
            .any(|k| k.starts_with("admin.")),
        "{report}"
    );
}

#[test]
fn refusals_name_the_member_the_value_and_a_hint() {
    let cluster = Path::new(FIXTURE).join("cluster.toml");
    // shard1's oplog ends at 1795223034:1; the other members reach 1795223038:1.
    refused(
        &cluster,
        &["--until", "1795223034:2"],
        &["member `shard1`", "ends at 1795223034:1", "1795223034:2"],
    );
    // shard0's backup ends at 1795222807:1 (config's at 1795222805:1).
    refused(
        &cluster,
        &["--until", "1795222806:1"],
        &["member `shard0`", "backup ends at 1795222807:1"],
    );
    // Inside the sharded drop: after the config server's metadata delete, before the
    // shards' drops.
    refused(
        &cluster,
        &["--until", "1795223000:9"],
        &[
            "inside the drop of `shop.orders`",
            "1795223000:7",
            "--until 1795223000:7",
        ],
    );
    refused(&cluster, &["--until", "end"], &["--until end"]);
    // A member missing from the file: config.shards at the limit lists it.
    let dir = tempfile::tempdir().unwrap();
    let p = edited_fixture(dir.path(), |t| {
        let k = t.find("[[shard]]\nid = \"shard2\"").unwrap();
        t[..k].to_string()
    });
    refused(&p, &["--until", "auto"], &["`shard2`", "config.shards"]);
    // A member that config.shards does not list.
    let dir = tempfile::tempdir().unwrap();
    let p = edited_fixture(dir.path(), |t| {
        t + "\n[[shard]]\nid = \"shard9\"\nbackup = \"shard2/backup\"\noplog = [\"shard2/oplog.bson\"]\n"
    });
    refused(
        &p,
        &["--until", "auto"],
        &["member `shard9`", "config.shards"],
    );
}

#[test]
fn plan_lists_every_member_at_one_limit() {
    let tmp = tempfile::tempdir().unwrap();
    let cluster = Path::new(FIXTURE).join("cluster.toml");
    let o = run_pitr(
        tmp.path(),
        &[
            "plan",
            "--cluster",
            cluster.to_str().unwrap(),
            "--until",
            "1795223000:7",
            "--out",
            "p",
            "--json",
        ],
        &[],
    );
    assert_eq!(code(&o), 0, "{}", show(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["limit"], "1795223000:7");
    let members = v["members"].as_array().unwrap();
    let ids: Vec<&str> = members
        .iter()
        .map(|m| m["member"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["config", "shard0", "shard1", "shard2"]);
    for m in members {
        assert!(
            parse_ts(&m["backup_end"]) < Ts::new(1_795_223_000, 7),
            "{m}"
        );
        assert!(
            parse_ts(&m["oplog_last"]) >= Ts::new(1_795_223_000, 7),
            "{m}"
        );
        assert!(m["entries_to_apply"].as_u64().unwrap() > 0, "{m}");
        let dir = tmp
            .path()
            .join("p/members")
            .join(m["member"].as_str().unwrap());
        assert!(dir.join("plan.json").is_file(), "{m}");
    }
    assert_eq!(
        v["shards_at_limit"],
        serde_json::json!(["shard0", "shard1", "shard2"])
    );
    assert!(tmp.path().join("p/cluster-plan.json").is_file());
}

#[test]
fn real_mongorestore_restores_the_merged_dump() {
    let test = "real_mongorestore_restores_the_merged_dump";
    let sets = tool_sets(test);
    let tmp = tempfile::tempdir().unwrap();
    let cluster = Path::new(FIXTURE).join("cluster.toml");
    let report = replay_with(tmp.path(), &cluster, "auto", &["--per-member"])
        .unwrap_or_else(|o| panic!("{}", show(&o)));
    for b in &sets {
        let mongod = common::spare::Mongod::start(&b.dir.join("mongod"));
        let out = tmp.path().join("out");
        let o = mongod.restore(&b.dir.join("mongorestore"), &[out.to_str().unwrap()]);
        let log = String::from_utf8_lossy(&o.stderr);
        assert!(
            log.contains("sharding.json"),
            "{}: mongorestore says it skipped sharding.json: {log}",
            b.label
        );
        assert!(
            // 100.18.0 quotes with backticks, 100.11.0 with double quotes.
            log.contains("do with subdirectory")
                && log.contains("members/shard0")
                && !log.contains("restoring members."),
            "{}: mongorestore skips the --per-member dumps: {log}",
            b.label
        );
        for n in report["namespaces"].as_array().unwrap() {
            let (db, coll) = n["ns"].as_str().unwrap().split_once('.').unwrap();
            assert_eq!(
                mongod.count(db, coll),
                n["documents"].as_u64().unwrap(),
                "{} with {}",
                n["ns"],
                b.label
            );
        }
        // `pitr verify --cluster`: the restored data against the merged dump, counts
        // and content (here on the server the dump was restored to; in production,
        // the new cluster's mongos).
        let verify = |what: &str| {
            let o = run_pitr(
                tmp.path(),
                &[
                    "verify",
                    "--uri",
                    &mongod.uri(),
                    "--cluster",
                    "out",
                    "--json",
                ],
                &[],
            );
            let v: Value = serde_json::from_slice(&o.stdout)
                .unwrap_or_else(|e| panic!("{what}: {e}: {}", show(&o)));
            (code(&o), v)
        };
        let (c, v) = verify("restored");
        assert_eq!(c, 0, "{}: {v}", b.label);
        assert_eq!(
            v["checked"].as_u64(),
            Some(report["namespaces"].as_array().unwrap().len() as u64),
            "{v}"
        );
        assert!(
            v["rows"]
                .as_array()
                .unwrap()
                .iter()
                .all(|r| r["note"].as_str().unwrap().contains("content = the dump's")),
            "{v}"
        );
        // Its text output, with the reading of every document as a phase on stderr.
        let o = run_pitr(
            tmp.path(),
            &["verify", "--uri", &mongod.uri(), "--cluster", "out"],
            &[],
        );
        assert_eq!(code(&o), 0, "{}", show(&o));
        let total: u64 = report["namespaces"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["documents"].as_u64().unwrap())
            .sum();
        let phase = stderr(&o)
            .lines()
            .find(|l| l.contains("reading the restored cluster's documents through mongos"))
            .unwrap_or_else(|| panic!("no progress line: {}", show(&o)))
            .to_string();
        assert!(
            phase
                .replace(',', "")
                .contains(&format!("{total} documents")),
            "{phase}"
        );
        mongod.delete_one("shop", "orders", bson::doc! {});
        let (c, v) = verify("one order deleted");
        assert_eq!(c, 1, "{}: {v}", b.label);
        let failed: Vec<&str> = v["rows"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["status"] == "fail")
            .map(|r| r["ns"].as_str().unwrap())
            .collect();
        assert_eq!(failed, ["shop.orders"], "{v}");
        // A directory that is not the merged dump is refused before the server is read.
        let o = run_pitr(
            tmp.path(),
            &["verify", "--uri", &mongod.uri(), "--cluster", "out/shop"],
            &[],
        );
        assert_eq!(code(&o), 2, "{}", show(&o));
        assert!(
            stderr(&o).contains("is not the merged dump of `pitr replay --cluster`"),
            "{}",
            show(&o)
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 8, .. ProptestConfig::default() })]

    /// Small generated clusters (2 or 3 data shards, with or without an idle one, in
    /// either DDL shape, dropping a sharded collection or the whole database, or
    /// renaming one sharded collection over another) restored at a random wall second between every backup's end
    /// and every oplog's end, or (half the cases) just after the first participant's
    /// decision entry of one of the cross-shard transactions: the merged dump is the
    /// truth at the limit pitr chose, or (only when that limit falls inside the DDL)
    /// a refusal saying so.
    #[test]
    fn random_limits_equal_the_truth(
        seed in 1u64..10_000,
        shards in 2usize..=3,
        idle in 0usize..=1,
        v5 in any::<bool>(),
        pick in 0.0f64..1.0,
        across_txn in 0usize..6,
        which_ddl in 0usize..3,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let shape = if v5 { DdlShape::V5 } else { DdlShape::V7 };
        // An idle shard only beside 2 data shards: the generator's 4th shard backs up
        // in [0 s, 9 s) and dumps its oplog from 3 s, but as an idle shard its only
        // entries are no-ops 10 s apart, so its oplog dump starts after its backup's
        // end and nothing proves no entry is missing between them (a refusal, tested
        // as such on the fixture).
        let idle = if shards == 2 { idle } else { 0 };
        let ddl = [Ddl::Drop, Ddl::DropDatabase, Ddl::RenameOver][which_ddl];
        let s = generate(&ClusterOptions { ddl, ..options(dir.path(), seed, shards, idle, shape) }).unwrap();
        let truth: Value =
            serde_json::from_slice(&fs::read(dir.path().join("truth.json")).unwrap()).unwrap();
        let members = truth["members"].as_array().unwrap();
        let ts = |m: &Value, k: &str| m[k].as_str().map(|_| parse_ts(&m[k]));
        let from = members.iter().filter_map(|m| ts(m, "backup_end_ts")).map(|t| t.t).max().unwrap() + 1;
        let to = members.iter().filter_map(|m| ts(m, "oplog_last_ts")).map(|t| t.t).min().unwrap() - 1;
        let sec = from + ((to - from) as f64 * pick) as u32;
        // Half the cases cut through a cross-shard transaction instead: one tick
        // after its first participant's decision entry (its other participants'
        // entries are later), where a per-shard limit would tear it.
        let until = match truth["transactions"].as_array().unwrap().get(across_txn) {
            Some(t) => {
                let first = t["participants"].as_array().unwrap().iter()
                    .map(|p| parse_ts(&p["decision_ts"])).min().unwrap();
                format!("{}:{}", first.t, first.i + 1)
            }
            None => sec.to_string(),
        };
        let tmp = tempfile::tempdir().unwrap();
        let result = replay(tmp.path(), &dir.path().join("cluster.toml"), &until);
        // The generator dumps a member's oplog from 3 s after its backup starts: a
        // member that wrote nothing between then and its backup's end has an oplog
        // dump starting after its backup's end, and nothing proves no entry is
        // missing between them. That cluster must be refused, naming the member.
        let unproven = members.iter().find(|m| {
            match (ts(m, "backup_end_ts"), ts(m, "oplog_first_ts")) {
                (Some(end), Some(first)) => first > end,
                // A member whose backup or oplog dump holds no entry at all.
                _ => true,
            }
        });
        if let Some(m) = unproven {
            let o = result.expect_err("a cluster whose coverage is unproven is refused");
            let e = stderr(&o);
            eprintln!("seed {seed}: refused (member {} unproven)", m["id"]);
            prop_assert!(e.contains(&format!("member `{}`", m["id"].as_str().unwrap())), "{}", show(&o));
            return Ok(());
        }
        match result {
            Ok(report) => {
                let l = check_equals_truth(&format!("seed {seed}"), tmp.path(), &report, &s.logical);
                eprintln!("seed {seed} ({shards}+{idle} shards, {shape:?}, {ddl:?}): equals the truth at {l}");
            }
            Err(o) => {
                let e = stderr(&o);
                prop_assert!(code(&o) == 2 && e.contains("falls inside the"), "seed {seed} at {until}: {}", show(&o));
            }
        }
    }
}

/// `dropDatabase` of `shop` through mongos, in both shapes: restored at its limit
/// (the first metadata delete on the config server) and one tick after its last
/// destructive entry, the merged dump is the truth there; a
/// limit inside it (between the first sharded collection's drop and the last
/// shard's `dropDatabase`) is refused, naming the operation and both ends.
#[test]
fn drop_database_restores_before_and_after_and_refuses_inside() {
    cluster_ddl_restores_before_and_after(Ddl::DropDatabase, "`shop`");
}

/// `shop.events` renamed over `shop.orders` (both sharded), in both shapes: at the
/// first shard's rename `shop.orders` is still the orders; one tick after the
/// config server's re-key it holds the events (and the orders written to it after),
/// routed by the source's chunks under the target's name; inside: refused.
#[test]
fn rename_over_restores_before_and_after_and_refuses_inside() {
    cluster_ddl_restores_before_and_after(Ddl::RenameOver, "`shop.orders`");
}

fn cluster_ddl_restores_before_and_after(ddl: Ddl, named: &str) {
    for shape in [DdlShape::V7, DdlShape::V5] {
        let dir = tempfile::tempdir().unwrap();
        let s = generate(&ClusterOptions {
            ddl,
            ..options(dir.path(), 7, 2, 1, shape)
        })
        .unwrap();
        let truth: Value =
            serde_json::from_slice(&fs::read(dir.path().join("truth.json")).unwrap()).unwrap();
        let inc = &truth["incidents"][1];
        let (first, last) = (parse_ts(&inc["cluster_limit"]), parse_ts(&inc["last_ts"]));
        let cluster = dir.path().join("cluster.toml");
        let after = format!("{}:{}", last.t, last.i + 1);
        for until in [first.to_string(), after] {
            let tmp = tempfile::tempdir().unwrap();
            let report = replay(tmp.path(), &cluster, &until)
                .unwrap_or_else(|o| panic!("{shape:?} at {until}: {}", show(&o)));
            let l = check_equals_truth(
                &format!("{shape:?} {ddl:?}"),
                tmp.path(),
                &report,
                &s.logical,
            );
            let names: Vec<&str> = report["namespaces"]
                .as_array()
                .unwrap()
                .iter()
                .map(|n| n["ns"].as_str().unwrap())
                .collect();
            match (ddl, l == first) {
                (_, true) => assert!(names.contains(&"shop.events"), "{names:?}"),
                (Ddl::DropDatabase, false) => assert!(
                    names.iter().all(|n| !n.starts_with("shop.")),
                    "{shape:?}: the database is gone after its last entry: {names:?}"
                ),
                (_, false) => assert!(
                    !names.contains(&"shop.events") && names.contains(&"shop.orders"),
                    "{shape:?}: {names:?}"
                ),
            }
        }
        for inside in [Ts::new(first.t, first.i + 1), last] {
            refused(
                &cluster,
                &["--until", &format!("{}:{}", inside.t, inside.i)],
                &["inside", named, &first.to_string()],
            );
        }
    }
}

/// The fixture's `movePrimary` of `shop` (shard0 to shard1, after the drop): restored
/// during the clone, just before the commit, between the commit and the old
/// primary's drop of its stale copy, and after the end, `shop.customers` is the
/// truth's every time (taken from the primary at the limit: shard0's copy before the
/// commit, shard1's after), and `find-drop --cluster` lists the old primary's drop
/// only as routine (`movePrimaryCleanup`).
#[test]
fn move_primary_at_every_cut_equals_the_truth_and_its_drop_is_routine() {
    let model = fixture_model();
    let cfg = fs::read(Path::new(FIXTURE).join("config/oplog.bson")).unwrap();
    let (mut at, mut marks) = (0, BTreeMap::new());
    while at < cfg.len() {
        let n = i32::from_le_bytes(cfg[at..at + 4].try_into().unwrap()) as usize;
        let d: bson::Document = bson::from_slice(&cfg[at..at + n]).unwrap();
        if let Ok(what) = d.get_document("o").and_then(|o| o.get_str("what")) {
            if let Some(p) = what.strip_prefix("movePrimary.") {
                let t = d.get_timestamp("ts").unwrap();
                marks.insert(p.to_string(), Ts::new(t.time, t.increment));
            }
        }
        at += n;
    }
    assert_eq!(marks.len(), 3, "{marks:?}");
    let truth: Value =
        serde_json::from_slice(&fs::read(Path::new(FIXTURE).join("truth.json")).unwrap()).unwrap();
    let decoy = truth["decoys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["what"].as_str().unwrap().starts_with("movePrimary"))
        .unwrap();
    let drop = parse_ts(&decoy["first_ts"]);
    let next = |t: Ts| format!("{}:{}", t.t, t.i + 1);
    let cluster = Path::new(FIXTURE).join("cluster.toml");
    for until in [
        next(marks["start"]),
        format!("{}:{}", marks["commit"].t, marks["commit"].i),
        next(marks["commit"]),
        format!("{}:{}", drop.t, drop.i),
        next(marks["end"]),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let report = replay(tmp.path(), &cluster, &until)
            .unwrap_or_else(|o| panic!("--until {until}: {}", show(&o)));
        check_equals_truth(&until, tmp.path(), &report, &model);
        let customers = report["namespaces"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["ns"] == "shop.customers")
            .unwrap()
            .clone();
        assert_eq!(customers["documents"], 80, "--until {until}: {customers}");
    }
    let tmp = tempfile::tempdir().unwrap();
    for (args, listed) in [(vec![], false), (vec!["--include-routine"], true)] {
        let mut a = vec![
            "find-drop",
            "--cluster",
            cluster.to_str().unwrap(),
            "--json",
        ];
        a.extend(args);
        let o = run_pitr(tmp.path(), &a, &[]);
        assert_eq!(code(&o), 0, "{}", show(&o));
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        let hit: Vec<&Value> = v
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["ns"] == "shop.customers")
            .collect();
        assert_eq!(hit.len(), usize::from(listed), "{v}");
        if listed {
            assert_eq!(hit[0]["routine"], "movePrimaryCleanup", "{}", hit[0]);
            assert_eq!(hit[0]["severity"], "info");
        }
    }
}

/// A resharding logged by the config server (two `resharding.coordinator.transition`
/// changelog entries spliced into its oplog at 130 s and 135 s): a limit inside it or
/// after it is refused (the backups are older), one before it restores.
#[test]
fn a_limit_after_a_resharding_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    generate(&options(dir.path(), 7, 2, 1, DdlShape::V7)).unwrap();
    let path = dir.path().join("config/oplog.bson");
    let bytes = fs::read(&path).unwrap();
    let mut docs: Vec<(Ts, Vec<u8>)> = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let n = i32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        let d: bson::Document = bson::from_slice(&bytes[at..at + n]).unwrap();
        let t = d.get_timestamp("ts").unwrap();
        docs.push((Ts::new(t.time, t.increment), bytes[at..at + n].to_vec()));
        at += n;
    }
    for (sec, state) in [(130u32, "preparing-to-donate"), (135, "done")] {
        let t = FIXTURE_START + sec;
        let d = bson::doc! {
            "op": "i", "ns": "config.changelog",
            "o": { "_id": format!("reshard-{sec}"), "what": "resharding.coordinator.transition", "ns": "shop.events",
                   "details": { "newState": state, "namespace": "shop.events", "reshardingUUID": "0f1e2d3c" } },
            "ts": bson::Timestamp { time: t, increment: 900 }, "t": 1i64, "v": 2i64,
            "wall": bson::DateTime::from_millis(t as i64 * 1000),
        };
        docs.push((Ts::new(t, 900), bson::to_vec(&d).unwrap()));
    }
    docs.sort_by_key(|(ts, _)| *ts);
    fs::write(
        &path,
        docs.into_iter().flat_map(|(_, b)| b).collect::<Vec<u8>>(),
    )
    .unwrap();
    let cluster = dir.path().join("cluster.toml");
    for until in [
        format!("{}:0", FIXTURE_START + 133),
        format!("{}", FIXTURE_START + 150),
    ] {
        refused(
            &cluster,
            &["--until", &until],
            &[
                "`shop.events` was resharded from",
                "cannot be replayed from the oplog",
            ],
        );
    }
    let tmp = tempfile::tempdir().unwrap();
    replay(tmp.path(), &cluster, &format!("{}", FIXTURE_START + 128))
        .unwrap_or_else(|o| panic!("{}", show(&o)));
}
