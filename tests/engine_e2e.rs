//! The embedded engine end to end: `pitr replay --engine embedded` on the committed
//! incident and on fresh seeds, against the generator's truth for every planted
//! incident; its `--out` restored by the REAL mongorestore (every release in
//! `../shared/tools`) into the stand-in mongod, which must hold the counts and the
//! `dbHash` the engine predicted; a memory budget far below the backup; Ctrl-C.

mod common;
mod replay_common;

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use replay_common::{code, read_json, run_pitr, show, stdout, tool_sets, FIXTURE};

/// Runs the embedded engine into `work/out` (`extra` flags added); returns the
/// report and the output.
fn embedded(
    cwd: &Path,
    scenario: &Path,
    until: &str,
    extra: &[&str],
) -> (Output, Option<serde_json::Value>) {
    let backup = scenario.join("backup");
    let oplog = scenario.join("oplog.bson");
    let mut args = vec![
        "replay",
        "--engine",
        "embedded",
        "--backup",
        backup.to_str().unwrap(),
        "--oplog",
        oplog.to_str().unwrap(),
        "--until",
        until,
        "--workdir",
        "work",
        "--out",
        "out",
        // Limits past earlier planted incidents are chosen on purpose here: these
        // tests check the engine's state at each limit (the verdict on replayed
        // incidents is tests/never_silently_wrong.rs's).
        "--accept-incidents",
    ];
    args.extend_from_slice(extra);
    let o = run_pitr(cwd, &args, &[]);
    let report = cwd.join("work/report.json");
    (o, report.exists().then(|| read_json(&report)))
}

/// Per namespace, the documents at the limit (existing namespaces only).
fn counts_of(report: &serde_json::Value) -> Vec<(String, u64)> {
    report["namespaces"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["exists"].as_bool().unwrap())
        .map(|n| {
            (
                n["ns"].as_str().unwrap().to_string(),
                n["documents"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// Every planted incident's limit: the engine's counts equal the generator's truth.
fn check_truth(test: &str, scenario: &Path) {
    let truth = read_json(&scenario.join("truth.json"));
    let expected = truth["expected_counts"].as_array().unwrap();
    assert!(!expected.is_empty(), "{test}: no incidents in the truth");
    for e in expected {
        let limit = e["oplog_limit"].as_str().unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let (o, report) = embedded(tmp.path(), scenario, limit, &[]);
        assert_eq!(code(&o), 0, "{test} at {limit}: {}", show(&o));
        let report = report.unwrap();
        assert_eq!(report["engine"], "embedded");
        let mut want: Vec<(String, u64)> = e["counts"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), v.as_u64().unwrap()))
            .collect();
        want.sort();
        let mut got = counts_of(&report);
        got.retain(|(ns, n)| *n > 0 || want.iter().any(|(w, _)| w == ns));
        got.sort();
        assert_eq!(got, want, "{test}: counts at {limit}");
        // The dump holds what the report says.
        for (ns, n) in &want {
            let (db, coll) = ns.split_once('.').unwrap();
            let f = tmp.path().join("out").join(db).join(format!("{coll}.bson"));
            if f.exists() {
                assert_eq!(
                    replay_common::bson_docs(&f) as u64,
                    *n,
                    "{test}: {ns} at {limit}"
                );
            }
        }
    }
}

#[test]
fn committed_incident_every_limit_equals_the_truth() {
    check_truth(
        "committed_incident_every_limit_equals_the_truth",
        Path::new(FIXTURE),
    );
}

#[test]
fn fresh_seeds_every_limit_equal_the_truth() {
    for seed in [11, 12345] {
        let dir = tempfile::tempdir().unwrap();
        common::generate_incident(dir.path(), seed);
        check_truth(&format!("fresh seed {seed}"), dir.path());
    }
}

/// The embedded engine's dry run shows the plan without its placeholder steps
/// (nothing of them runs on this path) and without saying the engine applied the
/// slice (it applied nothing): the slice's own line says how it would be applied.
#[test]
fn a_dry_run_shows_the_plan_without_steps_or_a_claim_of_applying() {
    let tmp = tempfile::tempdir().unwrap();
    let (o, report) = embedded(tmp.path(), Path::new(FIXTURE), "auto", &["--dry-run"]);
    assert_eq!(code(&o), 0, "{}", show(&o));
    assert!(report.is_none(), "a dry run wrote a report");
    let out = replay_common::stdout(&o);
    for shown in [
        "\nSlice     not kept: the engine applies it as it reads it",
        "\nPlan written to ",
        "\nEngine    embedded: would apply the backup and the slice in-process",
        "Nothing was applied (--dry-run).",
    ] {
        assert!(out.contains(shown), "{shown:?} missing:\n{out}");
    }
    for hidden in ["\nSteps ", "applied it", "<PORT>"] {
        assert!(!out.contains(hidden), "{hidden:?} shown:\n{out}");
    }
}

#[test]
fn restores_shop_orders_with_its_113_documents_and_names_the_engine() {
    let tmp = tempfile::tempdir().unwrap();
    let (o, report) = embedded(tmp.path(), Path::new(FIXTURE), "auto", &[]);
    assert_eq!(code(&o), 0, "{}", show(&o));
    let out = replay_common::stdout(&o);
    assert!(out.contains("Engine    embedded"), "{out}");
    let report = report.unwrap();
    let orders = counts_of(&report)
        .into_iter()
        .find(|(ns, _)| ns == "shop.orders")
        .unwrap();
    assert_eq!(orders.1, 113);
    assert_eq!(
        replay_common::bson_docs(&tmp.path().join("out/shop/orders.bson")),
        113
    );
    // The documents the drop destroys, on their own, cross-checked with numRecords.
    let d = &report["destroyed"];
    assert_eq!(
        (d["documents"].as_u64(), d["num_records"].as_i64()),
        (Some(113), Some(113))
    );
    assert_eq!(
        replay_common::bson_docs(&tmp.path().join("out-destroyed/shop/orders.bson")),
        113
    );
    let md = std::fs::read_to_string(tmp.path().join("work/report.md")).unwrap();
    assert!(md.contains("engine: embedded"), "{md}");
    // Nothing temporary left.
    let leftovers: Vec<String> = std::fs::read_dir(tmp.path().join("work"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

use common::spare::Mongod;

/// `pitr verify --json` of the spare `mongod` against the plan `plan_file`.
fn verify_json(cwd: &Path, mongod: &Mongod, plan_file: &Path) -> Output {
    run_pitr(
        cwd,
        &[
            "verify",
            "--uri",
            &mongod.uri(),
            "--expect",
            plan_file.to_str().unwrap(),
            "--json",
        ],
        &[],
    )
}

/// `--keep-slice`: the plan keeps the slice the engine applied, byte for byte the
/// one `pitr plan` writes for the same inputs and limit; without it, the same dump
/// and counts, and no slice left anywhere in the work dir.
#[test]
fn keep_slice_keeps_pitr_plans_slice_and_without_it_nothing_is_left() {
    let fixture = Path::new(FIXTURE);
    let kept = tempfile::tempdir().unwrap();
    let (o, kept_report) = embedded(kept.path(), fixture, "auto", &["--keep-slice"]);
    assert_eq!(code(&o), 0, "{}", show(&o));
    let slice = std::fs::read(kept.path().join("work/plan/oplog.bson")).unwrap();
    let pj = read_json(&kept.path().join("work/plan/plan.json"));
    assert_eq!(pj["slice"]["kept"], true);
    assert_eq!(pj["slice"]["bytes"], slice.len() as u64);
    assert!(
        pj["slice"]["entries"].as_u64().unwrap() > 0,
        "{}",
        pj["slice"]
    );
    let md = std::fs::read_to_string(kept.path().join("work/report.md")).unwrap();
    assert!(md.contains("applied and kept in `"), "{md}");

    let plan = run_pitr(
        kept.path(),
        &[
            "plan",
            "--backup",
            fixture.join("backup").to_str().unwrap(),
            "--oplog",
            fixture.join("oplog.bson").to_str().unwrap(),
            "--until",
            "auto",
            "--out",
            "by-plan",
        ],
        &[],
    );
    assert_eq!(code(&plan), 0, "{}", show(&plan));
    // pitr plan writes the one-run layout here: the backup's own entries, then
    // the slice.
    let theirs = read_json(&kept.path().join("by-plan/plan.json"));
    assert_eq!(theirs["slice"]["bytes"], slice.len() as u64);
    let file = std::fs::read(theirs["slice"]["oplog_file"].as_str().unwrap()).unwrap();
    assert!(
        file.ends_with(&slice),
        "the kept slice is not the end of pitr plan's {}",
        theirs["slice"]["oplog_file"]
    );

    let plain = tempfile::tempdir().unwrap();
    let (o, report) = embedded(plain.path(), fixture, "auto", &[]);
    assert_eq!(code(&o), 0, "{}", show(&o));
    let md = std::fs::read_to_string(plain.path().join("work/report.md")).unwrap();
    assert!(
        md.contains("applied as they were read and not kept"),
        "{md}"
    );
    let (report, kept_report) = (report.unwrap(), kept_report.unwrap());
    assert_eq!(counts_of(&report), counts_of(&kept_report));
    assert_eq!(report["namespaces"], kept_report["namespaces"]);
    let pj = read_json(&plain.path().join("work/plan/plan.json"));
    assert_eq!(pj["slice"]["kept"], false);
    assert_eq!(pj["slice"]["bytes"], slice.len() as u64);
    let mut bson_files = Vec::new();
    let mut dirs = vec![plain.path().join("work")];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "bson" || x == "tmp") {
                bson_files.push(p);
            }
        }
    }
    assert!(bson_files.is_empty(), "{bson_files:?}");
}

/// `dbHash` of `db.coll` and its count, through the driver.
#[test]
fn real_mongorestore_restores_the_engines_dump_with_its_counts_and_dbhash() {
    let test = "real_mongorestore_restores_the_engines_dump_with_its_counts_and_dbhash";
    let sets = tool_sets(test);
    for (form, flags, restore_args) in [
        ("directory", &[][..], &["out"][..]),
        ("gzip", &["--gzip"][..], &["--gzip", "out"][..]),
        ("archive", &["--archive"][..], &["--archive=out"][..]),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let (o, report) = embedded(tmp.path(), Path::new(FIXTURE), "auto", flags);
        assert_eq!(code(&o), 0, "{form}: {}", show(&o));
        let report = report.unwrap();
        let plan_file: PathBuf = tmp.path().join("work/plan/plan.json");
        // The engine applied the slice as it read it: no copy of it (without
        // --keep-slice) and none for a mongorestore run that does not happen.
        let plan_dir = tmp.path().join("work/plan");
        assert!(!plan_dir.join("oplog.bson").exists(), "{form}");
        assert!(!plan_dir.join("restore").exists(), "{form}");
        assert!(!plan_dir.join("restore.archive").exists(), "{form}");
        let pj: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&plan_file).unwrap()).unwrap();
        assert_eq!(pj["restore"]["inputs_written"], false, "{form}");
        assert_eq!(pj["slice"]["kept"], false, "{form}");
        assert!(
            pj["slice"]["oplog_file"]
                .as_str()
                .unwrap()
                .ends_with("plan/oplog.bson"),
            "{form}: {}",
            pj["slice"]
        );
        for b in &sets {
            let mongod = Mongod::start(&b.dir.join("mongod"));
            let mut args: Vec<&str> = restore_args.to_vec();
            let out_path = tmp.path().join("out");
            let archive_arg = format!("--archive={}", out_path.display());
            for a in args.iter_mut() {
                if *a == "out" {
                    *a = out_path.to_str().unwrap();
                } else if *a == "--archive=out" {
                    *a = &archive_arg;
                }
            }
            mongod.restore(&b.dir.join("mongorestore"), &args);
            // pitr verify compares every count and every dbHash with the plan.
            let v = verify_json(tmp.path(), &mongod, &plan_file);
            assert_eq!(code(&v), 0, "{form} with {}: {}", b.label, show(&v));
            let vj: serde_json::Value = serde_json::from_slice(&v.stdout).unwrap();
            let hashed = vj["rows"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|r| r["md5"].is_string() && r["md5"] == r["expected_md5"])
                .count();
            assert!(
                hashed >= 10,
                "{form}: only {hashed} collections hashed: {vj}"
            );
            // --json: nothing on stderr. In text, each phase on the server says
            // what it did (and, run longer than PITR_PROGRESS_INTERVAL, how far it is).
            assert_eq!(common::stderr(&v), "", "{form}");
            let t = run_pitr(
                tmp.path(),
                &[
                    "verify",
                    "--uri",
                    &mongod.uri(),
                    "--expect",
                    plan_file.to_str().unwrap(),
                ],
                &[],
            );
            assert_eq!(code(&t), 0, "{}", show(&t));
            let err = common::stderr(&t);
            let documents: u64 = vj["rows"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|r| r["documents"].as_u64())
                .sum();
            assert!(
                err.contains(&format!(
                    "pitr: counting the restored documents: {} documents in ",
                    fmt_count(documents)
                )),
                "{err}"
            );
            assert!(
                err.contains("pitr: hashing the restored collections (dbHash): "),
                "{err}"
            );
            // And the engine's report agrees with the server's dbHash of shop.orders.
            let (h, n) = mongod.hash_and_count("shop", "orders");
            let row = report["namespaces"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["ns"] == "shop.orders")
                .unwrap();
            assert_eq!(
                (
                    row["md5"].as_str().unwrap(),
                    row["documents"].as_u64().unwrap()
                ),
                (h.as_str(), n)
            );
        }
    }
}

#[test]
fn real_mongorestore_renames_with_ns_from_ns_to() {
    let test = "real_mongorestore_renames_with_ns_from_ns_to";
    let tmp = tempfile::tempdir().unwrap();
    let (o, report) = embedded(tmp.path(), Path::new(FIXTURE), "auto", &[]);
    assert_eq!(code(&o), 0, "{}", show(&o));
    let report = report.unwrap();
    let want = report["namespaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["ns"] == "shop.orders")
        .unwrap()["md5"]
        .as_str()
        .unwrap()
        .to_string();
    for b in tool_sets(test) {
        let mongod = Mongod::start(&b.dir.join("mongod"));
        mongod.restore(
            &b.dir.join("mongorestore"),
            &[
                "--nsInclude",
                "shop.orders",
                "--nsFrom",
                "shop.orders",
                "--nsTo",
                "recovered.orders_before_drop",
                tmp.path().join("out").to_str().unwrap(),
            ],
        );
        let (h, n) = mongod.hash_and_count("recovered", "orders_before_drop");
        assert_eq!((h.as_str(), n), (want.as_str(), 113), "{}", b.label);
    }
}

#[test]
fn a_memory_budget_far_below_the_backup_gives_the_same_dump() {
    // The committed backup is ~300 KB; 64 KiB of memory forces the on-disk store.
    let big = tempfile::tempdir().unwrap();
    let (o, r_big) = embedded(
        big.path(),
        Path::new(FIXTURE),
        "auto",
        &["--memory", "512MiB"],
    );
    assert_eq!(code(&o), 0, "{}", show(&o));
    let small = tempfile::tempdir().unwrap();
    let (o, r_small) = embedded(
        small.path(),
        Path::new(FIXTURE),
        "auto",
        &["--memory", "64KiB"],
    );
    assert_eq!(code(&o), 0, "{}", show(&o));
    let (r_big, r_small) = (r_big.unwrap(), r_small.unwrap());
    assert_eq!(r_small["engine_stats"]["spilled_to_disk"], true);
    assert_eq!(r_big["engine_stats"]["spilled_to_disk"], false);
    assert_eq!(r_big["namespaces"], r_small["namespaces"]);
    // Byte for byte the same dump.
    let files = |root: &Path| {
        let mut v = Vec::new();
        for db in std::fs::read_dir(root).unwrap() {
            let db = db.unwrap().path();
            for f in std::fs::read_dir(&db).unwrap() {
                let f = f.unwrap().path();
                v.push((
                    f.strip_prefix(root).unwrap().to_path_buf(),
                    std::fs::read(&f).unwrap(),
                ));
            }
        }
        v.sort();
        v
    };
    assert_eq!(
        files(&big.path().join("out")),
        files(&small.path().join("out"))
    );
    // The on-disk store is gone.
    let left: Vec<_> = std::fs::read_dir(small.path().join("work"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().starts_with(".pitr"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_strict_failure_names_the_entry_and_writes_nothing() {
    // Delete a document the backup holds, before the backup's end... then ask to
    // replay a slice that deletes it again: built from the committed fixture by
    // dropping every document of shop.orders from a copy of the backup.
    let tmp = tempfile::tempdir().unwrap();
    let scenario = tmp.path().join("scenario");
    common::copy_dir(Path::new(FIXTURE), &scenario);
    std::fs::write(scenario.join("backup/shop/customers.bson"), b"").unwrap();
    let (o, report) = embedded(tmp.path(), &scenario, "auto", &[]);
    assert_eq!(code(&o), 2, "{}", show(&o));
    let err = replay_common::stderr(&o);
    assert!(
        err.contains("shop.customers") && err.contains("--skip"),
        "{err}"
    );
    // The error names an exact position; nothing was written to --out.
    assert!(!tmp.path().join("out").exists());
    let _ = report;
}

#[test]
fn ctrl_c_during_a_long_apply_leaves_nothing_behind() {
    // A bigger scenario so the apply takes a while; SIGINT halfway.
    let gen = tempfile::tempdir().unwrap();
    pitr_fixturegen::generate(&pitr_fixturegen::Options {
        out: gen.path().to_path_buf(),
        seed: 5,
        scenario: pitr_fixturegen::Scenario::Bench,
        target_bytes: 40 << 20,
        start: pitr_fixturegen::DEFAULT_START_SECS,
        mix: Default::default(),
    })
    .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let backup = gen.path().join("backup");
    let oplog = gen.path().join("oplog.bson");
    let mut child = replay_common::pitr_cmd(
        tmp.path(),
        &[
            "replay",
            "--backup",
            backup.to_str().unwrap(),
            "--oplog",
            oplog.to_str().unwrap(),
            "--until",
            "end",
            "--workdir",
            "work",
            "--out",
            "out",
            "--memory",
            "64KiB",
        ],
        &[],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    // Wait until the engine's on-disk store exists, then interrupt.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let busy = std::fs::read_dir(tmp.path().join("work"))
            .map(|d| {
                d.flatten()
                    .any(|e| e.file_name().to_string_lossy().starts_with(".pitr-engine-"))
            })
            .unwrap_or(false);
        if busy {
            break;
        }
        assert!(Instant::now() < deadline, "the engine never started");
        if child.try_wait().unwrap().is_some() {
            panic!("pitr finished before it could be interrupted: make the scenario bigger");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!tmp.path().join("out").exists());
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    if tmp.path().join("work").exists() {
        let left: Vec<_> = std::fs::read_dir(tmp.path().join("work"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with('.'))
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }
}

/// What the oplog builds that mongodump shows in other terms, through the real
/// mongorestore: an index built on a time-series collection's buckets (bucket terms
/// in the oplog) is in the engine's dump as `listIndexes` shows it, and the real
/// mongorestore rebuilds it on the time-series collection; a collection whose `_id`
/// index has a collation and holds string `_id`s gets no predicted hash, and verify
/// passes it on its count, saying its content was not checked.
#[test]
fn oplog_built_timeseries_indexes_and_collated_ids_survive_the_real_mongorestore() {
    use bson::{doc, spec::BinarySubtype, Binary, Bson, Timestamp};
    let test = "oplog_built_timeseries_indexes_and_collated_ids_survive_the_real_mongorestore";
    let sets = tool_sets(test);
    let tmp = tempfile::tempdir().unwrap();
    let scenario = tmp.path().join("scenario");
    common::copy_dir(Path::new(FIXTURE), &scenario);
    // After the fixture's last entry (1795224522:1). The buckets collection's UUID
    // is the one its `create` in the fixture logged.
    let buckets_ui = {
        let bytes = std::fs::read(scenario.join("oplog.bson")).unwrap();
        let mut at = &bytes[..];
        let mut ui = None;
        while !at.is_empty() {
            let e = bson::Document::from_reader(&mut at).unwrap();
            if e.get_document("o").and_then(|o| o.get_str("create")) == Ok("system.buckets.cpu") {
                ui = match e.get("ui") {
                    Some(Bson::Binary(b)) => Some(b.clone()),
                    other => panic!("the create has no UUID: {other:?}"),
                };
            }
        }
        ui.expect("the fixture creates metrics.system.buckets.cpu")
    };
    let names_ui = Binary {
        subtype: BinarySubtype::Uuid,
        bytes: vec![0x42; 16],
    };
    let collation = doc! { "locale": "fr", "caseLevel": false, "caseFirst": "off", "strength": 3,
    "numericOrdering": false, "alternate": "non-ignorable", "maxVariable": "punct",
    "normalization": false, "backwards": false, "version": "57.1" };
    let ts = |i: u32| {
        Bson::Timestamp(Timestamp {
            time: 1_795_224_600,
            increment: i,
        })
    };
    let wall = bson::DateTime::from_millis(1_795_224_600_000);
    let entries = vec![
        doc! { "op": "c", "ns": "metrics.$cmd", "ui": buckets_ui.clone(), "o": {
        "createIndexes": "system.buckets.cpu", "v": 2,
        "key": { "meta": 1, "control.max.t": -1, "control.min.t": -1 }, "name": "host_1_t_-1" },
        "ts": ts(1), "t": 26_i64, "v": 2_i64, "wall": wall },
        doc! { "op": "c", "ns": "shop.$cmd", "ui": names_ui.clone(), "o": {
        "create": "names", "collation": collation.clone(),
        "idIndex": { "v": 2, "key": { "_id": 1 }, "name": "_id_", "collation": collation.clone() } },
        "ts": ts(2), "t": 26_i64, "v": 2_i64, "wall": wall },
        doc! { "op": "i", "ns": "shop.names", "ui": names_ui.clone(), "o": { "_id": "Émile", "n": 1 },
        "ts": ts(3), "t": 26_i64, "v": 2_i64, "wall": wall },
        doc! { "op": "i", "ns": "shop.names", "ui": names_ui.clone(), "o": { "_id": "eve", "n": 2 },
        "ts": ts(4), "t": 26_i64, "v": 2_i64, "wall": wall },
        doc! { "op": "i", "ns": "shop.names", "ui": names_ui.clone(), "o": { "_id": "Zoé", "n": 3 },
        "ts": ts(5), "t": 26_i64, "v": 2_i64, "wall": wall },
    ];
    let mut oplog = std::fs::OpenOptions::new()
        .append(true)
        .open(scenario.join("oplog.bson"))
        .unwrap();
    for e in &entries {
        std::io::Write::write_all(&mut oplog, &bson::to_vec(e).unwrap()).unwrap();
    }
    drop(oplog);

    let (o, report) = embedded(tmp.path(), &scenario, "end", &[]);
    assert_eq!(code(&o), 0, "{}", show(&o));
    let report = report.unwrap();
    let names = report["namespaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["ns"] == "shop.names")
        .unwrap();
    assert_eq!(names["documents"], 3, "{names}");
    assert!(names["md5"].is_null(), "{names}");
    assert!(
        names["md5_not_predicted"]
            .as_str()
            .unwrap()
            .starts_with("not predicted"),
        "{names}"
    );
    assert!(
        stdout(&o).contains("not predicted: string _ids"),
        "{}",
        show(&o)
    );
    let meta = std::fs::read_to_string(tmp.path().join("out/metrics/cpu.metadata.json")).unwrap();
    assert!(
        meta.contains(
            r#""key":{"host":{"$numberInt":"1"},"t":{"$numberInt":"-1"}},"name":"host_1_t_-1""#
        ),
        "{meta}"
    );
    let plan_file = tmp.path().join("work/plan/plan.json");
    for b in &sets {
        let mongod = Mongod::start(&b.dir.join("mongod"));
        mongod.restore(
            &b.dir.join("mongorestore"),
            &[tmp.path().join("out").to_str().unwrap()],
        );
        let v = verify_json(tmp.path(), &mongod, &plan_file);
        assert_eq!(code(&v), 0, "{}: {}", b.label, show(&v));
        let vj: serde_json::Value = serde_json::from_slice(&v.stdout).unwrap();
        let row = vj["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["ns"] == "shop.names")
            .unwrap()
            .clone();
        assert_eq!(row["documents"], 3, "{row}");
        assert!(
            row["note"]
                .as_str()
                .unwrap()
                .contains("content not checked (not predicted"),
            "{}: {row}",
            b.label
        );
        // The index is on the restored time-series collection, in its own terms.
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let keys: Vec<bson::Document> = rt.block_on(async {
            let client = mongodb::Client::with_uri_str(mongod.uri()).await.unwrap();
            let reply = client
                .database("metrics")
                .run_command(doc! { "listIndexes": "cpu" })
                .await
                .unwrap();
            reply
                .get_document("cursor")
                .unwrap()
                .get_array("firstBatch")
                .unwrap()
                .iter()
                .map(|d| d.as_document().unwrap().clone())
                .collect()
        });
        assert!(
            keys.iter().any(|k| k.get_str("name") == Ok("host_1_t_-1")
                && k.get_document("key").ok() == Some(&doc! { "host": 1, "t": -1 })),
            "{}: {keys:?}",
            b.label
        );
    }
}

/// `1,234`, as the progress lines write a count.
fn fmt_count(n: u64) -> String {
    indicatif::HumanCount(n).to_string()
}
