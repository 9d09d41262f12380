//! The live commands of a sharded cluster against stand-ins: `pitr cluster discover`
//! through a stand-in mongos (`PITR_STANDIN_MODE=mongos` with `PITR_STANDIN_CLUSTER`
//! naming the config server and the shards, as `config.shards` and
//! `serverStatus.sharding` answer them), and `pitr dump-oplog --cluster` reading each
//! member from a stand-in replica set of its own, each serving that member's oplog of
//! the bundled cluster fixture (`fixtures/cluster/<member>/oplog.bson`), after which
//! `pitr plan --cluster` takes the result with the fixture's backups; `pitr archive
//! --cluster` following every member side by side, each archive checked by `pitr
//! status --archive` and entry by entry against what its member served.

mod common;
mod oplog_archive_common;

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const MEMBERS: [&str; 4] = ["config", "shard0", "shard1", "shard2"];

fn fixture(member: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/cluster")
        .join(member)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A stand-in mongod, SIGKILLed and reaped when dropped.
struct Mongod {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl Drop for Mongod {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Mongod {
    /// Starts a stand-in: `--replSet SET` when `set` is given, with `env`.
    fn start(set: Option<&str>, env: &[(&str, String)]) -> Mongod {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("db")).unwrap();
        let port = free_port();
        let mut cmd = Command::new(common::standin_bin_dir().join("mongod"));
        cmd.arg("--port")
            .arg(port.to_string())
            .args(["--bind_ip", "127.0.0.1", "--dbpath"])
            .arg(dir.path().join("db"))
            .arg("--logpath")
            .arg(dir.path().join("mongod.log"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if let Some(s) = set {
            cmd.args(["--replSet", s]);
            // The config server's set is a config server (`hello` says `configsvr`).
            if s == "csrs" {
                cmd.arg("--configsvr");
            }
        }
        for k in [
            "PITR_STANDIN_MODE",
            "PITR_STANDIN_FAULT",
            "PITR_STANDIN_MONGOD_FAULT",
            "PITR_STANDIN_OPLOG",
            "PITR_STANDIN_CLUSTER",
        ] {
            cmd.env_remove(k);
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd.spawn().expect("spawn the stand-in mongod");
        let mut m = Mongod { child, port, dir };
        let end = Instant::now() + Duration::from_secs(10);
        while Instant::now() < end {
            if TcpStream::connect_timeout(
                &([127, 0, 0, 1], port).into(),
                Duration::from_millis(100),
            )
            .is_ok()
            {
                return m;
            }
            if let Ok(Some(st)) = m.child.try_wait() {
                let log =
                    std::fs::read_to_string(m.dir.path().join("mongod.log")).unwrap_or_default();
                panic!("the stand-in mongod exited early ({st}); log:\n{log}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("the stand-in mongod did not listen within 10 s");
    }

    fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

/// One stand-in replica set per member of the fixture, each serving its oplog; the
/// config server's set is `csrs`, each shard's is named after it.
fn members() -> Vec<(&'static str, String, Mongod)> {
    members_with(&[])
}

/// [`members`], each started with `env` too.
fn members_with(env: &[(&str, String)]) -> Vec<(&'static str, String, Mongod)> {
    MEMBERS
        .iter()
        .map(|m| {
            let set = if *m == "config" { "csrs" } else { m };
            let oplog = fixture(m).join("oplog.bson");
            let mut all = vec![("PITR_STANDIN_OPLOG", oplog.to_string_lossy().into_owned())];
            all.extend(env.iter().cloned());
            let d = Mongod::start(Some(set), &all);
            (*m, set.to_string(), d)
        })
        .collect()
}

/// A stand-in mongos whose cluster is `members`.
fn mongos(members: &[(&str, String, Mongod)]) -> Mongod {
    let cluster: Vec<String> = members
        .iter()
        .map(|(m, set, d)| format!("{m}={set}/{}", d.host()))
        .collect();
    Mongod::start(
        None,
        &[
            ("PITR_STANDIN_MODE", "mongos".into()),
            ("PITR_STANDIN_CLUSTER", cluster.join(";")),
        ],
    )
}

fn pitr(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pitr"))
        .args(args)
        .env_remove("PITR_URI")
        .env_remove("PITR_CLUSTER_USER")
        .env_remove("PITR_CLUSTER_PASSWORD")
        .stdin(Stdio::null())
        .output()
        .expect("run pitr")
}

fn text(o: &Output) -> (i32, String, String) {
    (
        o.status.code().expect("pitr exited by a signal"),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn ok(o: &Output) -> String {
    let (code, out, err) = text(o);
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    out
}

#[test]
fn discover_writes_each_members_replica_set_without_credentials() {
    let ms = members();
    let router = mongos(&ms);
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("cluster.toml");
    let uri = format!(
        "mongodb://{}/?appName=discover-test&serverSelectionTimeoutMS=5000",
        router.host()
    );
    let out = ok(&pitr(&[
        "cluster",
        "discover",
        "--uri",
        &uri,
        "--out",
        file.to_str().unwrap(),
    ]));
    assert!(out.contains("wrote ") && out.contains("shard2"), "{out}");
    let written = std::fs::read_to_string(&file).unwrap();
    let live = pitr::cluster::file::parse_live(&file, &written).unwrap();
    let got: Vec<(String, String)> = live
        .members
        .iter()
        .map(|m| (m.id.clone(), m.uri.clone().unwrap()))
        .collect();
    let want: Vec<(String, String)> = ms
        .iter()
        .map(|(m, set, d)| {
            (
                m.to_string(),
                format!(
                    "mongodb://{}/?replicaSet={set}&appName=discover-test&serverSelectionTimeoutMS=5000",
                    d.host()
                ),
            )
        })
        .collect();
    assert_eq!(got, want, "{written}");
    assert!(live
        .members
        .iter()
        .all(|m| m.backup.is_none() && m.oplog.is_empty()));
    // What plan/replay need is not there yet, and they say which key to add.
    let (code, _, err) = text(&pitr(&[
        "plan",
        "--cluster",
        file.to_str().unwrap(),
        "--until",
        "auto",
    ]));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("config has no `backup`") && err.contains("hint:"),
        "{err}"
    );

    // Never overwritten; without --out the same file is printed.
    let (code, _, err) = text(&pitr(&[
        "cluster",
        "discover",
        "--uri",
        &uri,
        "--out",
        file.to_str().unwrap(),
    ]));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("already exists"), "{err}");
    assert_eq!(ok(&pitr(&["cluster", "discover", "--uri", &uri])), written);
}

#[test]
fn discover_refuses_what_is_not_a_mongos() {
    let rs = Mongod::start(Some("rs0"), &[]);
    let uri = format!("mongodb://{}/?serverSelectionTimeoutMS=5000", rs.host());
    let (code, out, err) = text(&pitr(&["cluster", "discover", "--uri", &uri]));
    assert_eq!(code, 2, "{out}{err}");
    assert!(out.is_empty(), "{out}");
    assert!(
        err.contains("is a member of the replica set `rs0`, not a mongos"),
        "{err}"
    );
    assert!(err.contains("hint: give the URI of a mongos"), "{err}");

    // A mongos of a cluster without shards: nothing to write.
    let empty = Mongod::start(
        None,
        &[
            ("PITR_STANDIN_MODE", "mongos".into()),
            ("PITR_STANDIN_CLUSTER", "config=csrs/127.0.0.1:1".into()),
        ],
    );
    let uri = format!("mongodb://{}/?serverSelectionTimeoutMS=5000", empty.host());
    let (code, _, err) = text(&pitr(&["cluster", "discover", "--uri", &uri]));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("config.shards") && err.contains("no shards"),
        "{err}"
    );

    // A user without clusterMonitor: told which role discover needs.
    let denied = Mongod::start(
        None,
        &[
            ("PITR_STANDIN_MODE", "mongos".into()),
            (
                "PITR_STANDIN_CLUSTER",
                "config=csrs/127.0.0.1:1;shard0=shard0/127.0.0.1:2;unauthorized=serverStatus"
                    .into(),
            ),
        ],
    );
    let duri = format!("mongodb://{}/?serverSelectionTimeoutMS=5000", denied.host());
    let (code, _, err) = text(&pitr(&["cluster", "discover", "--uri", &duri]));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("not authorized to run `serverStatus` on the mongos")
            && err.contains("clusterMonitor"),
        "{err}"
    );

    // And a single-replica-set command given the mongos names `cluster discover`.
    let tmp = tempfile::tempdir().unwrap();
    let (code, _, err) = text(&pitr(&[
        "dump-oplog",
        "--uri",
        &uri,
        "--out",
        tmp.path().to_str().unwrap(),
    ]));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("is a mongos") && err.contains("pitr cluster discover --uri"),
        "{err}"
    );
}

/// The runbook: discover through the mongos, add the backups, dump every member's
/// oplog from its own replica set, plan at one cluster time.
#[test]
fn dump_oplog_cluster_writes_what_plan_cluster_takes() {
    let ms = members();
    let router = mongos(&ms);
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("cluster.toml");
    let uri = format!("mongodb://{}/?serverSelectionTimeoutMS=5000", router.host());
    ok(&pitr(&[
        "cluster",
        "discover",
        "--uri",
        &uri,
        "--out",
        file.to_str().unwrap(),
    ]));
    // Add each member's backup, as the user would.
    let mut text_ = std::fs::read_to_string(&file).unwrap();
    for m in MEMBERS {
        let table = if m == "config" {
            "[config]\n".to_string()
        } else {
            format!("id = \"{m}\"\n")
        };
        let backup = fixture(m).join("backup");
        text_ = text_.replace(
            &table,
            &format!("{table}backup = \"{}\"\n", backup.display()),
        );
    }
    std::fs::write(&file, &text_).unwrap();

    let dir = tmp.path().join("dump");
    let out = ok(&pitr(&[
        "dump-oplog",
        "--cluster",
        file.to_str().unwrap(),
        "--out",
        dir.to_str().unwrap(),
    ]));
    for m in MEMBERS {
        let want = std::fs::read(fixture(m).join("oplog.bson")).unwrap();
        let got = std::fs::read(dir.join(m).join("oplog.bson")).unwrap();
        assert!(got == want, "{m}: the dump differs from the oplog served");
        assert!(out.contains(&format!("{m:<9} wrote ")), "{out}");
    }
    assert!(
        out.contains("together the dumps reach 1795223034:1 (2026-11-21T01:03:54Z), the last entry of `shard1`"),
        "{out}"
    );
    let written = dir.join("cluster.toml");
    let c = pitr::cluster::file::load(&written).unwrap();
    assert_eq!(c.shards.len(), 3);
    assert_eq!(c.config.oplog, vec![dir.join("config/oplog.bson")]);

    let plan_dir = tmp.path().join("plan");
    let out = ok(&pitr(&[
        "plan",
        "--cluster",
        written.to_str().unwrap(),
        "--until",
        "auto",
        "--out",
        plan_dir.to_str().unwrap(),
    ]));
    assert!(out.contains("Cluster limit 1795222920:2"), "{out}");
    assert!(
        out.contains("config.shards at the limit lists `shard0`, `shard1`, `shard2`"),
        "{out}"
    );

    // Again: every member's dump is complete, so it is refused, naming the member;
    // with --resume the complete dumps are kept.
    let (code, _, err) = text(&pitr(&[
        "dump-oplog",
        "--cluster",
        file.to_str().unwrap(),
        "--out",
        dir.to_str().unwrap(),
    ]));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("member `config`: ") && err.contains("already exists"),
        "{err}"
    );
    let out = ok(&pitr(&[
        "dump-oplog",
        "--cluster",
        file.to_str().unwrap(),
        "--out",
        dir.to_str().unwrap(),
        "--resume",
    ]));
    assert!(out.contains("shard2    kept"), "{out}");
}

/// The members' password comes from PITR_CLUSTER_PASSWORD, goes to the member, and is
/// never printed; a password inside the file is refused before anything is read.
#[test]
fn member_credentials_come_from_the_environment_only() {
    let auth = Mongod::start(None, &[("PITR_STANDIN_MODE", "auth".into())]);
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("cluster.toml");
    let member = |user: &str| {
        format!(
            "[config]\nuri = \"mongodb://{user}{}/?serverSelectionTimeoutMS=5000\"\n\n[[shard]]\nid = \"shard0\"\nuri = \"mongodb://127.0.0.1:1/?replicaSet=shard0&serverSelectionTimeoutMS=300\"\n",
            auth.host()
        )
    };
    std::fs::write(&file, member("")).unwrap();
    let secret = "hunter2-cluster-secret";
    let o = Command::new(env!("CARGO_BIN_EXE_pitr"))
        .args(["dump-oplog", "--cluster", file.to_str().unwrap(), "--out"])
        .arg(tmp.path().join("dump"))
        .env_remove("PITR_URI")
        .env("PITR_CLUSTER_USER", "bob")
        .env("PITR_CLUSTER_PASSWORD", secret)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let (code, out, err) = text(&o);
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("member `config`: authentication failed for user `bob`"),
        "{err}"
    );
    assert!(!err.contains(secret) && !out.contains(secret), "{err}");
    // The members are dumped side by side: the unreachable shard is reported too.
    assert!(err.contains("member `shard0`: cannot reach"), "{err}");

    std::fs::write(&file, member(&format!("bob:{secret}@"))).unwrap();
    let (code, _, err) = text(&pitr(&[
        "dump-oplog",
        "--cluster",
        file.to_str().unwrap(),
        "--out",
        "unused",
    ]));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("config.uri holds a password"), "{err}");
    assert!(!err.contains(secret), "{err}");
}

/// The members are dumped side by side onto one filesystem: `--out` must have room
/// for all of them at once, each estimated from its oplog's size (`collStats`, here
/// stand-ins reporting 3 TiB each) and the share of its time the range spans.
/// Refused before any member is read; `--no-space-check` dumps them.
#[test]
fn dump_oplog_cluster_without_room_for_every_member_is_refused_before_any_is_read() {
    let ms = members_with(&[("PITR_STANDIN_OPLOG_SIZE", (3u64 << 40).to_string())]);
    let tmp = tempfile::tempdir().unwrap();
    let file = cluster_file_of(tmp.path(), &ms);
    let dir = tmp.path().join("dump");
    let args = |extra: &[&str]| {
        let mut v = vec![
            "dump-oplog",
            "--cluster",
            file.to_str().unwrap(),
            "--out",
            dir.to_str().unwrap(),
        ];
        v.extend_from_slice(extra);
        pitr(&v)
    };
    let (code, _, err) = text(&args(&[]));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(&format!(
            "not enough free space on the filesystem of `{}`: the dump writes about 12.0 TiB there (every member's entries in the range",
            tmp.path().display()
        )),
        "{err}"
    );
    assert!(!dir.exists(), "nothing written");
    ok(&args(&["--no-space-check"]));
    for m in MEMBERS {
        assert!(dir.join(m).join("oplog.bson").is_file(), "{m}");
    }
}

fn cluster_file_of(dir: &Path, members: &[(&str, String, Mongod)]) -> PathBuf {
    let mut t = String::new();
    for (m, set, d) in members {
        if *m == "config" {
            t.push_str("[config]\n");
        } else {
            t.push_str(&format!("[[shard]]\nid = \"{m}\"\n"));
        }
        t.push_str(&format!(
            "uri = \"mongodb://{}/?replicaSet={set}&serverSelectionTimeoutMS=5000\"\n\n",
            d.host()
        ));
    }
    let f = dir.join("cluster.toml");
    std::fs::write(&f, t).unwrap();
    f
}

fn status_is_clean(arch: &Path) {
    let (code, out, err) = text(&pitr(&["status", "--archive", arch.to_str().unwrap()]));
    assert_eq!(code, 0, "{}:\n{out}{err}", arch.display());
    assert!(!out.contains("GAP") && !out.contains("ROLLBACK"), "{out}");
}

/// `--once`: every member's archive holds exactly the oplog its replica set served.
#[test]
fn archive_cluster_once_keeps_every_members_oplog() {
    let ms = members();
    let tmp = tempfile::tempdir().unwrap();
    let file = cluster_file_of(tmp.path(), &ms);
    let arch = tmp.path().join("arch");
    let out = ok(&pitr(&[
        "archive",
        "--cluster",
        file.to_str().unwrap(),
        "--dir",
        arch.to_str().unwrap(),
        "--once",
    ]));
    for m in MEMBERS {
        assert!(out.contains(&format!("member `{m}`:")), "{out}");
        let want = oplog_archive_common::entries_of(&fixture(m).join("oplog.bson"));
        let got = oplog_archive_common::entries_of(&arch.join(m));
        oplog_archive_common::assert_same_entries(&got, &want, m);
        status_is_clean(&arch.join(m));
    }
}

/// Following: every member's oplog keeps being written; the archivers run side by
/// side for a while, stop together on SIGTERM (exit 0), and every member's archive is
/// clean and holds its member's entries from the first on, each once.
#[test]
fn archive_cluster_follows_every_member_until_sigterm() {
    let epoch = oplog_archive_common::now_secs();
    let ms: Vec<(&str, String, Mongod)> = ["config", "shard0", "shard1"]
        .iter()
        .map(|m| {
            let set = if *m == "config" { "csrs" } else { m };
            let w = format!("rate=300,epoch={epoch},count=100000,pad=50");
            (
                *m,
                set.to_string(),
                Mongod::start(Some(set), &[("PITR_STANDIN_OPLOG_WRITER", w)]),
            )
        })
        .collect();
    let tmp = tempfile::tempdir().unwrap();
    let file = cluster_file_of(tmp.path(), &ms);
    let arch = tmp.path().join("arch");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_pitr"));
    cmd.args(["archive", "--cluster"])
        .arg(&file)
        .arg("--dir")
        .arg(&arch)
        .args(["--chunk-time", "1s", "--log-every", "1s"])
        .env_remove("PITR_URI")
        .stdin(Stdio::null());
    let mut a = oplog_archive_common::Archiver::spawn(cmd);
    for (m, _, _) in &ms {
        a.wait_for(&format!("member `{m}`: chunk "), Duration::from_secs(20));
    }
    let (code, out, err) = a.stop();
    assert_eq!(code, 0, "{out}{err}");
    assert!(err.contains("stopped by signal"), "{err}");
    for (m, _, d) in &ms {
        assert!(out.contains(&format!("member `{m}`:")), "{out}");
        status_is_clean(&arch.join(m));
        let got = oplog_archive_common::entries_of(&arch.join(m));
        assert!(got.len() > 10, "{m}: only {} entries archived", got.len());
        // What the member holds, from its first entry up to the last one archived
        // (read with dump-oplog after the stop; the writer has gone on since).
        let set = if *m == "config" { "csrs" } else { m };
        let uri = format!("mongodb://{}/?replicaSet={set}", d.host());
        let dump = tmp.path().join(format!("dump-{m}"));
        ok(&pitr(&[
            "dump-oplog",
            "--uri",
            &uri,
            "--out",
            dump.to_str().unwrap(),
        ]));
        let last = got.last().unwrap().0;
        let want: Vec<_> = oplog_archive_common::entries_of(&dump.join("oplog.bson"))
            .into_iter()
            .filter(|(t, _)| *t <= last)
            .collect();
        oplog_archive_common::assert_same_entries(&got, &want, m);
    }
}

/// A file whose config server and shard uris are swapped is refused, naming the
/// member, before anything is written.
#[test]
fn a_member_playing_another_part_is_refused() {
    let ms = members();
    let tmp = tempfile::tempdir().unwrap();
    let file = cluster_file_of(tmp.path(), &ms);
    let good = std::fs::read_to_string(&file).unwrap();
    let (config, shard0) = (ms[0].2.host(), ms[1].2.host());
    let swapped = good
        .replace(&format!("{config}/?replicaSet=csrs"), "CONFIG")
        .replace(
            &format!("{shard0}/?replicaSet=shard0"),
            &format!("{config}/?replicaSet=csrs"),
        )
        .replace("CONFIG", &format!("{shard0}/?replicaSet=shard0"));
    std::fs::write(&file, swapped).unwrap();
    let dir = tmp.path().join("dump");
    let arch = tmp.path().join("arch");
    for args in [
        vec![
            "dump-oplog",
            "--cluster",
            file.to_str().unwrap(),
            "--out",
            dir.to_str().unwrap(),
        ],
        vec![
            "archive",
            "--cluster",
            file.to_str().unwrap(),
            "--dir",
            arch.to_str().unwrap(),
            "--once",
        ],
    ] {
        let (code, out, err) = text(&pitr(&args));
        assert_eq!(code, 2, "{out}{err}");
        assert!(
            err.contains("member `config`: ")
                && err.contains("is the replica set `shard0`, not a config server"),
            "{err}"
        );
        assert!(err.contains("hint: check the members' `uri`"), "{err}");
    }
    assert!(!dir.join("config/oplog.bson").exists());
    assert!(!arch.join("config/manifest.json").exists());
    // The members in their right place dumped side by side anyway; no cluster.toml
    // until every member is complete. With the file fixed, --resume keeps those and
    // dumps the two that were refused.
    assert!(dir.join("shard1/oplog.bson").exists() && dir.join("shard2/oplog.bson").exists());
    assert!(!dir.join("cluster.toml").exists());
    std::fs::write(&file, good).unwrap();
    let out = ok(&pitr(&[
        "dump-oplog",
        "--cluster",
        file.to_str().unwrap(),
        "--out",
        dir.to_str().unwrap(),
        "--resume",
    ]));
    assert!(
        out.contains("shard1    kept") && out.contains("config    wrote "),
        "{out}"
    );
    for m in MEMBERS {
        let want = std::fs::read(fixture(m).join("oplog.bson")).unwrap();
        assert!(
            std::fs::read(dir.join(m).join("oplog.bson")).unwrap() == want,
            "{m}"
        );
    }
    assert!(dir.join("cluster.toml").exists());
}
