//! find-drop against generated oplogs with planted incidents: every incident in
//! truth.json is found with its exact ts, limit and counts, every decoy stays
//! silent, and the filters work. The generator and find-drop were written
//! separately from the same rules (../shared/reference/oplog-format.md), so this
//! cross-checks both.

mod common;

use common::*;
use serde_json::Value;
use std::path::Path;

const FIXTURE: &str = "fixtures/incident";

fn json(o: &std::process::Output) -> Value {
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}\n{}", stdout(o), stderr(o)))
}

fn truth(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("truth.json")).unwrap()).unwrap()
}

/// The fields find-drop and truth.json share, per finding.
fn key(f: &Value) -> Value {
    let collections = match &f["collections"] {
        Value::Null => Value::Array(vec![]),
        other => other.clone(),
    };
    serde_json::json!({
        "kind": f["kind"], "ns": f["ns"], "ts": f["ts"], "oplog_limit": f["oplog_limit"],
        "count": f["count"], "num_records": f["num_records"], "in_transaction": f["in_transaction"],
        "collections": collections,
    })
}

fn assert_matches_truth(dir: &Path) {
    // With the backup every classification can be made: nothing on stderr.
    let o = pitr_in(
        dir,
        &["find-drop", "--json", "--backup", "backup", "oplog.bson"],
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(o.stderr.is_empty(), "stderr must be empty: {}", stderr(&o));
    let found: Vec<Value> = json(&o).as_array().unwrap().iter().map(key).collect();
    let t = truth(dir);
    let want: Vec<Value> = t["incidents"].as_array().unwrap().iter().map(key).collect();
    assert_eq!(found.len(), want.len(), "found {found:#?}\nwant {want:#?}");
    for (f, w) in found.iter().zip(&want) {
        assert_eq!(f, w);
    }
    // Without it, the same incidents, and a warning naming the delete bursts whose
    // collection (older than the oplog) might have had a TTL index.
    let o = pitr_in(dir, &["find-drop", "--json", "oplog.bson"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let without: Vec<Value> = json(&o).as_array().unwrap().iter().map(key).collect();
    assert_eq!(without, found);
    let err = stderr(&o);
    let incidents = t["incidents"].as_array().unwrap();
    let unsure: std::collections::BTreeSet<&str> = incidents
        .iter()
        .filter(|i| i["kind"] == "deleteBurst" && i["in_transaction"] == false)
        .map(|i| i["ns"].as_str().unwrap())
        .collect();
    assert!(!unsure.is_empty());
    for i in incidents {
        let ns = i["ns"].as_str().unwrap();
        assert_eq!(
            err.contains(&format!("`{ns}`")),
            unsure.contains(ns),
            "{ns}: {err}"
        );
    }
    // The routine operations: only with --include-routine, at severity info.
    let o = pitr_in(
        dir,
        &["find-drop", "--json", "--include-routine", "oplog.bson"],
    );
    let all = json(&o);
    let routine: Vec<Value> = all
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| !f["routine"].is_null())
        .map(|f| {
            assert_eq!(f["severity"], "info", "{f}");
            serde_json::json!({ "kind": f["kind"], "routine": f["routine"], "ns": f["ns"],
                "ts": f["ts"], "last_ts": f["last_ts"], "count": f["count"] })
        })
        .collect();
    let want: Vec<Value> = t["routine"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            serde_json::json!({ "kind": r["kind"], "routine": r["routine"], "ns": r["ns"],
                "ts": r["ts"], "last_ts": r["last_ts"], "count": r["count"] })
        })
        .collect();
    assert!(!want.is_empty());
    assert_eq!(routine, want);
    let non_routine: Vec<Value> = all
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["routine"].is_null())
        .map(key)
        .collect();
    assert_eq!(non_routine, found);
    // Decoys: nothing reported on their namespace inside their time range.
    for d in t["decoys"].as_array().unwrap() {
        let ns = d["ns"].as_str().unwrap();
        let ts = |s: &Value| -> (u64, u64) {
            let (a, b) = s.as_str().unwrap().split_once(':').unwrap();
            (a.parse().unwrap(), b.parse().unwrap())
        };
        let (lo, hi) = (ts(&d["first_ts"]), ts(&d["last_ts"]));
        for f in all.as_array().unwrap() {
            let at = ts(&f["ts"]);
            assert!(
                !(f["ns"] == ns && at >= lo && at <= hi),
                "decoy `{}` was reported: {f}",
                d["what"]
            );
        }
    }
}

#[test]
fn committed_fixture_matches_its_truth() {
    assert_matches_truth(&Path::new(env!("CARGO_MANIFEST_DIR")).join(FIXTURE));
}

#[test]
fn fresh_seeds_match_their_truth() {
    for seed in [1, 2, 99] {
        let dir = tempfile::tempdir().unwrap();
        generate_incident(&dir.path().join("gen"), seed);
        assert_matches_truth(&dir.path().join("gen"));
    }
}

#[test]
fn filters_by_namespace_kind_and_time() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(FIXTURE);
    let t = truth(&dir);
    let incidents = t["incidents"].as_array().unwrap();

    let o = pitr_in(
        &dir,
        &["find-drop", "--json", "--kind", "deleteBurst", "oplog.bson"],
    );
    let v = json(&o);
    let want = incidents
        .iter()
        .filter(|i| i["kind"] == "deleteBurst")
        .count();
    assert_eq!(v.as_array().unwrap().len(), want);

    let o = pitr_in(
        &dir,
        &["find-drop", "--json", "--ns", "analytics.*", "oplog.bson"],
    );
    let v = json(&o);
    assert_eq!(v.as_array().unwrap().len(), 1, "{v}");
    assert_eq!(v[0]["kind"], "dropDatabase");

    // --since is inclusive, --until exclusive, both on the incident's first ts.
    let second = incidents[1]["ts"].as_str().unwrap();
    let third = incidents[2]["ts"].as_str().unwrap();
    let o = pitr_in(
        &dir,
        &[
            "find-drop",
            "--json",
            "--since",
            second,
            "--until",
            third,
            "oplog.bson",
        ],
    );
    let v = json(&o);
    assert_eq!(v.as_array().unwrap().len(), 1, "{v}");
    assert_eq!(v[0]["ts"], second);

    // A namespace the oplog never touches is an error (exit 2), not "nothing
    // found": a typo must not read as a quiet collection.
    let o = pitr_in(
        &dir,
        &["find-drop", "--json", "--ns", "nosuch.*", "oplog.bson"],
    );
    assert_eq!(code(&o), 2);
    assert!(String::from_utf8_lossy(&o.stderr).contains("--ns `nosuch.*` matches no namespace"));
    // A namespace it touches without incident: exit 1, an empty array.
    let o = pitr_in(
        &dir,
        &["find-drop", "--json", "--ns", "shop.clicks", "oplog.bson"],
    );
    assert_eq!(code(&o), 1);
    assert_eq!(json(&o), serde_json::json!([]));
}

#[test]
fn human_output_names_the_restore_point_and_zone() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(FIXTURE);
    let t = truth(&dir);
    let first = &t["incidents"][0];
    let o = pitr_in(&dir, &["find-drop", "--tz", "Europe/Berlin", "oplog.bson"]);
    let out = stdout(&o);
    assert_eq!(code(&o), 0);
    assert!(out.starts_with("WHEN (Europe/Berlin)"), "{out}");
    assert!(out.contains("+01:00"), "{out}");
    assert!(
        out.contains(&format!(
            "--oplogLimit {}",
            first["oplog_limit"].as_str().unwrap()
        )),
        "{out}"
    );
    assert!(o.stderr.is_empty(), "{}", stderr(&o));

    let o = pitr_in(&dir, &["find-drop", "--tz", "Mars/Base", "oplog.bson"]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("`Mars/Base`"), "{}", stderr(&o));
}

#[test]
fn overlapping_sources_are_not_counted_twice() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(FIXTURE);
    let once = json(&pitr_in(&dir, &["find-drop", "--json", "oplog.bson"]));
    let o = pitr_in(&dir, &["find-drop", "--json", "oplog.bson", "oplog.bson"]);
    assert_eq!(json(&o), once);
    assert!(stderr(&o).contains("already covered"), "{}", stderr(&o));
}

#[test]
fn stats_marks_the_incidents_on_the_timeline() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(FIXTURE);
    let o = pitr_in(&dir, &["oplog", "stats", "--bucket", "1m", "oplog.bson"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("! drop shop.orders"), "{out}");
    let o = pitr_in(&dir, &["oplog", "stats", "--json", "oplog.bson"]);
    let v = json(&o);
    let t = truth(&dir);
    assert_eq!(v["entries"], t["oplog"]["entries"]);
    assert_eq!(v["first_ts"], t["oplog"]["first_ts"]);
    assert_eq!(v["last_ts"], t["oplog"]["last_ts"]);
    assert_eq!(
        v["findings"].as_array().unwrap().len(),
        t["incidents"].as_array().unwrap().len()
    );
    let o = pitr_in(&dir, &["oplog", "stats", "--bucket", "0s", "oplog.bson"]);
    assert_eq!(code(&o), 2);
}

/// The README's first command: the routine operations planted in the fixture
/// ($out refreshes, a failed $out, a TTL pass) stay out of the list and the restore
/// point, and a note counts them.
#[test]
fn routine_operations_are_not_incidents() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(FIXTURE);
    let t = truth(&dir);
    let routine = t["routine"].as_array().unwrap();
    let o = pitr_in(&dir, &["find-drop", "oplog.bson"]);
    assert_eq!(code(&o), 0);
    let out = stdout(&o);
    let (table, notes) = out.split_once("\n\n").unwrap();
    for r in routine {
        let ns = r["ns"].as_str().unwrap();
        assert!(!table.contains(ns), "{ns} listed:\n{out}");
        assert!(notes.contains(ns), "{ns} not in the notes:\n{out}");
    }
    assert!(
        notes.contains(&format!(
            "note: {} routine operation{} not listed",
            routine.len(),
            if routine.len() == 1 { "" } else { "s" }
        )),
        "{out}"
    );
    let first = t["incidents"][0]["oplog_limit"].as_str().unwrap();
    assert!(out.contains(&format!("--until {first}")), "{out}");

    // Routine operations alone are not "found": exit 1, with or without the flag.
    let o = pitr_in(
        &dir,
        &["find-drop", "--json", "--ns", "reports.*", "oplog.bson"],
    );
    assert_eq!((code(&o), json(&o)), (1, serde_json::json!([])));
    let o = pitr_in(
        &dir,
        &[
            "find-drop",
            "--json",
            "--ns",
            "reports.*",
            "--include-routine",
            "oplog.bson",
        ],
    );
    assert_eq!(code(&o), 1);
    let v = json(&o);
    assert!(!v.as_array().unwrap().is_empty());
    assert!(v
        .as_array()
        .unwrap()
        .iter()
        .all(|f| f["severity"] == "info"));
    let o = pitr_in(
        &dir,
        &[
            "find-drop",
            "--ns",
            "reports.*",
            "--include-routine",
            "oplog.bson",
        ],
    );
    let out = stdout(&o);
    assert!(out.contains("0 findings and"), "{out}");
    assert!(!out.contains("Restore to just before"), "{out}");
}

#[test]
fn a_backup_that_cannot_be_read_is_an_error_before_the_scan() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(FIXTURE);
    let o = pitr_in(&dir, &["find-drop", "--backup", "nosuch", "oplog.bson"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("`nosuch`") && err.contains("hint:"), "{err}");
    assert!(o.stdout.is_empty());
    // An oplog file is not a backup: said so by its content.
    let o = pitr_in(&dir, &["find-drop", "--backup", "oplog.bson", "oplog.bson"]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("looks like"), "{}", stderr(&o));
}
