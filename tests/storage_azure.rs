//! The storage layer against azurite, Microsoft's Azure Blob emulator (npm), started on a
//! free loopback port. It is installed by `npm ci --prefix tests/azurite`
//! (`.ci/run` does it); without it these tests say SKIPPED, and fail under CI.

mod common;
mod storage_common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use pitr::storage::{Location, Settings, Storage, StorageError, Tuning};
use storage_common::{first_difference, quick_tuning, Pattern};

const MIB: u64 = 1024 * 1024;
const ACCOUNT: &str = "devstoreaccount1";
/// azurite's well-known development key (public, in Microsoft's documentation).
const KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";
const CONTAINER: &str = "pitr-test";

fn azurite_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/azurite")
}

/// azurite-blob on 127.0.0.1, data under a temp dir, killed when dropped.
struct Azurite {
    port: u16,
    data: tempfile::TempDir,
    child: Option<Child>,
}

impl Azurite {
    /// Starts azurite with the test container, or says why it cannot (None).
    fn start(test: &str) -> Option<Azurite> {
        let bin = azurite_dir().join("node_modules/.bin/azurite-blob");
        if !bin.exists() {
            common::skip(
                test,
                &format!(
                    "azurite is not installed in {} (run `npm ci --prefix tests/azurite`)",
                    azurite_dir().display()
                ),
            );
            return None;
        }
        let port = free_port();
        let mut a = Azurite {
            port,
            data: tempfile::tempdir().unwrap(),
            child: None,
        };
        a.spawn();
        let out = Command::new("node")
            .arg(azurite_dir().join("create-container.js"))
            .arg(port.to_string())
            .arg(CONTAINER)
            .output()
            .expect("run node");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        Some(a)
    }

    fn spawn(&mut self) {
        let bin = azurite_dir().join("node_modules/.bin/azurite-blob");
        let child = Command::new(bin)
            .args(["--blobHost", "127.0.0.1", "--blobPort"])
            .arg(self.port.to_string())
            .arg("--location")
            .arg(self.data.path())
            .args(["--silent", "--skipApiVersionCheck"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start azurite");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(Instant::now() < deadline, "azurite did not start in 30 s");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    fn settings_with_key(&self, key: &str) -> Settings {
        Settings::from_pairs([
            ("AZURE_STORAGE_ACCOUNT_NAME", ACCOUNT.to_string()),
            ("AZURE_STORAGE_ACCOUNT_KEY", key.to_string()),
            (
                "AZURE_STORAGE_ENDPOINT",
                format!("http://127.0.0.1:{}/{ACCOUNT}", self.port),
            ),
            ("AZURE_ALLOW_HTTP", "true".to_string()),
        ])
    }

    fn storage(&self) -> Storage {
        Storage::new(self.settings_with_key(KEY), quick_tuning())
    }
}

impl Drop for Azurite {
    fn drop(&mut self) {
        self.kill();
    }
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

fn loc(key: &str) -> Location {
    Location::parse(&format!("az://{CONTAINER}/{key}")).unwrap()
}

fn write_pattern(storage: &Storage, at: &Location, seed: u64, len: u64) {
    let mut w = storage.create_all_or_nothing(at).unwrap();
    std::io::copy(&mut Pattern::new(seed, len), &mut w).unwrap();
    w.finish().unwrap();
}

#[test]
fn azure_blobs_round_trip_small_and_in_blocks() {
    let Some(az) = Azurite::start("azure_blobs_round_trip_small_and_in_blocks") else {
        return;
    };
    let storage = az.storage();
    let small = loc("x/manifest.json");
    let mut w = storage.create_all_or_nothing(&small).unwrap();
    w.write_all(b"{}").unwrap();
    w.finish().unwrap();
    let mut s = String::new();
    storage
        .open_read(&small)
        .unwrap()
        .read_to_string(&mut s)
        .unwrap();
    assert_eq!(s, "{}");

    let big = loc("x/dump.archive");
    let len = 17 * MIB + 3;
    write_pattern(&storage, &big, 9, len);
    assert_eq!(storage.head(&big).unwrap().size, len);
    let (diff, got, want) =
        first_difference(storage.open_read(&big).unwrap(), Pattern::new(9, len));
    assert_eq!((diff, got), (None, want));
    let listed: Vec<String> = storage
        .list(&loc("x"))
        .unwrap()
        .into_iter()
        .map(|o| o.location.to_string())
        .collect();
    assert_eq!(
        listed,
        [
            format!("az://{CONTAINER}/x/dump.archive"),
            format!("az://{CONTAINER}/x/manifest.json")
        ]
    );
    storage.delete(&big).unwrap();
    assert!(storage.head(&big).unwrap_err().is_not_found());
}

#[test]
fn azure_a_write_dropped_midway_leaves_nothing_visible() {
    let Some(az) = Azurite::start("azure_a_write_dropped_midway_leaves_nothing_visible") else {
        return;
    };
    let storage = az.storage();
    let at = loc("out/dump");
    {
        let mut w = storage.create_all_or_nothing(&at).unwrap();
        std::io::copy(&mut Pattern::new(1, 12 * MIB), &mut w).unwrap();
    }
    assert!(matches!(
        storage.head(&at).unwrap_err(),
        StorageError::NotFound { .. }
    ));
    assert!(storage.list(&loc("out")).unwrap().is_empty());
}

#[test]
fn azure_a_second_writer_of_a_manifest_gets_a_clear_error() {
    let Some(az) = Azurite::start("azure_a_second_writer_of_a_manifest_gets_a_clear_error") else {
        return;
    };
    let storage = az.storage();
    let m = loc("archive/manifest.json");
    storage.put_if_absent(&m, b"1").unwrap();
    let e = storage.put_if_absent(&m, b"2").unwrap_err();
    assert!(matches!(e, StorageError::AlreadyExists { .. }), "{e:?}");
    let (_, v) = storage.read_versioned(&m).unwrap();
    storage.put_if_match(&m, b"3", &v).unwrap();
    let e = storage.put_if_match(&m, b"4", &v).unwrap_err();
    assert!(
        matches!(e, StorageError::ChangedByAnotherWriter { .. }),
        "{e:?}"
    );
    assert_eq!(storage.read_versioned(&m).unwrap().0, b"3");
}

#[test]
fn azure_wrong_key_and_missing_container_are_named() {
    let Some(az) = Azurite::start("azure_wrong_key_and_missing_container_are_named") else {
        return;
    };
    write_pattern(&az.storage(), &loc("x"), 1, 10);
    // Another valid base64 key of the same length.
    let wrong = KEY.replace('E', "F");
    let storage = Storage::new(az.settings_with_key(&wrong), quick_tuning());
    let e = storage.open_read(&loc("x")).unwrap_err();
    assert!(matches!(e, StorageError::BadCredentials { .. }), "{e:?}");
    assert!(e.to_string().contains("AZURE_STORAGE_ACCOUNT_KEY"), "{e}");
    let shown = format!("{e} {e:?}");
    assert!(!shown.contains(&wrong) && !shown.contains(KEY), "{shown}");

    let storage = az.storage();
    let missing = Location::parse("az://no-such-container/x").unwrap();
    for e in [
        storage.open_read(&missing).map(|_| ()).unwrap_err(),
        storage.list(&missing).map(|_| ()).unwrap_err(),
        storage
            .put_if_absent(&missing, b"x")
            .map(|_| ())
            .unwrap_err(),
    ] {
        assert!(
            matches!(&e, StorageError::NoSuchBucket { bucket, word: "container", .. } if bucket == "no-such-container"),
            "{e:?}"
        );
    }
}

#[test]
fn azure_a_server_killed_mid_read_and_restarted_gives_the_same_bytes() {
    let Some(mut az) =
        Azurite::start("azure_a_server_killed_mid_read_and_restarted_gives_the_same_bytes")
    else {
        return;
    };
    let at = loc("oplog.bson");
    let len = 48 * MIB;
    write_pattern(&az.storage(), &at, 4, len);
    // azurite saves its blob index every 5 s (LokiJS `autosaveInterval`); a SIGKILL
    // before that loses the blob, which the reader rightly reports as deleted.
    std::thread::sleep(Duration::from_secs(6));
    let storage = Storage::new(
        az.settings_with_key(KEY),
        Tuning {
            retries: 0,
            read_ranges: 3,
            read_range_size: 16 * MIB,
            read_ahead_bytes: 64 * 1024,
            resume_backoff: Duration::from_millis(500),
            read_resumes: 20,
            ..quick_tuning()
        },
    );
    let mut r = storage.open_read(&at).unwrap();
    let mut head = vec![0u8; MIB as usize];
    r.read_exact(&mut head).unwrap();
    az.kill();
    az.spawn();
    let mut rest = Vec::new();
    r.read_to_end(&mut rest).unwrap();
    assert!(r.resumes() >= 1, "the read should have been resumed");
    let all = std::io::Read::chain(&head[..], &rest[..]);
    let (diff, got, want) = first_difference(all, Pattern::new(4, len));
    assert_eq!((diff, got), (None, want));
}

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/incident");

/// `pitr args` in `cwd` with azurite's account in the environment (and no other
/// cloud or pitr settings from the caller's).
fn pitr_az(a: &Azurite, cwd: &Path, args: &[&str]) -> std::process::Output {
    let mut c = Command::new(common::pitr_bin());
    c.args(args).current_dir(cwd);
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy().into_owned();
        if ["PITR_", "AWS_", "AZURE_", "GOOGLE_"]
            .iter()
            .any(|p| k.starts_with(p))
        {
            c.env_remove(&k);
        }
    }
    c.env("AZURE_STORAGE_ACCOUNT_NAME", ACCOUNT)
        .env("AZURE_STORAGE_ACCOUNT_KEY", KEY)
        .env(
            "AZURE_STORAGE_ENDPOINT",
            format!("http://127.0.0.1:{}/{ACCOUNT}", a.port),
        )
        .env("AZURE_ALLOW_HTTP", "true")
        .env("PITR_STORAGE_RETRIES", "1")
        .env("PITR_STORAGE_RETRY_SECS", "3");
    c.output().expect("run pitr")
}

fn show(o: &std::process::Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
        o.status.code(),
        common::stdout(o),
        common::stderr(o)
    )
}

/// The embedded replay's per-namespace result (existence, documents, dbHash md5).
fn replayed(
    a: &Azurite,
    cwd: &Path,
    backup: &str,
    oplog: &str,
    limit: &str,
) -> Vec<serde_json::Value> {
    std::fs::create_dir_all(cwd).unwrap();
    let o = pitr_az(
        a,
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
    assert_eq!(common::code(&o), 0, "{backup}: {}", show(&o));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(cwd.join("work/report.json")).unwrap())
            .unwrap();
    storage_common::restored(&report)
}

/// The commands with their inputs in an Azure container (`az://` URLs, the account
/// key in AZURE_* variables): find-drop's findings and the embedded replay's counts
/// and dbHash are those of the same files read locally, for a directory backup read
/// blob by blob and a gzip archive; a wrong key is refused naming the URL.
#[test]
fn azure_find_drop_and_replay_read_a_container_as_local_files() {
    let Some(a) = Azurite::start("azure_find_drop_and_replay_read_a_container_as_local_files")
    else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let local = tmp.path().join("local");
    std::fs::create_dir_all(&local).unwrap();
    for l in [
        pitr_fixturegen::layout::Layout::Dir,
        pitr_fixturegen::layout::Layout::ArchiveGzip,
    ] {
        pitr_fixturegen::layout::convert(
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
    storage_common::upload_tree(&a.storage(), &local, &loc("incident"));
    let url = |rel: &str| format!("az://{CONTAINER}/incident/{rel}");
    let path = |rel: &str| local.join(rel).to_str().unwrap().to_string();
    let dir = pitr_fixturegen::layout::Layout::Dir.file_name();
    let archive = pitr_fixturegen::layout::Layout::ArchiveGzip.file_name();

    let find = |backup: &str, oplog: &str| {
        let o = pitr_az(
            &a,
            tmp.path(),
            &["find-drop", "--json", "--backup", backup, oplog],
        );
        assert_eq!(common::code(&o), 0, "{backup}: {}", show(&o));
        serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()
    };
    let want = find(&path(dir), &path("oplog.bson"));
    assert!(!want.as_array().unwrap().is_empty(), "{want}");
    for b in [dir, archive] {
        assert_eq!(find(&url(b), &url("oplog.bson")), want, "{b}");
    }

    let limit = want[0]["oplog_limit"].as_str().unwrap().to_string();
    let want = replayed(
        &a,
        &tmp.path().join("r-local"),
        &path(dir),
        &path("oplog.bson"),
        &limit,
    );
    assert!(want.iter().any(|r| r["ns"] == "shop.orders"), "{want:?}");
    for b in [dir, archive] {
        let got = replayed(
            &a,
            &tmp.path().join(format!("r-{b}")),
            &url(b),
            &url("oplog.bson"),
            &limit,
        );
        assert_eq!(got, want, "{b} at {limit}");
    }

    // A dump written to the container: its write permission probed first (an
    // uncommitted block, never listed), then the dump streamed there.
    let out = format!("az://{CONTAINER}/restored");
    let o = pitr_az(
        &a,
        tmp.path(),
        &[
            "replay",
            "--backup",
            &url(dir),
            "--oplog",
            &url("oplog.bson"),
            "--until",
            &limit,
            "--out",
            &out,
        ],
    );
    assert_eq!(common::code(&o), 0, "{}", show(&o));
    let keys: Vec<String> = a
        .storage()
        .list(&loc("restored"))
        .unwrap()
        .into_iter()
        .map(|o| o.location.to_string())
        .collect();
    assert!(
        keys.contains(&format!("{out}/shop/orders.bson")),
        "{keys:?}"
    );
    assert!(!keys.iter().any(|k| k.contains("probe")), "{keys:?}");

    let mut c = Command::new(common::pitr_bin());
    let o = c
        .args(["find-drop", &url("oplog.bson")])
        .current_dir(tmp.path())
        .env("AZURE_STORAGE_ACCOUNT_NAME", ACCOUNT)
        .env("AZURE_STORAGE_ACCOUNT_KEY", "bm90LXRoZS1rZXk=")
        .env(
            "AZURE_STORAGE_ENDPOINT",
            format!("http://127.0.0.1:{}/{ACCOUNT}", a.port),
        )
        .env("AZURE_ALLOW_HTTP", "true")
        .env("PITR_STORAGE_RETRIES", "1")
        .output()
        .unwrap();
    assert_eq!(common::code(&o), 2, "{}", show(&o));
    let err = common::stderr(&o);
    assert!(
        err.contains(&url("oplog.bson")) && err.contains("hint:"),
        "{err}"
    );
    assert!(!err.contains("bm90LXRoZS1rZXk="), "{err}");
}
