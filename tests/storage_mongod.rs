//! `pitr replay --engine mongod` with its inputs and its output in a bucket: an
//! s3s-fs server on loopback (in this test process; it checks SigV4 signatures), the
//! real `pitr` binary, pitr's stand-in `mongod` and the REAL `mongorestore` and
//! `mongodump` of each mongo-tools release (`replay_common::tool_sets`). The backup
//! is downloaded into the work dir first (mongorestore reads local files only, and
//! the run says how much and where), the oplog read in place; the result must be the
//! one from the same files read locally: the same verification rows (counts and
//! dbHash), PASSED. `--out s3://...` uploads mongodump's hand-over dump all or
//! nothing, and a prefix that already holds objects is refused before any work.

mod common;
mod replay_common;
mod storage_common;

use std::path::{Path, PathBuf};
use std::process::Output;

use pitr::storage::{Found, Location};
use pitr_fixturegen::layout::{convert, Layout};
use replay_common::*;
use serde_json::Value;
use storage_common::{upload_tree, S3Server, ACCESS_KEY, SECRET_KEY};

const BUCKET: &str = "pitr-incident";

/// The incident's backup (as a directory and as a gzip archive) and oplog, locally
/// in `local` and in `s3://pitr-incident/incident/`.
struct Incident {
    tmp: tempfile::TempDir,
    server: S3Server,
    local: PathBuf,
}

impl Incident {
    fn start() -> Incident {
        let tmp = tempfile::tempdir().unwrap();
        let local = tmp.path().join("local");
        std::fs::create_dir_all(&local).unwrap();
        for l in [Layout::Dir, Layout::ArchiveGzip] {
            convert(
                &Path::new(FIXTURE).join("backup"),
                l,
                &local.join(l.file_name()),
            )
            .unwrap();
        }
        std::fs::copy(
            Path::new(FIXTURE).join("oplog.bson"),
            local.join("oplog.bson"),
        )
        .unwrap();
        let server = S3Server::start(&tmp.path().join("s3"), &[BUCKET]);
        upload_tree(
            &server.storage(),
            &local,
            &Location::parse(&format!("s3://{BUCKET}/incident")).unwrap(),
        );
        Incident { tmp, server, local }
    }

    fn url(&self, rel: &str) -> String {
        format!("s3://{BUCKET}/incident/{rel}")
    }

    fn local(&self, rel: &str) -> String {
        self.local.join(rel).to_str().unwrap().to_string()
    }

    /// `pitr replay --engine mongod` in a new directory `run` of the temp dir (work
    /// dir `run/work`), with this server's credentials in the environment.
    fn replay(&self, run: &str, bins: &Bins, backup: &str, oplog: &str, extra: &[&str]) -> Ran {
        let cwd = self.tmp.path().join(run);
        std::fs::create_dir_all(&cwd).unwrap();
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
            "auto",
            "--mongodb-bin",
            &bin,
            "--workdir",
            "work",
            "--grace",
            "3s",
        ];
        args.extend_from_slice(extra);
        let mut c = pitr_cmd(&cwd, &args, &[]);
        self.server.point(&mut c, ACCESS_KEY, SECRET_KEY);
        Ran {
            out: c.output().expect("run pitr"),
            work: cwd.join("work"),
        }
    }
}

struct Ran {
    out: Output,
    work: PathBuf,
}

impl Ran {
    fn report(&self) -> Value {
        read_json(&self.work.join("report.json"))
    }
}

/// A run that passed: exit 0, PASSED, verification passed; its verification rows.
fn passed(r: &Ran, what: &str) -> Vec<(String, bool, Option<u64>, String)> {
    assert_eq!(code(&r.out), 0, "{what}: {}", show(&r.out));
    let report = r.report();
    assert_eq!(report["result"], "passed", "{what}");
    assert_eq!(report["verify"]["passed"], true, "{what}");
    assert!(
        stdout(&r.out).contains("PASSED"),
        "{what}: {}",
        show(&r.out)
    );
    let pids = pids_in_report(&report);
    assert_nothing_running(&pids, &r.work);
    assert_no_temp_dirs(&r.work, None);
    verify_rows(&report["verify"])
}

/// The download said how much and where, and the copy is gone after the run.
fn downloaded(r: &Ran, url: &str, name: &str, objects: &str) {
    let err = stderr(&r.out);
    let dest = r.work.join("download").join(name);
    let line = err
        .lines()
        .find(|l| l.contains("downloading the backup"))
        .unwrap_or_else(|| panic!("no download message: {}", show(&r.out)));
    assert!(
        line.contains(url) && line.contains(&dest.display().to_string()) && line.contains(objects),
        "{line}"
    );
    assert!(
        line.contains("mongorestore reads local files only"),
        "{line}"
    );
    assert!(
        !dest.exists(),
        "the download was left in {}",
        dest.display()
    );
    assert!(!err.contains(SECRET_KEY), "{err}");
}

#[test]
fn backup_and_oplog_in_a_bucket_replay_with_mongod_as_from_local_files() {
    let sets = tool_sets("backup_and_oplog_in_a_bucket_replay_with_mongod");
    if sets.is_empty() {
        return;
    }
    let inc = Incident::start();
    for (i, bins) in sets.iter().enumerate() {
        let label = &bins.label;
        let local = inc.replay(
            &format!("local-{i}"),
            bins,
            &inc.local("backup"),
            &inc.local("oplog.bson"),
            &[],
        );
        let want = passed(&local, &format!("{label}: local"));
        assert!(
            want.iter()
                .any(|r| r.0 == "shop.orders" && r.2 == Some(113)),
            "{want:?}"
        );

        // A directory backup: every object downloaded, then one mongorestore run
        // over the plan's restore/, as from local files. The plan's passes over the
        // oplog object (the scan, the slice, the prediction) GET it once: the first
        // copies it into the work dir for the others (`oplog::spool`); the copy is
        // gone after the run.
        let gets = inc.server.gets_of(BUCKET, "incident/oplog.bson");
        let dir = inc.replay(
            &format!("dir-{i}"),
            bins,
            &inc.url("backup"),
            &inc.url("oplog.bson"),
            &[],
        );
        assert_eq!(passed(&dir, &format!("{label}: dir")), want, "{label}: dir");
        assert_eq!(
            inc.server.gets_of(BUCKET, "incident/oplog.bson") - gets,
            1,
            "{label}: the oplog object is read from the bucket once"
        );
        assert!(!dir.work.join("oplog-copy").exists(), "the copy is left");
        downloaded(&dir, &inc.url("backup"), "backup", "objects)");
        let cmd = step(&dir.report(), "restore_backup")["commands"][0]
            .as_str()
            .unwrap()
            .to_string();
        assert!(
            cmd.ends_with(&format!("{}/plan/restore", dir.work.display())),
            "{cmd}"
        );

        // A dry run downloads nothing and says that the real run will.
        let dry = inc.replay(
            &format!("dry-{i}"),
            bins,
            &inc.url("backup"),
            &inc.url("oplog.bson"),
            &["--dry-run"],
        );
        assert_eq!(code(&dry.out), code(&dir.out), "{}", show(&dry.out));
        let err = stderr(&dry.out);
        assert!(err.contains("the real run downloads it first"), "{err}");
        assert!(!err.contains("downloading the backup"), "{err}");
        assert!(!dry.work.join("download").exists());

        // A gzip archive: one object, streamed from the bucket into mongorestore's
        // standard input (with the slice appended to its oplog), never downloaded.
        let archive = inc.replay(
            &format!("archive-{i}"),
            bins,
            &inc.url("backup-gzip.archive"),
            &inc.url("oplog.bson"),
            &[],
        );
        assert_eq!(
            passed(&archive, &format!("{label}: archive")),
            want,
            "{label}: archive"
        );
        assert!(
            !stderr(&archive.out).contains("downloading the backup"),
            "{}",
            show(&archive.out)
        );
        assert!(!archive.work.join("download").exists());
        let report = archive.report();
        let restore = step(&report, "restore_backup");
        let cmd = restore["commands"][0].as_str().unwrap();
        assert!(
            cmd.contains(" --gzip ") && cmd.ends_with(" --archive"),
            "{cmd}"
        );
        let plan = read_json(&archive.work.join("plan/plan.json"));
        assert_eq!(
            plan["restore"]["stream"]["backup"],
            inc.url("backup-gzip.archive"),
            "{}",
            plan["restore"]
        );
        assert!(
            !archive.work.join("plan/restore.archive").exists(),
            "a copy of the archive was written"
        );
    }
}

#[test]
fn out_to_a_bucket_uploads_the_handover_dump_all_or_nothing() {
    let sets = tool_sets("out_to_a_bucket_uploads_the_handover_dump");
    let Some(bins) = sets.first() else {
        return;
    };
    let inc = Incident::start();
    let out = format!("s3://{BUCKET}/restored/run-1");
    let r = inc.replay(
        "out",
        bins,
        &inc.url("backup"),
        &inc.local("oplog.bson"),
        &["--out", &out],
    );
    passed(&r, "--out URL");
    let report = r.report();
    assert_eq!(report["dump"]["dir"], out.as_str(), "{report}");
    let err = stderr(&r.out);
    assert!(
        err.contains(&format!("uploading the dump to {out}")),
        "{err}"
    );
    assert!(!r.work.join("upload").exists(), "the staged dump was left");

    // In the bucket: the dump with its manifest, no in-progress marker; orders holds
    // the 113 documents the drop destroyed.
    let s = inc.server.storage();
    let Found::Prefix(objs) = s.stat(&Location::parse(&out).unwrap()).unwrap() else {
        panic!("nothing at {out}");
    };
    let keys: Vec<String> = objs
        .iter()
        .map(|o| o.location.to_string()[out.len() + 1..].to_string())
        .collect();
    assert!(keys.contains(&".pitr-dump.json".to_string()), "{keys:?}");
    assert!(
        !keys.contains(&".pitr-upload-in-progress".to_string()),
        "{keys:?}"
    );
    let orders = inc.tmp.path().join("orders.bson");
    let mut f = std::fs::File::create(&orders).unwrap();
    std::io::copy(
        &mut s
            .open_read(&Location::parse(&format!("{out}/shop/orders.bson")).unwrap())
            .unwrap(),
        &mut f,
    )
    .unwrap();
    assert_eq!(bson_docs(&orders), 113);

    // The same URL again: refused before any work (pitr never overwrites a dump).
    let again = inc.replay(
        "again",
        bins,
        &inc.url("backup"),
        &inc.local("oplog.bson"),
        &["--out", &out],
    );
    assert_eq!(code(&again.out), 2, "{}", show(&again.out));
    let err = stderr(&again.out);
    assert!(
        err.contains("already holds") && err.contains("hint:"),
        "{err}"
    );
    assert!(!err.contains("downloading"), "{err}");
    assert!(
        !again.work.exists(),
        "a work dir was left for a refused run"
    );

    // A backup whose upload is in progress (or was cut) is refused before anything
    // is downloaded or started.
    s.put_if_absent(
        &Location::parse(&inc.url("backup/.pitr-upload-in-progress")).unwrap(),
        b"another pitr\n",
    )
    .unwrap();
    let cut = inc.replay(
        "cut",
        bins,
        &inc.url("backup"),
        &inc.local("oplog.bson"),
        &[],
    );
    assert_eq!(code(&cut.out), 2, "{}", show(&cut.out));
    let err = stderr(&cut.out);
    assert!(err.contains(".pitr-upload-in-progress"), "{err}");
    assert!(!err.contains("downloading the backup"), "{err}");
    assert!(!cut.work.join("download").exists());
}

/// A store slow to answer (down for about a second, then back) while
/// `--engine mongod` looks at a backup in a bucket (an archive to stream, or a
/// directory to download: its listing) is said while pitr waits: lines every
/// interval, then how it ended, and the plan is made as without the wait.
/// Regression: those first requests' retries printed nothing.
#[test]
fn a_store_slow_to_answer_is_reported_while_the_mongod_engine_waits_for_it() {
    let bins = bins("a_store_slow_to_answer_is_reported_while_the_mongod_engine_waits");
    let mut inc = Incident::start();
    let oplog = inc.local("oplog.bson");
    let bin = bins.dir.display().to_string();
    for name in ["backup-gzip.archive", "backup"] {
        let backup = inc.url(name);
        let args = [
            "replay",
            "--engine",
            "mongod",
            "--dry-run",
            "--backup",
            &backup,
            "--oplog",
            &oplog,
            "--until",
            "auto",
            "--mongodb-bin",
            &bin,
        ];
        let mut c = pitr_cmd(inc.tmp.path(), &args, &[]);
        inc.server.point(&mut c, ACCESS_KEY, SECRET_KEY);
        c.env("PITR_PROGRESS_INTERVAL", "0.2s")
            .env("PITR_STORAGE_RETRIES", "10")
            .env("PITR_STORAGE_RETRY_SECS", "60")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        inc.server.kill();
        let child = c.spawn().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(1200));
        inc.server.restart();
        let o = child.wait_with_output().unwrap();
        assert_eq!(code(&o), 0, "{name}: {}", show(&o));
        let err = stderr(&o);
        let prefix = format!("pitr: opening {backup}: ");
        let lines: Vec<&str> = err.lines().filter(|l| l.starts_with(&prefix)).collect();
        let (last, waiting) = lines.split_last().expect(&err);
        assert!(waiting.len() >= 3, "{name}: {err}");
        assert!(waiting.iter().all(|l| l.contains(": waiting, ")), "{err}");
        assert!(last.contains(": opened in "), "{err}");
        assert!(
            stdout(&o).contains("Until     auto -> limit 1795223165:1"),
            "{name}: {}",
            show(&o)
        );
    }
}
