//! The commands an on-call engineer runs, with their inputs in a bucket: an s3s-fs
//! server on loopback (in this test process; it checks SigV4 signatures), the real
//! `pitr` binary reading `s3://` URLs with the credentials in its environment. Each
//! command must give what it gives on the same files read locally: find-drop's
//! findings, oplog stats and cat, plan's counts, and the embedded replay's counts and
//! dbHash, for every backup layout mongodump writes (a directory read object by
//! object, a gzip directory, an archive, a gzip archive) and for oplogs as `.bson`,
//! gzip, a dump prefix and a `pitr archive` prefix. And the refusals: wrong
//! credentials, a missing bucket, a URL with a secret, a command that cannot write a
//! URL yet.

mod common;
mod storage_common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use pitr::storage::Location;
use pitr_fixturegen::layout::{convert, Layout};
use serde_json::Value;
use storage_common::{
    objects, restored, take_manifest, upload_tree, S3Server, ACCESS_KEY, SECRET_KEY,
};

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/incident");
const BUCKET: &str = "pitr-incident";

fn gzip_file(from: &Path, to: &Path) {
    let mut enc = flate2::write::GzEncoder::new(
        std::fs::File::create(to).unwrap(),
        flate2::Compression::default(),
    );
    std::io::copy(&mut std::fs::File::open(from).unwrap(), &mut enc).unwrap();
    enc.finish().unwrap();
}

/// A bucket holding the incident: `s3://pitr-incident/incident/` with the fixture's
/// backup in every layout (`backup`, `backup-gzip`, `backup.archive`,
/// `backup-gzip.archive`), `oplog.bson` and `oplog.bson.gz`; the same files in
/// `local` for the comparison.
struct Incident {
    _tmp: tempfile::TempDir,
    server: S3Server,
    local: PathBuf,
}

/// A collection no entry touches, in `_id` order: read from local files of a
/// directory backup it stays in its file (`src/engine/replica/cold.rs`); read from
/// a bucket or an archive it is loaded; all give the same replay.
fn add_untouched(backup: &Path) {
    add_collection(
        backup,
        "archive",
        (0..500i32).map(|i| bson::doc! { "_id": i, "v": i * 3 }),
    );
}

/// `quiet.<coll>` in the directory backup `backup`: `docs` (in `_id` order) and
/// its metadata.
fn add_collection(backup: &Path, coll: &str, docs: impl Iterator<Item = bson::Document>) {
    let dir = backup.join("quiet");
    std::fs::create_dir_all(&dir).unwrap();
    let bytes: Vec<u8> = docs.flat_map(|d| bson::to_vec(&d).unwrap()).collect();
    std::fs::write(dir.join(format!("{coll}.bson")), bytes).unwrap();
    std::fs::write(
        dir.join(format!("{coll}.metadata.json")),
        format!(
            r#"{{"indexes":[{{"v":{{"$numberInt":"2"}},"key":{{"_id":{{"$numberInt":"1"}}}},"name":"_id_"}}],"collectionName":"{coll}","type":"collection"}}"#
        ),
    )
    .unwrap();
}

impl Incident {
    fn start() -> Incident {
        let tmp = tempfile::tempdir().unwrap();
        let local = tmp.path().join("local");
        std::fs::create_dir_all(&local).unwrap();
        // The fixture's backup with a collection no entry touches, in every layout.
        let src = tmp.path().join("src");
        convert(&Path::new(FIXTURE).join("backup"), Layout::Dir, &src).unwrap();
        add_untouched(&src);
        for l in Layout::ALL {
            convert(&src, l, &local.join(l.file_name())).unwrap();
        }
        std::fs::copy(
            Path::new(FIXTURE).join("oplog.bson"),
            local.join("oplog.bson"),
        )
        .unwrap();
        gzip_file(&local.join("oplog.bson"), &local.join("oplog.bson.gz"));
        let server = S3Server::start(&tmp.path().join("s3"), &[BUCKET]);
        upload_tree(
            &server.storage(),
            &local,
            &Location::parse(&format!("s3://{BUCKET}/incident")).unwrap(),
        );
        Incident {
            _tmp: tmp,
            server,
            local,
        }
    }

    fn url(&self, rel: &str) -> String {
        format!("s3://{BUCKET}/incident/{rel}")
    }

    fn local(&self, rel: &str) -> String {
        self.local.join(rel).to_str().unwrap().to_string()
    }

    /// `pitr args` in `cwd` with this server's credentials in the environment.
    fn pitr_in(&self, cwd: &Path, args: &[&str]) -> Output {
        self.pitr_with(cwd, args, &[])
    }

    fn pitr_with(&self, cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
        self.command(cwd, args, env).output().expect("run pitr")
    }

    /// The command [`Incident::pitr_with`] runs, to start it in the background.
    fn command(&self, cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Command {
        let mut c = Command::new(common::pitr_bin());
        c.args(args).current_dir(cwd);
        for (k, _) in std::env::vars_os() {
            let k = k.to_string_lossy().into_owned();
            if k.starts_with("PITR_") {
                c.env_remove(&k);
            }
        }
        self.server.point(&mut c, ACCESS_KEY, SECRET_KEY);
        for (k, v) in env {
            c.env(k, v);
        }
        c
    }

    fn pitr(&self, args: &[&str]) -> Output {
        self.pitr_in(&self.local, args)
    }
}

fn show(o: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
        o.status.code(),
        common::stdout(o),
        common::stderr(o)
    )
}

fn json(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", show(o)))
}

#[test]
fn find_drop_reads_backup_and_oplog_in_a_bucket_as_local_files() {
    let inc = Incident::start();
    let local = inc.pitr(&[
        "find-drop",
        "--json",
        "--backup",
        &inc.local("backup"),
        &inc.local("oplog.bson"),
    ]);
    assert_eq!(common::code(&local), 0, "{}", show(&local));
    let want = json(&local);
    assert!(!want.as_array().unwrap().is_empty());
    for (backup, oplog) in [
        ("backup", "oplog.bson"),
        ("backup-gzip", "oplog.bson.gz"),
        ("backup.archive", "oplog.bson"),
        ("backup-gzip.archive", "oplog.bson.gz"),
    ] {
        let o = inc.pitr(&[
            "find-drop",
            "--json",
            "--backup",
            &inc.url(backup),
            &inc.url(oplog),
        ]);
        assert_eq!(common::code(&o), 0, "{backup} {oplog}: {}", show(&o));
        assert_eq!(json(&o), want, "{backup} {oplog}");
        assert!(o.stderr.is_empty(), "{backup}: {}", show(&o));
    }
}

/// Every `.bson` file under `dir`, by its path below it, with its bytes.
fn bson_files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    common::files_under(dir)
        .into_iter()
        .filter(|(rel, _)| rel.ends_with(".bson"))
        .collect()
}

/// A sharded cluster whose members' backups and oplogs are in a bucket: the
/// cluster file names them by URL, and find-drop, plan and the embedded replay
/// `--cluster` give what they give on the same files read locally (the merged dump
/// byte for byte).
#[test]
fn a_clusters_backups_and_oplogs_in_a_bucket_read_as_local_files() {
    let inc = Incident::start();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/cluster");
    upload_tree(
        &inc.server.storage(),
        &fixture,
        &Location::parse(&format!("s3://{BUCKET}/cluster")).unwrap(),
    );
    let tmp = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(fixture.join("cluster.toml")).unwrap();
    let prefix = format!("s3://{BUCKET}/cluster/");
    let urls: String = text
        .lines()
        .map(|l| {
            if l.starts_with("backup =") || l.starts_with("oplog =") {
                l.replace("\"", "\u{1}")
                    .replacen('\u{1}', &format!("\"{prefix}"), 1)
                    .replace("\u{1}, \u{1}", &format!("\", \"{prefix}"))
                    .replace('\u{1}', "\"")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        urls.contains("s3://pitr-incident/cluster/shard2/oplog.bson"),
        "{urls}"
    );
    std::fs::write(tmp.path().join("bucket.toml"), urls).unwrap();
    let local_toml = fixture.join("cluster.toml").display().to_string();
    let run = |file: &str, args: &[&str], dir: &str| {
        let cwd = tmp.path().join(dir);
        std::fs::create_dir_all(&cwd).unwrap();
        let mut a = args.to_vec();
        a.extend(["--cluster", file]);
        let o = inc.pitr_in(&cwd, &a);
        assert_eq!(o.status.code(), Some(0), "{args:?} {file}: {}", show(&o));
        (o, cwd)
    };
    let bucket_toml = tmp.path().join("bucket.toml").display().to_string();
    let (a, _) = run(&local_toml, &["find-drop", "--json"], "fl");
    let (b, _) = run(&bucket_toml, &["find-drop", "--json"], "fb");
    let limits = |o: &Output| -> Vec<Value> {
        json(o)
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["oplog_limit"].clone())
            .collect()
    };
    assert!(!limits(&a).is_empty(), "{}", show(&a));
    assert_eq!(limits(&a), limits(&b));
    let replay = ["replay", "--until", "auto", "--out", "out", "--json"];
    let (a, la) = run(&local_toml, &replay, "rl");
    let (b, lb) = run(&bucket_toml, &replay, "rb");
    assert_eq!(json(&a)["limit"], json(&b)["limit"]);
    let (fa, fb) = (bson_files(&la.join("out")), bson_files(&lb.join("out")));
    assert!(fa.len() >= 3, "{fa:?}");
    assert!(
        fa == fb,
        "the merged dumps differ: {:?} vs {:?}",
        fa.iter().map(|f| &f.0).collect::<Vec<_>>(),
        fb.iter().map(|f| &f.0).collect::<Vec<_>>()
    );

    // --out in the bucket: the same merged dump uploaded with its manifest, nothing
    // left where it ran (no `s3:` directory, no staged copy), the download named.
    let url = format!("s3://{BUCKET}/restored/cluster");
    let to_bucket = ["replay", "--until", "auto", "--out", &url, "--json"];
    let (o, cwd) = run(&bucket_toml, &to_bucket, "ru");
    assert!(
        common::stderr(&o).contains(&format!(
            "--out {url}: the merged dump is streamed there as it is written (no copy on local disk)"
        )),
        "{}",
        show(&o)
    );
    let r = json(&o);
    assert_eq!(r["out"], url.as_str());
    assert_eq!(r["sharding_file"], format!("{url}/sharding.json"));
    assert_eq!(
        r["download"],
        format!("aws s3 cp --recursive {url} cluster").as_str()
    );
    assert_eq!(
        std::fs::read_dir(&cwd).unwrap().count(),
        0,
        "nothing left where it ran"
    );
    let mut got = objects(&inc.server.storage(), &Location::parse(&url).unwrap());
    take_manifest(&mut got);
    let local_out: Vec<(String, Vec<u8>)> =
        common::files_under(&la.join("out")).into_iter().collect();
    assert_eq!(
        got.iter().map(|g| &g.0).collect::<Vec<_>>(),
        local_out.iter().map(|l| &l.0).collect::<Vec<_>>()
    );
    let got_bson: Vec<_> = got
        .into_iter()
        .filter(|(k, _)| k.ends_with(".bson"))
        .collect();
    assert!(
        got_bson == fa,
        "the uploaded merged dump differs from the local one"
    );
    // The same URL again: refused before any work.
    let o = inc.pitr_in(
        &cwd,
        &[&to_bucket[..], &["--cluster", &bucket_toml]].concat(),
    );
    assert_eq!(common::code(&o), 2, "{}", show(&o));
    assert!(common::stderr(&o).contains("already holds"), "{}", show(&o));
    // As text: the download, then mongorestore on the local copy.
    let url = format!("s3://{BUCKET}/restored/cluster-2");
    let (o, _) = run(
        &bucket_toml,
        &["replay", "--until", "auto", "--out", &url],
        "rt",
    );
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains(&format!("One logical dump in `{url}`"))
            && text.contains(&format!(
                "Download it first (mongorestore reads local files only):\n  aws s3 cp --recursive {url} cluster-2\n"
            ))
            && text.contains("mongorestore --uri mongodb://MONGOS cluster-2\n"),
        "{text}"
    );
    // --per-member: each member's dump is named where it ends up, in the bucket.
    let url = format!("s3://{BUCKET}/restored/cluster-3");
    let (o, _) = run(
        &bucket_toml,
        &[
            "replay",
            "--until",
            "auto",
            "--per-member",
            "--out",
            &url,
            "--json",
        ],
        "rp",
    );
    let members = json(&o)["members"].as_array().unwrap().clone();
    assert!(!members.is_empty());
    for m in &members {
        let want = format!("{url}/members/{}", m["member"].as_str().unwrap());
        assert_eq!(m["dump"], want.as_str(), "{m}");
    }
    // ... and there: each member's files, byte for byte those of a local run,
    // beside the merged dump's, all in the manifest.
    let (_, lp) = run(
        &bucket_toml,
        &["replay", "--until", "auto", "--per-member", "--out", "out"],
        "rpl",
    );
    let mut got = objects(&inc.server.storage(), &Location::parse(&url).unwrap());
    take_manifest(&mut got);
    let want: Vec<(String, Vec<u8>)> = common::files_under(&lp.join("out")).into_iter().collect();
    assert!(
        want.iter().any(|(k, _)| k.starts_with("members/")),
        "{:?}",
        want.iter().map(|w| &w.0).collect::<Vec<_>>()
    );
    assert_eq!(
        got.iter().map(|g| &g.0).collect::<Vec<_>>(),
        want.iter().map(|w| &w.0).collect::<Vec<_>>()
    );
    assert!(
        got == want,
        "the uploaded --per-member dump differs from the local one"
    );
}

#[test]
fn oplog_stats_and_cat_read_a_bucket_as_local_files() {
    let inc = Incident::start();
    // Files, a gzip file, a dump prefix (its oplog.bson), an archive (its oplog).
    for (url, local) in [
        ("oplog.bson", "oplog.bson"),
        ("oplog.bson.gz", "oplog.bson"),
        ("backup", "backup"),
        ("backup-gzip.archive", "backup.archive"),
    ] {
        let o = inc.pitr(&["oplog", "stats", "--json", &inc.url(url)]);
        assert_eq!(common::code(&o), 0, "{url}: {}", show(&o));
        let l = inc.pitr(&["oplog", "stats", "--json", &inc.local(local)]);
        assert_eq!(common::code(&l), 0, "{local}: {}", show(&l));
        let (mut got, mut want) = (json(&o), json(&l));
        // The sources are named as given.
        for v in [&mut got, &mut want] {
            v.as_object_mut().unwrap().remove("sources");
        }
        assert_eq!(got, want, "{url}");
        let cat = |src: &str| {
            let o = inc.pitr(&["oplog", "cat", "--json", "--limit", "50", src]);
            assert_eq!(common::code(&o), 0, "{src}: {}", show(&o));
            o.stdout
        };
        assert_eq!(cat(&inc.url(url)), cat(&inc.local(local)), "{url}");
    }
}

fn replay(inc: &Incident, cwd: &Path, backup: &str, oplog: &str, limit: &str) -> Vec<Value> {
    let o = inc.pitr_in(
        cwd,
        &[
            "replay",
            "--backup",
            backup,
            "--oplog",
            oplog,
            "--until",
            limit,
            "--workdir",
            "work",
            "--out",
            "out",
            "--accept-incidents",
        ],
    );
    assert_eq!(common::code(&o), 0, "{backup} {oplog}: {}", show(&o));
    let text = std::fs::read_to_string(cwd.join("work/report.json")).unwrap();
    let report: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(report["engine"], "embedded");
    restored(&report)
}

#[test]
fn the_embedded_replay_restores_from_a_bucket_what_it_restores_from_files() {
    let inc = Incident::start();
    let truth: Value = serde_json::from_str(
        &std::fs::read_to_string(Path::new(FIXTURE).join("truth.json")).unwrap(),
    )
    .unwrap();
    let limit = truth["incidents"][0]["oplog_limit"].as_str().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let run = |name: &str, backup: &str, oplog: &str| {
        let cwd = tmp.path().join(name);
        std::fs::create_dir_all(&cwd).unwrap();
        replay(&inc, &cwd, backup, oplog, limit)
    };
    let want = run("local", &inc.local("backup"), &inc.local("oplog.bson"));
    assert!(want.iter().any(|r| r["ns"] == "shop.orders"), "{want:?}");
    // `quiet.archive` (no entry touches it) stayed in its local file; from the
    // bucket it is loaded (objects are streams): the same rows below.
    let from_files = |name: &str| {
        let text = std::fs::read_to_string(tmp.path().join(name).join("work/report.json")).unwrap();
        let report: Value = serde_json::from_str(&text).unwrap();
        report["engine_stats"]["collections_from_backup_files"]
            .as_u64()
            .unwrap()
    };
    assert!(from_files("local") >= 1);
    assert!(
        want.iter()
            .any(|r| r["ns"] == "quiet.archive" && r["documents"] == 500),
        "{want:?}"
    );
    for (backup, oplog) in [
        ("backup", "oplog.bson"),
        ("backup-gzip", "oplog.bson.gz"),
        ("backup.archive", "oplog.bson.gz"),
        ("backup-gzip.archive", "oplog.bson"),
    ] {
        let got = run(&format!("s3-{backup}"), &inc.url(backup), &inc.url(oplog));
        assert_eq!(got, want, "{backup} {oplog} at {limit}");
        assert_eq!(from_files(&format!("s3-{backup}")), 0, "{backup}");
    }
}

/// The replay's passes over an oplog object (the plan's scan, the slice) GET it once:
/// the first pass copies it into the work dir for the others (`oplog::spool`), the copy
/// is gone after the run, and the result is the same. Without the copy
/// (`--no-space-check` turns it off) every pass GETs the object.
#[test]
fn the_embedded_replay_gets_an_oplog_object_once() {
    let inc = Incident::start();
    let truth: Value = serde_json::from_str(
        &std::fs::read_to_string(Path::new(FIXTURE).join("truth.json")).unwrap(),
    )
    .unwrap();
    let limit = truth["incidents"][0]["oplog_limit"].as_str().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let key = "incident/oplog.bson.gz";
    let cwd = tmp.path().join("once");
    std::fs::create_dir_all(&cwd).unwrap();
    let before = inc.server.gets_of(BUCKET, key);
    let got = replay(
        &inc,
        &cwd,
        &inc.url("backup"),
        &inc.url("oplog.bson.gz"),
        limit,
    );
    // The fixture's oplog is smaller than one range: one GET in all, for every pass.
    assert_eq!(inc.server.gets_of(BUCKET, key) - before, 1);
    assert!(!cwd.join("work/oplog-copy").exists(), "the copy is left");

    let cwd = tmp.path().join("every-pass");
    std::fs::create_dir_all(&cwd).unwrap();
    let before = inc.server.gets_of(BUCKET, key);
    let o = inc.pitr_in(
        &cwd,
        &[
            "replay",
            "--backup",
            &inc.url("backup"),
            "--oplog",
            &inc.url("oplog.bson.gz"),
            "--until",
            limit,
            "--workdir",
            "work",
            "--out",
            "out",
            "--accept-incidents",
            "--no-space-check",
        ],
    );
    assert_eq!(common::code(&o), 0, "{}", show(&o));
    let passes = inc.server.gets_of(BUCKET, key) - before;
    assert!(passes >= 2, "{passes} GETs without the copy");
    let text = std::fs::read_to_string(cwd.join("work/report.json")).unwrap();
    let report: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(restored(&report), got);
}

#[test]
fn plan_reads_a_bucket_and_says_what_mongorestore_would_need() {
    let inc = Incident::start();
    let tmp = tempfile::tempdir().unwrap();
    let plan = |backup: &str, oplog: &str, out: &str| {
        let o = inc.pitr_in(
            tmp.path(),
            &[
                "plan", "--backup", backup, "--oplog", oplog, "--until", "auto", "--json", "--out",
                out,
            ],
        );
        assert_eq!(common::code(&o), 0, "{backup}: {}", show(&o));
        (json(&o), common::stderr(&o))
    };
    let (want, _) = plan(&inc.local("backup"), &inc.local("oplog.bson"), "p-local");
    let (got, err) = plan(&inc.url("backup"), &inc.url("oplog.bson"), "p-s3");
    assert!(err.contains("object storage"), "{err}");
    for k in ["until", "coverage"] {
        assert_eq!(got[k], want[k], "{k}");
    }
    assert_eq!(got["expected"], want["expected"]);
    assert!(got["expected"].is_array(), "{got}");
}

/// A store slow to answer (here: down for about a second, then back) is said while
/// pitr waits for it: the space check's look-up of the inputs' sizes (the first
/// request of a plan or a replay), and with `--no-space-check` the plan's opening
/// of the oplog (as in `find-drop` and `oplog`): lines every interval, then how it
/// ended, and the plan is made as without the wait. Regression: the retries of
/// that first request printed nothing.
#[test]
fn a_store_slow_to_answer_is_reported_while_pitr_waits_for_it() {
    let mut inc = Incident::start();
    let tmp = tempfile::tempdir().unwrap();
    let oplog = inc.url("oplog.bson");
    let backup = inc.local("backup");
    let env = [
        ("PITR_PROGRESS_INTERVAL", "0.2s"),
        ("PITR_STORAGE_RETRIES", "10"),
        ("PITR_STORAGE_RETRY_SECS", "60"),
    ];
    for (extra, what) in [
        (
            "--space-check",
            "looking up the sizes of the backup and the oplog",
        ),
        ("--no-space-check", &*format!("opening {oplog}")),
    ] {
        let out = format!("p{extra}");
        let mut args = vec![
            "plan", "--backup", &backup, "--oplog", &oplog, "--until", "auto", "--out", &out,
        ];
        if extra == "--no-space-check" {
            args.push(extra);
        }
        inc.server.kill();
        let child = inc
            .command(tmp.path(), &args, &env)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(1200));
        inc.server.restart();
        let o = child.wait_with_output().unwrap();
        assert_eq!(common::code(&o), 0, "{}", show(&o));
        let err = common::stderr(&o);
        let prefix = format!("pitr: {what}: ");
        let lines: Vec<&str> = err.lines().filter(|l| l.starts_with(&prefix)).collect();
        let (last, waiting) = lines.split_last().expect(&err);
        assert!(waiting.len() >= 3, "{what}: {err}");
        assert!(waiting.iter().all(|l| l.contains(": waiting, ")), "{err}");
        assert!(
            last.contains(": done in ") || last.contains(": opened in "),
            "{err}"
        );
        assert!(
            common::stdout(&o).contains("Until     auto -> limit 1795223165:1"),
            "{}",
            show(&o)
        );
    }
}

#[test]
fn wrong_credentials_a_missing_bucket_and_a_secret_in_the_url_are_refused() {
    let inc = Incident::start();
    let cwd = inc.local.clone();
    // A wrong secret: the server refuses the signature.
    let o = inc.pitr_with(
        &cwd,
        &["find-drop", &inc.url("oplog.bson")],
        &[("AWS_SECRET_ACCESS_KEY", "not-the-secret")],
    );
    assert_eq!(common::code(&o), 2, "{}", show(&o));
    let err = common::stderr(&o);
    assert!(err.contains(&inc.url("oplog.bson")), "{err}");
    assert!(err.contains("hint:"), "{err}");
    assert!(!err.contains("not-the-secret"), "{err}");
    assert!(err.to_lowercase().contains("credential"), "{err}");

    // A missing bucket, for an oplog and for a backup.
    for args in [
        vec!["find-drop", "s3://no-such-bucket/oplog.bson"],
        vec![
            "find-drop",
            "--backup",
            "s3://no-such-bucket/backup",
            "oplog.bson",
        ],
    ] {
        let o = inc.pitr_in(&cwd, &args);
        assert_eq!(common::code(&o), 2, "{args:?}: {}", show(&o));
        let err = common::stderr(&o);
        assert!(err.contains("no-such-bucket"), "{err}");
        assert!(err.contains("bucket"), "{err}");
    }

    // A missing object in an existing bucket: named, not "no such bucket".
    let o = inc.pitr(&["oplog", "stats", &inc.url("nothing-here.bson")]);
    assert_eq!(common::code(&o), 2, "{}", show(&o));
    assert!(
        common::stderr(&o).contains("nothing-here.bson"),
        "{}",
        show(&o)
    );

    // A secret in the URL: refused before any request, and never printed.
    for args in [
        vec![
            "find-drop",
            "s3://AKIAX:topsecret@pitr-incident/incident/oplog.bson",
        ],
        vec![
            "replay",
            "--backup",
            "s3://AKIAX:topsecret@pitr-incident/incident/backup",
            "--oplog",
            "oplog.bson",
            "--until",
            "auto",
        ],
    ] {
        let o = inc.pitr(&args);
        assert_eq!(common::code(&o), 2, "{args:?}: {}", show(&o));
        let all = format!("{}{}", common::stdout(&o), common::stderr(&o));
        assert!(!all.contains("topsecret"), "{all}");
        assert!(all.contains("***"), "{all}");
    }
}

#[test]
fn local_only_inputs_and_outputs_refuse_a_url() {
    let inc = Incident::start();
    let b = inc.url("backup");
    let o_ = inc.url("oplog.bson");
    let cases: Vec<(Vec<&str>, &str)> = vec![(
        vec![
            "plan",
            "--backup",
            &b,
            "--oplog",
            &o_,
            "--until",
            "auto",
            "--out",
            "s3://pitr-incident/plan",
        ],
        "--out",
    )];
    let cases = cases.into_iter().chain([
        (
            vec![
                "rehearse",
                "--uri",
                "mongodb://127.0.0.1:1/",
                "--backup",
                "backup",
                "--metrics",
                "s3://pitr-incident/pitr.prom",
            ],
            "--metrics",
        ),
        (
            vec![
                "cluster",
                "discover",
                "--uri",
                "mongodb://127.0.0.1:1/",
                "--out",
                "s3://pitr-incident/cluster.toml",
            ],
            "--out",
        ),
    ]);
    for (args, flag) in cases {
        let o = inc.pitr(&args);
        assert_eq!(common::code(&o), 2, "{args:?}: {}", show(&o));
        let err = common::stderr(&o);
        assert!(
            err.contains(&format!("`{flag} s3://"))
                && err.contains("takes a local path; object storage is not supported there"),
            "{args:?}: {err}"
        );
        assert!(err.contains("hint:"), "{args:?}: {err}");
        // Nothing was created locally under a directory named `s3:`.
        assert!(!inc.local.join("s3:").exists(), "{args:?}");
    }
    // A cluster file is read from a local path: a URL is refused as such (it was
    // read as the relative path `s3:/...` and reported missing).
    let o = inc.pitr(&["find-drop", "--cluster", "s3://pitr-incident/cluster.toml"]);
    assert_eq!(common::code(&o), 2, "{}", show(&o));
    let err = common::stderr(&o);
    assert!(
        err.contains("a cluster file is read from a local path")
            && err.contains("hint: copy it here first"),
        "{err}"
    );
}

/// A stand-in replica set member serving the fixture's oplog; killed on drop.
struct Member {
    child: std::process::Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Drop for Member {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn member() -> Member {
    use std::process::Stdio;
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("db")).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut cmd = Command::new(common::standin_bin_dir().join("mongod"));
    cmd.args(["--port", &port.to_string(), "--bind_ip", "127.0.0.1"])
        .args(["--replSet", "rs0", "--dbpath"])
        .arg(dir.path().join("db"))
        .arg("--logpath")
        .arg(dir.path().join("mongod.log"))
        .env("PITR_STANDIN_OPLOG", format!("{FIXTURE}/oplog.bson"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("PITR_STANDIN_") {
            cmd.env_remove(&k);
        }
    }
    let m = Member {
        child: cmd.spawn().expect("start the stand-in mongod"),
        port,
        _dir: dir,
    };
    let end = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", m.port)).is_err() {
        assert!(
            std::time::Instant::now() < end,
            "the stand-in mongod did not listen"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    m
}

/// A `pitr archive` directory (the fixture's oplog in 9 chunks), copied to a bucket
/// as it is, reads as the local directory does: only the chunks a range needs, and
/// a chunk missing from the bucket is named.
#[test]
fn an_oplog_archive_in_a_bucket_reads_as_the_local_directory() {
    let inc = Incident::start();
    let m = member();
    let arch = inc.local.join("arch");
    let o = inc.pitr(&[
        "archive",
        "--uri",
        &format!("mongodb://127.0.0.1:{}/", m.port),
        "--dir",
        arch.to_str().unwrap(),
        "--once",
        "--chunk-size",
        "48KiB",
    ]);
    assert_eq!(common::code(&o), 0, "{}", show(&o));
    let storage = inc.server.storage();
    let at = Location::parse(&inc.url("arch")).unwrap();
    upload_tree(&storage, &arch, &at);

    let local = inc.pitr(&["find-drop", "--json", arch.to_str().unwrap()]);
    assert_eq!(common::code(&local), 0, "{}", show(&local));
    let o = inc.pitr(&["find-drop", "--json", &inc.url("arch")]);
    assert_eq!(common::code(&o), 0, "{}", show(&o));
    assert_eq!(json(&o), json(&local));

    let tmp = tempfile::tempdir().unwrap();
    let limit = "1795223165:1";
    let run = |name: &str, oplog: &str| {
        let cwd = tmp.path().join(name);
        std::fs::create_dir_all(&cwd).unwrap();
        replay(&inc, &cwd, &inc.url("backup"), oplog, limit)
    };
    let chunk_keys: Vec<String> = storage
        .list(&at.join("chunks"))
        .unwrap()
        .into_iter()
        .map(|o| o.location.to_string())
        .map(|u| u.trim_start_matches(&format!("s3://{BUCKET}/")).to_string())
        .collect();
    let gets = |k: &String| inc.server.gets_of(BUCKET, k);
    let before: Vec<usize> = chunk_keys.iter().map(gets).collect();
    assert_eq!(
        run("s3", &inc.url("arch")),
        run("local", arch.to_str().unwrap())
    );
    // Each chunk the replay's passes read came from the bucket once (the copy in the
    // work dir served the other passes).
    let after: Vec<usize> = chunk_keys.iter().map(gets).collect();
    for ((k, b), a) in chunk_keys.iter().zip(&before).zip(&after) {
        assert!(a - b <= 1, "{k}: {} GETs", a - b);
    }
    assert!(after.iter().sum::<usize>() > before.iter().sum::<usize>());

    // Chunk 2 holds entries the replay needs: deleted from the bucket, it is named.
    let chunks: Vec<_> = storage
        .list(&at.join("chunks"))
        .unwrap()
        .into_iter()
        .map(|o| o.location)
        .collect();
    assert_eq!(chunks.len(), 9, "{chunks:?}");
    storage.delete(&chunks[1]).unwrap();
    let o = inc.pitr_in(
        tmp.path(),
        &[
            "plan",
            "--backup",
            &inc.url("backup"),
            "--oplog",
            &inc.url("arch"),
            "--until",
            limit,
            "--out",
            "p",
        ],
    );
    assert_eq!(common::code(&o), 2, "{}", show(&o));
    let err = common::stderr(&o);
    assert!(
        err.contains("chunk 2 of the oplog archive `s3://pitr-incident/incident/arch")
            && err.contains("is missing"),
        "{err}"
    );
}

#[test]
fn replay_out_to_a_bucket_uploads_the_same_dump_with_its_manifest_last() {
    let inc = Incident::start();
    let storage = inc.server.storage();
    let truth: Value = serde_json::from_str(
        &std::fs::read_to_string(Path::new(FIXTURE).join("truth.json")).unwrap(),
    )
    .unwrap();
    let limit = truth["incidents"][0]["oplog_limit"].as_str().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let run = |name: &str, out: &str, extra: &[&str]| {
        let cwd = tmp.path().join(name);
        std::fs::create_dir_all(&cwd).unwrap();
        let (backup, oplog) = (inc.url("backup"), inc.url("oplog.bson"));
        let mut args = vec![
            "replay",
            "--backup",
            &backup,
            "--oplog",
            &oplog,
            "--until",
            limit,
            "--workdir",
            "work",
            "--out",
            out,
        ];
        args.extend_from_slice(extra);
        let o = inc.pitr_in(&cwd, &args);
        let report = std::fs::read_to_string(cwd.join("work/report.json"))
            .ok()
            .map(|t| serde_json::from_str::<Value>(&t).unwrap());
        (o, report, cwd)
    };

    // A directory dump: the same files as the local run, plus the manifest; the
    // destroyed documents beside it; nothing left in the work dir.
    let (o, _, local_cwd) = run("local", "out", &[]);
    assert_eq!(common::code(&o), 0, "{}", show(&o));
    let url = "s3://pitr-incident/restored/2026-11-21";
    let (o, report, cwd) = run("s3", url, &[]);
    assert_eq!(common::code(&o), 0, "{}", show(&o));
    let report = report.unwrap();
    assert_eq!(report["out"], url);
    assert!(!cwd.join("work/upload").exists(), "the staged copy stays");
    let at = Location::parse(url).unwrap();
    let mut got = objects(&storage, &at);
    take_manifest(&mut got);
    assert!(
        !got.iter().any(|(k, _)| k.starts_with(".pitr-upload")),
        "{:?}",
        got.iter().map(|g| &g.0).collect::<Vec<_>>()
    );
    assert_eq!(
        got,
        common::files_under(&local_cwd.join("out"))
            .into_iter()
            .collect::<Vec<_>>()
    );
    let lost = objects(&storage, &at.with_name_suffix("-destroyed"));
    assert!(
        local_cwd.join("out-destroyed").is_dir(),
        "the local run wrote no OUT-destroyed"
    );
    assert_eq!(
        lost.len() - 1,
        common::files_under(&local_cwd.join("out-destroyed")).len()
    );
    // Mongorestore reads local files: the handover downloads first.
    let first = report["handover"][0]["command"].as_str().unwrap();
    assert_eq!(first, format!("aws s3 cp --recursive {url} 2026-11-21"));
    assert!(!report["handover"][1]["command"]
        .as_str()
        .unwrap()
        .contains("s3://"));

    // The uploaded dump reads back as a backup.
    let o = inc.pitr(&[
        "find-drop",
        "--json",
        "--backup",
        url,
        &inc.url("oplog.bson"),
    ]);
    assert!(common::code(&o) <= 1, "{}", show(&o));

    // Never over an existing dump.
    let (o, _, _) = run("again", url, &[]);
    assert_eq!(common::code(&o), 2, "{}", show(&o));
    assert!(
        common::stderr(&o).contains("never overwrites"),
        "{}",
        show(&o)
    );

    // Nor at a bucket's root (`<out>-destroyed` would be inside it): refused
    // before any work, a prefix suggested.
    let (o, _, _) = run("root", "s3://pitr-incident", &[]);
    assert_eq!(common::code(&o), 2, "{}", show(&o));
    let err = common::stderr(&o);
    assert!(
        err.contains("is a bucket's root") && err.contains("s3://pitr-incident/restored/"),
        "{err}"
    );
    assert!(!err.contains("reading the backup"), "{err}");

    // An archive: one object, no markers.
    let aurl = "s3://pitr-incident/restored/r.archive";
    let (o, _, _) = run("s3-archive", aurl, &["--archive", "--gzip"]);
    assert_eq!(common::code(&o), 0, "{}", show(&o));
    let (o, _, _) = run("local-archive", "r.archive", &["--archive", "--gzip"]);
    assert_eq!(common::code(&o), 0, "{}", show(&o));
    let a = objects(
        &storage,
        &Location::parse("s3://pitr-incident/restored").unwrap(),
    );
    let archive = a.iter().find(|(k, _)| k == "r.archive").unwrap();
    let local = std::fs::read(tmp.path().join("local-archive/r.archive")).unwrap();
    assert_eq!(archive.1.len(), local.len());

    // A cut upload (its marker left) and an object missing from the manifest's list
    // are refused as backups.
    storage
        .put_if_absent(&at.join(".pitr-upload-in-progress"), b"pid 1\n")
        .unwrap();
    let o = inc.pitr(&["find-drop", "--backup", url, &inc.url("oplog.bson")]);
    assert_eq!(common::code(&o), 2, "{}", show(&o));
    assert!(
        common::stderr(&o).contains("not a complete upload"),
        "{}",
        show(&o)
    );
    storage
        .delete(&at.join(".pitr-upload-in-progress"))
        .unwrap();
    storage.delete(&at.join("shop/orders.bson")).unwrap();
    let o = inc.pitr(&["find-drop", "--backup", url, &inc.url("oplog.bson")]);
    assert_eq!(common::code(&o), 2, "{}", show(&o));
    let err = common::stderr(&o);
    assert!(
        err.contains("`shop/orders.bson`") && err.contains("missing"),
        "{err}"
    );
}

/// A replay streaming its dump to `s3://BUCKET/<prefix>/2026-11-21`, caught as the
/// dump starts (its in-progress marker appears on the server); the backup holds a
/// 192 MiB collection no entry touches (streamed from the backup's file), which
/// keeps it writing. Asserts that nothing of the dump is on local disk then.
struct Streaming {
    child: std::process::Child,
    url: String,
    _tmp: tempfile::TempDir,
}

fn streaming(inc: &Incident, prefix: &str) -> Streaming {
    let tmp = tempfile::tempdir().unwrap();
    let backup = tmp.path().join("backup");
    convert(&Path::new(FIXTURE).join("backup"), Layout::Dir, &backup).unwrap();
    let pad = "p".repeat(1000);
    add_collection(
        &backup,
        "big",
        (0..192 * 1024i32).map(|i| bson::doc! { "_id": i, "pad": &pad }),
    );
    let url = format!("s3://{BUCKET}/{prefix}/2026-11-21");
    let marker = inc
        .server
        .root
        .join(BUCKET)
        .join(prefix)
        .join("2026-11-21/.pitr-upload-in-progress");
    let oplog = inc.local("oplog.bson");
    let mut child = inc
        .command(
            tmp.path(),
            &[
                "replay",
                "--backup",
                backup.to_str().unwrap(),
                "--oplog",
                &oplog,
                "--until",
                "auto",
                "--workdir",
                "work",
                "--out",
                &url,
            ],
            &[],
        )
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    while !marker.exists() {
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(120),
            "the dump never started"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "the replay ended first"
        );
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    // Streamed: nothing of the dump is written on local disk first.
    let local: Vec<String> = common::files_under(&tmp.path().join("work"))
        .into_keys()
        .filter(|k| k.ends_with(".bson"))
        .collect();
    assert!(local.is_empty(), "a local copy: {local:?}");
    Streaming {
        child,
        url,
        _tmp: tmp,
    }
}

/// The embedded replay streams its dump to the bucket (no copy on local disk), all
/// or nothing: the server killed while the dump is written, the replay fails (exit
/// 2) naming the URL, and the prefix is never read as a dump: no manifest, and the
/// in-progress marker left (the cleanup could not reach the server either) makes a
/// read of it refused.
#[test]
fn a_dump_streamed_to_a_bucket_and_cut_midway_is_never_read_as_one() {
    let mut inc = Incident::start();
    let Streaming { child, url, _tmp } = streaming(&inc, "cut");
    inc.server.kill();
    let o = child.wait_with_output().unwrap();
    inc.server.restart();
    assert_eq!(common::code(&o), 2, "{}", show(&o));
    assert!(common::stderr(&o).contains(&url), "{}", show(&o));
    let at = Location::parse(&url).unwrap();
    let left: Vec<String> = objects(&inc.server.storage(), &at)
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert!(!left.iter().any(|k| k == ".pitr-dump.json"), "{left:?}");
    if !left.is_empty() {
        assert!(
            left.iter().any(|k| k == ".pitr-upload-in-progress"),
            "objects without the marker: {left:?}"
        );
    }
    let o = inc.pitr(&["find-drop", "--backup", &url, &inc.url("oplog.bson")]);
    assert_eq!(common::code(&o), 2, "{}", show(&o));
}

/// Ctrl-C while the dump streams to the bucket: exit 130, and every object it wrote
/// is deleted again, the marker last: nothing is left under the prefix.
#[test]
fn a_dump_streamed_to_a_bucket_and_interrupted_leaves_nothing_there() {
    let inc = Incident::start();
    let Streaming { child, url, _tmp } = streaming(&inc, "interrupted");
    // SAFETY: a signal to a child process of this test.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let o = child.wait_with_output().unwrap();
    assert_eq!(common::code(&o), 130, "{}", show(&o));
    assert_nothing_under(&inc, &url);
}

/// No object under the prefix `url` of the incident's server.
fn assert_nothing_under(inc: &Incident, url: &str) {
    let left = objects(&inc.server.storage(), &Location::parse(url).unwrap());
    assert!(
        left.is_empty(),
        "left under {url}: {:?}",
        left.iter().map(|l| &l.0).collect::<Vec<_>>()
    );
}

/// Both or neither, in a bucket: the destroyed documents cannot be made readable
/// after the state was (a `.pitr-dump.json` not pitr's put under
/// `<out>-destroyed` in between), so the state's objects are deleted again, the
/// run fails naming `<out>-destroyed`, and the other writer's object stays.
#[test]
fn a_failed_second_commit_in_a_bucket_deletes_the_state_again() {
    let inc = Incident::start();
    let url = format!("s3://{BUCKET}/restored/both");
    let cwd = tempfile::tempdir().unwrap();
    let (backup, oplog) = (inc.url("backup"), inc.url("oplog.bson"));
    let args = [
        "replay", "--backup", &backup, "--oplog", &oplog, "--until", "auto", "--out", &url,
    ];
    let child = inc
        .command(
            cwd.path(),
            &args,
            &[("PITR_TEST_PAUSE_BETWEEN_COMMITS", "3s")],
        )
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let s = inc.server.storage();
    let manifest = Location::parse(&format!("{url}/.pitr-dump.json")).unwrap();
    let t0 = std::time::Instant::now();
    while s.head_opt(&manifest).unwrap().is_none() {
        assert!(
            t0.elapsed().as_secs() < 60,
            "the state never became readable"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let theirs = Location::parse(&format!("{url}-destroyed/.pitr-dump.json")).unwrap();
    s.put_if_absent(&theirs, b"{}").unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(common::code(&o), 2, "{}", show(&o));
    assert!(
        common::stderr(&o).contains(&format!("{url}-destroyed")),
        "{}",
        show(&o)
    );
    // The state is not left without its destroyed documents.
    assert_nothing_under(&inc, &url);
    let other = objects(&s, &Location::parse(&format!("{url}-destroyed")).unwrap());
    assert_eq!(other, [(".pitr-dump.json".to_string(), b"{}".to_vec())]);
}

/// The environment of a key held to one of the documented bucket policies
/// (`storage_common::Policy`, docs/object-storage.md "Bucket permissions").
fn policy_env(key: &'static str) -> [(&'static str, &'static str); 2] {
    [
        ("AWS_ACCESS_KEY_ID", key),
        ("AWS_SECRET_ACCESS_KEY", storage_common::POLICY_SECRET),
    ]
}

/// The read-only policy the docs give a restore host (`s3:GetObject`,
/// `s3:ListBucket`) is enough for every reading command, backup and oplog in the
/// bucket, and a write with it is refused as access denied, naming the permission,
/// before any of the restore's work, leaving nothing in the bucket.
#[test]
fn the_documented_read_only_policy_restores_and_refuses_a_write() {
    let inc = Incident::start();
    let env = policy_env(storage_common::READER_KEY);
    let tmp = tempfile::tempdir().unwrap();
    let (backup, oplog) = (inc.url("backup"), inc.url("oplog.bson"));
    let reads: [Vec<&str>; 4] = [
        vec!["find-drop", "--backup", &backup, &oplog],
        vec!["oplog", "stats", &oplog],
        vec![
            "plan", "--backup", &backup, "--oplog", &oplog, "--until", "auto",
        ],
        vec![
            "replay", "--backup", &backup, "--oplog", &oplog, "--until", "auto", "--out", "out",
        ],
    ];
    for args in &reads {
        let o = inc.pitr_with(tmp.path(), args, &env);
        assert_eq!(common::code(&o), 0, "{args:?}: {}", show(&o));
    }
    assert!(tmp.path().join("out/shop/orders.bson").is_file());

    let url = "s3://pitr-incident/restored/read-only";
    let cwd = tmp.path().join("write");
    std::fs::create_dir_all(&cwd).unwrap();
    let args = [
        "replay",
        "--backup",
        &backup,
        "--oplog",
        &oplog,
        "--until",
        "auto",
        "--workdir",
        "work",
        "--out",
        url,
    ];
    let o = inc.pitr_with(&cwd, &args, &env);
    assert_eq!(common::code(&o), 2, "{}", show(&o));
    let err = common::stderr(&o);
    assert!(err.contains("access denied"), "{err}");
    assert!(err.contains(url), "{err}");
    assert!(err.contains("s3:PutObject"), "{err}");
    assert!(!err.contains(storage_common::POLICY_SECRET), "{err}");
    // Refused before the backup was read: the first write is the dump's marker,
    // made before the work starts.
    assert!(!err.contains("reading the backup"), "{err}");
    assert_nothing_under(&inc, "s3://pitr-incident/restored");
}

/// The archiver's policy (`s3:PutObject`, `s3:AbortMultipartUpload`,
/// `s3:DeleteObject` added) writes a dump to a bucket, the same objects as with a
/// key that may do anything.
#[test]
fn the_documented_writer_policy_writes_a_dump() {
    let inc = Incident::start();
    let tmp = tempfile::tempdir().unwrap();
    let (backup, oplog) = (inc.url("backup"), inc.url("oplog.bson"));
    let mut dumps = Vec::new();
    for (name, env) in [
        ("any", Vec::new()),
        ("writer", policy_env(storage_common::WRITER_KEY).to_vec()),
    ] {
        let url = format!("s3://pitr-incident/restored/{name}");
        let args = [
            "replay", "--backup", &backup, "--oplog", &oplog, "--until", "auto", "--out", &url,
        ];
        let o = inc.pitr_with(tmp.path(), &args, &env);
        assert_eq!(common::code(&o), 0, "{name}: {}", show(&o));
        let mut got = objects(&inc.server.storage(), &Location::parse(&url).unwrap());
        take_manifest(&mut got);
        dumps.push(got);
    }
    assert!(!dumps[0].is_empty());
    assert_eq!(dumps[0], dumps[1]);
}

/// One object of a backup the credentials may not read (a 403 on it alone, as an
/// object encrypted with a KMS key the role cannot use): the replay stops, exit 2,
/// naming that object and what may cause it; it never restores without it.
#[test]
fn a_403_on_one_object_of_a_backup_names_it() {
    let inc = Incident::start();
    inc.server
        .deny_reads(BUCKET, "incident/backup/shop/orders.bson");
    let tmp = tempfile::tempdir().unwrap();
    let args = [
        "replay",
        "--backup",
        &inc.url("backup"),
        "--oplog",
        &inc.url("oplog.bson"),
        "--until",
        "auto",
        "--out",
        "out",
    ];
    let o = inc.pitr_in(tmp.path(), &args);
    assert_eq!(common::code(&o), 2, "{}", show(&o));
    let err = common::stderr(&o);
    assert!(err.contains(&inc.url("backup/shop/orders.bson")), "{err}");
    assert!(err.contains("access denied"), "{err}");
    assert!(err.contains("KMS key"), "{err}");
    assert!(
        !tmp.path().join("out").exists(),
        "a restore without shop.orders"
    );
}
