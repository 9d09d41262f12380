//! The storage layer on local paths: the same guarantees as on a bucket (nothing
//! visible before `finish`, conditional manifest updates), without a server.

mod storage_common;

use std::io::{Read, Write};
use std::sync::Arc;

use pitr::storage::{Location, Storage, StorageError};
use storage_common::{first_difference, Pattern};

fn storage() -> Storage {
    Storage::new(Default::default(), Default::default())
}

fn names(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn a_local_file_appears_only_at_finish_and_a_dropped_writer_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let s = storage();
    let target = dir.path().join("out/dump.archive");
    let at = Location::parse(target.to_str().unwrap()).unwrap();
    {
        let mut w = s.create_all_or_nothing(&at).unwrap();
        w.write_all(b"partial").unwrap();
        assert!(!target.exists(), "visible before finish");
    }
    assert!(!target.exists());
    assert_eq!(
        names(&dir.path().join("out")),
        Vec::<String>::new(),
        "temp left"
    );

    let mut w = s.create_all_or_nothing(&at).unwrap();
    std::io::copy(&mut Pattern::new(1, 3 << 20), &mut w).unwrap();
    assert!(!target.exists());
    let written = w.finish().unwrap();
    assert_eq!(written.size, 3 << 20);
    let r = s.open_read(&at).unwrap();
    assert_eq!(r.size(), 3 << 20);
    let (diff, got, want) = first_difference(r, Pattern::new(1, 3 << 20));
    assert_eq!((diff, got), (None, want));
    assert_eq!(names(&dir.path().join("out")), ["dump.archive"]);
}

#[test]
fn file_urls_and_bare_paths_name_the_same_file() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("a b.json");
    std::fs::write(&p, b"{}").unwrap();
    let url = format!("file://{}", p.to_str().unwrap().replace(' ', "%20"));
    let mut s = String::new();
    storage()
        .open_read(&Location::parse(&url).unwrap())
        .unwrap()
        .read_to_string(&mut s)
        .unwrap();
    assert_eq!(s, "{}");
    let e = storage()
        .open_read(&Location::parse(dir.path().join("none").to_str().unwrap()).unwrap())
        .unwrap_err();
    assert!(e.is_not_found(), "{e:?}");
    assert!(e.to_string().ends_with("none` does not exist"), "{e}");
}

#[test]
fn local_manifests_are_created_once_and_updated_only_from_the_version_read() {
    let dir = tempfile::tempdir().unwrap();
    let s = storage();
    let m = Location::parse(dir.path().join("arch/manifest.json").to_str().unwrap()).unwrap();
    s.put_if_absent(&m, b"1").unwrap();
    let e = s.put_if_absent(&m, b"2").unwrap_err();
    assert!(matches!(e, StorageError::AlreadyExists { .. }), "{e:?}");
    let (data, v) = s.read_versioned(&m).unwrap();
    assert_eq!(data, b"1");
    let v2 = s.put_if_match(&m, b"3", &v).unwrap();
    let e = s.put_if_match(&m, b"4", &v).unwrap_err();
    assert!(
        matches!(e, StorageError::ChangedByAnotherWriter { .. }),
        "{e:?}"
    );
    s.put_if_match(&m, b"5", &v2).unwrap();
    assert_eq!(s.read_versioned(&m).unwrap().0, b"5");
    // Neither temp files nor the lock file show in a listing.
    let listed: Vec<String> = s
        .list(&Location::parse(dir.path().join("arch").to_str().unwrap()).unwrap())
        .unwrap()
        .into_iter()
        .map(|o| o.location.file_name())
        .collect();
    assert_eq!(listed, ["manifest.json"]);
}

#[test]
fn writers_racing_on_a_local_manifest_never_both_win() {
    let dir = tempfile::tempdir().unwrap();
    let s = Arc::new(storage());
    for round in 0..20 {
        let m = Location::parse(
            dir.path()
                .join(format!("r{round}/manifest.json"))
                .to_str()
                .unwrap(),
        )
        .unwrap();
        // Create-if-absent from 4 threads: exactly one wins.
        let wins = (0..4)
            .map(|i| {
                let (s, m) = (Arc::clone(&s), m.clone());
                std::thread::spawn(move || s.put_if_absent(&m, &[i]).is_ok())
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|h| h.join().unwrap())
            .filter(|won| *won)
            .count();
        assert_eq!(wins, 1, "round {round}");
        // Then 4 threads update from the same version: exactly one wins.
        let (_, v) = s.read_versioned(&m).unwrap();
        let wins = (0..4)
            .map(|i| {
                let (s, m, v) = (Arc::clone(&s), m.clone(), v.clone());
                std::thread::spawn(move || s.put_if_match(&m, &[10 + i], &v).is_ok())
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|h| h.join().unwrap())
            .filter(|won| *won)
            .count();
        assert_eq!(wins, 1, "round {round}");
    }
}

#[test]
fn an_azure_location_without_an_account_names_the_variable_to_set() {
    // Fails while building the client, before any request (none is sent anywhere).
    let e = storage()
        .head(&Location::parse("az://container/x").unwrap())
        .unwrap_err();
    assert!(matches!(e, StorageError::Config { .. }), "{e:?}");
    assert!(e.to_string().contains("AZURE_STORAGE_ACCOUNT_NAME"), "{e}");
}

#[test]
fn a_read_error_keeps_its_storage_error_for_the_hint() {
    let io = std::io::Error::other(StorageError::NotFound {
        url: "s3://bkt/x".into(),
        source: None,
    });
    let e = pitr::storage::storage_error(&io).expect("inside");
    assert!(e.is_not_found());
    assert!(pitr::storage::storage_error(&std::io::Error::other("plain")).is_none());
}
