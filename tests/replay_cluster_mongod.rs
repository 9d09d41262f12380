//! `pitr replay --cluster FILE --until V --out DIR --engine mongod` (issue 19): one
//! spare mongod per member of the bundled cluster fixture, each restored by the REAL
//! mongorestore (`../shared/tools`, both releases) from its resolved slice, verified
//! against the embedded engine's prediction, dumped by the REAL mongodump and merged.
//!
//! The mongod is pitr's stand-in unless `PITR_E2E_BIN` names a directory with the
//! real MongoDB programs (the suite's convention, `tests/replay_common`); every test
//! says which ran. Compared with the embedded engine at limits before the incident,
//! at a cross-shard transaction's commitTimestamp, one tick after it, between its
//! participants' commit entries and after both, and at the sharded drop: the same
//! logical dump (per namespace, the same documents byte for byte, and the same
//! `sharding.json`). A slice left unresolved (each member at its own plain
//! `--oplogLimit`) is caught by the verification, naming the member and namespace.
//! `--jobs 2` gives what `--jobs 1` gives; `--keep` leaves the spares running.

mod cluster_common;
mod common;
mod replay_common;
mod storage_common;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use cluster_common::{parse_ts as ts, FIXTURE};
use pitr::oplog::Ts;
use pitr_fixturegen::layout::{convert, Layout};
use replay_common::{code, run_pitr, show, stderr, tool_sets, Bins};
use serde_json::Value;
use storage_common::{upload_file, S3Server};

fn ts_arg(t: Ts) -> String {
    format!("{}:{}", t.t, t.i)
}

fn next(t: Ts) -> Ts {
    Ts::new(t.t, t.i + 1)
}

fn cluster() -> PathBuf {
    Path::new(FIXTURE).join("cluster.toml")
}

/// `replay --cluster <c> --until <until> --out <out>` followed by `extra`.
fn replay_args<'a>(c: &'a Path, until: &'a str, out: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec![
        "replay",
        "--cluster",
        c.to_str().unwrap(),
        "--until",
        until,
        "--out",
        out,
    ];
    v.extend_from_slice(extra);
    v
}

/// `pitr replay --cluster --json --accept-incidents --out <out>` with `extra`; the
/// report, or the output of a run that did not exit 0.
fn run(
    cwd: &Path,
    out: &str,
    until: &str,
    extra: &[&str],
    env: &[(&str, &str)],
) -> Result<Value, std::process::Output> {
    let c = cluster();
    let mut args = replay_args(&c, until, out, &["--json", "--accept-incidents"]);
    args.extend_from_slice(extra);
    let o = run_pitr(cwd, &args, env);
    if code(&o) != 0 {
        return Err(o);
    }
    Ok(serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", show(&o))))
}

fn mongod(cwd: &Path, out: &str, until: &str, b: &Bins, extra: &[&str]) -> Value {
    let bin = b.dir.to_str().unwrap().to_string();
    let mut args = vec!["--engine", "mongod", "--mongodb-bin", bin.as_str()];
    args.extend_from_slice(extra);
    run(cwd, out, until, &args, &[])
        .unwrap_or_else(|o| panic!("{} at {until}: {}", b.label, show(&o)))
}

/// Per namespace of a dump directory: its documents' bytes, sorted (the order of
/// documents in a collection file is not the content).
fn dump_docs(dir: &Path) -> BTreeMap<String, Vec<Vec<u8>>> {
    let mut m = BTreeMap::new();
    for db in fs::read_dir(dir).unwrap().flatten() {
        if !db.path().is_dir() || db.file_name() == "members" {
            continue;
        }
        for f in fs::read_dir(db.path()).unwrap().flatten() {
            let name = f.file_name().to_string_lossy().into_owned();
            let Some(coll) = name.strip_suffix(".bson") else {
                continue;
            };
            let bytes = fs::read(f.path()).unwrap();
            let mut docs = Vec::new();
            let mut at = 0;
            while at < bytes.len() {
                let n = i32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
                docs.push(bytes[at..at + n].to_vec());
                at += n;
            }
            docs.sort();
            m.insert(format!("{}.{coll}", db.file_name().to_string_lossy()), docs);
        }
    }
    m
}

/// The two merged dumps hold the same documents per namespace, and the same
/// `sharding.json`.
fn assert_same_dump(a: &Path, b: &Path, what: &str) {
    let (da, db) = (dump_docs(a), dump_docs(b));
    assert_eq!(
        da.keys().collect::<Vec<_>>(),
        db.keys().collect::<Vec<_>>(),
        "{what}: namespaces"
    );
    for (ns, docs) in &da {
        assert_eq!(docs.len(), db[ns].len(), "{what}: documents of `{ns}`");
        assert!(docs == &db[ns], "{what}: the documents of `{ns}` differ");
    }
    assert_eq!(
        fs::read_to_string(a.join("sharding.json")).unwrap(),
        fs::read_to_string(b.join("sharding.json")).unwrap(),
        "{what}: sharding.json"
    );
}

/// The limits: before the incident (`auto`), the sharded drop, and for every
/// committed cross-shard transaction of the fixture its commitTimestamp, one tick
/// after, between its participants' commit entries and after both.
fn limits() -> Vec<(String, &'static str)> {
    let truth: Value =
        serde_json::from_slice(&fs::read(Path::new(FIXTURE).join("truth.json")).unwrap()).unwrap();
    let mut out = vec![
        ("auto".to_string(), "before the fan-out delete (auto)"),
        ("1795223000:7".to_string(), "at the sharded drop"),
    ];
    let txns = truth["transactions"].as_array().unwrap();
    for t in txns.iter().filter(|t| t["decision"] == "commit") {
        let ct = ts(&t["commit_timestamp"]);
        let mut commits: Vec<Ts> = t["participants"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| ts(&p["decision_ts"]))
            .collect();
        commits.sort();
        out.push((ts_arg(ct), "at a commitTimestamp"));
        out.push((ts_arg(next(ct)), "one tick after a commitTimestamp"));
        out.push((
            ts_arg(next(commits[0])),
            "between the participants' commit entries",
        ));
        out.push((
            ts_arg(next(commits[commits.len() - 1])),
            "after every commit entry",
        ));
    }
    assert!(out.len() >= 10, "the fixture's transactions: {truth}");
    out
}

#[test]
fn mongod_engine_gives_the_embedded_engines_dump_at_every_limit() {
    let test = "mongod_engine_gives_the_embedded_engines_dump_at_every_limit";
    let sets = tool_sets(test);
    let mut appended = 0;
    for b in &sets {
        eprintln!("{test}: {}", b.label);
        for (k, (until, what)) in limits().iter().enumerate() {
            let tmp = tempfile::tempdir().unwrap();
            let emb = run(tmp.path(), "embedded", until, &[], &[])
                .unwrap_or_else(|o| panic!("embedded at {until}: {}", show(&o)));
            let rep = mongod(tmp.path(), "mongod", until, b, &[]);
            let what = format!("{} at {until} ({what}, #{k})", b.label);
            assert_eq!(rep["engine"], "mongod", "{what}");
            assert_eq!(emb["namespaces"], rep["namespaces"], "{what}: counts");
            assert_same_dump(
                &tmp.path().join("embedded"),
                &tmp.path().join("mongod"),
                &what,
            );
            for m in rep["members"].as_array().unwrap() {
                let md = &m["mongod"];
                assert_eq!(md["verification"]["passed"], true, "{what}: {m}");
                assert_eq!(md["verification"]["standin"], b.standin, "{what}: {m}");
                assert_eq!(md["spare"]["kept"], false, "{what}: {m}");
                let n = md["slice"]["commits_appended"].as_array().unwrap().len();
                appended += n;
                // The oplogLimit takes the appended commit entries in.
                if n > 0 {
                    assert!(ts(&md["slice"]["oplog_limit"]) > ts(&rep["limit"]), "{m}");
                } else {
                    assert_eq!(md["slice"]["oplog_limit"], rep["limit"], "{m}");
                }
                if m["member"] == "config" {
                    let routing = md["verification"]["routing_checked"].as_array().unwrap();
                    assert!(routing.iter().any(|r| r == "config.chunks"), "{m}");
                }
            }
            // The spares and their data are gone; the work dir keeps plans and logs.
            let work = PathBuf::from(rep["members"][0]["mongod"]["work_dir"].as_str().unwrap());
            assert!(work.join("logs").is_dir(), "{what}");
            assert!(
                !fs::read_dir(&work)
                    .unwrap()
                    .flatten()
                    .any(|e| e.file_name().to_string_lossy().starts_with("pitr-spare-")),
                "{what}: a spare's dbpath is left"
            );
        }
    }
    if !sets.is_empty() {
        // Between the participants' commit entries, the late participant's commit
        // entry is past the limit: appended (at least once per transaction and set).
        assert!(
            appended >= 2 * sets.len(),
            "commit entries appended: {appended}"
        );
    }
}

/// What restoring each member with its own plain `--oplogLimit L` gives (no commit
/// entry past `L` of an included transaction; the config server's chunk commits
/// skipped by mongorestore): the verification refuses it, exit 2, naming the member
/// and the namespace, and nothing is written to --out.
#[test]
fn an_unresolved_slice_is_caught_by_the_verification() {
    let test = "an_unresolved_slice_is_caught_by_the_verification";
    let truth: Value =
        serde_json::from_slice(&fs::read(Path::new(FIXTURE).join("truth.json")).unwrap()).unwrap();
    let t = &truth["transactions"].as_array().unwrap()[0];
    assert_eq!(t["decision"], "commit", "{t}");
    // The participant whose commit entry is later: between the two, its entry is
    // past the limit.
    let mut parts: Vec<(Ts, String)> = t["participants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                ts(&p["decision_ts"]),
                p["member"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    parts.sort();
    let between = ts_arg(next(parts[0].0));
    let late = format!("member `{}`", parts[1].1);
    for b in &tool_sets(test) {
        eprintln!("{test}: {}", b.label);
        let bin = b.dir.to_str().unwrap();
        let env = [("PITR_TEST_UNRESOLVED_SLICE", "1")];
        for (until, member, ns) in [
            (between.as_str(), late.as_str(), "`shop.events`"),
            ("1795223000:7", "member `config`", "`config.chunks`"),
        ] {
            let tmp = tempfile::tempdir().unwrap();
            let o = run(
                tmp.path(),
                "out",
                until,
                &["--engine", "mongod", "--mongodb-bin", bin],
                &env,
            )
            .expect_err("an unresolved slice must fail");
            assert_eq!(code(&o), 2, "{}", show(&o));
            let e = stderr(&o);
            assert!(e.contains(member) && e.contains(ns), "{}", show(&o));
            assert!(!tmp.path().join("out").exists(), "{}", show(&o));
            if member == late {
                // One after the other: the members after the failed one are not
                // started (the idle shard2 comes last).
                assert!(
                    e.contains("member `shard2`: not started: another member failed"),
                    "{}",
                    show(&o)
                );
            }
            // The same limit resolved passes.
            mongod(tmp.path(), "ok", until, b, &[]);
        }
    }
}

#[test]
fn jobs_2_gives_what_jobs_1_gives() {
    let test = "jobs_2_gives_what_jobs_1_gives";
    for b in tool_sets(test).iter().take(1) {
        eprintln!("{test}: {}", b.label);
        let tmp = tempfile::tempdir().unwrap();
        let until = "1795223000:7";
        let one = mongod(tmp.path(), "one", until, b, &["--jobs", "1"]);
        let two = mongod(tmp.path(), "two", until, b, &["--jobs", "2"]);
        assert_eq!(one["namespaces"], two["namespaces"]);
        assert_same_dump(&tmp.path().join("one"), &tmp.path().join("two"), "--jobs 2");
        let ports: std::collections::BTreeSet<u64> = two["members"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["mongod"]["spare"]["port"].as_u64().unwrap())
            .collect();
        assert_eq!(ports.len(), 4, "one spare per member: {two}");
    }
}

#[test]
fn keep_leaves_every_spare_running_and_per_member_keeps_their_dumps() {
    let test = "keep_leaves_every_spare_running_and_per_member_keeps_their_dumps";
    for b in tool_sets(test).iter().take(1) {
        eprintln!("{test}: {}", b.label);
        let tmp = tempfile::tempdir().unwrap();
        let rep = mongod(tmp.path(), "out", "auto", b, &["--keep", "--per-member"]);
        let mut pids = Vec::new();
        for m in rep["members"].as_array().unwrap() {
            let spare = &m["mongod"]["spare"];
            assert_eq!(spare["kept"], true, "{m}");
            pids.push(spare["pid"].as_u64().unwrap().to_string());
            let port = spare["port"].as_u64().unwrap() as u16;
            assert!(
                std::net::TcpStream::connect(("127.0.0.1", port)).is_ok(),
                "the kept spare of {} listens: {m}",
                m["member"]
            );
            let dump = PathBuf::from(m["dump"].as_str().unwrap());
            assert!(dump.starts_with(tmp.path().join("out/members")), "{m}");
            assert!(dump.is_dir(), "{m}");
        }
        let killed = std::process::Command::new("kill")
            .args(&pids)
            .status()
            .unwrap();
        assert!(killed.success());
    }
}

#[test]
fn missing_programs_are_named_with_the_flag_and_variable() {
    let tmp = tempfile::tempdir().unwrap();
    let o = run(
        tmp.path(),
        "out",
        "auto",
        &[
            "--engine",
            "mongod",
            "--mongodb-bin",
            "/nonexistent-pitr-bin",
        ],
        &[],
    )
    .expect_err("no programs there");
    assert_eq!(code(&o), 2, "{}", show(&o));
    let e = stderr(&o);
    assert!(e.contains("/nonexistent-pitr-bin"), "{}", show(&o));
    assert!(
        e.contains("--mongodb-bin") || e.contains("PITR_MONGODB_BIN"),
        "{}",
        show(&o)
    );
    assert!(!tmp.path().join("out").exists());
    // The embedded engine takes no spare flags.
    let o = run(tmp.path(), "out", "auto", &["--jobs", "2"], &[]).expect_err("refused");
    assert_eq!(code(&o), 2, "{}", show(&o));
    assert!(stderr(&o).contains("--engine mongod"), "{}", show(&o));
}

/// `--dry-run`: every member planned as the real run plans it and its spare's
/// commands shown, each with the cluster's one `--oplogLimit`; no spare started,
/// `--out` not written; the exit code the real run would end with (1: the sharded
/// drop's limit replays the fan-out delete, without `--accept-incidents`; 0 with
/// it). The embedded engine runs no commands: its dry run is refused, pointing at
/// `pitr plan --cluster`.
#[test]
fn dry_run_shows_every_members_commands_and_starts_nothing() {
    let test = "dry_run_shows_every_members_commands_and_starts_nothing";
    for b in tool_sets(test).iter().take(1) {
        eprintln!("{test}: {}", b.label);
        let tmp = tempfile::tempdir().unwrap();
        let bin = b.dir.to_str().unwrap();
        let until = "1795223000:7";
        let c = cluster();
        let dry = |extra: &[&str]| {
            let flags = ["--engine", "mongod", "--mongodb-bin", bin, "--dry-run"];
            run_pitr(
                tmp.path(),
                &replay_args(&c, until, "out", &[&flags[..], extra].concat()),
                &[],
            )
        };
        let o = dry(&["--json"]);
        assert_eq!(code(&o), 1, "{}", show(&o));
        let d: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(d["format"], "pitr-cluster-replay-dry-run/1", "{d}");
        assert_eq!(d["exit_code"], 1);
        assert_eq!(d["incidents_replayed"][0]["kind"], "deleteBurst", "{d}");
        let members: Vec<&str> = d["members"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["member"].as_str().unwrap())
            .collect();
        assert_eq!(members, ["config", "shard0", "shard1", "shard2"]);
        for m in d["members"].as_array().unwrap() {
            assert_eq!(m["oplog_limit"], until, "{m}");
            let steps = m["dry_run"]["steps"].as_array().unwrap();
            let argv: Vec<Vec<String>> = steps
                .iter()
                .flat_map(|s| s["commands"].as_array().unwrap())
                .map(|c| {
                    c.as_array()
                        .unwrap()
                        .iter()
                        .map(|a| a.as_str().unwrap().to_string())
                        .collect()
                })
                .collect();
            let restore = argv
                .iter()
                .find(|a| a[0].ends_with("mongorestore"))
                .unwrap_or_else(|| panic!("no mongorestore command: {m}"));
            let at = restore.iter().position(|a| a == "--oplogLimit").unwrap();
            assert_eq!(restore[at + 1], until, "{m}");
            assert!(restore[0].starts_with(bin), "{m}");
            // The restore directory it names was written by the planning.
            assert!(Path::new(restore.last().unwrap()).is_dir(), "{m}");
        }
        assert!(!tmp.path().join("out").exists());
        let spares: Vec<PathBuf> = common::files_under(tmp.path())
            .into_keys()
            .filter(|p| p.contains("pitr-spare-") || p.ends_with("mongod.log"))
            .map(PathBuf::from)
            .collect();
        assert!(spares.is_empty(), "a spare was started: {spares:?}");

        let o = dry(&["--accept-incidents"]);
        assert_eq!(code(&o), 0, "{}", show(&o));
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(
            text.contains(
                "Member `shard2` (shard): its spare restores to --oplogLimit 1795223000:7"
            ) && text.contains("the real run would go ahead (exit code 0)")
                && text.contains("Nothing was run (--dry-run)")
                && text.contains("REPLAYED: deleteBurst of `shop.orders` at 1795222920:2"),
            "{text}"
        );
        assert!(!tmp.path().join("out").exists());
    }
    let tmp = tempfile::tempdir().unwrap();
    let o = run(tmp.path(), "out", "auto", &["--dry-run"], &[]).expect_err("refused");
    assert_eq!(code(&o), 2, "{}", show(&o));
    assert!(stderr(&o).contains("pitr plan --cluster"), "{}", show(&o));
}

/// The fixture with every member's backup as `mongodump --gzip` writes it (data and
/// metadata files `.gz`, the root `oplog.bson` gzip-compressed under its own name).
fn gzip_fixture(dst: &Path) -> PathBuf {
    fn walk(src: &Path, dst: &Path, in_backup: bool) {
        fs::create_dir_all(dst).unwrap();
        for e in fs::read_dir(src).unwrap().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let to = dst.join(&name);
            if e.path().is_dir() {
                walk(&e.path(), &to, in_backup || name == "backup");
                continue;
            }
            let bytes = fs::read(e.path()).unwrap();
            if !in_backup {
                fs::write(&to, bytes).unwrap();
                continue;
            }
            let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            std::io::Write::write_all(&mut z, &bytes).unwrap();
            let to = if name == "oplog.bson" {
                to
            } else {
                dst.join(format!("{name}.gz"))
            };
            fs::write(to, z.finish().unwrap()).unwrap();
        }
    }
    walk(Path::new(FIXTURE), dst, false);
    dst.join("cluster.toml")
}

/// A gzip backup is restored in one run with its own oplog (`restore/oplog.bson`,
/// gzip): the resolved slice is written compressed, the commit entry past the limit
/// appended, and the result is the embedded engine's.
#[test]
fn gzip_backups_are_resolved_in_their_one_run() {
    let test = "gzip_backups_are_resolved_in_their_one_run";
    for b in tool_sets(test).iter().take(1) {
        eprintln!("{test}: {}", b.label);
        let tmp = tempfile::tempdir().unwrap();
        let c = gzip_fixture(&tmp.path().join("gz"));
        let limits = limits();
        let (until, _) = limits
            .iter()
            .find(|(_, w)| *w == "between the participants' commit entries")
            .unwrap();
        let bin = b.dir.to_str().unwrap();
        let rep = mongod_equals_embedded(tmp.path(), (&c, &c), until, bin, &[], 1, "gzip backups");
        for m in rep["members"].as_array().unwrap() {
            let slice = &m["mongod"]["slice"];
            assert!(
                slice["file"]
                    .as_str()
                    .unwrap()
                    .ends_with("restore/oplog.bson"),
                "{m}"
            );
        }
    }
}

/// Ctrl-C while a member's spare starts: exit 130, the spare stopped and its dbpath
/// removed, the members after it not started, nothing written to --out.
#[test]
fn ctrl_c_stops_the_running_spare_and_starts_no_other() {
    let test = "ctrl_c_stops_the_running_spare_and_starts_no_other";
    for b in tool_sets(test).iter().take(1) {
        if !b.standin {
            common::say(&format!(
                "{test}: needs the stand-in's slow-start fault; skipped with real binaries"
            ));
            continue;
        }
        eprintln!("{test}: {}", b.label);
        let tmp = tempfile::tempdir().unwrap();
        let c = cluster();
        let err = fs::File::create(tmp.path().join("stderr")).unwrap();
        let mut child = replay_common::pitr_cmd(
            tmp.path(),
            &replay_args(
                &c,
                "auto",
                "out",
                &[
                    "--engine",
                    "mongod",
                    "--mongodb-bin",
                    b.dir.to_str().unwrap(),
                ],
            ),
            &[("PITR_STANDIN_MONGOD_FAULT", "slow-start-ms=5000")],
        )
        .stdout(std::process::Stdio::null())
        .stderr(err)
        .spawn()
        .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        // The config server's spare is starting (slowly): Ctrl-C then.
        while !fs::read_to_string(tmp.path().join("stderr"))
            .unwrap()
            .contains("member `config`: [1/5] Start a spare")
        {
            assert!(
                std::time::Instant::now() < deadline,
                "the spare never started"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        std::thread::sleep(std::time::Duration::from_millis(300));
        // SAFETY: a signal to our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        let status = child.wait().unwrap();
        let e = fs::read_to_string(tmp.path().join("stderr")).unwrap();
        assert_eq!(status.code(), Some(130), "{e}");
        assert!(
            e.contains("member `shard0`: not started: interrupted"),
            "{e}"
        );
        assert!(!tmp.path().join("out").exists(), "{e}");
        let work = fs::read_dir(tmp.path())
            .unwrap()
            .flatten()
            .find(|d| d.file_name().to_string_lossy().starts_with("pitr-replay-"))
            .unwrap()
            .path();
        let config = work.join("members/config");
        assert!(
            !fs::read_dir(&config)
                .unwrap()
                .flatten()
                .any(|d| d.file_name().to_string_lossy().starts_with("pitr-spare-")),
            "the spare's dbpath is left: {e}"
        );
    }
}

/// The fixture with every shard's backup as one `mongodump --oplog --archive --gzip`
/// file (the config server keeps its directory: an archive there is refused, below).
fn archive_fixture(dst: &Path) -> PathBuf {
    fs::create_dir_all(dst).unwrap();
    let mut toml = fs::read_to_string(Path::new(FIXTURE).join("cluster.toml")).unwrap();
    for m in ["config", "shard0", "shard1", "shard2"] {
        fs::create_dir_all(dst.join(m)).unwrap();
        fs::copy(
            Path::new(FIXTURE).join(m).join("oplog.bson"),
            dst.join(m).join("oplog.bson"),
        )
        .unwrap();
        let backup = Path::new(FIXTURE).join(m).join("backup");
        if m == "config" {
            common::copy_dir(&backup, &dst.join(m).join("backup"));
            continue;
        }
        let name = Layout::ArchiveGzip.file_name();
        convert(&backup, Layout::ArchiveGzip, &dst.join(m).join(name)).unwrap();
        toml = toml.replace(
            &format!("backup = \"{m}/backup\""),
            &format!("backup = \"{m}/{name}\""),
        );
    }
    fs::write(dst.join("cluster.toml"), toml).unwrap();
    dst.join("cluster.toml")
}

/// Archive backups of the shards: each archive is streamed to mongorestore with its
/// resolved slice appended to the archive's own oplog (one run), the commit entry of
/// the transaction past the limit among it; the result is the embedded engine's, at a
/// limit between the participants' commit entries and one after both. A config
/// server whose backup is an archive is refused, naming it.
#[test]
fn archive_backups_are_resolved_in_their_one_run() {
    let test = "archive_backups_are_resolved_in_their_one_run";
    for b in tool_sets(test).iter().take(1) {
        eprintln!("{test}: {}", b.label);
        let tmp = tempfile::tempdir().unwrap();
        let c = archive_fixture(&tmp.path().join("ar"));
        let bin = b.dir.to_str().unwrap();
        for (until, what) in limits().into_iter().filter(|(_, w)| {
            *w == "between the participants' commit entries" || *w == "after every commit entry"
        }) {
            let want = usize::from(what == "between the participants' commit entries");
            mongod_equals_embedded(tmp.path(), (&c, &c), &until, bin, &[], want, what);
        }
        // The config server's backup as an archive: refused, naming it.
        let dir = tmp.path().join("ar");
        let name = Layout::ArchiveGzip.file_name();
        convert(
            &dir.join("config/backup"),
            Layout::ArchiveGzip,
            &dir.join("config").join(name),
        )
        .unwrap();
        let toml = fs::read_to_string(&c).unwrap().replace(
            "backup = \"config/backup\"",
            &format!("backup = \"config/{name}\""),
        );
        fs::write(&c, toml).unwrap();
        let o = run_pitr(
            tmp.path(),
            &replay_args(
                &c,
                "auto",
                "refused",
                &[
                    "--accept-incidents",
                    "--engine",
                    "mongod",
                    "--mongodb-bin",
                    bin,
                ],
            ),
            &[],
        );
        assert_eq!(code(&o), 2, "{}", show(&o));
        let e = stderr(&o);
        assert!(
            e.contains("member `config`") && e.contains("archive"),
            "{e}"
        );
        assert!(!tmp.path().join("refused").exists());
    }
}

/// The shards' archive backups in a bucket (an s3s-fs server on loopback, in this
/// test process): each archive is streamed from the bucket into mongorestore's
/// standard input with the resolved slice appended to its oplog, the commit entry of
/// the transaction past the limit among it, and the result is the embedded engine's
/// from the same local files.
#[test]
fn archive_backups_in_a_bucket_are_streamed_with_the_resolved_slice() {
    let test = "archive_backups_in_a_bucket_are_streamed_with_the_resolved_slice";
    for b in tool_sets(test).iter().take(1) {
        eprintln!("{test}: {}", b.label);
        let tmp = tempfile::tempdir().unwrap();
        let local = archive_fixture(&tmp.path().join("ar"));
        let server = S3Server::start(&tmp.path().join("s3"), &["pitr-cluster"]);
        let name = Layout::ArchiveGzip.file_name();
        let mut toml = fs::read_to_string(&local).unwrap();
        for m in ["shard0", "shard1", "shard2"] {
            let url = format!("s3://pitr-cluster/{m}");
            upload_file(
                &server.storage(),
                &tmp.path().join("ar").join(m).join(name),
                &pitr::storage::Location::parse(&format!("{url}/{name}")).unwrap(),
            );
            toml = toml.replace(
                &format!("backup = \"{m}/{name}\""),
                &format!("backup = \"{url}/{name}\""),
            );
        }
        let remote = tmp.path().join("ar").join("bucket.toml");
        fs::write(&remote, toml).unwrap();
        let (until, _) = limits()
            .into_iter()
            .find(|(_, w)| *w == "between the participants' commit entries")
            .unwrap();
        let bin = b.dir.to_str().unwrap();
        let endpoint = server.endpoint();
        let env = storage_common::env_for(&endpoint);
        mongod_equals_embedded(
            tmp.path(),
            (&remote, &local),
            &until,
            bin,
            &env,
            1,
            "archive backups in a bucket",
        );
    }
}

/// `replay --cluster --engine mongod` of `clusters.0` and the embedded engine's of
/// `clusters.1` at `until`, in `cwd`: both succeed, the mongod run appended
/// `appended` commit entries in all, and the two merged dumps are the same. Returns
/// the mongod run's report.
fn mongod_equals_embedded(
    cwd: &Path,
    clusters: (&Path, &Path),
    until: &str,
    bin: &str,
    env: &[(&str, &str)],
    appended: usize,
    what: &str,
) -> Value {
    let (m_out, e_out) = (format!("mongod-{until}"), format!("embedded-{until}"));
    let flags = ["--json", "--accept-incidents"];
    let mongod = [&flags[..], &["--engine", "mongod", "--mongodb-bin", bin]].concat();
    let o = run_pitr(cwd, &replay_args(clusters.0, until, &m_out, &mongod), env);
    assert_eq!(code(&o), 0, "{what}: {}", show(&o));
    let rep: Value = serde_json::from_slice(&o.stdout).unwrap();
    let got: usize = rep["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            m["mongod"]["slice"]["commits_appended"]
                .as_array()
                .unwrap()
                .len()
        })
        .sum();
    assert_eq!(got, appended, "{what}: {rep}");
    let o = run_pitr(cwd, &replay_args(clusters.1, until, &e_out, &flags), &[]);
    assert_eq!(code(&o), 0, "{what}: {}", show(&o));
    assert_same_dump(&cwd.join(&e_out), &cwd.join(&m_out), what);
    rep
}

/// `--out s3://...` with `--engine mongod --per-member`: the merged dump (pitr's
/// merge of the spares' mongodumps) is streamed to the bucket with `sharding.json`
/// and each member's dump under `members/`, the manifest listing them all; it holds
/// what a local `--out` holds, and nothing of it is left in the work dir.
#[test]
fn mongod_engine_streams_the_merged_dump_to_a_bucket() {
    let test = "mongod_engine_streams_the_merged_dump_to_a_bucket";
    for b in tool_sets(test).iter().take(1) {
        eprintln!("{test}: {}", b.label);
        let tmp = tempfile::tempdir().unwrap();
        let server = S3Server::start(&tmp.path().join("s3"), &["pitr-cluster"]);
        let endpoint = server.endpoint();
        let env = storage_common::env_for(&endpoint);
        let url = "s3://pitr-cluster/merged";
        let bin = b.dir.to_str().unwrap();
        let flags = ["--per-member", "--engine", "mongod", "--mongodb-bin", bin];
        let c = cluster();
        let rep = run(
            tmp.path(),
            url,
            "auto",
            &[&flags[..], &["--workdir", "work"]].concat(),
            &env,
        )
        .unwrap_or_else(|o| panic!("{}", show(&o)));
        assert_eq!(rep["out"], url, "{rep}");
        assert_eq!(
            rep["download"],
            format!("aws s3 cp --recursive {url} merged").as_str()
        );
        for m in rep["members"].as_array().unwrap() {
            let want = format!("{url}/members/{}", m["member"].as_str().unwrap());
            assert_eq!(m["dump"], want.as_str(), "{m}");
        }
        // The spares' dumps, uploaded, are not left in the work dir (it keeps the
        // members' plans, which link the backups).
        let left = walk(&tmp.path().join("work/member-dumps"));
        assert!(left.is_empty(), "{left:?}");

        let o = run_pitr(
            tmp.path(),
            &replay_args(
                &c,
                "auto",
                "local",
                &[
                    &["--json", "--accept-incidents", "--workdir", "work-local"][..],
                    &flags,
                ]
                .concat(),
            ),
            &[],
        );
        assert_eq!(code(&o), 0, "{}", show(&o));
        let mut got = storage_common::objects(
            &server.storage(),
            &pitr::storage::Location::parse(url).unwrap(),
        );
        storage_common::take_manifest(&mut got);
        let copy = tmp.path().join("copy");
        for (k, bytes) in &got {
            let p = copy.join(k);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, bytes).unwrap();
        }
        let local = tmp.path().join("local");
        let rel = |root: &Path| -> Vec<String> {
            let mut v: Vec<String> = walk(root)
                .iter()
                .map(|p| p.strip_prefix(root).unwrap().display().to_string())
                .collect();
            v.sort();
            v
        };
        assert_eq!(rel(&copy), rel(&local));
        assert_same_dump(&copy, &local, "the merged dump in the bucket");
    }
}

/// Every file under `dir` (none when it does not exist).
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(rd) = fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}
