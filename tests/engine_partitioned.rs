//! The embedded engine's apply on several writer threads (`PITR_APPLY_WRITERS`,
//! `src/engine/replica/partition.rs`) gives byte for byte what the sequential apply
//! gives: the dump, the destroyed-documents dump, the report (counts, dbHash,
//! tolerated entries, the memory peak) and the plan (lint, expected counts), on
//! every traffic mix of the generator, within the memory budget and past it. So do
//! collections left in the backup's files (`src/engine/replica/cold.rs`) and
//! loaded ones (`PITR_COLD=load`).

mod common;
mod replay_common;

use std::collections::BTreeMap;
use std::path::Path;

use pitr_fixturegen::mix::Mix;
use replay_common::{code, run_pitr, show};

/// A JSON file of the work dir with the run's own directory and its timings
/// taken out (the only things two runs may differ by).
fn normalized(path: &Path, run_dir: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .replace(run_dir.to_str().unwrap(), "<run>");
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    fn strip(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(m) => {
                for k in [
                    "seconds",
                    "created_at",
                    "started_at",
                    "finished_at",
                    "elapsed_seconds",
                ] {
                    m.remove(k);
                }
                m.values_mut().for_each(strip);
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    strip(&mut v);
    // How the work was shared out: compared by the caller.
    if let Some(st) = v.get_mut("engine_stats").and_then(|s| s.as_object_mut()) {
        st.remove("writers");
        st.remove("entries_on_writers");
        st.remove("entries_deferred");
    }
    v
}

/// What a run leaves: exit code, the dump's files, the destroyed documents' files,
/// the report and the plan.
type Outputs = (
    i32,
    BTreeMap<String, Vec<u8>>,
    BTreeMap<String, Vec<u8>>,
    serde_json::Value,
    serde_json::Value,
);

/// The run's outputs, and how many entries its writer threads applied.
fn replay(scenario: &Path, writers: &str, memory: &str) -> (Outputs, u64) {
    replay_batched(scenario, writers, memory, "8192")
}

/// [`replay`] with queues of `batch` entries (`PITR_APPLY_BATCH`).
fn replay_batched(scenario: &Path, writers: &str, memory: &str, batch: &str) -> (Outputs, u64) {
    let (o, on_writers, _) = replay_with(scenario, writers, memory, &[("PITR_APPLY_BATCH", batch)]);
    (o, on_writers)
}

/// [`replay`] with more environment (after `PITR_APPLY_WRITERS`); also returns how
/// many writes were deferred to the sort-merge store.
fn replay_with(
    scenario: &Path,
    writers: &str,
    memory: &str,
    env: &[(&str, &str)],
) -> (Outputs, u64, u64) {
    replay_args(scenario, writers, memory, env, &[])
}

/// [`replay_with`] with more arguments (`--gzip`, `--archive`).
fn replay_args(
    scenario: &Path,
    writers: &str,
    memory: &str,
    env: &[(&str, &str)],
    more: &[&str],
) -> (Outputs, u64, u64) {
    let tmp = tempfile::tempdir().unwrap();
    let backup = scenario.join("backup");
    let oplog = scenario.join("oplog.bson");
    let o = run_pitr(
        tmp.path(),
        &[
            "replay",
            "--engine",
            "embedded",
            "--backup",
            backup.to_str().unwrap(),
            "--oplog",
            oplog.to_str().unwrap(),
            "--until",
            "end",
            "--workdir",
            "work",
            "--out",
            "out",
            "--memory",
            memory,
            "--accept-incidents",
        ]
        .iter()
        .chain(more)
        .copied()
        .collect::<Vec<_>>(),
        &[&[("PITR_APPLY_WRITERS", writers)], env].concat(),
    );
    assert!(
        matches!(code(&o), 0 | 1),
        "writers {writers}, --memory {memory}: {}",
        show(&o)
    );
    // Nothing beside the outputs: no temporary dump or staging directory
    // (`.out.pitr-…`, `.out.pitr-cold-…`) is left behind.
    let left: Vec<String> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !matches!(n.as_str(), "out" | "out-destroyed" | "work"))
        .collect();
    assert!(left.is_empty(), "left beside the dump: {left:?}");
    let run = tmp.path().canonicalize().unwrap();
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(tmp.path().join("work/report.json")).unwrap())
            .unwrap();
    let stats = &report["engine_stats"];
    assert_eq!(stats["writers"].as_u64(), Some(writers.parse().unwrap()));
    let on_writers = stats["entries_on_writers"].as_u64().unwrap();
    let deferred = stats["entries_deferred"].as_u64().unwrap();
    let dump = match tmp.path().join("out") {
        p if p.is_file() => BTreeMap::from([("archive".to_string(), std::fs::read(&p).unwrap())]),
        p => common::files_under(&p),
    };
    assert!(!dump.is_empty(), "writers {writers}: no dump\n{}", show(&o));
    let outputs = (
        code(&o),
        dump,
        match tmp.path().join("out-destroyed") {
            p if p.is_file() => {
                BTreeMap::from([("archive".to_string(), std::fs::read(&p).unwrap())])
            }
            p => common::files_under(&p),
        },
        normalized(&tmp.path().join("work/report.json"), &run),
        normalized(&tmp.path().join("work/plan/plan.json"), &run),
    );
    (outputs, on_writers, deferred)
}

fn assert_same(mix: Mix, what: &str, seq: &Outputs, par: &Outputs) {
    let name = mix.name();
    assert_eq!(seq.0, par.0, "{name} {what}: exit code");
    assert_eq!(
        seq.1.keys().collect::<Vec<_>>(),
        par.1.keys().collect::<Vec<_>>(),
        "{name} {what}: the dump's files"
    );
    for (p, bytes) in &seq.1 {
        assert!(par.1[p] == *bytes, "{name} {what}: {} differs", p);
    }
    assert!(
        seq.2 == par.2,
        "{name} {what}: the destroyed documents differ"
    );
    assert_eq!(seq.3, par.3, "{name} {what}: report.json");
    assert_eq!(seq.4, par.4, "{name} {what}: plan.json");
}

#[test]
fn writers_give_the_sequential_bytes_on_every_mix() {
    let mixes = [
        Mix::Current,
        Mix::Oltp,
        Mix::Retryable,
        Mix::Legacy,
        Mix::Large,
        Mix::Tiny,
        Mix::Orders,
    ];
    for (i, mix) in mixes.into_iter().enumerate() {
        let gen = tempfile::tempdir().unwrap();
        pitr_fixturegen::generate(&pitr_fixturegen::Options {
            out: gen.path().to_path_buf(),
            seed: 11 + i as u64,
            scenario: pitr_fixturegen::Scenario::Bench,
            target_bytes: 3 << 20,
            start: pitr_fixturegen::DEFAULT_START_SECS,
            mix,
        })
        .unwrap();
        let (seq, none) = replay(gen.path(), "1", "1GiB");
        let (par, shared) = replay(gen.path(), "2", "1GiB");
        assert_same(mix, "2 writers", &seq, &par);
        let applied = par.3["engine_stats"]["entries_applied"].as_u64().unwrap();
        assert_eq!(none, 0, "{}: one writer applies alone", mix.name());
        // Most entries are CRUD outside transactions: the writers must have had them.
        assert!(
            shared * 2 > applied && applied > 1_000,
            "{}: {shared} of {applied} entries on the writers",
            mix.name()
        );
        // Short queues: many hand-offs to the writers while the next queue fills.
        let batch = ["7", "100", "1000"][i % 3];
        let (short, _) = replay_batched(gen.path(), "2", "1GiB", batch);
        assert_same(mix, &format!("2 writers, queues of {batch}"), &seq, &short);
        if i % 3 == 0 {
            // An odd number of partitions, and a budget passed in the middle of the
            // apply (the documents move to disk after a batch, not in its middle:
            // `PITR_MOVE=late`, or they would move before the slice).
            assert_same(mix, "3 writers", &seq, &replay(gen.path(), "3", "1GiB").0);
            let late = [("PITR_MOVE", "late")];
            let (seq_small, _, deferred) = replay_with(gen.path(), "1", "1MiB", &late);
            let (par_small, on_writers, _) = replay_with(
                gen.path(),
                "2",
                "1MiB",
                &[("PITR_MOVE", "late"), ("PITR_APPLY_BATCH", "50")],
            );
            assert_eq!(
                par_small.3["engine_stats"]["spilled_to_disk"],
                serde_json::Value::Bool(true),
                "{}: the small budget was not passed",
                mix.name()
            );
            assert!(
                on_writers > 0,
                "{}: the budget was passed before the writers had any entry",
                mix.name()
            );
            assert_same(mix, "2 writers, 1MiB", &seq_small, &par_small);
            // Moved before the slice, as by default: the same bytes, report and
            // plan, but for the memory peak (lower: the slice's writes never came
            // into memory); no entry of the slice went to the writers.
            let (ahead, ahead_on_writers, _) = replay_with(gen.path(), "2", "1MiB", &[]);
            let without_peak = |o: &Outputs| {
                let mut o = o.clone();
                let peak = o.3["engine_stats"]
                    .as_object_mut()
                    .and_then(|st| st.remove("peak_memory_estimate"))
                    .and_then(|v| v.as_u64())
                    .unwrap();
                (o, peak)
            };
            let ((ahead, ahead_peak), (late, late_peak)) =
                (without_peak(&ahead), without_peak(&seq_small));
            assert_same(mix, "moved ahead of the slice, 1MiB", &late, &ahead);
            assert!(
                ahead_peak < late_peak,
                "{}: peak {ahead_peak} ahead, {late_peak} late",
                mix.name()
            );
            assert!(
                ahead_on_writers < on_writers,
                "{}: {ahead_on_writers} entries on the writers moved ahead, {on_writers} late",
                mix.name()
            );
            // Past the budget the writes are sorted and merged (the sort-merge
            // store); the B-tree store applies them one at a time: the same bytes.
            let (tree, _, none) =
                replay_with(gen.path(), "1", "1MiB", &[("PITR_DISK_STORE", "redb")]);
            assert!(deferred > 1_000, "{}: {deferred} deferred", mix.name());
            assert_eq!(none, 0, "{}", mix.name());
            assert_same(mix, "the B-tree store, 1MiB", &tree, &seq_small);
        }
    }
}

/// A value that is not a number of threads is refused, naming it.
#[test]
fn a_bad_writer_count_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let scenario = Path::new(replay_common::FIXTURE);
    let backup = scenario.join("backup");
    let oplog = scenario.join("oplog.bson");
    let o = run_pitr(
        tmp.path(),
        &[
            "replay",
            "--engine",
            "embedded",
            "--backup",
            backup.to_str().unwrap(),
            "--oplog",
            oplog.to_str().unwrap(),
            "--until",
            "end",
            "--workdir",
            "work",
            "--out",
            "out",
        ],
        &[("PITR_APPLY_WRITERS", "two")],
    );
    assert_eq!(code(&o), 2, "{}", show(&o));
    let err = replay_common::stderr(&o);
    assert!(err.contains("PITR_APPLY_WRITERS=\"two\""), "{err}");
    assert!(!tmp.path().join("out").exists());
}

/// Collections no entry touches stay in the backup's files and are copied to the
/// dump (`src/engine/replica/cold.rs`), checked while the oplog is read (or at the
/// seeding, `PITR_COLD=late`), their files copied by the dump or beside a plain
/// directory dump while the oplog is applied (`PITR_COLD_COPY=1`); loading them
/// instead (`PITR_COLD=load`) gives the same dump, destroyed documents, report and
/// plan, within the budget and past it, as a directory, `--gzip` and `--archive`.
/// Only the memory they did not take differs.
#[test]
fn collections_left_in_the_backup_give_the_loaded_bytes() {
    let gen = tempfile::tempdir().unwrap();
    pitr_fixturegen::generate(&pitr_fixturegen::Options {
        out: gen.path().to_path_buf(),
        seed: 5,
        scenario: pitr_fixturegen::Scenario::Bench,
        target_bytes: 2 << 20,
        start: pitr_fixturegen::DEFAULT_START_SECS,
        mix: Mix::Current,
    })
    .unwrap();
    let ordered = replay_common::add_untouched(&gen.path().join("backup"));
    let without_memory = |mut o: Outputs| {
        let st = o.3["engine_stats"].as_object_mut().unwrap();
        let cold = (
            st.remove("collections_from_backup_files")
                .and_then(|v| v.as_u64())
                .unwrap(),
            st.remove("bytes_from_backup_files")
                .and_then(|v| v.as_u64())
                .unwrap(),
        );
        st.remove("peak_memory_estimate");
        (o, cold)
    };
    for (memory, more) in [
        ("1GiB", &[][..]),
        ("1MiB", &[][..]),
        ("1GiB", &["--gzip"][..]),
        ("1MiB", &["--archive"][..]),
    ] {
        let what = format!("--memory {memory} {more:?}");
        let (cold, (n, bytes)) = without_memory(replay_args(gen.path(), "2", memory, &[], more).0);
        let (loaded, none) =
            without_memory(replay_args(gen.path(), "2", memory, &[("PITR_COLD", "load")], more).0);
        assert_same(Mix::Current, &what, &loaded, &cold);
        // Checked (and hashed) while the oplog is read, or only at the seeding.
        let (late, late_cold) =
            without_memory(replay_args(gen.path(), "2", memory, &[("PITR_COLD", "late")], more).0);
        assert_same(Mix::Current, &format!("{what}, late"), &late, &cold);
        assert_eq!(late_cold, (n, bytes), "{what}");
        // Copied ahead of the dump whatever their size (by default only past the
        // kernel's dirty page limit, which these few megabytes are not).
        let (ahead, ahead_cold) = without_memory(
            replay_args(gen.path(), "2", memory, &[("PITR_COLD_COPY", "1")], more).0,
        );
        assert_same(
            Mix::Current,
            &format!("{what}, copied ahead"),
            &ahead,
            &cold,
        );
        assert_eq!(ahead_cold, (n, bytes), "{what}");
        assert!(
            n >= 1 && bytes >= ordered.len() as u64,
            "{what}: {n} collections, {bytes} bytes"
        );
        assert_eq!(none, (0, 0), "{what}");
        if more.is_empty() {
            assert!(
                cold.1["cold/ordered.bson"] == ordered,
                "{what}: the ordered file, copied"
            );
            assert!(
                cold.1["cold/shuffled.bson"].len() == ordered.len(),
                "{what}: sorted"
            );
        }
    }
}

/// The slice's entries are applied as the slice is written, handed over on the way
/// (`src/plan/tee.rs`, `src/plan/build/streamed.rs`), unless `PITR_SLICE=file`
/// reads them back from the file once it is written: the same bytes in the same
/// order, so the same dump, destroyed documents, report and plan, on every mix,
/// within the budget and past it, with `--ns` too.
#[test]
fn the_slice_applied_as_it_is_written_gives_what_its_file_gives() {
    let mixes = [
        Mix::Current,
        Mix::Oltp,
        Mix::Retryable,
        Mix::Legacy,
        Mix::Large,
        Mix::Tiny,
        Mix::Orders,
    ];
    let file = [("PITR_SLICE", "file")];
    for (i, mix) in mixes.into_iter().enumerate() {
        let gen = tempfile::tempdir().unwrap();
        pitr_fixturegen::generate(&pitr_fixturegen::Options {
            out: gen.path().to_path_buf(),
            seed: 31 + i as u64,
            scenario: pitr_fixturegen::Scenario::Bench,
            target_bytes: 2 << 20,
            start: pitr_fixturegen::DEFAULT_START_SECS,
            mix,
        })
        .unwrap();
        let mut cases: Vec<(&str, &[&str])> = vec![("1GiB", &[])];
        if i % 3 == 0 {
            cases.push(("1MiB", &[]));
            cases.push(("1GiB", &["--ns", "shop.*"]));
        }
        for (memory, more) in cases {
            let what = format!("--memory {memory} {more:?}");
            let streamed = replay_args(gen.path(), "2", memory, &[], more).0;
            let read_back = replay_args(gen.path(), "2", memory, &file, more).0;
            assert_same(mix, &what, &read_back, &streamed);
        }
    }
}
