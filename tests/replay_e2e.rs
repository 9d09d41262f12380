//! `pitr replay` and `pitr verify` end to end, through the real `pitr` binary.
//!
//! By default with the REAL `mongorestore` and `mongodump` of each mongo-tools
//! release in `../shared/tools` (or `PITR_MONGO_TOOLS_BIN`) against pitr's stand-in
//! `mongod` built from `tests/standins` (no registry here ships mongod); with
//! `PITR_E2E_BIN=DIR` (see `scripts/e2e-real.sh`) against real MongoDB programs
//! throughout. Each test prints which programs ran.
//!
//! Expected counts come from `fixtures/incident/truth.json`, written by the
//! generator that planted the incidents, not from pitr's own planner.

mod common;
mod replay_common;

use std::collections::BTreeMap;
use std::path::Path;

use replay_common::*;
use serde_json::Value;

fn truth() -> Value {
    read_json(&Path::new(FIXTURE).join("truth.json"))
}

/// truth.json's `expected_counts` for one limit.
fn truth_counts(limit: &str) -> BTreeMap<String, u64> {
    let t = truth();
    let entry = t["expected_counts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["oplog_limit"] == limit)
        .unwrap_or_else(|| panic!("truth.json has no counts for {limit}"));
    entry["counts"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_u64().unwrap()))
        .collect()
}

fn incident_limit(kind: &str, ns: &str) -> String {
    let t = truth();
    t["incidents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["kind"] == kind && i["ns"] == ns)
        .unwrap_or_else(|| panic!("no {kind} of {ns} in truth.json"))["oplog_limit"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Runs `pitr replay` on the incident fixture in a fresh temp dir.
struct Run {
    tmp: tempfile::TempDir,
    out: std::process::Output,
}

impl Run {
    fn workdir(&self) -> std::path::PathBuf {
        self.tmp.path().join("work")
    }
    fn report(&self) -> Value {
        read_json(&self.workdir().join("report.json"))
    }
}

fn replay(bins: &Bins, until: &str, extra: &[&str], env: &[(&str, &str)]) -> Run {
    let tmp = tempfile::tempdir().unwrap();
    let backup = format!("{FIXTURE}/backup");
    let oplog = format!("{FIXTURE}/oplog.bson");
    let out = replay_env(tmp.path(), bins, &backup, &oplog, until, extra, env);
    Run { tmp, out }
}

/// `pitr replay --backup B --oplog O --until U` with `bins`, work dir `work` in
/// `tmp`, plus `extra`.
fn replay_in(
    tmp: &Path,
    bins: &Bins,
    backup: &str,
    oplog: &str,
    until: &str,
    extra: &[&str],
) -> std::process::Output {
    replay_env(tmp, bins, backup, oplog, until, extra, &[])
}

/// [`replay_in`] with extra environment variables for pitr.
fn replay_env(
    tmp: &Path,
    bins: &Bins,
    backup: &str,
    oplog: &str,
    until: &str,
    extra: &[&str],
    env: &[(&str, &str)],
) -> std::process::Output {
    let bin = bins.dir.display().to_string();
    let mut args = vec![
        "replay",
        "--engine",
        "mongod",
        "--backup",
        backup,
        "--oplog",
        oplog,
        "--until",
        until,
        "--mongodb-bin",
        &bin,
        "--workdir",
        "work",
        "--grace",
        "3s",
    ];
    args.extend_from_slice(extra);
    run_pitr(tmp, &args, env)
}

/// Every namespace truth.json lists has its count; nothing else holds documents.
fn assert_counts_match_truth(report: &Value, limit: &str) {
    assert_counts_match(report, limit, &truth_counts(limit));
}

/// Every namespace of `want` has its count; nothing else holds documents.
fn assert_counts_match(report: &Value, limit: &str, want: &BTreeMap<String, u64>) {
    let rows = verify_rows(&report["verify"]);
    for (ns, n) in want {
        let row = rows
            .iter()
            .find(|r| &r.0 == ns)
            .unwrap_or_else(|| panic!("{limit}: no verify row for {ns}: {rows:?}"));
        assert_eq!((row.1, row.2), (true, Some(*n)), "{limit}: {ns}: {row:?}");
        assert_eq!(row.3, "pass", "{limit}: {ns}");
    }
    for r in &rows {
        if r.1 && r.2.unwrap_or(0) > 0 {
            assert!(
                want.contains_key(&r.0),
                "{limit}: {} is not in truth.json: {r:?}",
                r.0
            );
        }
    }
}

fn assert_clean(run: &Run, dump_parent: Option<&Path>) {
    let report = run.report();
    let mut pids = pids_in_report(&report);
    pids.extend(pids_in(&stderr(&run.out)));
    assert_nothing_running(&pids, &run.workdir());
    assert_no_temp_dirs(&run.workdir(), dump_parent);
}

#[test]
fn incident_drop_with_until_auto_restores_orders_and_hands_over_a_dump() {
    for bins in tool_sets("incident_drop_with_until_auto") {
        incident_drop(&bins);
    }
}

fn incident_drop(bins: &Bins) {
    let label = &bins.label;
    let run = replay(bins, "auto", &["--out", "handover"], &[]);
    assert_eq!(code(&run.out), 0, "{label}: {}", show(&run.out));
    let limit = incident_limit("drop", "shop.orders");
    let report = run.report();
    assert_eq!(report["result"], "passed");
    assert_eq!(report["restore_point"]["limit"], limit.as_str());
    assert_eq!(report["restore_point"]["exclusive"], true);
    assert_eq!(report["verify"]["passed"], true);
    assert_counts_match_truth(&report, &limit);

    // The dropped collection is back with the count the drop recorded.
    let num_records = truth()["incidents"][0]["num_records"].as_u64().unwrap();
    let orders = verify_rows(&report["verify"])
        .into_iter()
        .find(|r| r.0 == "shop.orders")
        .unwrap();
    assert_eq!(orders.2, Some(num_records));
    let so = stdout(&run.out);
    assert!(
        so.contains("= numRecords 113 recorded by the entry at the limit"),
        "{so}"
    );
    assert!(so.contains("PASSED"), "{so}");

    // Every step ran and took measurable time; logs are where the report says. A
    // directory backup is restored and rolled forward in one mongorestore run.
    let steps = report["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 5);
    for st in steps {
        assert_eq!(st["status"], "ok", "{label}: {st}");
        if let Some(l) = st["log"].as_str() {
            assert!(Path::new(l).is_file(), "{l}");
        }
    }
    // What mongorestore was given: the plan's one-run view of the backup, its own
    // oplog followed by the slice, and the exact exclusive limit; no secret on any
    // command line.
    let restore_cmd = step(&report, "restore_backup")["commands"][0]
        .as_str()
        .unwrap();
    assert!(
        restore_cmd.ends_with(&format!(
            "--oplogReplay --oplogLimit {limit} {}/plan/restore",
            run.workdir().display()
        )),
        "{restore_cmd}"
    );
    for st in steps {
        for c in st["commands"].as_array().unwrap() {
            let c = c.as_str().unwrap().to_lowercase();
            assert!(!c.contains("password") && !c.contains('@'), "{c}");
        }
    }
    // The real mongorestore's own account of the restore, in its log.
    let restore_log =
        std::fs::read_to_string(step(&report, "restore_backup")["log"].as_str().unwrap()).unwrap();
    assert!(
        restore_log.contains("document(s) restored successfully. 0 document(s) failed to restore."),
        "{label}: {restore_log}"
    );

    // The hand-over dump: complete, renamed into place.
    let dump = run.tmp.path().join("handover");
    assert_eq!(
        bson_docs(&dump.join("shop/orders.bson")),
        num_records as usize
    );
    assert_eq!(bson_docs(&dump.join("shop/customers.bson")), 90);
    assert_eq!(report["dump"]["dir"], dump.display().to_string());

    // The report says what ran, and whether it was real.
    let md = std::fs::read_to_string(run.workdir().join("report.md")).unwrap();
    for needle in [
        &limit,
        "exclusive",
        "shop.orders",
        "## Verification",
        "## Binaries",
        "mongod.log",
    ] {
        assert!(md.contains(needle), "report.md lacks {needle}:\n{md}");
    }
    assert_eq!(report["standin"], bins.standin);
    if bins.standin {
        assert!(md.contains("STAND-IN: not a real MongoDB result"), "{md}");
        assert!(so.contains("STAND-IN: not a real MongoDB result"), "{so}");
    }
    for b in report["binaries"].as_array().unwrap() {
        let standin = match b["tool"].as_str().unwrap() {
            "mongod" => bins.standin,
            _ => bins.standin_tools,
        };
        assert_eq!(b["is_standin"], standin, "{b}");
    }
    assert_clean(&run, Some(run.tmp.path()));
}

#[test]
fn incident_other_limits_match_truth() {
    for bins in tool_sets("incident_other_limits_match_truth") {
        other_limits(&bins);
    }
}

fn other_limits(bins: &Bins) {
    for (kind, ns) in [
        ("dropDatabase", "analytics"),
        ("deleteBurst", "shop.inventory"),
    ] {
        let limit = incident_limit(kind, ns);
        let run = replay(bins, &limit, &["--json"], &[]);
        // Both limits lie after the drop of shop.orders: restored, replayed and
        // verified, but the restore holds that drop's damage, so the verdict says
        // so and the exit code is 1 (without --accept-incidents).
        assert_eq!(
            code(&run.out),
            1,
            "{}: {kind}: {}",
            bins.label,
            show(&run.out)
        );
        // --json prints report.json itself.
        let printed: Value = serde_json::from_slice(&run.out.stdout).unwrap();
        let report = run.report();
        assert_eq!(printed, report);
        assert_eq!(report["result"], "incident_replayed", "{}", bins.label);
        assert_eq!(report["verify"]["passed"], true, "{}", bins.label);
        assert_eq!(
            report["stake"]["incidents"][0]["ns"], "shop.orders",
            "{}",
            bins.label
        );
        assert!(
            stderr(&run.out).contains("REPLAYS"),
            "{}: {}",
            bins.label,
            show(&run.out)
        );
        assert_eq!(report["restore_point"]["limit"], limit.as_str());
        assert_counts_match_truth(&report, &limit);
        assert_eq!(step(&report, "dump")["status"], "skipped", "no --out");
        assert_clean(&run, None);
    }
}

const PEER_DUMP: &str = "test/qa-tests/jstests/restore/testdata/dump_with_oplog";

#[test]
fn peer_dump_with_oplog_gives_14_then_15_documents() {
    let Some(peer) = common::peer_dir("peer_dump_with_oplog_gives_14_then_15_documents") else {
        return;
    };
    let dump = peer.join(PEER_DUMP).display().to_string();
    for bins in tool_sets("peer_dump_with_oplog") {
        for (until, want) in [("1416342266:0", 14), ("end", 15)] {
            let tmp = tempfile::tempdir().unwrap();
            let bin = bins.dir.display().to_string();
            let o = run_pitr(
                tmp.path(),
                &[
                    "replay",
                    "--engine",
                    "mongod",
                    "--backup",
                    &dump,
                    "--oplog",
                    &dump,
                    "--until",
                    until,
                    "--mongodb-bin",
                    &bin,
                    "--workdir",
                    "w",
                    "--grace",
                    "3s",
                    "--json",
                ],
                &[],
            );
            assert_eq!(code(&o), 0, "--until {until}: {}", show(&o));
            let report: Value = serde_json::from_slice(&o.stdout).unwrap();
            let rows = verify_rows(&report["verify"]);
            let data = rows
                .iter()
                .find(|r| r.0 == "test.data")
                .expect("test.data row");
            assert_eq!(data.2, Some(want), "--until {until}: {rows:?}");
            // The limit lies inside the backup's own oplog: no slice step.
            assert_eq!(report["steps"].as_array().unwrap().len(), 5);
            assert_clean_dir(&report, &tmp.path().join("w"));
        }
    }
}

fn assert_clean_dir(report: &Value, workdir: &Path) {
    assert_nothing_running(&pids_in_report(report), workdir);
    assert_no_temp_dirs(workdir, None);
}

#[test]
fn dry_run_shows_real_paths_and_starts_nothing() {
    let bins = bins("dry_run_shows_real_paths_and_starts_nothing");
    let rec_dir = tempfile::tempdir().unwrap();
    let record = rec_dir.path().join("record.jsonl");
    let record_s = record.display().to_string();
    let run = replay(
        &bins,
        "auto",
        &["--dry-run", "--out", "handover"],
        &[("PITR_STANDIN_RECORD", &record_s)],
    );
    assert_eq!(code(&run.out), 0, "{}", show(&run.out));
    let so = stdout(&run.out);
    let restore = bins.dir.join("mongorestore").display().to_string();
    assert!(
        so.contains(&format!(
            "{restore} --host 127.0.0.1 --port <PORT> --bypassDocumentValidation --oplogReplay --oplogLimit 1795223165:1"
        )),
        "{so}"
    );
    assert!(
        so.contains(&bins.dir.join("mongodump").display().to_string()),
        "{so}"
    );
    assert!(so.contains("Nothing was run (--dry-run)."), "{so}");
    assert!(
        !so.contains("<PORT>, <DBPATH>, <DUMP_DIR>"),
        "the placeholder runbook is replaced: {so}"
    );
    // Nothing started: no record of any tool, no spare, no report, no dump.
    assert!(!record.exists(), "a tool ran during --dry-run");
    let work = run.workdir();
    assert!(work.join("plan/plan.json").is_file());
    assert!(!work.join("report.json").exists());
    assert!(!run.tmp.path().join("handover").exists());
    assert_no_temp_dirs(&work, Some(run.tmp.path()));
    assert!(processes_mentioning(&work.display().to_string()).is_empty());
    assert!(
        std::fs::read_dir(work.join("logs"))
            .unwrap()
            .next()
            .is_none(),
        "no log: nothing ran"
    );

    // The JSON form says the same.
    let tmp = tempfile::tempdir().unwrap();
    let backup = format!("{FIXTURE}/backup");
    let oplog = format!("{FIXTURE}/oplog.bson");
    let o = run_pitr(
        tmp.path(),
        &[
            "replay",
            "--engine",
            "mongod",
            "--backup",
            &backup,
            "--oplog",
            &oplog,
            "--until",
            "auto",
            "--mongodb-bin",
            "/nonexistent",
            "--dry-run",
            "--json",
        ],
        &[],
    );
    // Programs missing: the rehearsal fails as the real run would (exit 2), after
    // printing everything.
    assert_eq!(code(&o), 2, "{}", show(&o));
    let d: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(d["format"], "pitr-replay-dry-run/1");
    assert_eq!(d["ready"], false);
    assert_eq!(d["exit_code"], 2);
    assert!(d["refusal"].as_str().unwrap().contains("missing"), "{d}");
    assert!(d["binaries"][0]["error"]
        .as_str()
        .unwrap()
        .contains("/nonexistent"));
    assert_eq!(d["plan"]["until"]["limit"], "1795223165:1");
}

#[test]
fn keep_leaves_a_spare_that_pitr_verify_checks() {
    let Some(bins) = tool_sets("keep_leaves_a_spare_that_pitr_verify_checks")
        .into_iter()
        .next()
    else {
        return;
    };
    let run = replay(&bins, "auto", &["--keep"], &[]);
    assert_eq!(code(&run.out), 0, "{}", show(&run.out));
    let report = run.report();
    let port = report["kept"]["port"].as_u64().expect("kept.port") as u16;
    let pid = report["kept"]["pid"].as_u64().unwrap() as u32;
    let spare_dir = std::path::PathBuf::from(report["kept"]["dir"].as_str().unwrap());
    // Stop it whatever happens below.
    struct Stop(u32, std::path::PathBuf);
    impl Drop for Stop {
        fn drop(&mut self) {
            // SAFETY: kill(2) on the spare this test asked pitr to keep.
            unsafe { libc::kill(self.0 as i32, libc::SIGTERM) };
            let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while pitr::exec::pgroup::is_running(self.0) && std::time::Instant::now() < end {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            // SAFETY: as above.
            unsafe { libc::kill(self.0 as i32, libc::SIGKILL) };
            let _ = std::fs::remove_dir_all(&self.1);
        }
    }
    let stop = Stop(pid, spare_dir.clone());
    assert!(pitr::exec::pgroup::is_running(pid), "the kept spare runs");
    assert!(spare_dir.join("db").is_dir());
    let so = stdout(&run.out);
    assert!(
        so.contains(&format!("mongosh 'mongodb://127.0.0.1:{port}/'")),
        "{so}"
    );
    assert!(so.contains(&format!("kill {pid}")), "{so}");
    assert_eq!(step(&report, "shutdown")["status"], "kept");

    // pitr verify alone, against the kept spare: passes.
    let uri = format!("mongodb://127.0.0.1:{port}/");
    let plan = run.workdir().join("plan/plan.json");
    let plan_s = plan.display().to_string();
    let o = run_pitr(
        run.tmp.path(),
        &["verify", "--uri", &uri, "--expect", &plan_s, "--json"],
        &[],
    );
    assert_eq!(code(&o), 0, "{}", show(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["format"], "pitr-verify/1");
    assert_eq!(
        (v["passed"].as_bool(), v["failed"].as_u64()),
        (Some(true), Some(0))
    );
    assert_eq!(v["server"]["standin"], bins.standin);
    assert_eq!(stderr(&o), "", "--json says nothing on stderr");
    // The URI can come from PITR_URI; the table names every namespace.
    let o = run_pitr(
        run.tmp.path(),
        &["verify", "--expect", &plan_s],
        &[("PITR_URI", &uri)],
    );
    assert_eq!(code(&o), 0, "{}", show(&o));
    assert!(stdout(&o).contains("shop.orders"), "{}", show(&o));
    // Counting reads every collection on the server: said on stderr, not stdout.
    assert!(
        stderr(&o).contains("pitr: counting the restored documents: "),
        "{}",
        show(&o)
    );
    assert!(!stdout(&o).contains("pitr: "), "{}", show(&o));

    // Against a wrong plan: one count off, and a namespace that does not exist.
    let mut p = read_json(&plan);
    for e in p["expected"].as_array_mut().unwrap() {
        if e["ns"] == "shop.customers" {
            e["documents"] = Value::from(e["documents"].as_u64().unwrap() + 1);
        }
    }
    p["expected"].as_array_mut().unwrap().push(serde_json::json!({
        "ns": "shop.nowhere", "exists": true, "documents": 3, "backup_documents": null, "num_records": null
    }));
    let checks = p["expected"].as_array().unwrap().len();
    let wrong = run.tmp.path().join("wrong-plan.json");
    std::fs::write(&wrong, serde_json::to_string(&p).unwrap()).unwrap();
    let o = run_pitr(
        run.tmp.path(),
        &[
            "verify",
            "--uri",
            &uri,
            "--expect",
            &wrong.display().to_string(),
        ],
        &[],
    );
    assert_eq!(code(&o), 1, "{}", show(&o));
    let text = stdout(&o);
    assert!(
        text.contains(&format!(
            "FAILED: {checks} checks, {} passed, 2 failed",
            checks - 2
        )),
        "{text}"
    );
    assert!(text.contains("expected 91, found 90 (-1)"), "{text}");
    assert!(
        text.contains("missing: the plan expects 3 documents"),
        "{text}"
    );

    drop(stop);
    assert_nothing_running(&[pid].into_iter().collect(), &run.workdir());
}

#[test]
fn verify_never_prints_a_password_and_fails_cleanly_without_a_server() {
    // A port nobody listens on (bound, then released).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let tmp = tempfile::tempdir().unwrap();
    let plan_dir = tmp.path().join("p");
    let backup = format!("{FIXTURE}/backup");
    let oplog = format!("{FIXTURE}/oplog.bson");
    let o = run_pitr(
        tmp.path(),
        &[
            "plan",
            "--backup",
            &backup,
            "--oplog",
            &oplog,
            "--until",
            "auto",
            "--out",
            &plan_dir.display().to_string(),
        ],
        &[],
    );
    assert_eq!(code(&o), 0, "{}", show(&o));
    let uri = format!("mongodb://admin:hunter2@127.0.0.1:{port}/?authSource=admin");
    let o = run_pitr(
        tmp.path(),
        &[
            "verify",
            "--uri",
            &uri,
            "--expect",
            &plan_dir.join("plan.json").display().to_string(),
            "--connect-timeout",
            "1s",
        ],
        &[],
    );
    assert_eq!(code(&o), 2, "{}", show(&o));
    let all = format!("{}{}", stdout(&o), stderr(&o));
    assert!(!all.contains("hunter2"), "{all}");
    assert!(
        all.contains("error: ") && all.contains("<redacted>@127.0.0.1"),
        "{all}"
    );
    assert!(all.contains("hint: "), "{all}");
    // And a file that is not a plan.
    let o = run_pitr(
        tmp.path(),
        &["verify", "--uri", &uri, "--expect", &backup],
        &[],
    );
    assert_eq!(code(&o), 2, "{}", show(&o));
    assert!(stderr(&o).contains("cannot read the plan"), "{}", show(&o));
}

/// mongorestore exits 0 when documents fail to insert (here a duplicate `_id` in a
/// collection file) and only its last line says so: pitr reads it and does not
/// call such a restore a success.
#[test]
fn documents_that_fail_to_restore_fail_the_replay() {
    for bins in tool_sets("documents_that_fail_to_restore_fail_the_replay") {
        let tmp = tempfile::tempdir().unwrap();
        let backup = tmp.path().join("backup");
        common::copy_dir(&Path::new(FIXTURE).join("backup"), &backup);
        let file = backup.join("shop/customers.bson");
        let mut bytes = std::fs::read(&file).unwrap();
        let first = i32::from_le_bytes(bytes[..4].try_into().unwrap()) as usize;
        let dup = bytes[..first].to_vec();
        bytes.extend(dup);
        std::fs::write(&file, bytes).unwrap();
        let oplog = format!("{FIXTURE}/oplog.bson");
        let out = replay_in(
            tmp.path(),
            &bins,
            backup.to_str().unwrap(),
            &oplog,
            "auto",
            &[],
        );
        assert_eq!(code(&out), 2, "{}: {}", bins.label, show(&out));
        let e = stderr(&out);
        assert!(
            e.contains("mongorestore exited 0 but 1 document(s) failed to restore")
                && e.contains("E11000 duplicate key"),
            "{}: {e}",
            bins.label
        );
        let report = read_json(&tmp.path().join("work/report.json"));
        assert_eq!(step(&report, "restore_backup")["status"], "failed");
        assert_eq!(step(&report, "verify")["status"], "not_run");
        assert_clean_dir(&report, &tmp.path().join("work"));
    }
}

/// A real `mongodump --archive --oplog` (mongo-tools' own test data, server 4.0.2)
/// restored by the real mongorestore (`--archive=FILE --oplogReplay`) into the
/// stand-in gives exactly the counts `pitr plan` expects from it.
#[test]
fn peer_archive_with_oplog_restores_to_the_planned_counts() {
    let Some(peer) = common::peer_dir("peer_archive_with_oplog_restores_to_the_planned_counts")
    else {
        return;
    };
    let archive = peer
        .join("mongorestore/testdata/dump-w-oplog.archive")
        .canonicalize()
        .unwrap()
        .display()
        .to_string();
    for bins in tool_sets("peer_archive_with_oplog") {
        let tmp = tempfile::tempdir().unwrap();
        let o = replay_in(tmp.path(), &bins, &archive, &archive, "end", &["--json"]);
        assert_eq!(code(&o), 0, "{}: {}", bins.label, show(&o));
        let report: Value = serde_json::from_slice(&o.stdout).unwrap();
        let cmd = step(&report, "restore_backup")["commands"][0]
            .as_str()
            .unwrap();
        // The archive goes to mongorestore's standard input, streamed by pitr.
        assert!(
            cmd.contains("--oplogReplay") && cmd.ends_with(" --archive"),
            "{cmd}"
        );
        let plan = read_json(&tmp.path().join("work/plan/plan.json"));
        assert_eq!(
            plan["restore"]["stream"]["backup"],
            archive.as_str(),
            "{}",
            plan["restore"]
        );
        let want = plan["expected"].as_array().unwrap();
        assert!(!want.is_empty());
        let rows = verify_rows(&report["verify"]);
        for e in want {
            let row = rows
                .iter()
                .find(|r| r.0 == e["ns"].as_str().unwrap())
                .unwrap();
            assert_eq!(row.2, e["documents"].as_u64(), "{}: {row:?}", bins.label);
            assert_eq!(row.3, "pass");
        }
        assert_clean_dir(&report, &tmp.path().join("w"));
    }
}

/// The incident's backup, with a time-series collection added, in every layout
/// mongodump writes (a `--gzip --oplog` directory with gzip content in
/// `oplog.bson`, an archive, a gzipped archive), restored by the real mongorestore
/// of both releases to just before the drop of `shop.orders`: verified against the
/// generator's truth (and the time-series collection's buckets).
#[test]
fn every_backup_layout_replays_with_the_real_tools() {
    use pitr_fixturegen::layout::{add_timeseries, convert, Layout};
    let sets = tool_sets("every_backup_layout_replays_with_the_real_tools");
    if sets.is_empty() {
        return;
    }
    let layouts = tempfile::tempdir().unwrap();
    let plain = layouts.path().join("plain");
    convert(&Path::new(FIXTURE).join("backup"), Layout::Dir, &plain).unwrap();
    let buckets = add_timeseries(&plain, "iot", "readings", 12, 1_795_200_000).unwrap();
    let limit = incident_limit("drop", "shop.orders");
    let mut want = truth_counts(&limit);
    want.insert("iot.system.buckets.readings".into(), buckets.into());
    for l in [Layout::Gzip, Layout::Archive, Layout::ArchiveGzip] {
        let backup = layouts.path().join(l.file_name());
        convert(&plain, l, &backup).unwrap();
        for bins in &sets {
            let tmp = tempfile::tempdir().unwrap();
            let oplog = format!("{FIXTURE}/oplog.bson");
            let b = backup.to_str().unwrap();
            let out = replay_in(tmp.path(), bins, b, &oplog, &limit, &["--json"]);
            assert_eq!(code(&out), 0, "{l:?}, {}: {}", bins.label, show(&out));
            let report: Value = serde_json::from_slice(&out.stdout).unwrap();
            let cmd = step(&report, "restore_backup")["commands"][0]
                .as_str()
                .unwrap();
            assert_eq!(cmd.contains(" --gzip "), l != Layout::Archive, "{cmd}");
            assert_counts_match(&report, &limit, &want);
            assert_clean_dir(&report, &tmp.path().join("work"));
        }
    }
}

/// mongo-tools' time-series dump with its oplog (872 `$v:2` updates of buckets,
/// server 5.0): the real mongorestore restores the time-series collection and
/// replays the bucket updates; verify counts buckets and raises no false failure
/// for the view, `admin.system.views` or the `config` collections of the dump.
#[test]
fn peer_timeseries_dump_replays_and_verifies() {
    let Some(peer) = common::peer_dir("peer_timeseries_dump_replays_and_verifies") else {
        return;
    };
    let dump = peer
        .join("mongorestore/testdata/timeseries_tests/ts_dump_with_oplog")
        .canonicalize()
        .unwrap()
        .display()
        .to_string();
    for bins in tool_sets("peer_timeseries_dump") {
        let tmp = tempfile::tempdir().unwrap();
        let extra = ["--json", "--out", "out", "--ns", "timeseries_test.*"];
        let o = replay_in(tmp.path(), &bins, &dump, &dump, "end", &extra);
        assert_eq!(code(&o), 0, "{}: {}", bins.label, show(&o));
        let report: Value = serde_json::from_slice(&o.stdout).unwrap();
        let rows = verify_rows(&report["verify"]);
        let buckets = rows
            .iter()
            .find(|r| r.0 == "timeseries_test.system.buckets.foo_ts")
            .unwrap_or_else(|| panic!("{rows:?}"));
        assert_eq!(buckets.2, Some(10), "{rows:?}");
        assert!(rows.iter().all(|r| r.3 == "pass"), "{rows:?}");
        // Handed over by its own name, as mongodump requires.
        let cmd = step(&report, "dump")["commands"][0].as_str().unwrap();
        assert!(cmd.contains("--collection foo_ts"), "{cmd}");
        assert!(
            tmp.path()
                .join("out/timeseries_test/foo_ts.metadata.json")
                .is_file()
                || tmp
                    .path()
                    .join("out/timeseries_test/foo_ts.metadata.json.gz")
                    .is_file(),
            "{}",
            bins.label
        );
        assert_clean_dir(&report, &tmp.path().join("w"));
    }
}
