//! The storage layer against a real S3 server (s3s-fs, in-process, on loopback): what
//! a user would see reading and writing a bucket, including the failures.

mod storage_common;

use std::io::{Read, Write};

use std::time::Duration;

use pitr::error::{Failure, Hint};
use pitr::storage::{Location, Settings, Storage, StorageError, Tuning};
use storage_common::{first_difference, quick_tuning, Pattern, S3Server, SECRET_KEY};

const MIB: u64 = 1024 * 1024;

fn loc(s: &str) -> Location {
    Location::parse(s).unwrap()
}

/// Everything a user could see of an error: message, hint, Debug, and the rendering
/// with its cause chain that the CLI prints.
fn everything_shown(e: StorageError) -> String {
    let head = format!("{e}\n{}\n{e:?}\n", e.hint().unwrap_or_default());
    head + &Failure::from(e).render()
}

fn assert_no_secret(e: StorageError) {
    let shown = everything_shown(e);
    assert!(
        !shown.contains(SECRET_KEY),
        "the secret key is shown:\n{shown}"
    );
}

fn write_pattern(storage: &Storage, at: &Location, seed: u64, len: u64) -> pitr::storage::Written {
    let mut w = storage.create_all_or_nothing(at).unwrap();
    std::io::copy(&mut Pattern::new(seed, len), &mut w).unwrap();
    w.finish().unwrap()
}

#[test]
fn a_multipart_object_round_trips_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let server = S3Server::start(dir.path(), &["backups"]);
    let storage = server.storage();
    let at = loc("s3://backups/nightly/dump.archive.gz");
    // 23 MiB with 5 MiB parts: four full parts and a short last one.
    let len = 23 * MIB + 12_345;
    let written = write_pattern(&storage, &at, 7, len);
    assert_eq!(written.size, len);
    assert!(written.version.etag.is_some(), "{written:?}");

    let head = storage.head(&at).unwrap();
    assert_eq!(head.size, len);
    let r = storage.open_read(&at).unwrap();
    assert_eq!(r.size(), len);
    let (diff, got, want) = first_difference(r, Pattern::new(7, len));
    assert_eq!((diff, got), (None, want));
}

#[test]
fn a_small_object_is_one_put_and_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let server = S3Server::start(dir.path(), &["bkt"]);
    let storage = server.storage();
    let at = loc("s3://bkt/x/small.json");
    let mut w = storage.create_all_or_nothing(&at).unwrap();
    w.write_all(b"{\"ok\":true}").unwrap();
    w.finish().unwrap();
    let mut s = String::new();
    storage
        .open_read(&at)
        .unwrap()
        .read_to_string(&mut s)
        .unwrap();
    assert_eq!(s, "{\"ok\":true}");
    // An empty object too.
    let empty = loc("s3://bkt/x/empty");
    storage
        .create_all_or_nothing(&empty)
        .unwrap()
        .finish()
        .unwrap();
    assert_eq!(storage.head(&empty).unwrap().size, 0);
    let mut v = Vec::new();
    storage
        .open_read(&empty)
        .unwrap()
        .read_to_end(&mut v)
        .unwrap();
    assert!(v.is_empty());
}

/// Files s3s-fs keeps for an unfinished multipart upload (`.upload-<id>...`).
fn pending_uploads(root: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".upload"))
        .collect()
}

#[test]
fn a_multipart_write_dropped_midway_leaves_nothing_visible_and_is_aborted() {
    let dir = tempfile::tempdir().unwrap();
    let server = S3Server::start(dir.path(), &["bkt"]);
    let storage = server.storage();
    let at = loc("s3://bkt/out/dump.archive");
    {
        let mut w = storage.create_all_or_nothing(&at).unwrap();
        // Three parts' worth: at least two parts have been uploaded.
        std::io::copy(&mut Pattern::new(1, 16 * MIB), &mut w).unwrap();
        assert!(
            !pending_uploads(dir.path()).is_empty(),
            "a multipart upload should be under way"
        );
        assert!(storage.list(&loc("s3://bkt/out")).unwrap().is_empty());
        // Dropped here without finish, as on an error or a panic.
    }
    let e = storage.head(&at).unwrap_err();
    assert!(matches!(e, StorageError::NotFound { .. }), "{e:?}");
    assert!(storage.list(&loc("s3://bkt")).unwrap().is_empty());
    assert_eq!(
        pending_uploads(dir.path()),
        Vec::<String>::new(),
        "not aborted"
    );
}

#[test]
fn a_write_whose_server_dies_fails_and_leaves_nothing_visible() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = S3Server::start(dir.path(), &["bkt"]);
    let tuning = Tuning {
        retries: 0,
        ..quick_tuning()
    };
    let storage = Storage::new(server.settings(), tuning);
    let at = loc("s3://bkt/out/big");
    let mut w = storage.create_all_or_nothing(&at).unwrap();
    std::io::copy(&mut Pattern::new(2, 11 * MIB), &mut w).unwrap();
    server.kill();
    // Keep writing until the failure shows (a part in flight, or finish).
    let mut failed = std::io::copy(&mut Pattern::new(3, 20 * MIB), &mut w).is_err();
    if !failed {
        failed = w.finish().is_err();
    }
    assert!(failed, "the write should fail while the server is down");
    server.restart();
    let e = storage.head(&at).unwrap_err();
    assert!(matches!(e, StorageError::NotFound { .. }), "{e:?}");
}

/// Tuning for the read tests: no retries inside object_store (this layer's resume must
/// do it), and ranges that hold little ahead of the reader, so that a kill finds GETs
/// in the middle of their bodies.
fn read_tuning(ranges: usize, range_size: u64) -> Tuning {
    Tuning {
        retries: 0,
        read_ranges: ranges,
        read_range_size: range_size,
        read_ahead_bytes: 64 * 1024,
        ..quick_tuning()
    }
}

#[test]
fn a_large_object_read_by_ranges_is_byte_identical() {
    let dir = tempfile::tempdir().unwrap();
    let server = S3Server::start(dir.path(), &["bkt"]);
    let at = loc("s3://bkt/oplog.bson");
    let len = 40 * MIB + 4321;
    write_pattern(&server.storage(), &at, 3, len);
    // Ranges that do not divide the object, a last range of a few bytes, one range
    // in flight up to more than there are ranges, one stream, and ranges longer than
    // the object.
    for (ranges, size) in [(4, 3 * MIB + 17), (3, 40 * MIB), (1, MIB), (2, 64 * MIB)] {
        let storage = Storage::new(server.settings(), read_tuning(ranges, size));
        let r = storage.open_read(&at).unwrap();
        assert_eq!(r.size(), len);
        let (diff, got, want) = first_difference(r, Pattern::new(3, len));
        assert_eq!((diff, got), (None, want), "{ranges} ranges of {size} bytes");
    }
    // Dropped midway with ranges in flight: nothing hangs, the next read is whole.
    let storage = Storage::new(server.settings(), read_tuning(4, MIB));
    let mut r = storage.open_read(&at).unwrap();
    let mut head = vec![0u8; 3 * MIB as usize];
    r.read_exact(&mut head).unwrap();
    drop(r);
    let (diff, got, want) = first_difference(storage.open_read(&at).unwrap(), Pattern::new(3, len));
    assert_eq!((diff, got), (None, want));
}

/// Reads `at` (`len` bytes of pattern `seed`) with `tuning`, killing the server after
/// the first MiB and restarting it 300 ms later while the reader goes on: the bytes
/// must be the same and the read resumed at least once.
fn read_across_a_restart(
    server: &mut S3Server,
    at: &Location,
    seed: u64,
    len: u64,
    tuning: Tuning,
) {
    let storage = Storage::new(server.settings(), tuning);
    let mut r = storage.open_read(at).unwrap();
    let mut head = vec![0u8; MIB as usize];
    r.read_exact(&mut head).unwrap();
    server.kill();
    let mut rest = Vec::new();
    std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(300));
            server.restart();
        });
        r.read_to_end(&mut rest).unwrap();
    });
    assert!(r.resumes() >= 1, "the read should have been resumed");
    let all = std::io::Read::chain(&head[..], &rest[..]);
    let (diff, got, want) = first_difference(all, Pattern::new(seed, len));
    assert_eq!((diff, got), (None, want));
}

#[test]
fn a_server_killed_mid_read_and_restarted_gives_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = S3Server::start(dir.path(), &["bkt"]);
    let at = loc("s3://bkt/oplog.bson");
    let len = 64 * MIB + 99;
    write_pattern(&server.storage(), &at, 11, len);
    // Several ranges in flight when the server dies (their bodies cut, or the next
    // ones refused while it is down), then one stream.
    read_across_a_restart(&mut server, &at, 11, len, read_tuning(4, 8 * MIB));
    read_across_a_restart(&mut server, &at, 11, len, read_tuning(1, MIB));
}

#[test]
fn an_object_replaced_while_it_is_read_is_an_error_not_a_splice() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = S3Server::start(dir.path(), &["bkt"]);
    let at = loc("s3://bkt/chunk");
    let len = 64 * MIB;
    for ranges in [4, 1] {
        write_pattern(&server.storage(), &at, 5, len);
        let tuning = Tuning {
            resume_backoff: Duration::from_millis(1500),
            ..read_tuning(ranges, 8 * MIB)
        };
        let storage = Storage::new(server.settings(), tuning);
        let mut r = storage.open_read(&at).unwrap();
        let mut head = vec![0u8; MIB as usize];
        r.read_exact(&mut head).unwrap();
        server.kill();
        server.restart();
        // Same length, other bytes, written before the reader's first resume.
        write_pattern(&server.storage(), &at, 6, len);
        let e = std::io::copy(&mut r, &mut std::io::sink()).unwrap_err();
        let e = e
            .get_ref()
            .and_then(|e| e.downcast_ref::<StorageError>())
            .expect("a StorageError inside the io::Error");
        assert!(
            matches!(e, StorageError::ChangedWhileReading { .. }),
            "{ranges} ranges: {e:?}"
        );
        assert!(e.to_string().contains("s3://bkt/chunk"), "{e}");
    }
}

#[test]
fn an_object_replaced_between_two_ranges_is_an_error_without_any_break() {
    let dir = tempfile::tempdir().unwrap();
    let server = S3Server::start(dir.path(), &["bkt"]);
    let at = loc("s3://bkt/chunk");
    let len = 64 * MIB;
    write_pattern(&server.storage(), &at, 5, len);
    // Two ranges of 8 MiB in flight: the third is asked for after the replacement,
    // and its ETag tells.
    let storage = Storage::new(server.settings(), read_tuning(2, 8 * MIB));
    let mut r = storage.open_read(&at).unwrap();
    let mut head = vec![0u8; MIB as usize];
    r.read_exact(&mut head).unwrap();
    write_pattern(&server.storage(), &at, 6, len);
    let mut rest = Vec::new();
    let e = r.read_to_end(&mut rest).unwrap_err();
    let e = e
        .get_ref()
        .and_then(|e| e.downcast_ref::<StorageError>())
        .expect("a StorageError inside the io::Error");
    assert!(
        matches!(e, StorageError::ChangedWhileReading { .. }),
        "{e:?}"
    );
    // What was handed out before the error is the first version's, never the second's.
    let got = MIB + rest.len() as u64;
    assert!(got < len, "{got}");
    let all = std::io::Read::chain(&head[..], &rest[..]);
    let (diff, _, _) = first_difference(all, Pattern::new(5, len).take(got));
    assert_eq!(diff, None, "bytes of the new version were handed out");
    assert_eq!(r.resumes(), 0);
}

/// The write probe (`Storage::probe_write`, asked before a long job writes to a
/// prefix) leaves nothing: no object, no open multipart upload. With a key held to
/// the read-only policy it is `AccessDenied` naming the prefix and `s3:PutObject`,
/// and with the archiver's policy (no s3:DeleteObject needed) it passes.
#[test]
fn the_write_probe_leaves_nothing_and_names_a_missing_permission() {
    let dir = tempfile::tempdir().unwrap();
    let server = S3Server::start(dir.path(), &["bkt"]);
    let at = loc("s3://bkt/restored/today");
    server.storage().probe_write(&at).unwrap();
    let policy = |key| {
        Storage::new(
            server.settings_with(key, storage_common::POLICY_SECRET),
            quick_tuning(),
        )
    };
    policy(storage_common::NO_DELETE_KEY)
        .probe_write(&at)
        .unwrap();
    assert!(server.storage().list(&loc("s3://bkt")).unwrap().is_empty());
    assert_eq!(pending_uploads(dir.path()), Vec::<String>::new());
    let e = policy(storage_common::READER_KEY)
        .probe_write(&at)
        .unwrap_err();
    assert!(matches!(e, StorageError::AccessDenied { .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        "cannot write `s3://bkt/restored/today`: access denied"
    );
    assert!(e.hint().unwrap().contains("s3:PutObject"), "{e:?}");
}

/// A move (a server-side copy, then a delete: how the archiver sets a rolled-back
/// chunk aside) names what failed: a copy refused for its target or for its source
/// (AWS asks `s3:GetObject` on the source too, so an unreadable source, as one
/// encrypted with a KMS key the role cannot use, fails it) says `copy into` with
/// both permissions and the KMS cause; a source that is not there is named, not
/// the target; a refused delete names `s3:DeleteObject`. The source stays where it
/// was in each case.
#[test]
fn a_move_names_the_request_that_failed() {
    let dir = tempfile::tempdir().unwrap();
    let server = S3Server::start(dir.path(), &["bkt"]);
    let (from, to) = (loc("s3://bkt/chunks/a"), loc("s3://bkt/aside/a"));
    write_pattern(&server.storage(), &from, 1, 10);
    let policy = |key| {
        Storage::new(
            server.settings_with(key, storage_common::POLICY_SECRET),
            quick_tuning(),
        )
    };
    let copy_refused = |e: StorageError| {
        assert!(matches!(e, StorageError::AccessDenied { .. }), "{e:?}");
        assert_eq!(
            e.to_string(),
            "cannot copy into `s3://bkt/aside/a`: access denied"
        );
        let hint = e.hint().unwrap();
        assert!(
            hint.contains("not allowed to copy objects here")
                && hint.contains("s3:PutObject, and s3:GetObject on the copy's source,")
                && hint.contains("KMS key"),
            "{hint}"
        );
    };
    // Not allowed to write at all.
    copy_refused(
        policy(storage_common::READER_KEY)
            .rename(&from, &to)
            .unwrap_err(),
    );
    // Allowed to write, but the source cannot be read.
    server.deny_reads("bkt", "chunks/a");
    copy_refused(
        policy(storage_common::WRITER_KEY)
            .rename(&from, &to)
            .unwrap_err(),
    );
    // (Listed: a HEAD of the unreadable source is refused too.)
    assert_eq!(
        server
            .storage()
            .list(&loc("s3://bkt/chunks"))
            .unwrap()
            .len(),
        1
    );
    assert!(server.storage().head_opt(&to).unwrap().is_none());

    // No such source: named as the source.
    let e = server
        .storage()
        .rename(&loc("s3://bkt/chunks/gone"), &to)
        .unwrap_err();
    assert!(matches!(e, StorageError::NotFound { .. }), "{e:?}");
    assert!(e.to_string().contains("`s3://bkt/chunks/gone`"), "{e}");

    // Copied, but not allowed to delete the source.
    let b = loc("s3://bkt/chunks/b");
    write_pattern(&server.storage(), &b, 1, 10);
    let e = policy(storage_common::NO_DELETE_KEY)
        .rename(&b, &loc("s3://bkt/aside/b"))
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "cannot delete `s3://bkt/chunks/b`: access denied"
    );
    assert!(e.hint().unwrap().contains("s3:DeleteObject"), "{e:?}");
}

/// A request refused for the machine's clock (403 `RequestTimeTooSkewed`, what S3
/// answers a signature more than 15 minutes off): `ClockSkew`, for a read, a listing
/// and a write, the hint saying to sync the clock rather than to check credentials.
#[test]
fn a_clock_off_is_named_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let server = S3Server::start(dir.path(), &["bkt"]);
    write_pattern(&server.storage(), &loc("s3://bkt/x"), 1, 10);
    let storage = Storage::new(
        server.settings_with(storage_common::SKEWED_KEY, storage_common::POLICY_SECRET),
        quick_tuning(),
    );
    let errors = [
        storage.open_read(&loc("s3://bkt/x")).map(drop).unwrap_err(),
        storage.list(&loc("s3://bkt")).map(drop).unwrap_err(),
        storage
            .put_if_absent(&loc("s3://bkt/y"), b"y")
            .map(drop)
            .unwrap_err(),
    ];
    for e in errors {
        assert!(matches!(e, StorageError::ClockSkew { .. }), "{e:?}");
        assert!(e.to_string().contains("clock is wrong"), "{e}");
        assert!(e.hint().unwrap().contains("sync it"), "{e:?}");
    }
}

#[test]
fn wrong_credentials_are_named_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let server = S3Server::start(dir.path(), &["bkt"]);
    write_pattern(&server.storage(), &loc("s3://bkt/x"), 1, 10);
    for (key, secret) in [
        (storage_common::ACCESS_KEY, "not-the-secret"),
        ("AKIAUNKNOWN", SECRET_KEY),
    ] {
        let storage = Storage::new(server.settings_with(key, secret), quick_tuning());
        let e = storage.open_read(&loc("s3://bkt/x")).unwrap_err();
        assert!(matches!(e, StorageError::BadCredentials { .. }), "{e:?}");
        assert!(e.to_string().contains("`s3://bkt/x`"), "{e}");
        assert!(
            e.to_string().contains("AWS_ACCESS_KEY_ID"),
            "which credentials: {e}"
        );
        assert_no_secret(e);
        let e = storage.list(&loc("s3://bkt")).unwrap_err();
        assert!(matches!(e, StorageError::BadCredentials { .. }), "{e:?}");
    }
}

#[test]
fn a_missing_bucket_is_named_as_such_for_every_operation() {
    let dir = tempfile::tempdir().unwrap();
    let server = S3Server::start(dir.path(), &["bkt"]);
    let storage = server.storage();
    let at = loc("s3://nosuch/k");
    // Reads only: s3s-fs creates a missing bucket on PUT (real S3 answers NoSuchBucket,
    // which the same classification covers).
    let errors = [
        storage.open_read(&at).map(|_| ()).unwrap_err(),
        storage.head(&at).map(|_| ()).unwrap_err(),
        storage.list(&loc("s3://nosuch/p")).map(|_| ()).unwrap_err(),
        storage.read_versioned(&at).map(|_| ()).unwrap_err(),
    ];
    for e in errors {
        assert!(
            matches!(&e, StorageError::NoSuchBucket { bucket, .. } if bucket == "nosuch"),
            "{e:?}"
        );
        assert!(
            e.to_string().contains("bucket `nosuch` does not exist"),
            "{e}"
        );
        assert!(e.is_not_found());
    }
    // A missing object in a bucket that exists is a different message.
    let e = storage.open_read(&loc("s3://bkt/missing")).unwrap_err();
    assert!(matches!(e, StorageError::NotFound { .. }), "{e:?}");
    assert_eq!(e.to_string(), "`s3://bkt/missing` does not exist");
}

#[test]
fn a_second_writer_of_a_manifest_gets_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let server = S3Server::start(dir.path(), &["bkt"]);
    let storage = server.storage();
    let m = loc("s3://bkt/archive/manifest.json");

    let v1 = storage.put_if_absent(&m, b"{\"chunks\":[]}").unwrap();
    let e = storage.put_if_absent(&m, b"{\"other\":1}").unwrap_err();
    assert!(matches!(e, StorageError::AlreadyExists { .. }), "{e:?}");
    assert!(e.hint().unwrap().contains("another pitr"), "{:?}", e.hint());

    // Two archivers read the same version; the first update wins, the second is refused.
    let (data, read_v) = storage.read_versioned(&m).unwrap();
    assert_eq!(data, b"{\"chunks\":[]}");
    assert_eq!(read_v.etag, v1.etag);
    let v2 = storage
        .put_if_match(&m, b"{\"chunks\":[1]}", &read_v)
        .unwrap();
    let e = storage
        .put_if_match(&m, b"{\"chunks\":[2]}", &read_v)
        .unwrap_err();
    assert!(
        matches!(e, StorageError::ChangedByAnotherWriter { .. }),
        "{e:?}"
    );
    assert!(
        e.to_string().contains("s3://bkt/archive/manifest.json"),
        "{e}"
    );
    // The winner's content stands, and its version chains on.
    let (data, v) = storage.read_versioned(&m).unwrap();
    assert_eq!(data, b"{\"chunks\":[1]}");
    assert_eq!(v.etag, v2.etag);
    storage.put_if_match(&m, b"{\"chunks\":[1,3]}", &v).unwrap();
}

// No test of two *simultaneous* creates here: s3s-fs checks `If-None-Match` and then
// writes (s3s-fs 0.14.1 `s3.rs`, `put_object`), so both can win on it where S3 itself
// cannot. The local implementation is atomic and raced in `storage_local.rs`.

#[test]
fn no_credentials_anywhere_says_which_chains_were_tried() {
    let dir = tempfile::tempdir().unwrap();
    let server = S3Server::start(dir.path(), &["bkt"]);
    // The instance metadata endpoint pointed at a closed loopback port, so the chain's
    // last step fails here as it does off-cloud (never the real 169.254.169.254).
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed_addr = closed.local_addr().unwrap();
    drop(closed);
    // The read's error with no keys set, and `extra` (one more variable) if any.
    let read_without_keys = |extra: Option<(&str, String)>| {
        let mut vars = vec![
            ("AWS_ENDPOINT_URL", server.endpoint()),
            ("AWS_ALLOW_HTTP", "true".into()),
            ("AWS_METADATA_ENDPOINT", format!("http://{closed_addr}")),
        ];
        vars.extend(extra);
        let tuning = Tuning {
            retries: 0,
            ..quick_tuning()
        };
        let storage = Storage::new(Settings::from_pairs(vars), tuning);
        let e = storage.open_read(&loc("s3://bkt/x")).unwrap_err();
        assert!(matches!(e, StorageError::NoCredentials { .. }), "{e:?}");
        e
    };
    let e = read_without_keys(None);
    let msg = e.to_string();
    assert!(msg.contains("instance metadata"), "{msg}");
    assert!(msg.contains("AWS_WEB_IDENTITY_TOKEN_FILE"), "{msg}");
    assert!(
        e.hint().unwrap().contains("AWS_ACCESS_KEY_ID"),
        "{:?}",
        e.hint()
    );

    // An AWS CLI profile (a credentials file, or AWS_PROFILE), which pitr does not
    // read: the hint says how to export it.
    let creds = dir.path().join("aws-credentials");
    std::fs::write(&creds, "[default]\naws_access_key_id = AKIAX\n").unwrap();
    for (extra, profile) in [
        (
            ("AWS_SHARED_CREDENTIALS_FILE", creds.display().to_string()),
            "default",
        ),
        (("AWS_PROFILE", "prod".to_string()), "prod"),
    ] {
        let hint = read_without_keys(Some(extra)).hint().unwrap();
        assert!(
            hint.contains(&format!(
                "aws configure export-credentials --profile {profile} --format env"
            )),
            "{hint}"
        );
    }
}

#[test]
fn an_endpoint_nobody_listens_on_is_unreachable() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = closed.local_addr().unwrap();
    drop(closed);
    for scheme in ["http", "https"] {
        let settings = Settings::from_pairs([
            ("AWS_ACCESS_KEY_ID", "AK".to_string()),
            ("AWS_SECRET_ACCESS_KEY", SECRET_KEY.to_string()),
            ("AWS_ENDPOINT_URL", format!("{scheme}://{addr}")),
            ("AWS_ALLOW_HTTP", "true".to_string()),
        ]);
        let storage = Storage::new(
            settings,
            Tuning {
                retries: 0,
                ..quick_tuning()
            },
        );
        let e = storage.head(&loc("s3://bkt/x")).unwrap_err();
        assert!(
            matches!(e, StorageError::Unreachable { .. }),
            "{scheme}: {e:?}"
        );
        assert!(e.to_string().contains(&addr.to_string()), "{e}");
        assert_no_secret(e);
    }
}

#[test]
fn list_takes_whole_segments_and_sorts() {
    let dir = tempfile::tempdir().unwrap();
    let server = S3Server::start(dir.path(), &["bkt"]);
    let storage = server.storage();
    for k in ["a/2", "a/1", "a/sub/3", "ab/x", "z"] {
        write_pattern(&storage, &loc(&format!("s3://bkt/{k}")), 1, 3);
    }
    let keys = |p: &str| -> Vec<String> {
        storage
            .list(&loc(p))
            .unwrap()
            .into_iter()
            .map(|o| o.location.to_string())
            .collect()
    };
    assert_eq!(
        keys("s3://bkt/a"),
        ["s3://bkt/a/1", "s3://bkt/a/2", "s3://bkt/a/sub/3"]
    );
    assert_eq!(keys("s3://bkt/a/"), keys("s3://bkt/a"));
    assert_eq!(keys("s3://bkt").len(), 5);
    assert!(keys("s3://bkt/nothing-here").is_empty());
    // A prefix is whole segments: the object `z` is not under the prefix `z`.
    assert!(keys("s3://bkt/z").is_empty());
    let all = storage.list(&loc("s3://bkt")).unwrap();
    assert_eq!(
        all.iter()
            .find(|o| o.location.file_name() == "z")
            .unwrap()
            .size,
        3
    );
}

#[test]
fn delete_removes_and_is_idempotent() {
    let dir = tempfile::tempdir().unwrap();
    let server = S3Server::start(dir.path(), &["bkt"]);
    let storage = server.storage();
    let at = loc("s3://bkt/gone");
    write_pattern(&storage, &at, 1, 10);
    storage.delete(&at).unwrap();
    assert!(storage.head(&at).unwrap_err().is_not_found());
    storage.delete(&at).unwrap();
}

#[test]
fn no_display_of_settings_or_errors_shows_the_secret() {
    let dir = tempfile::tempdir().unwrap();
    let server = S3Server::start(dir.path(), &["bkt"]);
    let storage = server.storage();
    let shown = format!("{storage:?} {:?}", server.settings());
    assert!(!shown.contains(SECRET_KEY), "{shown}");
    assert!(shown.contains("AWS_SECRET_ACCESS_KEY=***"), "{shown}");
    let e = storage.open_read(&loc("s3://bkt/missing")).unwrap_err();
    assert_no_secret(e);
    let e = Location::parse(&format!("s3://AK:{SECRET_KEY}@b/x")).unwrap_err();
    assert!(matches!(e, StorageError::SecretInUrl { .. }));
    assert_no_secret(e);
}
