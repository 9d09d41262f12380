//! `pitr oplog cat --ns/--since/--until/--around` (issue 17 item 17): hints elsewhere
//! send people to `oplog cat` to look at an entry, and it could only print a whole
//! file from the start. Runs the real binary on the committed incident fixture.

mod common;

use common::{code, pitr, stderr, stdout};

const ORACLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/incident/oplog.bson");

fn lines(args: &[&str]) -> Vec<String> {
    let o = pitr(args);
    assert_eq!(code(&o), 0, "{args:?}: {}", stderr(&o));
    stdout(&o).lines().map(String::from).collect()
}

fn ts_of(line: &str) -> &str {
    line.trim_start_matches(['>', ' '])
        .split(' ')
        .next()
        .unwrap()
}

#[test]
fn ns_selects_entries_commands_and_transactions_acting_on_it() {
    let all = lines(&["oplog", "cat", ORACLE]);
    let got = lines(&["oplog", "cat", ORACLE, "--ns", "shop.payments"]);
    assert!(!got.is_empty() && got.len() < all.len());
    for l in &got {
        assert!(
            l.contains(" shop.payments ") || l.contains(" admin.$cmd ") && l.contains("applyOps"),
            "{l}"
        );
    }
    // The deletes of the incident's committed transaction come with their applyOps.
    assert!(got
        .iter()
        .any(|l| l.starts_with("1795224005:2 ") && l.contains("applyOps")));

    // Repeatable; a drop on `shop.$cmd` counts for the collection it drops; a glob
    // selects a whole database, including its dropDatabase.
    let got = lines(&[
        "oplog",
        "cat",
        ORACLE,
        "--ns",
        "shop.orders",
        "--ns",
        "analytics.*",
    ]);
    assert!(got
        .iter()
        .any(|l| l.starts_with("1795223165:1 ") && l.contains("drop orders")));
    assert!(got
        .iter()
        .any(|l| l.starts_with("1795223380:5 ") && l.contains("dropDatabase")));
    assert!(!got.iter().any(|l| l.contains(" shop.clicks ")));
}

#[test]
fn since_is_inclusive_and_until_exclusive_in_every_time_form() {
    let got = lines(&[
        "oplog",
        "cat",
        ORACLE,
        "--since",
        "1795223165:1",
        "--until",
        "Timestamp({ t: 1795223167, i: 2 })",
    ]);
    let ts: Vec<&str> = got.iter().map(|l| ts_of(l)).collect();
    assert_eq!(ts, vec!["1795223165:1", "1795223166:1", "1795223167:1"]);
    // RFC 3339 and epoch seconds: whole seconds.
    let got = lines(&[
        "oplog",
        "cat",
        ORACLE,
        "--since",
        "2026-11-21T01:06:05Z",
        "--until",
        "1795223167",
    ]);
    let ts: Vec<&str> = got.iter().map(|l| ts_of(l)).collect();
    assert_eq!(ts, vec!["1795223165:1", "1795223166:1"]);
    // --help says which bound is which.
    let help = stdout(&pitr(&["oplog", "cat", "--help"]));
    assert!(
        help.contains("(inclusive)") && help.contains("(exclusive"),
        "{help}"
    );
}

#[test]
fn around_shows_n_entries_before_and_after_and_marks_the_one() {
    let got = lines(&[
        "oplog",
        "cat",
        ORACLE,
        "--around",
        "1795223165:1",
        "-n",
        "3",
    ]);
    assert_eq!(got.len(), 7, "{got:#?}");
    assert!(got[3].starts_with("> 1795223165:1 "), "{}", got[3]);
    for (k, l) in got.iter().enumerate().filter(|(k, _)| *k != 3) {
        assert!(l.starts_with("  "), "line {k}: {l}");
    }
    let all = lines(&["oplog", "cat", ORACLE]);
    let at = all
        .iter()
        .position(|l| l.starts_with("1795223165:1 "))
        .unwrap();
    let want: Vec<&str> = all[at - 3..=at + 3].iter().map(|l| ts_of(l)).collect();
    assert_eq!(got.iter().map(|l| ts_of(l)).collect::<Vec<_>>(), want);

    // A second (not a position): the first entry at or after it, said on stderr.
    let o = pitr(&["oplog", "cat", ORACLE, "--around", "1795223164", "-n", "1"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let out = stdout(&o);
    assert_eq!(out.lines().count(), 3, "{out}");
    assert!(
        out.lines().nth(1).unwrap().starts_with("> 1795223165:1 "),
        "{out}"
    );
    assert!(
        stderr(&o).contains("1795223165:1 is the first entry at or after `--around 1795223164`"),
        "{}",
        stderr(&o)
    );
    // With --ns, the context is the selected entries.
    let got = lines(&[
        "oplog",
        "cat",
        ORACLE,
        "--around",
        "1795223165:1",
        "-n",
        "1",
        "--ns",
        "shop.orders",
    ]);
    assert_eq!(got.len(), 3, "{got:#?}");
    assert!(got[0].contains(" i  shop.orders "), "{}", got[0]);
    assert!(got[2].contains("create orders"), "{}", got[2]);
}

#[test]
fn a_selection_matching_nothing_names_the_value_and_what_is_there() {
    let o = pitr(&["oplog", "cat", ORACLE, "--ns", "shop.order"]);
    assert_eq!(code(&o), 1, "{}", stdout(&o));
    assert_eq!(stdout(&o), "");
    let err = stderr(&o);
    assert!(
        err.starts_with("error: `--ns shop.order` matches no entry of `"),
        "{err}"
    );
    assert!(
        err.contains("\nhint: closest namespaces in the oplog: `shop.orders`"),
        "{err}"
    );

    let o = pitr(&["oplog", "cat", ORACLE, "--since", "2026-11-22T00:00:00Z"]);
    assert_eq!(code(&o), 1);
    let err = stderr(&o);
    assert!(
        err.contains("is at or after `--since 2026-11-22T00:00:00Z`")
            && err.contains("run from 1795222803:1")
            && err.contains("to 1795224522:1"),
        "{err}"
    );

    let o = pitr(&["oplog", "cat", ORACLE, "--around", "1795299999"]);
    assert_eq!(code(&o), 1);
    assert!(
        stderr(&o).contains("`--around 1795299999`"),
        "{}",
        stderr(&o)
    );
}

/// "read the 1 complete entries": the count and its noun agree.
#[test]
fn one_complete_entry_is_singular() {
    let tmp = tempfile::tempdir().unwrap();
    let all = std::fs::read(ORACLE).unwrap();
    let first = i32::from_le_bytes(all[..4].try_into().unwrap()) as usize;
    let f = tmp.path().join("cut.bson");
    std::fs::write(&f, &all[..first + 10]).unwrap();
    let o = pitr(&["oplog", "cat", "--allow-truncated", f.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("(entry 2 declares") && err.contains("1 complete entry before it"),
        "{err}"
    );
    assert!(!err.contains("1 complete entries"), "{err}");
}
