//! The cluster's files: the config server's metadata, each member's backup and oplog
//! dump, `cluster.toml` and `truth.json`.

use std::fs;
use std::io::Write;
use std::path::Path;

use bson::{doc, Bson, Document};

use super::member::{doc_key, Coll, Member, Role};
use super::sim::{uuid_bson, Cluster};
use super::truth::{ClusterTruth, Incident, MemberTruth};
use super::ClusterOptions;
use crate::dump::metadata_json;
use crate::files::{write_atomic, AtomicFile};
use crate::GenError;

/// UUIDs of the server's own collections, used in the oplog's `ui` and the backup's
/// metadata alike.
pub const CONFIG_COLLECTIONS_UUID: [u8; 16] = [6; 16];
pub const CONFIG_CHUNKS_UUID: [u8; 16] = [7; 16];

/// Fills the config server's `config` database: shards, databases, collections,
/// chunks, version (what `pitr` will read for ownership in phase B).
pub fn config_metadata(c: &mut Cluster) {
    let shards: Vec<Document> = c
        .shards
        .iter()
        .map(|s| {
            doc! { "_id": &s.id, "host": format!("{0}/{0}-a.example.net:27018,{0}-b.example.net:27018", s.id), "state": 1 }
        })
        .collect();
    let primary = c.shards[c.primary].id.clone();
    let mut colls: Vec<Document> = Vec::new();
    let mut chunks: Vec<Document> = Vec::new();
    for s in &c.sharded {
        colls.push(
            doc! { "_id": &s.ns, "lastmodEpoch": s.epoch, "uuid": uuid_bson(&s.uuid),
            "key": { s.key: if s.hashed { Bson::from("hashed") } else { Bson::Int32(1) } }, "unique": false, "noBalance": false },
        );
        for (k, ch) in s.chunks.iter().enumerate() {
            chunks.push(doc! { "_id": ch.id, "uuid": uuid_bson(&s.uuid),
            "min": { s.key: ch.min.bson() }, "max": { s.key: ch.max.bson() },
            "shard": &c.shards[ch.shard].id,
            "lastmod": Bson::Timestamp(bson::Timestamp { time: 1, increment: k as u32 }) });
        }
    }
    let mut put = |ns: &str, uuid: [u8; 16], docs: Vec<Document>| {
        let coll = c.config.coll(ns);
        coll.uuid = uuid;
        for d in docs {
            coll.docs
                .insert(doc_key(d.get("_id").unwrap_or(&Bson::Null)), d);
        }
    };
    put("config.shards", [3; 16], shards);
    put(
        "config.databases",
        [4; 16],
        vec![doc! { "_id": "shop", "primary": primary, "partitioned": true }],
    );
    put("config.collections", CONFIG_COLLECTIONS_UUID, colls);
    put("config.chunks", CONFIG_CHUNKS_UUID, chunks);
    put(
        "config.version",
        [5; 16],
        vec![doc! { "_id": 1, "clusterId": bson::oid::ObjectId::from_bytes([2; 12]) }],
    );
}

/// What was written.
pub struct Written {
    pub entries: u64,
    pub bytes: u64,
    pub incidents: usize,
    pub decoys: usize,
}

fn io_err(what: &str, path: &Path, source: std::io::Error) -> GenError {
    GenError::Io {
        what: what.to_string(),
        path: path.to_path_buf(),
        source,
    }
}

/// Makes `out` ready: created if missing; an existing one must be empty or hold a
/// previous cluster run (its `cluster.toml`), whose files are removed.
fn prepare(out: &Path) -> Result<(), GenError> {
    if out.exists() && !out.is_dir() {
        return Err(GenError::OutNotDir(out.to_path_buf()));
    }
    fs::create_dir_all(out).map_err(|e| io_err("cannot create the output directory", out, e))?;
    let names: Vec<String> = fs::read_dir(out)
        .map_err(|e| io_err("cannot list the output directory", out, e))?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    if names.is_empty() {
        return Ok(());
    }
    if !names.iter().any(|n| n == "cluster.toml") {
        return Err(GenError::OutNotEmpty {
            dir: out.to_path_buf(),
            entry: names[0].clone(),
        });
    }
    for n in names {
        let p = out.join(&n);
        let own = n == "cluster.toml"
            || n == "truth.json"
            || n == "config"
            || n.starts_with("shard")
            || n.starts_with(crate::files::TEMP_PREFIX);
        if !own {
            return Err(GenError::OutNotEmpty {
                dir: out.to_path_buf(),
                entry: n,
            });
        }
        let r = if p.is_dir() {
            fs::remove_dir_all(&p)
        } else {
            fs::remove_file(&p)
        };
        r.map_err(|e| io_err("cannot remove the previous run's", &p, e))?;
    }
    Ok(())
}

/// Writes every member's files, `cluster.toml` and `truth.json` (last).
pub fn write(
    c: &Cluster,
    opts: &ClusterOptions,
    incidents: Vec<Incident>,
) -> Result<Written, GenError> {
    prepare(&opts.out)?;
    let mut members = Vec::new();
    let (mut entries, mut bytes) = (0u64, 0u64);
    for m in c.members() {
        let dir = opts.out.join(&m.id);
        let backup = dir.join("backup");
        let fcv = match opts.shape {
            super::ddl::DdlShape::V7 => "7.0",
            super::ddl::DdlShape::V5 => "5.0",
        };
        write_backup(m, &backup, fcv).map_err(|e| io_err("cannot write the backup", &backup, e))?;
        let path = dir.join("oplog.bson");
        let mut f = AtomicFile::create(&path).map_err(|e| io_err("cannot create", &path, e))?;
        let (mut first, mut last, mut n) = (None, None, 0u64);
        for e in m.entries_in(m.oplog) {
            f.write_all(&e.bytes)
                .map_err(|er| io_err("cannot write", &path, er))?;
            first.get_or_insert(e.ts);
            last = Some(e.ts);
            n += 1;
            bytes += e.bytes.len() as u64;
        }
        f.commit().map_err(|e| io_err("cannot write", &path, e))?;
        entries += n;
        members.push(MemberTruth {
            id: m.id.clone(),
            role: match m.role {
                Role::Config => "config",
                Role::Shard => "shard",
            },
            backup: format!("{}/backup", m.id),
            backup_end_ts: m.entries_in(m.backup).last().map(|e| e.ts),
            oplog: format!("{}/oplog.bson", m.id),
            oplog_first_ts: first,
            oplog_last_ts: last,
            entries: n,
        });
    }
    let toml_path = opts.out.join("cluster.toml");
    write_atomic(&toml_path, cluster_toml(c, opts).as_bytes())
        .map_err(|e| io_err("cannot write", &toml_path, e))?;
    let truth = ClusterTruth {
        generator: "pitr-gen",
        seed: opts.seed,
        scenario: "cluster",
        ddl_shape: opts.shape.name(),
        members,
        incidents,
        decoys: c.decoys.clone(),
        transactions: c.txns.clone(),
        logical_content: None,
    };
    let truth_path = opts.out.join("truth.json");
    write_atomic(&truth_path, truth.to_json().as_bytes())
        .map_err(|e| io_err("cannot write", &truth_path, e))?;
    Ok(Written {
        entries,
        bytes,
        incidents: truth.incidents.len(),
        decoys: truth.decoys.len(),
    })
}

/// `cluster.toml` with paths relative to it.
fn cluster_toml(c: &Cluster, opts: &ClusterOptions) -> String {
    let mut s = format!(
        "# A sharded cluster written by pitr-gen --scenario cluster (seed {}, DDL shape {}):\n\
         # one mongodump --oplog backup and one oplog dump per member.\n\n\
         [config]\nbackup = \"config/backup\"\noplog = [\"config/oplog.bson\"]\n",
        opts.seed,
        opts.shape.name()
    );
    for m in &c.shards {
        s.push_str(&format!(
            "\n[[shard]]\nid = \"{0}\"\nbackup = \"{0}/backup\"\noplog = [\"{0}/oplog.bson\"]\n",
            m.id
        ));
    }
    s
}

/// One member's `mongodump --oplog` directory: the collections as read at the
/// backup's start, and `oplog.bson` with the entries written while it ran.
fn write_backup(m: &Member, root: &Path, fcv: &str) -> std::io::Result<()> {
    fs::create_dir_all(root.join("admin"))?;
    let version = bson::to_vec(&doc! { "_id": "featureCompatibilityVersion", "version": fcv })
        .map_err(std::io::Error::other)?;
    write_atomic(&root.join("admin/system.version.bson"), &version)?;
    write_atomic(
        &root.join("admin/system.version.metadata.json"),
        metadata_json("system.version", &[1; 16], &[], None).as_bytes(),
    )?;
    for (ns, coll) in &m.snapshot {
        write_collection(root, ns, coll)?;
    }
    let mut f = AtomicFile::create(&root.join("oplog.bson"))?;
    for e in m.entries_in(m.backup) {
        f.write_all(&e.bytes)?;
    }
    f.commit()
}

fn write_collection(root: &Path, ns: &str, coll: &Coll) -> std::io::Result<()> {
    let (db, name) = ns.split_once('.').unwrap_or((ns, ""));
    let dir = root.join(db);
    fs::create_dir_all(&dir)?;
    let mut f = AtomicFile::create(&dir.join(format!("{name}.bson")))?;
    for d in coll.docs.values() {
        f.write_all(&bson::to_vec(d).map_err(std::io::Error::other)?)?;
    }
    f.commit()?;
    write_atomic(
        &dir.join(format!("{name}.metadata.json")),
        metadata_json(name, &coll.uuid, &[], None).as_bytes(),
    )
}
