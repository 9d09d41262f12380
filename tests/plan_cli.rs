//! `pitr plan` as a user runs it: the real binary in a temp dir, checking stdout,
//! stderr, exit codes and the files it writes (or, after a failure, does not write).
//!
//! Three sources of truth: mongo-tools' own restore test data (peer data, skipped
//! when absent), the project's generated fixtures with their truth.json, and small
//! scenarios built here entry by entry.

mod common;

use std::fs;
use std::path::{Path, PathBuf};

use bson::{doc, spec::BinarySubtype, Binary, Bson, Document, Timestamp};
use common::*;
use serde_json::Value;

use pitr::oplog::{self, ReadOptions, Ts};
use pitr::plan::RestorePlan;

// ---------------------------------------------------------------- helpers

fn ts(t: u32, i: u32) -> Bson {
    Bson::Timestamp(Timestamp {
        time: t,
        increment: i,
    })
}

/// Seconds of the synthetic scenarios: 2023-11-14T22:13:20Z + s.
fn at(s: u32) -> u32 {
    1_700_000_000 + s
}

fn write_bson(path: &Path, docs: &[Document]) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut b = Vec::new();
    for d in docs {
        b.extend(bson::to_vec(d).unwrap());
    }
    fs::write(path, b).unwrap();
}

fn ins(s: u32, i: u32, ns: &str, id: i64) -> Document {
    doc! { "ts": ts(at(s), i), "t": 1i64, "v": 2, "op": "i", "ns": ns, "ui": Binary { subtype: BinarySubtype::Uuid, bytes: vec![1; 16] },
    "wall": bson::DateTime::from_millis(at(s) as i64 * 1000), "o": { "_id": id, "n": id } }
}

fn del(s: u32, i: u32, ns: &str, id: i64) -> Document {
    doc! { "ts": ts(at(s), i), "t": 1i64, "v": 2, "op": "d", "ns": ns, "o": { "_id": id } }
}

fn cmd(s: u32, i: u32, db: &str, o: Document) -> Document {
    doc! { "ts": ts(at(s), i), "t": 1i64, "v": 2, "op": "c", "ns": format!("{db}.$cmd"), "o": o }
}

fn drop_cmd(s: u32, i: u32, db: &str, coll: &str, n: i64) -> Document {
    let mut d = cmd(s, i, db, doc! { "drop": coll });
    d.insert("o2", doc! { "numRecords": n });
    d
}

/// A small incident: `shop.orders` (ids 1-5) and `shop.users` (ids 1-2) backed up
/// with their own oplog (100:1-100:3), then traffic, the drop of shop.orders at
/// 150:1, its re-creation and two inserts, and more traffic up to 200:1.
struct Scenario {
    _tmp: tempfile::TempDir,
    root: PathBuf,
}

impl Scenario {
    fn new() -> Scenario {
        Scenario::with_oplog(Scenario::main_oplog())
    }

    fn main_oplog() -> Vec<Document> {
        vec![
            ins(90, 1, "shop.orders", 5),
            ins(100, 1, "shop.orders", 6),
            del(100, 2, "shop.orders", 1),
            ins(100, 3, "shop.users", 3),
            ins(120, 1, "shop.orders", 7),
            ins(121, 1, "shop.users", 4),
            del(130, 1, "shop.users", 1),
            ins(140, 1, "shop.orders", 8),
            drop_cmd(150, 1, "shop", "orders", 7),
            cmd(
                160,
                1,
                "shop",
                doc! { "create": "orders", "idIndex": { "v": 2, "key": { "_id": 1 }, "name": "_id_" } },
            ),
            ins(160, 2, "shop.orders", 100),
            ins(170, 1, "shop.orders", 101),
            ins(180, 1, "shop.users", 5),
            doc! { "ts": ts(at(200), 1), "t": 1i64, "op": "n", "ns": "", "o": { "msg": "periodic noop" } },
        ]
    }

    fn with_oplog(oplog: Vec<Document>) -> Scenario {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_path_buf();
        let b = root.join("backup");
        write_bson(
            &b.join("shop/orders.bson"),
            &(1..=5)
                .map(|i| doc! { "_id": i as i64, "n": i })
                .collect::<Vec<_>>(),
        );
        fs::write(b.join("shop/orders.metadata.json"), r#"{"options":{},"indexes":[{"v":2,"key":{"_id":1},"name":"_id_"}],"type":"collection"}"#).unwrap();
        write_bson(
            &b.join("shop/users.bson"),
            &[doc! { "_id": 1i64 }, doc! { "_id": 2i64 }],
        );
        // The backup's own oplog: the last entries before and during the dump.
        write_bson(
            &b.join("oplog.bson"),
            &[
                ins(100, 1, "shop.orders", 6),
                del(100, 2, "shop.orders", 1),
                ins(100, 3, "shop.users", 3),
            ],
        );
        write_bson(&root.join("oplog.bson"), &oplog);
        Scenario { _tmp: tmp, root }
    }

    fn plan(&self, extra: &[&str]) -> std::process::Output {
        let mut args = vec!["plan", "--backup", "backup", "--oplog", "oplog.bson"];
        args.extend_from_slice(extra);
        pitr_in(&self.root, &args)
    }

    fn plan_json(&self, extra: &[&str]) -> Value {
        let mut args = extra.to_vec();
        args.push("--json");
        let o = self.plan(&args);
        assert_eq!(code(&o), 0, "pitr plan {extra:?}:\n{}", stderr(&o));
        assert!(o.stderr.is_empty(), "stderr: {}", stderr(&o));
        serde_json::from_slice(&o.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", stdout(&o)))
    }

    /// Entries in the root directory other than the inputs.
    fn outputs(&self) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(&self.root)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n != "backup" && n != "oplog.bson")
            .collect();
        v.sort();
        v
    }
}

fn expected(plan: &Value, ns: &str) -> Option<u64> {
    plan["expected"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["ns"] == ns && e["exists"] == true)
        .map(|e| e["documents"].as_u64().unwrap())
}

fn read_ts(path: &Path) -> Vec<Ts> {
    let mut r = oplog::open(&path.to_string_lossy(), ReadOptions::default()).unwrap();
    let mut v = Vec::new();
    while let Some(e) = r.next_entry().unwrap() {
        v.push(e.ts);
    }
    v
}

/// The slice's entries, wherever the plan wrote them: `OUT/oplog.bson`, or in the
/// one-run `OUT/restore/oplog.bson` after the backup's own entries.
fn slice_ts(plan: &Value) -> Vec<Ts> {
    let all = read_ts(Path::new(plan["slice"]["oplog_file"].as_str().unwrap()));
    if plan["slice"]["after_backup_oplog"] == true {
        let own = plan["backup"]["oplog"]["entries"].as_u64().unwrap_or(0) as usize;
        all[own..].to_vec()
    } else {
        all
    }
}

fn lint_codes(plan: &Value) -> Vec<String> {
    plan["lint"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["code"].as_str().unwrap().to_string())
        .collect()
}

// ---------------------------------------------------------------- synthetic

#[test]
fn auto_stops_just_before_the_drop_and_writes_a_sorted_bounded_slice() {
    let s = Scenario::new();
    let p = s.plan_json(&["--until", "auto", "--out", "plan"]);
    let limit = format!("{}:1", at(150));
    assert_eq!(p["format"], "pitr-plan/1");
    assert_eq!(p["until"]["limit"], limit.as_str());
    assert_eq!(p["until"]["exclusive"], true);
    assert_eq!(p["until"]["finding"]["kind"], "drop");
    assert_eq!(p["until"]["entry_at_limit"]["command"], "drop");
    assert_eq!(p["backup"]["end_ts"], format!("{}:3", at(100)).as_str());
    assert_eq!(p["coverage"]["mode"], "after_backup");
    assert_eq!(p["coverage"]["anchored"], true);
    // Backup 1-5, its oplog +6 -1, then +7 +8: the 7 documents the drop recorded.
    assert_eq!(expected(&p, "shop.orders"), Some(7));
    assert_eq!(expected(&p, "shop.users"), Some(3));
    let orders = p["expected"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["ns"] == "shop.orders")
        .unwrap();
    assert_eq!(orders["num_records"], 7);
    assert_eq!(orders["backup_documents"], 5);

    // One mongorestore run (a directory backup): plan/restore/ links the backup's
    // databases, and its oplog.bson holds the backup's own entries, then exactly the
    // slice: the entries after the backup's end and before the limit.
    let restore = s.root.join("plan/restore");
    let combined = restore.join("oplog.bson");
    assert_eq!(
        p["slice"]["oplog_file"],
        combined.canonicalize().unwrap().display().to_string()
    );
    assert_eq!(p["slice"]["after_backup_oplog"], true);
    let mut want = read_ts(&s.root.join("backup/oplog.bson"));
    want.extend([
        Ts::new(at(120), 1),
        Ts::new(at(121), 1),
        Ts::new(at(130), 1),
        Ts::new(at(140), 1),
    ]);
    assert_eq!(read_ts(&combined), want);
    assert_eq!(p["slice"]["entries"], 4);
    assert!(!s.root.join("plan/oplog.bson").exists());
    let shop = fs::symlink_metadata(restore.join("shop")).unwrap();
    assert!(shop.file_type().is_symlink());
    assert_eq!(
        fs::read_link(restore.join("shop")).unwrap(),
        s.root.join("backup/shop").canonicalize().unwrap()
    );
    // plan.json is the same plan, and reads back as a RestorePlan.
    let text = fs::read_to_string(s.root.join("plan/plan.json")).unwrap();
    let back = RestorePlan::from_json(&text).unwrap();
    assert_eq!(serde_json::to_value(&back).unwrap(), p);
    assert_eq!(back.limit(), Ts::new(at(150), 1));
    // The steps name the real directories and the exact limit.
    let steps = p["steps"].as_array().unwrap();
    let argv = |n: usize| -> Vec<String> {
        steps[n]["commands"][0]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_string())
            .collect()
    };
    assert!(argv(0).contains(&"ttlMonitorEnabled=false".to_string()));
    assert_eq!(
        &argv(1)[5..],
        &[
            "--bypassDocumentValidation".to_string(),
            "--oplogReplay".to_string(),
            "--oplogLimit".to_string(),
            limit.clone(),
            restore.canonicalize().unwrap().display().to_string()
        ]
    );
    assert_eq!(p["restore"]["combined"], true);
    assert!(p["restore"]["slice_dir"].is_null());
    // No separate replay step: start, restore+replay, verify, dump, shutdown.
    assert_eq!(steps.len(), 5);

    // Planning again into the same directory replaces restore/ (links only).
    let again = s.plan_json(&["--until", "auto", "--out", "plan"]);
    assert_eq!(again["until"]["limit"], limit.as_str());
    assert_eq!(read_ts(&combined), want);
    assert!(
        s.root.join("backup/shop/orders.bson").is_file(),
        "the backup is untouched"
    );
}

/// `--until auto` on routine operations and one real drop: a `$out` refresh (the
/// `tmp.agg_out.<UUID>` shape of document_source_out.cpp), a failed `$out`'s drop of
/// its temporary collection, and a TTL pass over `shop.sessions`, whose TTL index only
/// the backup's metadata tells, all come before the drop of `shop.orders`; the plan
/// uses its backup to tell them apart and picks the drop. find-drop without
/// `--backup` cannot: it lists the TTL pass as a deleteBurst and says why.
#[test]
fn until_auto_passes_over_routine_operations_to_the_real_drop() {
    let mut oplog = Scenario::main_oplog();
    oplog.retain(|d| d.get_timestamp("ts").unwrap().time < at(150));
    let tmp = "tmp.agg_out.0f1e2d3c-4b5a-4697-8877-665544332211";
    oplog.push(cmd(110, 1, "shop", doc! { "create": tmp, "temp": true, "idIndex": { "v": 2, "key": { "_id": 1 }, "name": "_id_" } }));
    oplog.push(ins(110, 2, &format!("shop.{tmp}"), 1));
    let mut rename = cmd(
        110,
        3,
        "shop",
        doc! { "renameCollection": format!("shop.{tmp}"), "to": "shop.report", "stayTemp": false,
        "dropTarget": Binary { subtype: BinarySubtype::Uuid, bytes: vec![3; 16] } },
    );
    rename.insert("o2", doc! { "numRecords": 2i64 });
    oplog.push(rename);
    let batch = |from: i64, to: i64| -> Bson {
        Bson::Array(
            (from..to)
                .map(|k| {
                    Bson::Document(doc! { "op": "d", "ns": "shop.sessions", "o": { "_id": k } })
                })
                .collect(),
        )
    };
    oplog.push(cmd(125, 1, "admin", doc! { "applyOps": batch(0, 100) }));
    oplog.push(cmd(125, 2, "admin", doc! { "applyOps": batch(100, 120) }));
    let failed = "tmp.agg_out.99999999-4b5a-4697-8877-665544332211";
    oplog.push(cmd(131, 1, "shop", doc! { "create": failed, "temp": true }));
    oplog.push(drop_cmd(131, 2, "shop", failed, 0));
    oplog.extend(
        Scenario::main_oplog()
            .into_iter()
            .filter(|d| d.get_timestamp("ts").unwrap().time >= at(150)),
    );
    oplog.sort_by_key(|d| {
        let t = d.get_timestamp("ts").unwrap();
        (t.time, t.increment)
    });
    let s = Scenario::with_oplog(oplog);
    let b = s.root.join("backup/shop");
    write_bson(
        &b.join("sessions.bson"),
        &(0..150)
            .map(|k| doc! { "_id": k as i64 })
            .collect::<Vec<_>>(),
    );
    fs::write(
        b.join("sessions.metadata.json"),
        r#"{"indexes":[{"v":2,"key":{"_id":1},"name":"_id_"},{"v":2,"key":{"lastSeen":1},"name":"lastSeen_1","expireAfterSeconds":3600}],"collectionName":"sessions","type":"collection"}"#,
    )
    .unwrap();
    write_bson(
        &b.join("report.bson"),
        &[doc! { "_id": 1i64 }, doc! { "_id": 2i64 }],
    );

    let p = s.plan_json(&["--until", "auto", "--out", "plan"]);
    assert_eq!(p["until"]["limit"], format!("{}:1", at(150)).as_str());
    assert_eq!(p["until"]["finding"]["kind"], "drop");
    assert_eq!(p["until"]["finding"]["ns"], "shop.orders");
    // The routine operations are in the replayed range: named as routine, not as
    // destructive operations to stop before.
    let lints: Vec<(String, String)> = p["lint"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["code"].as_str().unwrap().into(),
                l["severity"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert!(
        !lints.iter().any(|(c, _)| c == "destructive-before-limit"),
        "{lints:?}"
    );
    let routine: Vec<&(String, String)> = lints
        .iter()
        .filter(|(c, _)| c == "routine-before-limit")
        .collect();
    assert_eq!(routine.len(), 3, "{lints:?}");
    assert!(routine.iter().all(|(_, sev)| sev == "info"));
    assert_eq!(expected(&p, "shop.sessions"), Some(30));

    // find-drop with the backup: the drop is the only incident; without it, the TTL
    // pass is a deleteBurst it cannot classify, and it says so.
    let o = pitr_in(
        &s.root,
        &["find-drop", "--json", "--backup", "backup", "oplog.bson"],
    );
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let kinds: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["kind"].as_str().unwrap())
        .collect();
    assert_eq!((code(&o), kinds), (0, vec!["drop"]), "{}", stderr(&o));
    // A $out that replaced `shop.report` once: routine, but worth a look.
    assert!(
        stderr(&o).starts_with("warning: CHECK the routine outReplace of shop.report")
            && stderr(&o).lines().count() == 1,
        "{}",
        stderr(&o)
    );
    let o = pitr_in(&s.root, &["find-drop", "--json", "oplog.bson"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v[0]["kind"], "deleteBurst");
    assert_eq!(v[0]["severity"], "high");
    assert!(
        stderr(&o).contains("`shop.sessions`") && stderr(&o).contains("--backup"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn human_output_has_every_section_and_says_the_limit_is_exclusive() {
    let s = Scenario::new();
    let o = s.plan(&["--until", "auto"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let out = stdout(&o);
    for section in [
        "Backup ",
        "Oplog ",
        "Until ",
        "Coverage ",
        "Lint ",
        "Expected ",
        "Slice ",
        "Steps ",
    ] {
        assert!(
            out.contains(&format!("\n{section}")) || out.starts_with(section),
            "missing {section}:\n{out}"
        );
    }
    assert!(
        out.contains(&format!(
            "limit {}:1 (2023-11-14T22:15:50Z) (exclusive)",
            at(150)
        )),
        "{out}"
    );
    assert!(out.contains("--oplogLimit 1700000150:1"), "{out}");
    assert!(
        out.contains("= numRecords 7 of the entry at the limit"),
        "{out}"
    );
    // The default output directory is named after the limit, in the cwd.
    assert_eq!(s.outputs(), vec!["pitr-plan-1700000150-1".to_string()]);
    assert!(s.root.join("pitr-plan-1700000150-1/plan.json").is_file());
}

#[test]
fn skipping_the_drop_keeps_the_later_writes() {
    let s = Scenario::new();
    let p = s.plan_json(&["--until", "end", "--skip", "1700000150:1"]);
    assert_eq!(p["until"]["limit"], "1700000200:2");
    assert_eq!(p["skips"][0]["outcome"], "skipped");
    assert_eq!(p["skips"][0]["entry"]["command"], "drop");
    // 7 before the drop, the create changes nothing, then +100 +101.
    assert_eq!(expected(&p, "shop.orders"), Some(9));
    assert_eq!(expected(&p, "shop.users"), Some(4));
    let slice = PathBuf::from(p["slice"]["oplog_file"].as_str().unwrap());
    assert!(!read_ts(&slice).contains(&Ts::new(at(150), 1)));
    // Without the skip, the drop happens and only the re-created collection remains.
    let p = s.plan_json(&["--until", "end", "--out", "noskip"]);
    assert_eq!(expected(&p, "shop.orders"), Some(2));
    assert!(
        lint_codes(&p).contains(&"destructive-before-limit".to_string()),
        "{:?}",
        lint_codes(&p)
    );
}

#[test]
fn a_skip_that_matches_nothing_is_an_error_and_writes_nothing() {
    let s = Scenario::new();
    for (skip, needle) in [
        ("1700000150:2", "no entry of"),
        ("1700000100:2", "not after the backup's end"),
        ("1700000160:1", "at or after the limit"),
        ("1700000150", "not an exact oplog position"),
    ] {
        let o = s.plan(&["--until", "1700000160:1", "--skip", skip]);
        assert_eq!(code(&o), 2, "--skip {skip}: {}", stdout(&o));
        let err = stderr(&o);
        assert!(
            err.starts_with("error: ") && err.contains(needle),
            "--skip {skip}: {err}"
        );
        assert!(err.contains("\nhint: "), "{err}");
        assert!(o.stdout.is_empty());
        assert_eq!(
            s.outputs(),
            Vec::<String>::new(),
            "--skip {skip} left files behind"
        );
    }
}

#[test]
fn a_gap_after_the_backup_is_an_error_naming_both_sides() {
    // The oplog starts 20 s after the backup's end.
    let late: Vec<Document> = Scenario::main_oplog()
        .into_iter()
        .filter(|d| d.get_timestamp("ts").unwrap().time >= at(120))
        .collect();
    let s = Scenario::with_oplog(late);
    let o = s.plan(&["--until", "auto"]);
    assert_eq!(code(&o), 2, "{}", stdout(&o));
    let err = stderr(&o);
    assert!(err.contains("coverage gap"), "{err}");
    assert!(
        err.contains("1700000100:3 (2023-11-14T22:15:00Z)")
            && err.contains("1700000120:1 (2023-11-14T22:15:20Z)"),
        "{err}"
    );
    assert!(err.contains("hint: "), "{err}");
    assert_eq!(s.outputs(), Vec::<String>::new());

    // Past the end of the oplog: a gap too, and the hint offers `--until end`.
    let s = Scenario::new();
    let o = s.plan(&["--until", "1700000300:0"]);
    assert_eq!(code(&o), 2);
    let err = stderr(&o);
    assert!(
        err.contains("ends at 1700000200:1") && err.contains("--until end` (= 1700000200:2)"),
        "{err}"
    );
    let o = s.plan(&["--until", "2023-11-14T22:20:00Z"]);
    assert_eq!(code(&o), 2);
    assert!(
        stderr(&o).contains("after the last entry 1700000200:1"),
        "{}",
        stderr(&o)
    );
    assert_eq!(s.outputs(), Vec::<String>::new());
}

#[test]
fn a_wall_clock_until_maps_to_the_first_entry_at_or_after_it() {
    let s = Scenario::new();
    // 22:15:45Z = 1700000145: nothing in that second before the drop at 150:1.
    let p = s.plan_json(&["--until", "2023-11-14T22:15:45Z"]);
    assert_eq!(p["until"]["mapped"], true);
    assert_eq!(p["until"]["requested"], "1700000145:0");
    assert_eq!(p["until"]["limit"], "1700000150:1");
    assert_eq!(p["until"]["entry_at_limit"]["ts"], "1700000150:1");
    assert_eq!(p["until"]["entry_at_limit"]["op"], "c");
    assert_eq!(p["until"]["entry_at_limit"]["ns"], "shop.$cmd");
    assert!(p["until"]["explanation"]
        .as_str()
        .unwrap()
        .contains("exclusive"));
    // Epoch seconds and an ObjectId's second are mapped the same way.
    for v in ["1700000145", "oid:6553f1910000000000000000"] {
        let p = s.plan_json(&["--until", v, "--out", "x"]);
        assert_eq!(p["until"]["limit"], "1700000150:1", "{v}");
    }
    // An exact t:i is used as is, and the plan says there is no entry there.
    let p = s.plan_json(&["--until", "1700000145:7", "--out", "exact"]);
    assert_eq!(
        (
            p["until"]["limit"].as_str(),
            p["until"]["mapped"].as_bool(),
            p["until"]["exact_entry"].as_bool()
        ),
        (Some("1700000145:7"), Some(false), Some(false))
    );
    assert_eq!(p["until"]["entry_at_limit"]["ts"], "1700000150:1");
    assert_eq!(expected(&p, "shop.orders"), Some(7));
}

#[test]
fn ns_filtering_replays_only_the_selected_namespaces() {
    let s = Scenario::new();
    let p = s.plan_json(&["--until", "end", "--ns", "shop.users"]);
    assert_eq!(
        slice_ts(&p),
        vec![
            Ts::new(at(121), 1),
            Ts::new(at(130), 1),
            Ts::new(at(180), 1)
        ]
    );
    assert_eq!(p["slice"]["filtered_out"], 7);
    assert_eq!(expected(&p, "shop.users"), Some(4));
    // The backup (with its own oplog) is restored whole: orders as of its end.
    assert_eq!(expected(&p, "shop.orders"), Some(5));
    assert!(lint_codes(&p).contains(&"ns-backup-restored-whole".to_string()));
    assert_eq!(
        p["restore"]["dump_namespaces"],
        serde_json::json!(["shop.users"])
    );
}

/// `pitr replay`'s free-space check runs before the scan can tell an oplog out of
/// order, whose slice the embedded engine then sorts through the work dir: the plan
/// asks the caller's check (`PlanRequest::sort_room`) once its scan says so, with
/// the sort's peak bytes, and a refusal stops it before any slice is written. An
/// oplog in order never asks.
#[test]
fn an_unsorted_oplog_asks_the_callers_room_before_it_is_sorted() {
    use pitr::plan::{sort_peak_bytes, PlanError, PlanRequest, SortRoom, UntilSpec};
    use std::sync::{Arc, Mutex};
    let request = |s: &Scenario, asked: &Arc<Mutex<Vec<u64>>>, room: bool| {
        let asked = asked.clone();
        PlanRequest {
            out: Some(s.root.join("plan")),
            sort_room: Some(SortRoom(Arc::new(move |bytes| {
                asked.lock().unwrap().push(bytes);
                match room {
                    true => Ok(()),
                    false => Err(PlanError::NoRoom {
                        message: "no room for the sort".into(),
                        hint: "make room".into(),
                    }),
                }
            }))),
            ..PlanRequest::new(
                s.root.join("backup"),
                s.root.join("oplog.bson").display().to_string(),
                UntilSpec::Auto,
                s.root.clone(),
            )
        }
    };
    let mut entries = Scenario::main_oplog();
    entries.swap(4, 7);
    let s = Scenario::with_oplog(entries.clone());
    let asked = Arc::new(Mutex::new(Vec::new()));
    let req = request(&s, &asked, false);
    let e = pitr::plan::build(&req, &pitr::plan::Quiet).unwrap_err();
    assert!(matches!(e, PlanError::NoRoom { .. }), "{e:?}");
    assert_eq!(e.to_string(), "no room for the sort");
    assert_eq!(pitr::error::Hint::hint(&e).as_deref(), Some("make room"));
    assert!(!s.root.join("plan/oplog.bson").exists());
    // With room: asked once, and the plan is made with the slice sorted.
    asked.lock().unwrap().clear();
    let plan = pitr::plan::build(&request(&s, &asked, true), &pitr::plan::Quiet).unwrap();
    assert!(plan.slice.reordered);
    // The bytes asked for: the entries between the backup's end and the limit,
    // whatever their order, counted by the second (those in the same second as
    // either end too); well under the sort's memory, so no sorted runs beside it.
    let (end, limit) = (plan.backup.end_ts, plan.until.limit);
    let slice: u64 = entries
        .iter()
        .filter(|d| (end.t..=limit.t).contains(&d.get_timestamp("ts").unwrap().time))
        .map(|d| bson::to_vec(d).unwrap().len() as u64)
        .sum();
    let whole = fs::metadata(s.root.join("oplog.bson")).unwrap().len();
    assert!(0 < slice && slice < whole, "{slice} of {whole}");
    assert_eq!(*asked.lock().unwrap(), [slice]);
    assert_eq!(sort_peak_bytes(slice, req.sort_memory), slice);
    // In ts order: never asked.
    let s = Scenario::new();
    let asked = Arc::new(Mutex::new(Vec::new()));
    pitr::plan::build(&request(&s, &asked, false), &pitr::plan::Quiet).unwrap();
    assert!(asked.lock().unwrap().is_empty());
    // Past the sort's memory, the sorted runs beside the slice count too.
    assert_eq!(sort_peak_bytes(300 << 20, 256 << 20), 600 << 20);
}

#[test]
fn an_unsorted_oplog_is_sorted_into_the_slice() {
    let mut entries = Scenario::main_oplog();
    entries.swap(4, 7); // 140:1 before 120:1
    entries.push(ins(121, 1, "shop.users", 4)); // a duplicate, out of place
    let s = Scenario::with_oplog(entries);
    let p = s.plan_json(&["--until", "auto"]);
    assert_eq!(p["oplog"]["sorted"], false);
    assert_eq!(p["oplog"]["out_of_order"], 3);
    assert_eq!(p["slice"]["reordered"], true);
    assert_eq!(p["slice"]["duplicates_dropped"], 1);
    assert!(lint_codes(&p).contains(&"unsorted-oplog".to_string()));
    let got = slice_ts(&p);
    let mut sorted = got.clone();
    sorted.sort();
    assert_eq!(got, sorted);
    assert_eq!(got.len(), 4);
    assert!(got
        .iter()
        .all(|t| *t > Ts::new(at(100), 3) && *t < Ts::new(at(150), 1)));
    assert_eq!(expected(&p, "shop.orders"), Some(7));
}

#[test]
fn a_command_mongorestore_cannot_apply_makes_a_lint_error_and_exit_1() {
    let mut entries = Scenario::main_oplog();
    entries.insert(
        5,
        cmd(
            125,
            1,
            "admin",
            doc! { "setFeatureCompatibilityVersion": "7.0" },
        ),
    );
    let s = Scenario::with_oplog(entries);
    let o = s.plan(&["--until", "auto"]);
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("error   unknown-command 1700000125:1 admin.$cmd"),
        "{out}"
    );
    assert!(out.contains("The lint found 1 error:"), "{out}");
    assert!(s.root.join("pitr-plan-1700000150-1/plan.json").is_file());
}

#[test]
fn backups_without_their_own_oplog_need_backup_end() {
    let s = Scenario::new();
    fs::remove_file(s.root.join("backup/oplog.bson")).unwrap();
    let o = s.plan(&["--until", "auto"]);
    assert_eq!(code(&o), 2);
    let err = stderr(&o);
    assert!(
        err.contains("has no oplog of its own") && err.contains("--backup-end"),
        "{err}"
    );
    // Told where it starts, it replays from there (idempotently).
    let p = s.plan_json(&["--until", "auto", "--backup-end", "1700000095:0"]);
    assert_eq!(p["backup"]["end_source"], "flag");
    // One run: the backup's directories and the slice as the only oplog.
    assert_eq!(p["restore"]["combined"], true);
    assert_eq!(
        slice_ts(&p).len() as u64,
        p["slice"]["entries"].as_u64().unwrap()
    );
    assert_eq!(expected(&p, "shop.orders"), Some(7));
    assert_eq!(expected(&p, "shop.users"), Some(3));
    // With --ns and no oplog of its own, the backup restore itself is narrowed.
    let p = s.plan_json(&[
        "--until",
        "1700000150:1",
        "--backup-end",
        "1700000095:0",
        "--ns",
        "shop.users",
        "--out",
        "n",
    ]);
    assert_eq!(
        p["restore"]["ns_include"],
        serde_json::json!(["shop.users"])
    );
    // Two runs (mongorestore refuses --nsInclude with --oplogReplay): the slice
    // goes on its own, and the lint knows its run sees no earlier indexes.
    assert_eq!(p["restore"]["combined"], false);
    assert!(p["restore"]["slice_dir"].is_string());
    assert!(s.root.join("n/oplog.bson").is_file());
    assert_eq!(expected(&p, "shop.orders"), None);
    // --backup-end cannot override a backup's own oplog.
    let s = Scenario::new();
    let o = s.plan(&["--until", "auto", "--backup-end", "1700000095:0"]);
    assert_eq!(code(&o), 2);
    assert!(
        stderr(&o).contains("conflicts with the backup's own oplog"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn out_dir_is_refused_when_it_holds_other_files_and_replaced_when_it_is_a_plan() {
    let s = Scenario::new();
    fs::create_dir(s.root.join("busy")).unwrap();
    fs::write(s.root.join("busy/notes.txt"), "mine").unwrap();
    let o = s.plan(&["--until", "auto", "--out", "busy"]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("`notes.txt`"), "{}", stderr(&o));
    assert_eq!(fs::read_dir(s.root.join("busy")).unwrap().count(), 1);
    // A previous plan's directory is replaced.
    s.plan_json(&["--until", "auto", "--out", "p"]);
    let p = s.plan_json(&["--until", "end", "--out", "p"]);
    let mut names: Vec<String> = fs::read_dir(s.root.join("p"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, vec!["plan.json", "restore"]);
    let on_disk: Value =
        serde_json::from_str(&fs::read_to_string(s.root.join("p/plan.json")).unwrap()).unwrap();
    assert_eq!(on_disk, p);
}

#[test]
fn bad_command_lines() {
    let s = Scenario::new();
    for (args, needle) in [
        (vec!["--until", "soon"], "`soon`"),
        (
            vec!["--until", "auto", "--ns", "shop.{x"],
            "not a valid namespace pattern",
        ),
        (vec!["--until", "auto", "--oplog", "-"], "stdin"),
    ] {
        let mut all = vec!["plan", "--backup", "backup"];
        if !args.contains(&"--oplog") {
            all.extend(["--oplog", "oplog.bson"]);
        }
        all.extend(args.iter());
        let o = pitr_in(&s.root, &all);
        assert_eq!(code(&o), 2, "{all:?}");
        assert!(stderr(&o).contains(needle), "{all:?}: {}", stderr(&o));
    }
    let o = pitr_in(
        &s.root,
        &[
            "plan",
            "--backup",
            "nope",
            "--oplog",
            "oplog.bson",
            "--until",
            "auto",
        ],
    );
    assert_eq!(code(&o), 2);
    assert!(
        stderr(&o).contains("backup `nope` does not exist"),
        "{}",
        stderr(&o)
    );
    assert_eq!(s.outputs(), Vec::<String>::new());
}

/// An input that can be read only once (a pipe: `<(zcat ...)`, a FIFO, `/dev/stdin`
/// fed by one) is refused at once, naming it, by plan and by replay: both read each
/// input more than once. Regression: `replay --oplog FIFO` read it once for the scan,
/// then waited forever at "applying the oplog slice" for a writer that had gone.
/// The FIFOs here never get a writer: a pitr that opened one would hang (the test
/// then fails after 60 s instead of waiting forever too).
#[test]
fn an_input_that_can_be_read_only_once_is_refused() {
    let s = Scenario::new();
    for name in ["oplog.fifo", "backup.fifo"] {
        let made = std::process::Command::new("mkfifo")
            .arg(s.root.join(name))
            .status()
            .unwrap();
        assert!(made.success(), "mkfifo");
    }
    for (args, flag, fifo) in [
        (
            vec!["plan", "--backup", "backup", "--oplog", "oplog.fifo"],
            "--oplog",
            "oplog.fifo",
        ),
        (
            vec!["plan", "--backup", "backup.fifo", "--oplog", "oplog.bson"],
            "--backup",
            "backup.fifo",
        ),
    ]
    .into_iter()
    .chain([&["--out", "r"][..], &["--dry-run"]].map(|extra| {
        let mut replay = vec!["replay", "--backup", "backup", "--oplog", "oplog.fifo"];
        replay.extend(extra);
        (replay, "--oplog", "oplog.fifo")
    })) {
        let mut all = args.clone();
        all.extend(["--until", "auto"]);
        let mut child = std::process::Command::new(pitr_bin())
            .args(&all)
            .current_dir(&s.root)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let end = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while child.try_wait().unwrap().is_none() {
            if std::time::Instant::now() > end {
                child.kill().unwrap();
                panic!("{all:?}: pitr waited on the pipe");
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let o = child.wait_with_output().unwrap();
        assert_eq!(code(&o), 2, "{all:?}: {}", stderr(&o));
        let what = &flag[2..];
        assert!(
            stderr(&o).contains(&format!(
                "error: {flag} `{fifo}` is a pipe: pitr reads the {what} more than once, and a pipe only once"
            )),
            "{all:?}: {}",
            stderr(&o)
        );
        assert!(
            stderr(&o).contains(&format!("hint: save the {what} to a file first")),
            "{}",
            stderr(&o)
        );
    }
    let mut left = s.outputs();
    left.retain(|n| !n.ends_with(".fifo"));
    assert_eq!(left, Vec::<String>::new());
}

// ---------------------------------------------------------------- peer data

const DUMP_WITH_OPLOG: &str = "test/qa-tests/jstests/restore/testdata/dump_with_oplog";

/// mongo-tools' own test: the dump's oplog inserts _id 10-13 at 1416342265:2..5 and
/// _id 14 at 1500000000:1, so `--oplogLimit 1416342266:0` gives 14 documents and
/// no limit 15. Here the backup's own oplog IS the oplog to replay: the limit lies
/// inside the backup's oplog window, so the plan replays it with --oplogLimit and
/// needs no slice; `--until end` replays all of it.
#[test]
fn peer_dump_with_oplog_matches_mongo_tools_known_counts() {
    let Some(peer) = peer_dir("peer_dump_with_oplog_matches_mongo_tools_known_counts") else {
        return;
    };
    let dump = peer.join(DUMP_WITH_OPLOG);
    let dump = dump.to_str().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let run = |until: &str, out: &str| -> Value {
        let o = pitr_in(
            tmp.path(),
            &[
                "plan", "--backup", dump, "--oplog", dump, "--until", until, "--json", "--out", out,
            ],
        );
        assert_eq!(code(&o), 0, "--until {until}: {}", stderr(&o));
        serde_json::from_slice(&o.stdout).unwrap()
    };
    let p = run("1416342266:0", "a");
    assert_eq!(expected(&p, "test.data"), Some(14));
    assert_eq!(p["coverage"]["mode"], "within_backup_oplog");
    assert_eq!(p["restore"]["backup_oplog_limit"], "1416342266:0");
    assert_eq!(p["restore"]["slice_dir"], Value::Null);
    assert_eq!(p["until"]["exact_entry"], false);
    assert_eq!(p["until"]["entry_at_limit"]["ts"], "1500000000:1");
    assert!(lint_codes(&p).contains(&"fuzzy-restore-point".to_string()));
    // The legacy system.indexes.bson is index definitions, not a collection.
    assert_eq!(p["backup"]["documents"], 10);
    let p = run("end", "b");
    assert_eq!(expected(&p, "test.data"), Some(15));
    assert_eq!(p["until"]["limit"], "1500000000:2");
    assert_eq!(p["restore"]["backup_oplog_limit"], Value::Null);
    assert_eq!(p["steps"].as_array().unwrap().len(), 5, "no slice step");
    // Nothing was written into the peer data.
    assert!(!Path::new(dump).join("plan.json").exists());
}

/// mongo-tools' create_indexes oplog ends with an entry repeated out of order.
#[test]
fn peer_unsorted_oplog_is_sorted_and_deduplicated() {
    let Some(peer) = peer_dir("peer_unsorted_oplog_is_sorted_and_deduplicated") else {
        return;
    };
    let oplog_path = peer.join("mongorestore/testdata/create_indexes/oplog.bson");
    let tmp = tempfile::tempdir().unwrap();
    fs::create_dir_all(tmp.path().join("backup/create_indexes")).unwrap();
    fs::write(tmp.path().join("backup/create_indexes/other.bson"), []).unwrap();
    let o = pitr_in(
        tmp.path(),
        &[
            "plan",
            "--backup",
            "backup",
            "--backup-end",
            "1589174730:1",
            "--oplog",
            oplog_path.to_str().unwrap(),
            "--until",
            "end",
            "--json",
        ],
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let p: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(p["oplog"]["sorted"], false);
    assert_eq!(p["slice"]["reordered"], true);
    // Its repeated ts holds two different createIndexes: both are kept.
    assert_eq!(p["slice"]["duplicates_dropped"], 0);
    assert_eq!(p["slice"]["same_ts_kept"], 1);
    assert!(lint_codes(&p).contains(&"same-ts-entries".to_string()));
    let got = slice_ts(&p);
    let mut sorted = got.clone();
    sorted.sort();
    assert_eq!(got, sorted);
    assert_eq!(got.len(), 15);
    assert!(
        lint_codes(&p).contains(&"index-build-deferred".to_string()),
        "{:?}",
        lint_codes(&p)
    );
    assert_eq!(expected(&p, "create_indexes.test"), Some(0));
}

// ---------------------------------------------------------------- generated fixtures

const FIXTURE: &str = "fixtures/incident";

/// For every incident of a generated fixture, `--until <its limit>` expects exactly
/// truth.json's counts, and `--until auto` picks the first incident.
fn assert_plan_matches_truth(dir: &Path) {
    let truth: Value =
        serde_json::from_str(&fs::read_to_string(dir.join("truth.json")).unwrap()).unwrap();
    let out = tempfile::tempdir().unwrap();
    let run = |until: &str, name: &str| -> Value {
        let target = out.path().join(name);
        let o = pitr_in(
            dir,
            &[
                "plan",
                "--backup",
                "backup",
                "--oplog",
                "oplog.bson",
                "--until",
                until,
                "--json",
                "--out",
                target.to_str().unwrap(),
            ],
        );
        assert_eq!(code(&o), 0, "--until {until}: {}", stderr(&o));
        serde_json::from_slice(&o.stdout).unwrap()
    };
    let incidents = truth["incidents"].as_array().unwrap();
    let counts = truth["expected_counts"].as_array().unwrap();
    assert_eq!(incidents.len(), counts.len());
    assert!(!incidents.is_empty());
    for (n, (inc, want)) in incidents.iter().zip(counts).enumerate() {
        let limit = inc["oplog_limit"].as_str().unwrap();
        assert_eq!(want["oplog_limit"], limit);
        let p = run(limit, &format!("p{n}"));
        let got: serde_json::Map<String, Value> = p["expected"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["exists"] == true)
            .map(|e| {
                (
                    e["ns"].as_str().unwrap().to_string(),
                    e["documents"].clone(),
                )
            })
            .collect();
        assert_eq!(
            Value::Object(got),
            want["counts"],
            "incident {n} ({} of {}) at {limit}",
            inc["kind"],
            inc["ns"]
        );
        // Where the incident recorded how many documents it removed, the plan
        // carries that number as a cross-check on the namespace it hit.
        if let (Some(n_rec), "drop") = (inc["num_records"].as_u64(), inc["kind"].as_str().unwrap())
        {
            let e = p["expected"]
                .as_array()
                .unwrap()
                .iter()
                .find(|e| e["ns"] == inc["ns"])
                .unwrap();
            assert_eq!(
                (e["num_records"].as_u64(), e["documents"].as_u64()),
                (Some(n_rec), Some(n_rec))
            );
        }
        let slice = PathBuf::from(p["slice"]["oplog_file"].as_str().unwrap());
        let limit_ts = pitr::plan::ts_json::parse(limit).unwrap();
        assert!(read_ts(&slice).iter().all(|t| *t < limit_ts));
    }
    let p = run("auto", "auto");
    assert_eq!(p["until"]["limit"], incidents[0]["oplog_limit"]);
    assert_eq!(p["until"]["finding"]["kind"], incidents[0]["kind"]);
}

#[test]
fn generated_fixture_counts_match_truth_for_every_incident() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(FIXTURE);
    assert!(
        dir.join("truth.json").is_file(),
        "the committed fixture {} is missing its truth.json",
        dir.display()
    );
    assert_plan_matches_truth(&dir);
}

#[test]
fn fresh_seeds_match_their_truth() {
    for seed in [1, 99] {
        let dir = tempfile::tempdir().unwrap();
        generate_incident(&dir.path().join("gen"), seed);
        assert_plan_matches_truth(&dir.path().join("gen"));
    }
}

#[test]
fn a_truncated_oplog_fails_unless_allowed() {
    let s = Scenario::new();
    let path = s.root.join("oplog.bson");
    let mut bytes = fs::read(&path).unwrap();
    bytes.truncate(bytes.len() - 9);
    fs::write(&path, bytes).unwrap();
    let o = s.plan(&["--until", "auto"]);
    assert_eq!(code(&o), 2);
    let err = stderr(&o);
    assert!(
        err.contains("is truncated at byte") && err.contains("--allow-truncated"),
        "{err}"
    );
    assert_eq!(s.outputs(), Vec::<String>::new());
    let p = s.plan_json(&["--until", "end", "--allow-truncated"]);
    // The cut-off no-op at 200:1 is gone: the oplog now ends at 180:1.
    assert_eq!(p["until"]["limit"], "1700000180:2");
    assert!(p["oplog"]["truncated"]
        .as_str()
        .unwrap()
        .contains("truncated"));
    assert!(lint_codes(&p).contains(&"truncated-oplog".to_string()));
}

/// mongo-tools' own transaction cases (`common/txn/testdata/oplog_entries.json`,
/// used by its `common/txn` tests): each case is an oplog and the documents its
/// namespace must hold afterwards (`postimage`). Each is replayed alone after an
/// empty backup of its collection; the plan's expected count must be the size of
/// the post-image, and find-drop must read it without finding anything destructive.
#[test]
fn peer_transaction_cases_give_their_postimage_counts() {
    let Some(peer) = peer_dir("peer_transaction_cases_give_their_postimage_counts") else {
        return;
    };
    let text = fs::read_to_string(peer.join("common/txn/testdata/oplog_entries.json")).unwrap();
    let cases: serde_json::Map<String, Value> = serde_json::from_str(&text).unwrap();
    let mut checked = 0;
    for (name, case) in &cases {
        let ops: Vec<Document> = case["ops"]
            .as_array()
            .unwrap()
            .iter()
            .map(
                |v| match Bson::try_from(modern_extjson(v.clone())).unwrap() {
                    Bson::Document(d) => d,
                    other => panic!("{name}: not a document: {other:?}"),
                },
            )
            .collect();
        // The namespace whose documents the case checks.
        let ns = match case["ns"].as_str() {
            Some(ns) if ns != "admin.$cmd" => ns.to_string(),
            // The vectored-insert case names its target only inside applyOps.
            _ => ops[0]
                .get_document("o")
                .unwrap()
                .get_array("applyOps")
                .unwrap()[0]
                .as_document()
                .unwrap()
                .get_str("ns")
                .unwrap()
                .to_string(),
        };
        let want = match case["postimage"].as_array() {
            Some(p) => p.len() as u64,
            // The vectored-insert case has no post-image: `multiOpType: 1` marks the
            // inserts of one retryable write, applied at once, not a transaction
            // (mongo-tools `txn.NewMeta`), so both of its inserts are there.
            None => 2,
        };
        let first = ops
            .iter()
            .map(|d| d.get_timestamp("ts").unwrap())
            .min_by_key(|t| (t.time, t.increment))
            .unwrap();
        let before = doc! { "ts": ts(first.time - 1, 1), "t": 1i64, "op": "n", "ns": "", "o": { "msg": "backup end" } };
        let dir = tempfile::tempdir().unwrap();
        let (db, coll) = ns.split_once('.').unwrap();
        write_bson(&dir.path().join(format!("backup/{db}/{coll}.bson")), &[]);
        write_bson(
            &dir.path().join("backup/oplog.bson"),
            std::slice::from_ref(&before),
        );
        let mut all = vec![before];
        all.extend(ops);
        write_bson(&dir.path().join("oplog.bson"), &all);

        let o = pitr_in(dir.path(), &["find-drop", "oplog.bson"]);
        assert_eq!(code(&o), 1, "{name}: find-drop: {}", stderr(&o));
        let o = pitr_in(
            dir.path(),
            &[
                "plan",
                "--backup",
                "backup",
                "--oplog",
                "oplog.bson",
                "--until",
                "end",
                "--json",
                "--out",
                "p",
            ],
        );
        assert!(matches!(code(&o), 0 | 1), "{name}: plan: {}", stderr(&o));
        let p: Value = serde_json::from_slice(&o.stdout).unwrap();
        let row = p["expected"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["ns"] == ns.as_str())
            .unwrap_or_else(|| panic!("{name}: no expected row for {ns}: {}", p["expected"]));
        assert_eq!(row["documents"], want, "{name}: {row}");
        checked += 1;
    }
    assert_eq!(checked, 12, "every case of the file was checked");
}

/// Rewrites legacy extended JSON (`{"$binary": "<base64>", "$type": "04"}`, which
/// mongo-tools' test data still uses and the bson crate does not read) into the
/// canonical form.
fn modern_extjson(v: Value) -> Value {
    match v {
        Value::Object(m) => {
            if let (Some(Value::String(b64)), Some(Value::String(t)), 2) =
                (m.get("$binary"), m.get("$type"), m.len())
            {
                return serde_json::json!({"$binary": {"base64": b64, "subType": t}});
            }
            Value::Object(m.into_iter().map(|(k, v)| (k, modern_extjson(v))).collect())
        }
        Value::Array(a) => Value::Array(a.into_iter().map(modern_extjson).collect()),
        other => other,
    }
}

/// `--expect-max-ids` bounds the `_id`s held during the replay, not only the
/// backup's: on the committed incident (1,362 documents in the backup, 1,374 held
/// at the drop) a cap between the two leaves the expected counts out and says why,
/// and the plan is otherwise made; a cap above both counts (with room for the
/// `_id`s of namespaces the plan does not check, such as `system.views`).
#[test]
fn expect_max_ids_bounds_the_replay_not_only_the_backup() {
    let out = tempfile::tempdir().unwrap();
    let plan = |cap: &str| -> Value {
        let target = out.path().join(format!("p{cap}"));
        let o = pitr_in(
            Path::new(FIXTURE),
            &[
                "plan",
                "--backup",
                "backup",
                "--oplog",
                "oplog.bson",
                "--until",
                "auto",
                "--expect-max-ids",
                cap,
                "--json",
                "--out",
                target.to_str().unwrap(),
            ],
        );
        assert_eq!(code(&o), 0, "cap {cap}: {}", stderr(&o));
        serde_json::from_slice(&o.stdout).unwrap()
    };
    let p = plan("1365");
    assert_eq!(p["backup"]["documents"], 1362);
    assert!(p["expected"].is_null(), "{}", p["expected"]);
    let note = p["expected_note"].as_str().unwrap();
    assert!(
        note.contains("the replay holds more than 1365 documents (--expect-max-ids)"),
        "{note}"
    );
    let p = plan("1400");
    assert_eq!(expected(&p, "shop.orders"), Some(113));
    assert!(p["expected_note"].is_null());
    // Below the backup's own count, the inventory says so first.
    let p = plan("1000");
    assert!(p["expected_note"]
        .as_str()
        .unwrap()
        .contains("the backup holds more than 1000 documents"));
}

/// An output directory without room for the slice and mongorestore's one-run inputs
/// is refused before anything is read. The inputs: an oplog of 8 TiB (beside the
/// directory backup's own oplog, which the one-run oplog.bson holds too), a sparse file
/// whose apparent size is what is counted (and which is no oplog at all: a plan
/// that went on would fail reading it instead), also named through a link; then an archive backup of 8 TiB
/// beside the real oplog, whose one-run copy counts too. `--no-space-check` goes on
/// (and meets the files for what they are).
#[test]
fn an_output_without_room_is_refused_before_anything_is_read() {
    let s = Scenario::new();
    let sparse = |name: &str| {
        let f = fs::File::create(s.root.join(name)).unwrap();
        f.set_len(8 << 40).unwrap();
    };
    sparse("huge.bson");
    let args = [
        "plan",
        "--backup",
        "backup",
        "--oplog",
        "huge.bson",
        "--until",
        "end",
    ];
    let o = pitr_in(&s.root, &args);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains(&format!(
            "not enough free space on the filesystem of `{}`: the plan writes about 8.0 TiB there (the slice and the one-run restore/oplog.bson)",
            s.root.display()
        )) && err.contains("hint: free some space, or give --out on a larger filesystem"),
        "{err}"
    );
    assert_eq!(s.outputs(), ["huge.bson"], "nothing written");
    // Named through a link (`latest.bson -> huge.bson`): the file it names is counted.
    std::os::unix::fs::symlink("huge.bson", s.root.join("latest.bson")).unwrap();
    let mut linked = args.to_vec();
    linked[4] = "latest.bson";
    let o = pitr_in(&s.root, &linked);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("the plan writes about 8.0 TiB there"),
        "{}",
        stderr(&o)
    );
    fs::remove_file(s.root.join("latest.bson")).unwrap();
    sparse("backup.archive");
    let args = [
        "plan",
        "--backup",
        "backup.archive",
        "--oplog",
        "oplog.bson",
        "--until",
        "end",
    ];
    let err = stderr(&pitr_in(&s.root, &args));
    assert!(
        err.contains(
            "the plan writes about 8.0 TiB there (the slice and the one-run restore archive)"
        ),
        "{err}"
    );
    let mut skipped = args.to_vec();
    skipped.push("--no-space-check");
    let o = pitr_in(&s.root, &skipped);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(!stderr(&o).contains("free space"), "{}", stderr(&o));
    // Within the disk: the usual plan.
    s.plan_json(&["--until", "end"]);
}
