//! The timeline of one run: the catalogue before the backup, the dump window, the
//! background traffic, the scripted incidents and decoys, and the files and
//! `truth.json` that come out of it.
//!
//! ```text
//! t0            t0+3               t0+8 (backup end)                       end
//! |-- dump -----|--------------------|-- traffic -- incidents & decoys -- tail --|
//! | backup/oplog.bson: [t0, t0+8)    |
//!               | oplog.bson: [t0+3, end] (overlaps the backup by 5 s)
//! ```

use std::time::Instant;

use rand::seq::SliceRandom;
use rand::{Rng, RngCore, SeedableRng};

use super::bsonw::BsonW;
use super::dump;
use super::emit::{Emitter, Sink};
use super::files::{write_atomic, AtomicFile, OutDir};
use super::ids::{OidGen, Session};
use super::rng::{mix, poisson, uuid, MainRng};
use super::routine::RoutineTraffic;
use super::script::{Script, Slot};
use super::shapes::Shape;
use super::truth::{BackupTruth, Decoy, ExpectedCounts, Incident, OplogTruth, Truth};
use super::world::{CollSpec, IdKind, IndexSpec, World};
use super::{GenError, Options, Scenario, Summary};

/// Seconds the simulated mongodump runs.
pub const DUMP_SECS: u32 = 8;
/// The replica set's oplog dump starts this many seconds after the backup started.
pub const MAIN_OFFSET: u32 = 3;
/// Documents of the initial data were inserted during this many days before t0.
const HISTORY_SECS: u32 = 30 * 86_400;

/// Sizes and rates of a scenario.
pub struct Params {
    /// Mean background entries per second after the backup.
    pub rate: f64,
    /// Mean background entries per second during the dump (at least one a second).
    pub window_rate: f64,
    /// Seconds between scripted events (plus up to `jitter`).
    pub gap: u32,
    pub jitter: u32,
    /// Seconds of traffic between the backup's end and the first scripted event
    /// (`bench`: decided by the size target).
    pub lead: u32,
    /// Seconds of traffic after the last scripted event.
    pub tail: u32,
    /// Bound of the remembered live ids per collection.
    pub pool_cap: usize,
    /// Multiplier of the initial collection sizes.
    pub scale: u64,
    /// Inserts per part of a background multi-part transaction.
    pub large_txn_ops: u32,
    /// Documents written to the staging collection before the rename incident.
    pub staging_docs: u32,
    /// Most documents a convertToCapped keeps.
    pub capped_keep_max: usize,
    /// Approximate size of the main oplog (bench).
    pub target_bytes: Option<u64>,
    /// Write the routine traffic of [`super::routine`] ($out refreshes, TTL and
    /// time-series expiry).
    pub routine: bool,
    /// Share of background inserts, updates and deletes written as retryable writes.
    pub retryable_share: f64,
}

impl Params {
    pub fn for_scenario(s: Scenario, target_bytes: u64) -> Params {
        match s {
            // The cluster scenario has its own timeline (`cluster/`); lib::generate
            // never runs this one for it.
            Scenario::Incident | Scenario::Cluster => Params {
                rate: 0.25,
                window_rate: 2.0,
                gap: 120,
                jitter: 30,
                lead: 90,
                tail: 60,
                pool_cap: usize::MAX,
                scale: 1,
                large_txn_ops: 4,
                staging_docs: 40,
                capped_keep_max: usize::MAX,
                target_bytes: None,
                routine: true,
                retryable_share: 0.75,
            },
            Scenario::Bench => {
                // Fast enough traffic to fill the target with the scripted part
                // taking at most about a fifth of it (2500 entries/s at most).
                let secs = 5.0 * (13 * 20 + 5 + 5 + 15) as f64;
                let rate = (target_bytes as f64 / 330.0 / secs).clamp(2.0, 2500.0);
                Params {
                    rate,
                    window_rate: rate,
                    gap: 20,
                    jitter: 5,
                    lead: 0,
                    tail: 15,
                    pool_cap: 50_000,
                    scale: (target_bytes >> 25).clamp(1, 30),
                    large_txn_ops: 40,
                    staging_docs: 400,
                    capped_keep_max: 3000,
                    target_bytes: Some(target_bytes),
                    // The bench traffic stays as it was (its byte-level fast paths
                    // are measured on it); routine traffic is for the incident scenario.
                    routine: false,
                    retryable_share: 0.0,
                }
            }
        }
    }
}

/// A collection present before the backup: spec and initial size (x `scale`).
fn initial_catalogue() -> Vec<(CollSpec, u64)> {
    fn c(
        db: &'static str,
        name: &str,
        shape: Shape,
        id_kind: IdKind,
        first_n: u32,
        indexes: Vec<IndexSpec>,
    ) -> CollSpec {
        CollSpec {
            db,
            name: name.to_string(),
            shape,
            id_kind,
            first_n,
            indexes,
            bg: true,
        }
    }
    let ix = |name, key, unique, ttl| IndexSpec {
        name,
        key,
        unique,
        ttl,
    };
    vec![
        (
            c(
                "shop",
                "orders",
                Shape::Order,
                IdKind::Oid,
                0,
                vec![
                    ix("status_1", &[("status", 1)], false, None),
                    ix("customerId_1", &[("customerId", 1)], false, None),
                ],
            ),
            100,
        ),
        (
            c(
                "shop",
                "customers",
                Shape::Customer,
                IdKind::Str("C-"),
                0,
                vec![ix("email_1", &[("email", 1)], true, None)],
            ),
            90,
        ),
        (
            c(
                "shop",
                "inventory",
                Shape::Inventory,
                IdKind::Int,
                10_000,
                vec![],
            ),
            315,
        ),
        (
            c(
                "shop",
                "payments",
                Shape::Payment,
                IdKind::Oid,
                0,
                vec![ix("orderId_1", &[("orderId", 1)], false, None)],
            ),
            170,
        ),
        (
            c(
                "shop",
                "profiles",
                Shape::Profile,
                IdKind::Str("u_"),
                0,
                vec![],
            ),
            165,
        ),
        (
            c(
                "shop",
                "sessions_log",
                Shape::SessionLog,
                IdKind::Oid,
                0,
                vec![ix("createdAt_1", &[("createdAt", 1)], false, Some(604_800))],
            ),
            135,
        ),
        (
            c("shop", "clicks", Shape::Click, IdKind::Oid, 0, vec![]),
            175,
        ),
        (
            c("shop", "events", Shape::Event, IdKind::Oid, 0, vec![]),
            120,
        ),
        (
            c(
                "shop",
                "orders_archive",
                Shape::Order,
                IdKind::Oid,
                0,
                vec![ix("status_1", &[("status", 1)], false, None)],
            ),
            30,
        ),
        (
            c(
                "analytics",
                "pageviews",
                Shape::PageView,
                IdKind::Str("pv-"),
                0,
                vec![],
            ),
            25,
        ),
        (
            c(
                "analytics",
                "daily_rollup",
                Shape::Rollup,
                IdKind::Int,
                0,
                vec![],
            ),
            20,
        ),
        (
            c(
                "analytics",
                "funnels",
                Shape::Funnel,
                IdKind::Oid,
                0,
                vec![],
            ),
            15,
        ),
    ]
}

/// Everything one run works with.
pub struct Gen {
    pub seed: u64,
    pub rng: MainRng,
    pub em: Emitter,
    pub world: World,
    pub oids: OidGen,
    pub sessions: Vec<Session>,
    pub params: Params,
    /// First second of the run (the backup starts).
    pub t0: u32,
    pub incidents: Vec<Incident>,
    pub decoys: Vec<Decoy>,
    /// Prepared transactions waiting for their commit (next second).
    pub pending: Vec<super::traffic::Prepared>,
    /// UUID of `config.system.sessions`.
    pub sessions_coll_uuid: [u8; 16],
    /// Set at the end: no more transactions that span seconds.
    pub winding_down: bool,
    /// Retryable writes, `$out` refreshes, TTL and time-series expiry.
    pub routine: RoutineTraffic,
    /// The bench's kind of background traffic.
    pub mix: super::mix::Mix,
}

impl Gen {
    /// True while the dump runs or the main oplog has not started yet: no
    /// multi-entry transactions then (they would straddle a file boundary).
    pub fn in_window(&self, sec: u32) -> bool {
        sec < self.t0 + DUMP_SECS + 1
    }
}

fn io_err(what: &str, path: &std::path::Path, source: std::io::Error) -> GenError {
    GenError::Io {
        what: what.to_string(),
        path: path.to_path_buf(),
        source,
    }
}

/// Runs a whole scenario.
pub fn run(opts: &Options) -> Result<Summary, GenError> {
    let started = Instant::now();
    let mut params = Params::for_scenario(opts.scenario, opts.target_bytes);
    super::mix::tune(&mut params, opts.mix);
    let out = OutDir::prepare(&opts.out)?;
    let backup_dir = out.backup_dir().to_path_buf();
    let main_path = out.root.join("oplog.bson");
    let main_file = AtomicFile::create(&main_path)
        .map_err(|e| io_err("cannot create a file in", &out.root, e))?;
    let backup_file = AtomicFile::create(&backup_dir.join("oplog.bson"))
        .map_err(|e| io_err("cannot create a file in", &backup_dir, e))?;

    let mut rng = MainRng::seed_from_u64(opts.seed);
    let t0 = opts.start;
    let oids = OidGen::new(&mut rng, 4);
    let app_uid = {
        let mut u = [0u8; 32];
        rng.fill_bytes(&mut u);
        u
    };
    let sessions = (0..32).map(|_| Session::new(&mut rng, app_uid)).collect();
    let term = rng.random_range(2..40);
    let sessions_coll_uuid = uuid(&mut rng);
    let routine = RoutineTraffic::new(
        opts.seed,
        params.routine,
        params.retryable_share,
        t0 + DUMP_SECS,
    );
    let mut g = Gen {
        seed: opts.seed,
        rng,
        em: Emitter::new(Sink::new(main_file), Sink::new(backup_file), term),
        world: World::default(),
        oids,
        sessions,
        params,
        t0,
        incidents: Vec::new(),
        decoys: Vec::new(),
        pending: Vec::new(),
        sessions_coll_uuid,
        winding_down: false,
        routine,
        mix: opts.mix,
    };
    g.em.side_rng = Some(MainRng::seed_from_u64(mix(
        opts.seed ^ 0x7761_6c6c_5f73_6964
    )));
    g.em.legacy = opts.mix == super::mix::Mix::Legacy;

    // The data before the backup: ids born over the previous 30 days, oldest first.
    for (spec, n) in initial_catalogue()
        .into_iter()
        .chain(super::mix::extra_catalogue(opts.mix))
    {
        let u = uuid(&mut g.rng);
        let cap = g.params.pool_cap;
        let c = g.world.add(spec, u, cap);
        let n = n * g.params.scale;
        let mut born: Vec<u32> = (0..n)
            .map(|_| t0 - g.rng.random_range(60..HISTORY_SECS))
            .collect();
        born.sort_unstable();
        let coll = &mut g.world.colls[c];
        coll.exists = true;
        for b in born {
            let l = coll.new_live(&mut g.rng, &mut g.oids, b);
            coll.inserted(&mut g.rng, l);
        }
    }
    let system_version_uuid = uuid(&mut g.rng);

    // The dump visits the collections one after another during the window.
    let n_dumped = g.world.colls.len() as u32;
    let dump_at: Vec<u32> = (0..n_dumped)
        .map(|k| t0 + k * DUMP_SECS / n_dumped)
        .collect();
    let mut counts = std::collections::BTreeMap::new();
    let mut w = BsonW::new();
    counts.insert(
        "admin.system.version".to_string(),
        dump::write_system_version(&backup_dir, &system_version_uuid, &mut w)
            .map_err(|e| io_err("cannot write the backup in", &backup_dir, e))?,
    );

    let mut script = Script::new(&mut g);
    let backup_end = t0 + DUMP_SECS;
    let mut sec = t0;
    let mut end: Option<u32> = None;
    let mut backup_oplog: Option<AtomicFile> = None;
    loop {
        g.em.backup.on = sec < backup_end;
        g.em.main.on = sec >= t0 + MAIN_OFFSET;
        if sec == backup_end {
            backup_oplog = g.em.backup.close();
        }
        for (k, at) in dump_at.iter().enumerate() {
            if *at == sec {
                let c = &g.world.colls[k];
                if c.pool.len() as u64 != c.count {
                    return Err(GenError::Internal(format!(
                        "{} has untracked documents at dump time",
                        c.ns
                    )));
                }
                let n = dump::write_collection(&backup_dir, c, g.seed, &mut w)
                    .map_err(|e| io_err("cannot write the backup in", &backup_dir, e))?;
                counts.insert(c.ns.clone(), n);
            }
        }
        if !script.started() && sec >= backup_end {
            let go = match g.params.target_bytes {
                None => sec >= backup_end + g.params.lead,
                Some(target) => {
                    let entries = g.em.main.entries.max(1);
                    let avg = g.em.main.bytes as f64 / entries as f64;
                    let rest =
                        script.approx_secs(&g.params) as f64 * g.params.rate * avg.max(100.0)
                            + 400_000.0;
                    g.em.main.entries > 0 && g.em.main.bytes as f64 + rest >= target as f64
                }
            };
            if go {
                script.start(&mut g, sec);
            }
        }
        second(&mut g, &mut script, sec)
            .map_err(|e| io_err("cannot write the oplog files in", &opts.out, e))?;
        if end.is_none() && script.finished() {
            end = Some(sec + g.params.tail);
        }
        if end.is_some_and(|e| sec >= e) {
            // No new prepared transactions; stop once the open ones are committed.
            g.winding_down = true;
            if g.pending.is_empty() {
                break;
            }
        }
        sec += 1;
    }

    // Files into place: truth.json goes last, so that it always describes them.
    let backup_oplog =
        backup_oplog.ok_or_else(|| GenError::Internal("backup oplog not closed".into()))?;
    backup_oplog
        .commit()
        .map_err(|e| io_err("cannot write the backup's oplog in", &backup_dir, e))?;
    let main_file =
        g.em.main
            .close()
            .ok_or_else(|| GenError::Internal("main oplog already closed".into()))?;
    let mut incidents = std::mem::take(&mut g.incidents);
    incidents.sort_by_key(|i| i.ts);
    for i in &mut incidents {
        i.wall =
            g.em.walls_of
                .get(&i.ts)
                .map(|ms| super::truth::wall_string(*ms))
                .unwrap_or_default();
    }
    let expected_counts = incidents
        .iter()
        .map(|i| ExpectedCounts {
            oplog_limit: i.oplog_limit,
            counts: i.counts.clone(),
        })
        .collect();
    let backup_docs: u64 = counts.values().sum();
    let backup_colls = counts.len();
    let truth = Truth {
        generator: "pitr-gen",
        seed: opts.seed,
        scenario: opts.scenario.name(),
        backup: BackupTruth {
            dir: "backup",
            oplog_first_ts: g.em.backup.first,
            oplog_last_ts: g.em.backup.last,
            oplog_entries: g.em.backup.entries,
            end_ts: g.em.backup.last,
            counts,
        },
        oplog: OplogTruth {
            path: "oplog.bson",
            first_ts: g.em.main.first,
            last_ts: g.em.main.last,
            entries: g.em.main.entries,
            sorted: true,
        },
        incidents,
        decoys: std::mem::take(&mut g.decoys),
        routine: g.routine.truth(),
        expected_counts,
    };
    out.retire_truth()?;
    out.install_backup()?;
    main_file
        .commit()
        .map_err(|e| io_err("cannot write", &main_path, e))?;
    let truth_path = opts.out.join("truth.json");
    write_atomic(&truth_path, truth.to_json().as_bytes())
        .map_err(|e| io_err("cannot write", &truth_path, e))?;

    Ok(Summary {
        out: opts.out.clone(),
        backup_collections: backup_colls,
        backup_documents: backup_docs,
        backup_oplog_entries: g.em.backup.entries,
        oplog_entries: g.em.main.entries,
        oplog_bytes: g.em.main.bytes,
        incidents: truth.incidents.len(),
        decoys: truth.decoys.len(),
        elapsed: started.elapsed(),
    })
}

/// Writes one second: pending commits, the periodic no-op, then background
/// operations and scripted steps in random order.
fn second(g: &mut Gen, script: &mut Script, sec: u32) -> std::io::Result<()> {
    g.em.begin_second(sec);
    g.commit_pending();
    if (sec - g.t0).is_multiple_of(10) {
        g.noop("periodic noop");
    }
    let n_bg = if sec < g.t0 + DUMP_SECS {
        poisson(&mut g.rng, g.params.window_rate).max(1)
    } else {
        poisson(&mut g.rng, g.params.rate)
    };
    let mut slots: Vec<Slot> = Vec::with_capacity(n_bg as usize + 8);
    slots.extend(std::iter::repeat_n(Slot::Background, n_bg as usize));
    script.demand(sec, &mut slots);
    slots.shuffle(&mut g.rng);
    for s in slots {
        match s {
            Slot::Background => super::mix::background(g),
            Slot::Event(i) => script.step(g, i),
        }
    }
    g.routine_second(sec);
    g.em.end_second(&mut g.rng)
}
