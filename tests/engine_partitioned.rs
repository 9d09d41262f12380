//! The embedded engine's apply on several writer threads (`PITR_APPLY_WRITERS`,
//! `src/engine/replica/partition.rs`) gives byte for byte what the sequential apply
//! gives: the dump, the destroyed-documents dump, the report (counts, dbHash,
//! tolerated entries, the memory peak) and the plan (lint, expected counts), on
//! every traffic mix of the generator, within the memory budget and past it.

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
        ],
        &[&[("PITR_APPLY_WRITERS", writers)], env].concat(),
    );
    assert!(
        matches!(code(&o), 0 | 1),
        "writers {writers}, --memory {memory}: {}",
        show(&o)
    );
    let run = tmp.path().canonicalize().unwrap();
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(tmp.path().join("work/report.json")).unwrap())
            .unwrap();
    let stats = &report["engine_stats"];
    assert_eq!(stats["writers"].as_u64(), Some(writers.parse().unwrap()));
    let on_writers = stats["entries_on_writers"].as_u64().unwrap();
    let deferred = stats["entries_deferred"].as_u64().unwrap();
    let dump = common::files_under(&tmp.path().join("out"));
    assert!(!dump.is_empty(), "writers {writers}: no dump\n{}", show(&o));
    let outputs = (
        code(&o),
        dump,
        common::files_under(&tmp.path().join("out-destroyed")),
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
            // apply (the documents move to disk after a batch, not in its middle).
            assert_same(mix, "3 writers", &seq, &replay(gen.path(), "3", "1GiB").0);
            let (seq_small, _, deferred) = replay_with(gen.path(), "1", "1MiB", &[]);
            let (par_small, _) = replay_batched(gen.path(), "2", "1MiB", "50");
            assert_eq!(
                par_small.3["engine_stats"]["spilled_to_disk"],
                serde_json::Value::Bool(true),
                "{}: the small budget was not passed",
                mix.name()
            );
            assert_same(mix, "2 writers, 1MiB", &seq_small, &par_small);
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
