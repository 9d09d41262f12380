//! Values as people paste them at 3 a.m. (issue 17 item 16): timestamps copied from
//! mongosh or the legacy shell, a millisecond epoch, `pitr status` without
//! arguments, an extended-JSON "oplog". Each runs the real binary.

mod common;

use common::{code, pitr, stderr, stdout};
use serde_json::Value;

const ORACLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/incident/oplog.bson");
const BACKUP: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/incident/backup");

/// Was: "the seconds part `Timestamp(1795223165, 1)` is not a decimal number", exit 2.
#[test]
fn shell_timestamps_are_time_values_everywhere() {
    for v in [
        "Timestamp(1795223165, 1)",
        "Timestamp( 1795223165 , 1 )",
        "Timestamp({ t: 1795223165, i: 1 })",
        "  Timestamp({t:1795223165,i:1}) ",
        r#"{"$timestamp":{"t":1795223165,"i":1}}"#,
    ] {
        let o = pitr(&["ts", v, "--json"]);
        assert_eq!(code(&o), 0, "{v}: {}", stderr(&o));
        let j: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(j["ts"], "1795223165:1", "{v}");
        assert_eq!(j["exact_position"], true, "{v}");
        assert_eq!(j["input"], v);
    }

    // find-drop --since/--until.
    let o = pitr(&[
        "find-drop",
        ORACLE,
        "--since",
        "Timestamp({ t: 1795223100, i: 0 })",
        "--until",
        "Timestamp(1795223300, 1)",
        "--json",
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("\"1795223165:1\""), "{out}");
    assert!(
        !out.contains("\"1795223380:2\""),
        "--until was applied: {out}"
    );

    // plan --until (the drop's own position) and --skip.
    let tmp = tempfile::tempdir().unwrap();
    let o = pitr(&[
        "plan",
        "--backup",
        BACKUP,
        "--oplog",
        ORACLE,
        "--until",
        "Timestamp({ t: 1795223380, i: 2 })",
        "--skip",
        "Timestamp(1795223165, 1)",
        "--out",
        tmp.path().join("p").to_str().unwrap(),
        "--json",
    ]);
    assert!(code(&o) < 2, "{}", stderr(&o));
    let j: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["until"]["limit"], "1795223380:2", "{j}");
    assert!(
        j.to_string().contains("1795223165:1"),
        "the skip is in the plan"
    );
}

/// A 13-digit epoch is milliseconds: refused (never year 58000 read as seconds),
/// with the seconds value in the message itself, which is all clap shows for a flag.
#[test]
fn a_millisecond_epoch_is_refused_with_the_seconds_it_means() {
    let o = pitr(&["ts", "1795223165000"]);
    assert_eq!(code(&o), 2);
    assert_eq!(stdout(&o), "");
    let err = stderr(&o);
    assert!(
        err.starts_with("error: `1795223165000` is not a time value: it has 13 digits, like epoch milliseconds; did you mean `1795223165` (2026-11-21T01:06:05Z)?"),
        "{err}"
    );
    assert!(err.contains("\nhint: "), "{err}");

    let o = pitr(&["find-drop", ORACLE, "--until", "1795223165000"]);
    assert_eq!(code(&o), 2);
    assert!(
        stderr(&o).contains("did you mean `1795223165`"),
        "{}",
        stderr(&o)
    );
}

/// Was: "the following required arguments were not provided: --uri <URI>", with no
/// word of --archive.
#[test]
fn status_without_arguments_mentions_archive() {
    let o = common::pitr_in(std::path::Path::new("."), &["status"]);
    assert_eq!(code(&o), 2);
    let err = stderr(&o);
    assert!(err.contains("--uri") && err.contains("--archive"), "{err}");
}

/// Was: "convert extended JSON with `mongoimport`/`bsondump`'s inverse": bsondump
/// has no inverse.
#[test]
fn a_json_oplog_gets_a_hint_that_can_be_followed() {
    let tmp = tempfile::tempdir().unwrap();
    let f = tmp.path().join("oplog.json");
    std::fs::write(
        &f,
        "{\"ts\": {\"$timestamp\": {\"t\": 1795223165, \"i\": 1}}, \"op\": \"n\", \"ns\": \"\", \"o\": {}}\n",
    )
    .unwrap();
    let o = pitr(&["oplog", "cat", f.to_str().unwrap()]);
    assert_eq!(code(&o), 2);
    let err = stderr(&o);
    assert!(err.contains("JSON"), "{err}");
    let hint = err.split("\nhint: ").nth(1).expect("a hint");
    assert!(!hint.contains("inverse"), "{hint}");
    assert!(
        hint.contains("pitr dump-oplog") && hint.contains("mongodump -d local -c oplog.rs"),
        "{hint}"
    );
}
