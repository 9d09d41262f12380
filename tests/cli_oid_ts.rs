//! `pitr oid decode`, `pitr oid at` and `pitr ts` as a user runs them: the real
//! binary in a temp dir, checking stdout, stderr and the exit code.

use std::process::Command;

use serde_json::Value;

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn pitr(args: &[&str]) -> Run {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = Command::new(env!("CARGO_BIN_EXE_pitr"))
        .args(args)
        .current_dir(dir.path())
        .output()
        .expect("run pitr");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn ok(args: &[&str]) -> String {
    let r = pitr(args);
    assert_eq!(r.code, 0, "{args:?} failed:\n{}", r.stderr);
    assert_eq!(r.stderr, "", "{args:?} wrote to stderr");
    r.stdout
}

fn json(args: &[&str]) -> Value {
    let out = ok(args);
    serde_json::from_str(out.trim_end()).unwrap_or_else(|e| panic!("{args:?}: {e}\n{out}"))
}

/// Bad input: exit 2, nothing on stdout, `error:` naming the value, then a `hint:`.
fn rejected(args: &[&str], named: &str) -> String {
    let r = pitr(args);
    assert_eq!(r.code, 2, "{args:?} should fail:\n{}{}", r.stdout, r.stderr);
    assert_eq!(r.stdout, "", "{args:?} printed partial output");
    assert!(r.stderr.starts_with("error: "), "{args:?}:\n{}", r.stderr);
    assert!(r.stderr.contains("\nhint: "), "{args:?}:\n{}", r.stderr);
    assert!(
        r.stderr.contains(&format!("`{named}`")),
        "{args:?} should name `{named}`:\n{}",
        r.stderr
    );
    r.stderr
}

#[test]
fn oid_decode_docs_example() {
    let out = ok(&["oid", "decode", "47cc67093475061e3d95369d"]);
    assert!(out.starts_with("47cc67093475061e3d95369d\n"), "{out}");
    assert!(out.contains("created        2008-03-03T21:00:57Z  (epoch seconds 1204578057)"));
    assert!(out.contains("current spec   random 3475061e3d  counter 9778845 (0x95369d)"));
    assert!(out.contains("historic       machine 347506  pid 7741 (0x1e3d)"));
    assert!(out.contains("client's clock") && out.contains("--oplogLimit"));
}

#[test]
fn oid_decode_accepts_what_the_shell_prints() {
    for arg in [
        "ObjectId(\"47cc67093475061e3d95369d\")",
        "ObjectId('47CC67093475061E3D95369D')",
        " 47cc67093475061e3d95369d ",
    ] {
        let out = ok(&["oid", "decode", arg]);
        assert!(out.contains("2008-03-03T21:00:57Z"), "{arg}: {out}");
    }
}

#[test]
fn oid_decode_reads_time_unsigned_after_2038() {
    let out = ok(&[
        "oid",
        "decode",
        "ffffffffffffffffffffffff",
        "800000000000000000000000",
    ]);
    assert!(out.contains("2106-02-07T06:28:15Z  (epoch seconds 4294967295)"));
    assert!(out.contains("2038-01-19T03:14:08Z  (epoch seconds 2147483648)"));
}

#[test]
fn oid_decode_json_is_one_object_per_line() {
    let out = ok(&[
        "oid",
        "decode",
        "--json",
        "47cc67093475061e3d95369d",
        "ffffffff0000000000000001",
    ]);
    let lines: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    assert_eq!(lines.len(), 2);
    let d = &lines[0];
    assert_eq!(d["object_id"], "47cc67093475061e3d95369d");
    assert_eq!(d["epoch_seconds"], 1204578057);
    assert_eq!(d["utc"], "2008-03-03T21:00:57Z");
    assert_eq!(d["current"]["random"], "3475061e3d");
    assert_eq!(d["current"]["counter"], 0x95369d);
    assert_eq!(d["historic"]["machine_id"], "347506");
    assert_eq!(d["historic"]["pid_hex"], "1e3d");
    assert_eq!(d["historic"]["pid"], 0x1e3d);
    assert_eq!(d["historic"]["counter"], 0x95369d);
    assert_eq!(lines[1]["utc"], "2106-02-07T06:28:15Z");
    assert_eq!(lines[1]["current"]["counter"], 1);
}

#[test]
fn oid_decode_fails_on_first_bad_id_without_partial_output() {
    let err = rejected(
        &[
            "oid",
            "decode",
            "47cc67093475061e3d95369d",
            "47cc6709",
            "also-bad",
        ],
        "47cc6709",
    );
    assert!(
        err.contains("8 characters") && err.contains("24 hex digits"),
        "{err}"
    );
    assert!(!err.contains("also-bad"), "{err}");
    let err = rejected(
        &["oid", "decode", "47cc67093475061e3d95369g"],
        "47cc67093475061e3d95369g",
    );
    assert!(
        err.contains("`g`") && err.contains("24 characters"),
        "{err}"
    );
}

#[test]
fn oid_at_prints_boundaries_and_filters() {
    let out = ok(&["oid", "at", "2008-03-03T22:00:57+01:00"]);
    assert!(out.contains("from 2008-03-03T22:00:57+01:00"), "{out}");
    assert!(out.contains("lowest    47cc67090000000000000000"));
    assert!(out.contains("highest   47cc6709ffffffffffffffff"));
    assert!(out.contains("{_id: {$gte: ObjectId(\"47cc67090000000000000000\")}}"));
    assert!(out.contains("{_id: {$lte: ObjectId(\"47cc6709ffffffffffffffff\")}}"));
}

#[test]
fn oid_at_json() {
    let v = json(&["oid", "at", "--json", "1204578057:7"]);
    assert_eq!(v["input"], "1204578057:7");
    assert_eq!(v["epoch_seconds"], 1204578057);
    assert_eq!(v["utc"], "2008-03-03T21:00:57Z");
    assert_eq!(v["lowest"], "47cc67090000000000000000");
    assert_eq!(v["highest"], "47cc6709ffffffffffffffff");
    assert_eq!(
        v["filter_gte"],
        "{_id: {$gte: ObjectId(\"47cc67090000000000000000\")}}"
    );
    assert_eq!(
        v["filter_lte"],
        "{_id: {$lte: ObjectId(\"47cc6709ffffffffffffffff\")}}"
    );
    assert_eq!(
        v["filter_within"],
        "{_id: {$gte: ObjectId(\"47cc67090000000000000000\"), $lte: ObjectId(\"47cc6709ffffffffffffffff\")}}"
    );
}

#[test]
fn oid_at_rejects_bad_time() {
    rejected(&["oid", "at", "5:1:2"], "5:1:2");
}

#[test]
fn ts_json_for_each_form() {
    // (value, form, ts, utc, exact_position, subsec_dropped)
    let table = [
        (
            "1700000000:3",
            "oplog_ts",
            "1700000000:3",
            "2023-11-14T22:13:20Z",
            true,
            false,
        ),
        (
            "1700000000:",
            "oplog_ts",
            "1700000000:0",
            "2023-11-14T22:13:20Z",
            false,
            false,
        ),
        (
            "1700000000",
            "epoch_seconds",
            "1700000000:0",
            "2023-11-14T22:13:20Z",
            false,
            false,
        ),
        (
            "2026-11-21T03:12:00+01:00",
            "rfc3339",
            "1795227120:0",
            "2026-11-21T02:12:00Z",
            false,
            false,
        ),
        (
            "2026-11-21T03:12:00.250Z",
            "rfc3339",
            "1795230720:0",
            "2026-11-21T03:12:00Z",
            false,
            true,
        ),
        (
            "oid:47cc67093475061e3d95369d",
            "object_id",
            "1204578057:0",
            "2008-03-03T21:00:57Z",
            false,
            false,
        ),
    ];
    for (value, form, ts, utc, exact, dropped) in table {
        let v = json(&["ts", "--json", value]);
        assert_eq!(v["input"], value);
        assert_eq!(v["form"], form, "{value}");
        assert_eq!(v["ts"], ts, "{value}");
        assert_eq!(v["oplog_limit"], ts, "{value}");
        assert_eq!(v["utc"], utc, "{value}");
        assert_eq!(v["exact_position"], exact, "{value}");
        assert_eq!(v["subsec_dropped"], dropped, "{value}");
        let (t, i) = ts.split_once(':').expect("t:i");
        assert_eq!(v["t"].to_string(), t);
        assert_eq!(v["i"].to_string(), i);
        assert_eq!(v["epoch_seconds"], v["t"]);
        assert!(v["description"].is_string());
        let lowest = v["lowest_object_id"].as_str().expect("hex");
        assert_eq!(lowest.len(), 24);
        assert!(lowest.ends_with("0000000000000000"));
    }
}

#[test]
fn ts_human_shows_every_form_and_the_exclusive_limit() {
    let out = ok(&["ts", "1700000000:3"]);
    assert!(out.contains("t:i            1700000000:3"), "{out}");
    assert!(out.contains("epoch seconds  1700000000"));
    assert!(out.contains("UTC            2023-11-14T22:13:20Z"));
    assert!(out.contains("ObjectId       6553f1000000000000000000"));
    assert!(out.contains("--oplogLimit   1700000000:3  (exclusive"));

    let out = ok(&["ts", "2026-11-21T03:12:00.250+01:00"]);
    assert!(out.contains("UTC            2026-11-21T02:12:00Z"), "{out}");
    assert!(out.contains("fraction of a second was dropped"));
    assert!(out.contains("use --oplogLimit 1795227121:0"));
}

#[test]
fn ts_rejects_bad_values_with_error_and_hint() {
    for value in [
        "5:1:2",
        "4294967296",
        "4294967296:0",
        "5:4294967296",
        "-1",
        "abc",
        "0x10",
        "2026-11-21T03:12:00",
        "1969-12-31T23:59:59Z",
        "2106-02-07T06:28:16Z",
        "oid:47cc",
    ] {
        rejected(&["ts", value], value);
    }
    let err = rejected(&["ts", "2026-11-21T03:12:00"], "2026-11-21T03:12:00");
    assert!(err.contains("add `Z`"), "{err}");
    let err = rejected(&["ts", "5:1:2"], "5:1:2");
    assert!(err.contains("more than one `:`"), "{err}");
    assert!(err.contains("hint: accepted forms:"), "{err}");
}

#[test]
fn ts_rejects_empty_value() {
    let r = pitr(&["ts", ""]);
    assert_eq!(r.code, 2);
    assert_eq!(r.stdout, "");
    assert!(
        r.stderr.starts_with("error: empty time value"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("\nhint: "));
}

#[test]
fn missing_arguments_are_usage_errors() {
    for args in [&["ts"][..], &["oid", "decode"], &["oid", "at"]] {
        let r = pitr(args);
        assert_eq!(r.code, 2, "{args:?}");
        assert!(r.stderr.starts_with("error:"), "{args:?}: {}", r.stderr);
    }
}

#[test]
fn help_has_examples() {
    for args in [
        &["oid", "decode", "--help"][..],
        &["oid", "at", "--help"],
        &["ts", "--help"],
    ] {
        let out = ok(args);
        assert!(out.contains("Examples:"), "{args:?}: {out}");
    }
    let out = ok(&["oid", "--help"]);
    assert!(out.contains("decode") && out.contains("at"));
}
