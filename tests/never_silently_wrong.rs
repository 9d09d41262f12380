//! Issue "never silently wrong": paths where pitr used to give a confident answer
//! that was wrong, or stayed silent where a person needs it to shout. Each test
//! runs the real binary on the bundled incident (or on real peer data) as a tired
//! on-call engineer would, and names the behaviour it pins.

mod common;

use std::fs;
use std::path::{Path, PathBuf};

use common::*;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/incident")
}

fn backup() -> String {
    fixture().join("backup").display().to_string()
}

fn oplog() -> String {
    fixture().join("oplog.bson").display().to_string()
}

fn show(o: &std::process::Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        stdout(o),
        stderr(o)
    )
}

/// Pinned: `replay --until 01:10` replays the drop of `shop.orders` (01:06) and the
/// dropDatabase of `analytics` (01:09) and used to print PASSED with exit 0, the only
/// sign a count of 4 in a table.
#[test]
fn a_restore_past_the_incident_says_so_before_applying_and_exits_1() {
    let tmp = tempfile::tempdir().unwrap();
    let (b, op) = (backup(), oplog());
    let run = |extra: &[&str]| {
        let mut a = vec![
            "replay",
            "--backup",
            &b,
            "--oplog",
            &op,
            "--until",
            "2026-11-21T01:10:00Z",
        ];
        a.extend_from_slice(extra);
        pitr_in(tmp.path(), &a)
    };
    let o = run(&["--out", "late"]);
    assert_eq!(code(&o), 1, "{}", show(&o));
    let (so, se) = (stdout(&o), stderr(&o));
    assert!(!so.contains("PASSED"), "{}", show(&o));
    assert!(so.contains("INCIDENT REPLAYED"), "{}", show(&o));
    assert!(
        so.contains(
            "drop of shop.orders at 1795223165:1; dropDatabase of analytics at 1795223380:2"
        ),
        "{}",
        show(&o)
    );
    // Before anything is applied: what is replayed, what is left out, the way back.
    assert!(se.contains("REPLAYS 2 incidents"), "{}", show(&o));
    assert!(
        se.contains("to stop before it: --until 1795223165:1"),
        "{}",
        show(&o)
    );
    assert!(
        se.contains("--until 1795223400:1 --skip 1795223165:1"),
        "{}",
        show(&o)
    );
    assert!(se.contains("LEAVES OUT"), "{}", show(&o));
    let stake_at = se.find("At stake").unwrap();
    assert!(
        se.find("NAMESPACE").unwrap() > stake_at,
        "the stake comes first: {}",
        show(&o)
    );
    // The dump is still complete: the verdict is about what it holds.
    assert!(tmp.path().join("late").is_dir());
    let report: serde_json::Value = serde_json::from_str(
        &fs::read_to_string(
            fs::read_dir(tmp.path())
                .unwrap()
                .map(|e| e.unwrap().path())
                .find(|p| {
                    p.file_name()
                        .unwrap()
                        .to_string_lossy()
                        .starts_with("pitr-replay-")
                })
                .unwrap()
                .join("report.json"),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(report["result"], "incident_replayed");
    assert_eq!(report["stake"]["incidents"].as_array().unwrap().len(), 2);
    assert!(report["stake"]["lost_operations"].as_u64().unwrap() > 0);

    // Deliberately: exit 0, and the summary says it was on purpose.
    let o = run(&["--out", "late2", "--accept-incidents"]);
    assert_eq!(code(&o), 0, "{}", show(&o));
    assert!(
        stdout(&o).contains("on purpose (--accept-incidents)"),
        "{}",
        show(&o)
    );
    assert!(stdout(&o).contains("RESTORED AND HASHED"), "{}", show(&o));

    // The dry run exits with the code the real run would.
    let o = run(&["--dry-run"]);
    assert_eq!(code(&o), 1, "{}", show(&o));
    assert!(stdout(&o).contains("At stake"), "{}", show(&o));

    // Stopping before the first incident replays none of them.
    let o = pitr_in(
        tmp.path(),
        &[
            "replay",
            "--backup",
            &backup(),
            "--oplog",
            &oplog(),
            "--until",
            "auto",
            "--out",
            "ok",
        ],
    );
    assert_eq!(code(&o), 0, "{}", show(&o));
    assert!(
        stderr(&o).contains("replays  no critical or high incident"),
        "{}",
        show(&o)
    );
}

/// Pinned: a 2020 oplog beside a 2026 backup applied nothing and printed PASSED.
#[test]
fn an_oplog_that_cannot_belong_to_the_backup_is_refused_naming_both_ranges() {
    let Some(peer) = peer_dir("an_oplog_that_cannot_belong_to_the_backup_is_refused") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let foreign = peer.join("mongorestore/testdata/commit_indexes_build/oplog.bson");
    let o = pitr_in(
        tmp.path(),
        &[
            "replay",
            "--backup",
            &backup(),
            "--oplog",
            foreign.to_str().unwrap(),
            "--until",
            "end",
            "--out",
            "x",
        ],
    );
    assert_eq!(code(&o), 2, "{}", show(&o));
    let se = stderr(&o);
    assert!(se.contains("before the backup's end 1795222807:3"), "{se}");
    assert!(
        se.contains("1588114149:1 .. 1588114270:1") && se.contains("1795222800:1 .. 1795222807:3"),
        "both ranges: {se}"
    );
    assert!(se.contains("hint:"), "{se}");
    assert!(!tmp.path().join("x").exists());
}

/// Pinned: an oplog that covers the backup's end but holds other entries there (another
/// replica set, or a rollback of what the backup captured) was only a warning.
#[test]
fn an_oplog_of_another_history_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let bytes = fs::read(oplog()).unwrap();
    let mut out = Vec::new();
    let mut changed = 0;
    let mut rest = &bytes[..];
    while !rest.is_empty() {
        let len = u32::from_le_bytes(rest[..4].try_into().unwrap()) as usize;
        let mut d = bson::Document::from_reader(&rest[..len]).unwrap();
        rest = &rest[len..];
        let ts = d.get_timestamp("ts").unwrap();
        if (ts.time, ts.increment) == (1795222807, 3) {
            // Another term at the backup's end: another history.
            d.insert("t", 99i64);
            changed += 1;
        }
        out.extend(bson::to_vec(&d).unwrap());
    }
    assert_eq!(
        changed, 1,
        "the fixture's oplog holds the backup's last entry"
    );
    let other = tmp.path().join("other.bson");
    fs::write(&other, out).unwrap();
    let o = pitr_in(
        tmp.path(),
        &[
            "plan",
            "--backup",
            &backup(),
            "--oplog",
            other.to_str().unwrap(),
            "--until",
            "auto",
        ],
    );
    assert_eq!(code(&o), 2, "{}", show(&o));
    let se = stderr(&o);
    assert!(se.contains("are not the same history"), "{se}");
    assert!(se.contains("another entry at 1795222807:3"), "{se}");
    assert!(se.contains("rolled back"), "{se}");
}

/// Pinned: "restore it with: mongorestore restored" rolled every namespace back; an
/// embedded run said PASSED although no server verified anything.
#[test]
fn the_handover_restores_what_the_incident_touched() {
    let tmp = tempfile::tempdir().unwrap();
    let o = pitr_in(
        tmp.path(),
        &[
            "replay",
            "--backup",
            &backup(),
            "--oplog",
            &oplog(),
            "--until",
            "auto",
            "--out",
            "restored",
        ],
    );
    assert_eq!(code(&o), 0, "{}", show(&o));
    let so = stdout(&o);
    assert!(!so.contains("PASSED"), "{so}");
    assert!(so.contains("RESTORED AND HASHED"), "{so}");
    let dir = tmp.path().join("restored").display().to_string();
    assert!(
        so.contains(&format!("mongorestore --nsInclude=shop.orders {dir}\n")),
        "{so}"
    );
    assert!(
        so.contains(&format!(
            "mongorestore --nsInclude=shop.orders --nsFrom=shop.orders --nsTo=shop.orders_restored {dir}\n"
        )),
        "{so}"
    );

    // With --ns, the table lists only what --out holds.
    let o = pitr_in(
        tmp.path(),
        &[
            "replay",
            "--backup",
            &backup(),
            "--oplog",
            &oplog(),
            "--until",
            "auto",
            "--ns",
            "shop.orders",
            "--out",
            "only",
        ],
    );
    assert_eq!(code(&o), 0, "{}", show(&o));
    let so = stdout(&o);
    assert!(so.contains("\nshop.orders "), "{so}");
    assert!(
        !so.contains("analytics.") && !so.contains("shop.payments"),
        "{so}"
    );
}

/// Pinned: `find-drop --ns shop.ordrs` said nothing destructive was found, and
/// `plan --ns shop.ordrs` wrote a plan that replays nothing.
#[test]
fn a_filter_that_matches_nothing_is_an_error_naming_the_closest() {
    let o = pitr(&["find-drop", &oplog(), "--ns", "shop.ordrs"]);
    assert_eq!(code(&o), 2, "{}", show(&o));
    assert!(
        stderr(&o).contains("--ns `shop.ordrs` matches no namespace")
            && stderr(&o).contains("the closest: `shop.orders`"),
        "{}",
        show(&o)
    );
    // A namespace that exists but saw nothing destructive is "nothing found" (1).
    let o = pitr(&["find-drop", &oplog(), "--ns", "shop.clicks"]);
    assert_eq!(code(&o), 1, "{}", show(&o));
    // A collection of a dropped database matches through the dropDatabase.
    let o = pitr(&["find-drop", &oplog(), "--ns", "analytics.pageviews"]);
    assert_eq!(code(&o), 0, "{}", show(&o));
    let o = pitr(&["find-drop", &oplog(), "--since", "2026-12-01T00:00:00Z"]);
    assert_eq!(code(&o), 2, "{}", show(&o));
    assert!(
        stderr(&o).contains("is after the last entry") && stderr(&o).contains("1795224522:1"),
        "{}",
        show(&o)
    );
    let o = pitr(&["find-drop", &oplog(), "--until", "2026-11-01T00:00:00Z"]);
    assert_eq!(code(&o), 2, "{}", show(&o));

    let tmp = tempfile::tempdir().unwrap();
    let o = pitr_in(
        tmp.path(),
        &[
            "plan",
            "--backup",
            &backup(),
            "--oplog",
            &oplog(),
            "--until",
            "end",
            "--ns",
            "shop.ordrs",
        ],
    );
    assert_eq!(code(&o), 2, "{}", show(&o));
    assert!(
        stderr(&o).contains("the closest: `shop.orders`"),
        "{}",
        show(&o)
    );
    assert_eq!(
        fs::read_dir(tmp.path()).unwrap().count(),
        0,
        "nothing written"
    );
}

/// Pinned: find-drop's "by hand" hint said to put the replica set's oplog in place of
/// the backup's oplog.bson, which drops the writes made during the dump.
/// Pinned: `find-drop` over an empty file (a dump that wrote nothing, the wrong
/// path) said "No destructive operations found in 0 entries" and nothing else: read
/// as "nothing happened". Now a note (a warning with `--json`) names the source that
/// held no entry, alone among several; `plan --until auto` says the same in its hint.
/// Likewise the backup itself given to find-drop: its own oplog covers only the
/// dump's minutes, and a note says so.
#[test]
fn an_empty_oplog_is_named_not_read_as_nothing_happened() {
    let tmp = tempfile::tempdir().unwrap();
    let empty = tmp.path().join("oplog.bson");
    fs::write(&empty, b"").unwrap();
    let e = empty.display().to_string();
    let note = format!("`{e}` holds no oplog entries: nothing was scanned there");

    let o = pitr(&["find-drop", &e]);
    assert_eq!(code(&o), 1, "{}", show(&o));
    assert!(
        stdout(&o).contains(&format!("note: {note}")),
        "{}",
        show(&o)
    );

    let o = pitr(&["find-drop", "--json", &e]);
    assert_eq!(code(&o), 1, "{}", show(&o));
    assert_eq!(stdout(&o).trim(), "[]");
    assert!(
        stderr(&o).contains(&format!("warning: {note}")),
        "{}",
        show(&o)
    );

    // Beside a real oplog: its findings as before, the empty one named, the other not.
    let op = oplog();
    let o = pitr(&["find-drop", &op, &e, "--kind", "drop"]);
    assert_eq!(code(&o), 0, "{}", show(&o));
    let out = stdout(&o);
    assert!(out.contains("shop.orders") && out.contains(&note), "{out}");
    assert!(!out.contains(&format!("`{op}` holds no")), "{out}");
    // A real oplog alone gets no such note.
    assert!(!stdout(&pitr(&["find-drop", &op])).contains("holds no oplog entries"));

    // The backup itself given to find-drop: "nothing found" in its own oplog says
    // nothing of what came after it, and the note says so.
    let o = pitr(&["find-drop", &backup()]);
    assert_eq!(code(&o), 1, "{}", show(&o));
    assert!(
        stdout(&o).contains(
            "is the oplog of a `mongodump --oplog` backup: its 20 entries are only what was written while the dump ran"
        ),
        "{}",
        show(&o)
    );
    assert!(!stdout(&pitr(&["find-drop", &op])).contains("mongodump --oplog` backup"));
    // Given with the later oplog, the backup's is where the timeline starts.
    let o = pitr(&["find-drop", &backup(), &op]);
    assert!(
        !stdout(&o).contains("mongodump --oplog` backup"),
        "{}",
        show(&o)
    );

    let o = pitr_in(
        tmp.path(),
        &[
            "plan",
            "--backup",
            &backup(),
            "--oplog",
            &e,
            "--until",
            "auto",
        ],
    );
    assert_eq!(code(&o), 2, "{}", show(&o));
    assert!(
        stderr(&o).contains(&format!("hint: `{e}` holds no entries at all")),
        "{}",
        show(&o)
    );
}

/// Pinned: the backup itself (or its `oplog.bson`) given as --oplog, an easy slip at
/// 3 a.m. `--until auto` said only "no critical or high-severity destructive
/// operation ... in 20 entries" with the hint to pass another --until; `--until end`
/// restored the backup as it is without a word. Both now say that the oplog is the
/// backup's own and what to give instead; the real oplog gets no such word.
#[test]
fn the_backups_own_oplog_given_as_the_oplog_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let b = backup();
    let own = fixture().join("backup/oplog.bson").display().to_string();
    let said = format!("`{own}` holds exactly the backup's own oplog");
    // `pitr CMD --backup B --oplog OPLOG --until UNTIL --out OUT [--json]`.
    let run = |cmd: &str, oplog: &str, until: &str, out: &str, json: bool| {
        let mut args = vec![
            cmd, "--backup", &b, "--oplog", oplog, "--until", until, "--out", out,
        ];
        if json {
            args.push("--json");
        }
        pitr_in(tmp.path(), &args)
    };

    let o = run("replay", &b, "auto", "a", false);
    assert_eq!(code(&o), 2, "{}", show(&o));
    assert!(
        stderr(&o).contains(&format!("hint: {said}")),
        "{}",
        show(&o)
    );

    let o = run("replay", &own, "end", "e", false);
    assert_eq!(code(&o), 0, "{}", show(&o));
    assert!(
        stdout(&o).contains(&format!("warning: {said}")),
        "{}",
        show(&o)
    );

    let o = run("plan", &own, "end", "p", true);
    assert_eq!(code(&o), 0, "{}", show(&o));
    let plan: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let codes: Vec<&str> = plan["lint"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["code"].as_str().unwrap())
        .collect();
    assert!(codes.contains(&"oplog-is-the-backups-own"), "{codes:?}");

    let o = run("plan", &oplog(), "auto", "q", false);
    assert_eq!(code(&o), 0, "{}", show(&o));
    assert!(
        !stdout(&o).contains("oplog-is-the-backups-own"),
        "{}",
        show(&o)
    );
}

#[test]
fn the_by_hand_hint_keeps_the_backups_own_entries() {
    let o = pitr(&["find-drop", &oplog()]);
    assert_eq!(code(&o), 0, "{}", show(&o));
    let so = stdout(&o);
    assert!(!so.contains("as oplog.bson"), "{so}");
    assert!(
        so.contains("pitr plan --backup <BACKUP_DIR>")
            && so.contains("mongorestore --oplogReplay --oplogLimit 1795223165:1 plan/restore"),
        "{so}"
    );
}

/// Pinned: skipping the drop of `shop.orders`, which the application then re-created,
/// failed at the insert 1795223236:1 as "different histories". The server refuses
/// the `create` at 1795223208:1; pitr stops there and prints the two restores that
/// work, which are run here as printed.
#[test]
fn a_skipped_drop_then_recreated_stops_at_the_create_with_the_way_that_works() {
    let tmp = tempfile::tempdir().unwrap();
    let o = pitr_in(
        tmp.path(),
        &[
            "replay",
            "--backup",
            &backup(),
            "--oplog",
            &oplog(),
            "--until",
            "1795223380:2",
            "--skip",
            "1795223165:1",
            "--out",
            "x",
        ],
    );
    assert_eq!(code(&o), 2, "{}", show(&o));
    let se = stderr(&o);
    assert!(
        se.contains("cannot apply the `c` entry 1795223208:1"),
        "{se}"
    );
    assert!(!tmp.path().join("x").exists());
    let cmds: Vec<String> = se
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("pitr replay --backup"))
        .map(str::to_string)
        .collect();
    assert_eq!(cmds.len(), 2, "{se}");
    assert!(
        cmds[0].contains("--until 1795223165:1 --ns shop.orders"),
        "{}",
        cmds[0]
    );
    for c in &cmds {
        let args: Vec<&str> = c.split_whitespace().skip(1).collect();
        let o = pitr_in(tmp.path(), &args);
        assert_eq!(code(&o), 0, "{c}: {}", show(&o));
    }
    let before = tmp.path().join("x-orders-before-drop/shop/orders.bson");
    assert_eq!(
        replay_bson_docs(&before),
        113,
        "the orders as they were before the drop"
    );
}

fn replay_bson_docs(path: &Path) -> usize {
    let bytes = fs::read(path).unwrap();
    let mut n = 0;
    let mut rest = &bytes[..];
    while rest.len() >= 4 {
        let len = u32::from_le_bytes(rest[..4].try_into().unwrap()) as usize;
        rest = &rest[len..];
        n += 1;
    }
    n
}

/// Pinned: a read-only or unwritable --out was found at the final rename, after the
/// whole replay; an empty directory was refused although the hint said empty is fine.
#[test]
fn out_is_checked_before_any_work_and_may_be_an_empty_directory() {
    let tmp = tempfile::tempdir().unwrap();
    fs::write(tmp.path().join("a-file"), b"x").unwrap();
    let o = pitr_in(
        tmp.path(),
        &[
            "replay",
            "--backup",
            &backup(),
            "--oplog",
            &oplog(),
            "--until",
            "auto",
            "--out",
            "a-file/restored",
        ],
    );
    assert_eq!(code(&o), 2, "{}", show(&o));
    assert!(stderr(&o).contains("cannot be written"), "{}", show(&o));
    assert!(
        !stderr(&o).contains("At stake"),
        "refused before the plan was made: {}",
        show(&o)
    );
    // No work dir was left behind either.
    let left: Vec<_> = fs::read_dir(tmp.path()).unwrap().collect();
    assert_eq!(left.len(), 1, "{left:?}");

    fs::create_dir(tmp.path().join("empty")).unwrap();
    let o = pitr_in(
        tmp.path(),
        &[
            "replay",
            "--backup",
            &backup(),
            "--oplog",
            &oplog(),
            "--until",
            "auto",
            "--out",
            "empty",
        ],
    );
    assert_eq!(code(&o), 0, "{}", show(&o));
    assert!(tmp.path().join("empty/shop/orders.bson").is_file());
    // --archive names a file: an existing directory is refused up front.
    fs::create_dir(tmp.path().join("empty2")).unwrap();
    let o = pitr_in(
        tmp.path(),
        &[
            "replay",
            "--backup",
            &backup(),
            "--oplog",
            &oplog(),
            "--until",
            "auto",
            "--archive",
            "--out",
            "empty2",
        ],
    );
    assert_eq!(code(&o), 2, "{}", show(&o));
    assert!(
        stderr(&o).contains("--archive writes one file"),
        "{}",
        show(&o)
    );
}

/// Pinned: help that described the mongod path while the embedded engine is the
/// default, a `jq .verify.passed` example that gives null in an embedded run, the
/// wrong slice path in `plan --help`, no archives in OPLOG's help, `verify --help`
/// saying counts only; and no man page or completions for someone holding only the
/// binary.
#[test]
fn help_matches_the_program_and_ships_man_pages_and_completions() {
    let top = stdout(&pitr(&["--help"]));
    assert!(
        top.contains("embedded engine") && top.contains("pitr completions"),
        "{top}"
    );
    let replay = stdout(&pitr(&["replay", "--help"]));
    assert!(
        replay.contains("--engine embedded (the default)"),
        "{replay}"
    );
    assert!(!replay.contains(".verify.passed"), "{replay}");
    assert!(replay.contains("jq -r .result"), "{replay}");
    assert!(replay.contains("--oplogLimit"), "{replay}");
    let plan = stdout(&pitr(&["plan", "--help"]));
    assert!(plan.contains("OUT/restore/oplog.bson"), "{plan}");
    assert!(plan.contains("oplog archive directory"), "{plan}");
    let fd = stdout(&pitr(&["find-drop", "--help"]));
    assert!(
        fd.contains("mongodump archives") && fd.contains("pitr archive"),
        "{fd}"
    );
    let verify = stdout(&pitr(&["verify", "--help"]));
    assert!(verify.contains("dbHash"), "{verify}");

    let o = pitr(&["completions", "bash"]);
    assert_eq!(code(&o), 0, "{}", show(&o));
    assert!(stdout(&o).contains("--accept-incidents") && stdout(&o).contains("find-drop"));
    for shell in ["zsh", "fish"] {
        let o = pitr(&["completions", shell]);
        assert_eq!(code(&o), 0, "{shell}: {}", show(&o));
        assert!(stdout(&o).contains("replay"), "{shell}");
    }
    let tmp = tempfile::tempdir().unwrap();
    let o = pitr(&["man", "--dir", tmp.path().join("man1").to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", show(&o));
    let page = fs::read_to_string(tmp.path().join("man1/pitr-replay.1")).unwrap();
    assert!(
        page.contains(".TH") && page.contains("accept\\-incidents"),
        "{page}"
    );
    assert!(tmp.path().join("man1/pitr.1").is_file());
    assert!(tmp.path().join("man1/pitr-find-drop.1").is_file());
}

/// Pinned: `plan --backup <an oplog file>` said "random or corrupt bytes"; a
/// `--until` before the backup named another time than the one typed.
#[test]
fn errors_point_the_right_way() {
    let o = pitr(&[
        "plan",
        "--backup",
        &oplog(),
        "--oplog",
        &oplog(),
        "--until",
        "auto",
    ]);
    assert_eq!(code(&o), 2, "{}", show(&o));
    let se = stderr(&o);
    assert!(
        se.contains("it looks like an oplog") && !se.contains("random"),
        "{se}"
    );
    assert!(se.contains("give this file as --oplog"), "{se}");
    let tmp = tempfile::tempdir().unwrap();
    let o = pitr_in(
        tmp.path(),
        &[
            "plan",
            "--backup",
            &backup(),
            "--oplog",
            &oplog(),
            "--until",
            "2026-11-21T00:30:00Z",
        ],
    );
    assert_eq!(code(&o), 2, "{}", show(&o));
    assert!(
        stderr(&o).contains(
            "--until `2026-11-21T00:30:00Z` stands for the first oplog entry at or after it"
        ),
        "{}",
        show(&o)
    );
}

/// The habits people bring from mongo-tools: `--oplogLimit` for `--until`, and
/// `--archive=FILE` answered with a sentence instead of a usage line.
#[test]
fn mongo_tools_habits_are_understood() {
    let tmp = tempfile::tempdir().unwrap();
    let o = pitr_in(
        tmp.path(),
        &[
            "plan",
            "--backup",
            &backup(),
            "--oplog",
            &oplog(),
            "--oplogLimit",
            "1795223165:1",
            "--json",
        ],
    );
    assert_eq!(code(&o), 0, "{}", show(&o));
    let p: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(p["until"]["limit"], "1795223165:1");
    let o = pitr(&["find-drop", "--archive=nightly.archive"]);
    assert_eq!(code(&o), 2, "{}", show(&o));
    assert!(
        stderr(&o).contains("recognises mongodump archives by their content")
            && stderr(&o).contains("--backup nightly.archive")
            && !stderr(&o).contains("Usage:"),
        "{}",
        show(&o)
    );
    let o = pitr(&["replay", "--archive=out.archive"]);
    assert_eq!(code(&o), 2, "{}", show(&o));
    assert!(
        stderr(&o).contains("--archive --out out.archive"),
        "{}",
        show(&o)
    );
}

/// One look instead of reading: the plan and the replay print the timeline.
#[test]
fn plan_and_replay_print_a_one_line_timeline() {
    let tmp = tempfile::tempdir().unwrap();
    let o = pitr_in(
        tmp.path(),
        &[
            "plan",
            "--backup",
            &backup(),
            "--oplog",
            &oplog(),
            "--until",
            "2026-11-21T01:10:00Z",
        ],
    );
    assert_eq!(code(&o), 0, "{}", show(&o));
    let line = stdout(&o)
        .lines()
        .find(|l| l.starts_with("Timeline"))
        .unwrap_or_else(|| panic!("{}", show(&o)))
        .to_string();
    assert_eq!(
        line,
        "Timeline  2026-11-21 UTC: backup 01:00:00-01:00:07 · oplog 01:00:03 · drop shop.orders 01:06:05 · \
         dropDatabase analytics 01:09:40 · LIMIT 01:10:00 (1795223400:1, exclusive) · oplog end 01:28:42"
    );
    let o = pitr_in(
        tmp.path(),
        &[
            "replay",
            "--backup",
            &backup(),
            "--oplog",
            &oplog(),
            "--until",
            "auto",
            "--dry-run",
        ],
    );
    assert!(
        stdout(&o).contains("LIMIT 01:06:05 (1795223165:1, exclusive) before drop shop.orders"),
        "{}",
        show(&o)
    );
}

/// Pinned: `find-drop --backup DIR` printed `<BACKUP_DIR>` in the commands it
/// suggests, although it was given the directory.
#[test]
fn find_drop_suggests_commands_with_the_backup_it_was_given() {
    let o = pitr(&["find-drop", &oplog(), "--backup", &backup()]);
    assert_eq!(code(&o), 0, "{}", show(&o));
    let so = stdout(&o);
    assert!(!so.contains("<BACKUP_DIR>"), "{so}");
    assert!(
        so.contains(&format!("pitr replay --backup {} --oplog", backup())),
        "{so}"
    );
}
