//! The bundled cluster fixture and its generator, for the `--cluster` restore tests
//! (`replay_cluster.rs`, `replay_cluster_txns.rs`).
#![allow(dead_code)]

use std::fs;
use std::path::Path;

use pitr::oplog::Ts;
use pitr_fixturegen::cluster::ddl::{Ddl, DdlShape};
use pitr_fixturegen::cluster::truth::Logical;
use pitr_fixturegen::cluster::{generate, ClusterOptions};
use serde_json::Value;

use crate::replay_common::{code, run_pitr, show};

pub const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/cluster");
/// `scripts/gen-fixtures.sh`: SEED=7, START=2026-11-21T01:00:00Z.
pub const FIXTURE_START: u32 = 1_795_222_800;

pub fn options(
    dir: &Path,
    seed: u64,
    shards: usize,
    idle: usize,
    shape: DdlShape,
) -> ClusterOptions {
    ClusterOptions {
        out: dir.to_path_buf(),
        seed,
        start: FIXTURE_START,
        shards,
        idle_shards: idle,
        shape,
        ddl: Ddl::Drop,
    }
}

/// The fixture regenerated into `dir` (its truth.json must be the committed one, so
/// the files and the model are the fixture's); the logical model.
pub fn generated_fixture(dir: &Path) -> Logical {
    let s = generate(&options(dir, 7, 2, 1, DdlShape::V7)).unwrap();
    assert_eq!(
        fs::read(dir.join("truth.json")).unwrap(),
        fs::read(Path::new(FIXTURE).join("truth.json")).unwrap(),
        "the fixture is not what the generator writes with seed 7: run scripts/gen-fixtures.sh"
    );
    s.logical
}

/// The fixture's logical model.
pub fn fixture_model() -> Logical {
    let dir = tempfile::tempdir().unwrap();
    generated_fixture(dir.path())
}

/// A `"t:i"` string of a report or truth.json.
pub fn parse_ts(v: &Value) -> Ts {
    let (t, i) = v.as_str().unwrap().split_once(':').unwrap();
    Ts::new(t.parse().unwrap(), i.parse().unwrap())
}

/// `pitr replay --cluster --json --accept-incidents` into `cwd/out`; the report, or
/// the output of a run that did not exit 0. The limits of these tests are past
/// earlier incidents on purpose (the fan-out delete): they check the state at each
/// limit; the verdict on replayed incidents is tested on its own.
pub fn replay(cwd: &Path, cluster: &Path, until: &str) -> Result<Value, std::process::Output> {
    replay_with(cwd, cluster, until, &["--accept-incidents"])
}

/// `pitr replay --cluster --json` into `cwd/out` with `extra` arguments.
pub fn replay_with(
    cwd: &Path,
    cluster: &Path,
    until: &str,
    extra: &[&str],
) -> Result<Value, std::process::Output> {
    let mut args = vec![
        "replay",
        "--cluster",
        cluster.to_str().unwrap(),
        "--until",
        until,
        "--out",
        "out",
        "--json",
    ];
    args.extend_from_slice(extra);
    let o = run_pitr(cwd, &args, &[]);
    if code(&o) != 0 {
        return Err(o);
    }
    Ok(serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", show(&o))))
}
