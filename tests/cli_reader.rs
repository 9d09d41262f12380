//! Bad input through the real binary: every case gives `error:` + `hint:` on
//! stderr, exit code 2, no panic, and no partial result on stdout.

mod common;

use common::*;
use std::path::Path;

fn entry(t: u32, i: u32) -> Vec<u8> {
    bson::to_vec(&bson::doc! {
        "ts": bson::Timestamp { time: t, increment: i }, "op": "i", "ns": "shop.orders", "o": { "_id": i as i64 },
    })
    .unwrap()
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> String {
    std::fs::write(dir.join(name), bytes).unwrap();
    name.to_string()
}

/// Runs both a reading command and find-drop on the file and checks the error shape.
fn assert_bad(dir: &Path, file: &str, expect_in_error: &[&str]) {
    for args in [
        vec!["oplog", "cat", file],
        vec!["find-drop", file],
        vec!["find-drop", "--json", file],
    ] {
        let o = pitr_in(dir, &args);
        let err = stderr(&o);
        assert_eq!(code(&o), 2, "{args:?}: {err}");
        assert!(err.starts_with("error: "), "{args:?}: {err}");
        assert!(err.contains("\nhint: "), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        for want in expect_in_error {
            assert!(err.contains(want), "{args:?}: expected `{want}` in: {err}");
        }
        if args[0] == "find-drop" {
            assert!(
                o.stdout.is_empty(),
                "{args:?}: no partial result: {}",
                stdout(&o)
            );
        }
    }
}

#[test]
fn truncated_last_entry_names_offset_and_count_and_can_be_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = [entry(10, 1), entry(10, 2)].concat();
    let first = entry(10, 1).len();
    let partial = entry(10, 3);
    bytes.extend(&partial[..partial.len() - 9]);
    let f = write(dir.path(), "oplog.bson", &bytes);
    assert_bad(
        dir.path(),
        &f,
        &[
            &format!("truncated at byte {}", 2 * first),
            "2 complete entries",
            "--allow-truncated",
        ],
    );

    let o = pitr_in(dir.path(), &["oplog", "cat", "--allow-truncated", &f]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stdout(&o).lines().count(), 2);
    assert!(
        stderr(&o).contains("read the 2 complete entries"),
        "{}",
        stderr(&o)
    );

    let o = pitr_in(dir.path(), &["find-drop", "--allow-truncated", &f]);
    assert_eq!(code(&o), 1, "nothing destructive in it: {}", stderr(&o));
    assert!(
        stdout(&o).contains("scanned the 2 complete entries"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn impossible_length_prefixes() {
    let dir = tempfile::tempdir().unwrap();
    let mut tiny = entry(1, 1);
    tiny.extend(3i32.to_le_bytes());
    tiny.extend([0u8; 8]);
    let f = write(dir.path(), "tiny.bson", &tiny);
    assert_bad(dir.path(), &f, &["impossible length of 3 bytes", "entry 2"]);

    let mut huge = entry(1, 1);
    huge.extend((64 * 1024 * 1024i32).to_le_bytes());
    huge.extend([0u8; 8]);
    let f = write(dir.path(), "huge.bson", &huge);
    assert_bad(dir.path(), &f, &["impossible length of 67108864 bytes"]);

    // A plausible length that runs past the end of the file is a truncation.
    let mut past = entry(1, 1);
    past.extend(4096i32.to_le_bytes());
    past.extend([0u8; 8]);
    let f = write(dir.path(), "past.bson", &past);
    assert_bad(dir.path(), &f, &["declares 4096 bytes, 12 remain"]);
}

#[test]
fn not_bson_at_all_says_what_it_looks_like() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(
        dir.path(),
        "oplog.json",
        br#"{"ts": {"$timestamp": {"t": 1, "i": 1}}, "op": "n", "ns": ""}"#,
    );
    assert_bad(dir.path(), &f, &["looks like JSON text"]);

    let f = write(
        dir.path(),
        "notes.bson",
        b"this is a plain text file\nwith two lines\n",
    );
    assert_bad(dir.path(), &f, &["looks like text"]);

    let f = write(dir.path(), "oplog.bson.bz2", b"BZh91AY&SY\x00\x00\x00\x00");
    assert_bad(dir.path(), &f, &["bzip2-compressed"]);

    let random: Vec<u8> = (0..300u32)
        .map(|k| (k.wrapping_mul(2654435761) >> 13) as u8 | 0x80)
        .collect();
    let f = write(dir.path(), "random.bson", &random);
    assert_bad(dir.path(), &f, &["not a BSON oplog dump"]);
}

/// `mongodump --oplog --gzip` writes gzip content into a file named `oplog.bson`:
/// it is read by content, whatever its name, by every reading command.
#[test]
fn gzip_content_is_read_whatever_the_name() {
    let dir = tempfile::tempdir().unwrap();
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut enc, &[entry(1, 1), entry(1, 2)].concat()).unwrap();
    let f = write(dir.path(), "oplog.bson", &enc.finish().unwrap());
    let o = pitr_in(dir.path(), &["oplog", "stats", "--json", &f]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["entries"], 2);
    // find-drop: read fine, nothing destructive (exit 1 like grep).
    let o = pitr_in(dir.path(), &["find-drop", &f]);
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    // A dump directory whose oplog.bson is gzip content.
    let o = pitr_in(dir.path(), &["oplog", "cat", "."]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stdout(&o).lines().count(), 2, "{}", stdout(&o));
}

#[test]
fn a_collection_dump_is_not_an_oplog() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = entry(1, 1);
    bytes.extend(bson::to_vec(&bson::doc! { "_id": 5, "name": "a customer" }).unwrap());
    let f = write(dir.path(), "orders.bson", &bytes);
    assert_bad(
        dir.path(),
        &f,
        &["entry 2 at byte", "is not an oplog entry", "no `ts` field"],
    );
}

#[test]
fn empty_file_is_valid_with_zero_entries() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "empty.bson", b"");
    let o = pitr_in(dir.path(), &["oplog", "cat", &f]);
    assert_eq!(
        (code(&o), stdout(&o).as_str(), stderr(&o).as_str()),
        (0, "", "")
    );
    let o = pitr_in(dir.path(), &["find-drop", "--json", &f]);
    assert_eq!(code(&o), 1);
    assert_eq!(stdout(&o).trim(), "[]");
}

#[test]
fn missing_paths_and_dirs_without_oplog() {
    let dir = tempfile::tempdir().unwrap();
    assert_bad(
        dir.path(),
        "nope.bson",
        &["cannot open `nope.bson`", "check the path"],
    );
    std::fs::create_dir(dir.path().join("dump")).unwrap();
    assert_bad(
        dir.path(),
        "dump",
        &["directory without an oplog", "mongodump --oplog"],
    );
    // A typo of a file that is there: the hint names it.
    write(dir.path(), "oplog.bson", &entry(1, 1));
    assert_bad(
        dir.path(),
        "oplg.bson",
        &[
            "cannot open `oplg.bson`",
            "hint: did you mean `oplog.bson`? check the path",
        ],
    );
    assert_bad(dir.path(), "nope.bson", &["hint: check the path"]);
}

/// A mistyped backup, oplog or cluster file path: the error names the path as
/// given, and the hint the existing one it most likely meant.
#[test]
fn a_mistyped_path_is_answered_with_the_one_meant() {
    let f = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let backup = f.join("incident/bakup");
    let oplog = f.join("incident/oplog.bson");
    let o = pitr(&[
        "plan",
        "--backup",
        backup.to_str().unwrap(),
        "--oplog",
        oplog.to_str().unwrap(),
        "--until",
        "auto",
    ]);
    let err = stderr(&o);
    assert_eq!(code(&o), 2, "{err}");
    assert!(
        err.contains(&format!("backup `{}` does not exist", backup.display()))
            && err.contains(&format!(
                "hint: did you mean `{}`?",
                f.join("incident/backup").display()
            )),
        "{err}"
    );
    let cluster = f.join("cluster/clustr.toml");
    let o = pitr(&[
        "plan",
        "--cluster",
        cluster.to_str().unwrap(),
        "--until",
        "auto",
    ]);
    let err = stderr(&o);
    assert_eq!(code(&o), 2, "{err}");
    assert!(
        err.contains(&format!(
            "hint: did you mean `{}`?",
            f.join("cluster/cluster.toml").display()
        )),
        "{err}"
    );
}

#[test]
fn gz_stdin_and_dump_dirs_are_read() {
    let dir = tempfile::tempdir().unwrap();
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut enc, &[entry(5, 1), entry(5, 2)].concat()).unwrap();
    write(dir.path(), "oplog.bson.gz", &enc.finish().unwrap());
    let o = pitr_in(dir.path(), &["oplog", "cat", "oplog.bson.gz"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stdout(&o).lines().count(), 2);

    std::fs::create_dir_all(dir.path().join("dump/local")).unwrap();
    write(dir.path(), "dump/local/oplog.rs.bson", &entry(6, 1));
    let o = pitr_in(dir.path(), &["oplog", "cat", "dump"]);
    assert_eq!(stdout(&o).lines().count(), 1, "{}", stderr(&o));

    use std::io::Write;
    let mut child = std::process::Command::new(pitr_bin())
        .args(["oplog", "cat", "--json", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(&[entry(7, 1), entry(7, 2), entry(7, 3)].concat())
        .unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(code(&o), 0);
    let lines: Vec<serde_json::Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[2]["ts"]["$timestamp"]["i"], 3);
}

/// `pitr oplog cat big.bson | head -n 1`: the reader goes away after one line. pitr
/// must then stop quietly with exit code 0 (ripgrep's convention), not report an
/// error or panic. Driven from Rust, not a shell, so that the exit code and stderr
/// of pitr itself are what is checked.
#[test]
fn closed_stdout_is_not_an_error() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let dir = tempfile::tempdir().unwrap();
    let bytes: Vec<u8> = (0..20000u32)
        .flat_map(|i| entry(100 + i / 10, i % 10 + 1))
        .collect();
    write(dir.path(), "big.bson", &bytes);
    for args in [
        &["oplog", "cat", "big.bson"][..],
        &["oplog", "cat", "--json", "big.bson"],
    ] {
        let mut child = Command::new(pitr_bin())
            .args(args)
            .current_dir(dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut first = String::new();
        {
            let mut out = BufReader::new(child.stdout.take().unwrap());
            out.read_line(&mut first).unwrap();
            // Dropping the read end closes the pipe while pitr still has lines to write.
        }
        let o = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!first.is_empty(), "{args:?}: no first line");
        assert_eq!(o.status.code(), Some(0), "{args:?}: {:?} {err}", o.status);
        assert!(err.is_empty(), "{args:?}: stderr: {err}");
    }
}
