//! The numbered steps of a restore and the exact command of each.
//!
//! Each command is built by a pure function from a [`RestoreSpec`] (what the plan
//! decided) and [`CommandValues`] (binaries, port, directories). `pitr plan` prints
//! them with placeholders (`<PORT>`, `<DBPATH>`, ...); `pitr replay` calls the same
//! functions with real values, so what it runs is what the plan showed.
//! Passwords never appear in an argv: credentials go through mongorestore's and
//! mongodump's `--config FILE` (a 0600 YAML file with `password: ...`).

use serde::{Deserialize, Serialize};

use crate::oplog::Ts;

use super::ts_json;

/// What the restore commands must do, as decided by the plan. JSON: `backup_dir`,
/// `gzip` (pass `--gzip`: the backup's files are compressed), `backup_oplog_replay`
/// (restore the backup with `--oplogReplay` of its own oplog), `backup_oplog_limit`
/// (`"t:i"` or null: `--oplogLimit` for that replay, when the restore point lies
/// inside the backup's own oplog), `ns_include` (`--nsInclude` values for the backup
/// restore; only without its own oplog, which mongorestore cannot combine with
/// includes), `slice_dir` (directory to replay with `--oplogReplay --oplogLimit`,
/// null when there is nothing after the backup's end), `limit` (`"t:i"`, exclusive),
/// `plan_file` (this plan's `plan.json`), `dump_namespaces` (what to hand over with
/// mongodump; empty = everything), `combined` (`backup_dir` is pitr's one-run view
/// of the backup: see below).
///
/// **One run when possible.** mongorestore keeps its own catalog of the indexes it
/// will build (from the metadata files and the replayed oplog) and buffers
/// transactions; a second `mongorestore` run for the slice knows neither, so a
/// `collMod` of an index made before the backup's end fails (`cannot find index in
/// indexCatalog for collMod`) and a transaction begun in the backup's own oplog loses
/// its first parts. For a directory backup the plan therefore writes `OUT/restore/`:
/// links to the backup's database directories plus one `oplog.bson` holding the
/// backup's own entries followed by the slice (gzip-compressed when the backup is),
/// restored in ONE `mongorestore --oplogReplay --oplogLimit` run. Two runs remain
/// for archives (mongorestore reads an archive's oplog only from the archive) and
/// for `--ns` with a backup that has no oplog of its own (`--nsInclude` cannot be
/// combined with `--oplogReplay`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestoreSpec {
    pub backup_dir: String,
    #[serde(default)]
    pub combined: bool,
    /// `backup_dir` is a mongodump archive file: restored with `--archive=FILE`.
    #[serde(default)]
    pub archive: bool,
    pub gzip: bool,
    pub backup_oplog_replay: bool,
    #[serde(default, deserialize_with = "ts_json::de_opt")]
    pub backup_oplog_limit: Option<Ts>,
    pub ns_include: Vec<String>,
    pub slice_dir: Option<String>,
    #[serde(deserialize_with = "ts_json::de")]
    pub limit: Ts,
    pub plan_file: String,
    pub dump_namespaces: Vec<String>,
    /// The backup's data is already in the spare (a recovered snapshot backup): the
    /// restore step is not run (see `PlanRequest::backup_in_spare`).
    #[serde(default)]
    pub backup_in_spare: bool,
    /// Whether the files these steps restore from were written (`restore/` or
    /// `restore.archive` for a combined run). False when the embedded engine made
    /// the plan: it applies the slice itself, and `OUT/oplog.bson` holds the slice
    /// alone; `pitr plan` writes them.
    #[serde(default = "written_by_default")]
    pub inputs_written: bool,
    /// The archive backup is fed to mongorestore's standard input by pitr (`--archive`
    /// without a file), not read from a file: see [`StreamSpec`].
    #[serde(default)]
    pub stream: Option<StreamSpec>,
}

/// What pitr streams into the restore step's `mongorestore --archive` (standard
/// input): the archive `backup` (a path or a URL) re-encoded as it is read, with the
/// slice file appended to its oplog namespace when `slice` is set (the one run:
/// what `OUT/restore.archive` would hold, never written to disk).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamSpec {
    pub backup: String,
    pub slice: Option<String>,
}

fn written_by_default() -> bool {
    true
}

/// Concrete values (or placeholders) for the commands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommandValues {
    pub mongod: String,
    pub mongorestore: String,
    pub mongodump: String,
    pub pitr: String,
    /// Always the loopback address for a spare pitr starts.
    pub host: String,
    pub port: String,
    pub dbpath: String,
    pub logpath: String,
    /// `--config FILE` for mongorestore/mongodump (credentials), if any.
    pub config: Option<String>,
    /// Where step 5 dumps the restored data.
    pub dump_dir: String,
}

impl CommandValues {
    /// What `pitr plan` prints.
    pub fn placeholders() -> CommandValues {
        CommandValues {
            mongod: "mongod".into(),
            mongorestore: "mongorestore".into(),
            mongodump: "mongodump".into(),
            pitr: "pitr".into(),
            host: "127.0.0.1".into(),
            port: "<PORT>".into(),
            dbpath: "<DBPATH>".into(),
            logpath: "<DBPATH>/mongod.log".into(),
            config: None,
            dump_dir: "<DUMP_DIR>".into(),
        }
    }
}

/// One step of the runbook. JSON: `number` (from 1), `title`, `commands` (argv
/// arrays, run in order; may be empty for a manual step), `note`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Step {
    pub number: u32,
    pub title: String,
    pub commands: Vec<Vec<String>>,
    pub note: Option<String>,
}

fn s(x: &str) -> String {
    x.to_string()
}

/// Step 1: the spare standalone mongod: loopback only, its own dbpath, TTL monitor
/// off (TTL deletes during a restore lose data), logging to a file.
pub fn mongod_argv(v: &CommandValues) -> Vec<String> {
    vec![
        v.mongod.clone(),
        s("--port"),
        v.port.clone(),
        s("--bind_ip"),
        v.host.clone(),
        s("--dbpath"),
        v.dbpath.clone(),
        s("--setParameter"),
        s("ttlMonitorEnabled=false"),
        s("--logpath"),
        v.logpath.clone(),
    ]
}

fn connection(tool: &str, v: &CommandValues) -> Vec<String> {
    let mut a = vec![
        s(tool),
        s("--host"),
        v.host.clone(),
        s("--port"),
        v.port.clone(),
    ];
    if let Some(c) = &v.config {
        a.push(s("--config"));
        a.push(c.clone());
    }
    a
}

/// Step 2: restore the backup (with `--oplogReplay` of its own oplog when it has one).
/// `--bypassDocumentValidation`: the documents are the source's own, validated (or
/// deliberately not) when they were written; a validator added or tightened later
/// must not turn them away during the restore.
pub fn restore_backup_argv(r: &RestoreSpec, v: &CommandValues) -> Vec<String> {
    let mut a = connection(&v.mongorestore, v);
    a.push(s("--bypassDocumentValidation"));
    if r.gzip {
        a.push(s("--gzip"));
    }
    if r.backup_oplog_replay {
        a.push(s("--oplogReplay"));
        if let Some(l) = r.backup_oplog_limit {
            a.push(s("--oplogLimit"));
            a.push(l.to_string());
        }
    }
    for ns in &r.ns_include {
        a.push(s("--nsInclude"));
        a.push(ns.clone());
    }
    if r.stream.is_some() {
        // `--archive` without a value: the archive on standard input (mongo-tools
        // `mongorestore/options.go`: `Archive string` with `optional:"true"
        // optional-value:"-"`), fed by pitr.
        a.push(s("--archive"));
    } else if r.archive {
        // mongorestore reads the whole archive, its oplog included, from --archive.
        a.push(format!("--archive={}", r.backup_dir));
    } else {
        a.push(r.backup_dir.clone());
    }
    a
}

/// Step 3: replay the slice up to the exclusive limit (None: nothing to replay).
pub fn replay_slice_argv(r: &RestoreSpec, v: &CommandValues) -> Option<Vec<String>> {
    let dir = r.slice_dir.as_ref()?;
    let mut a = connection(&v.mongorestore, v);
    a.push(s("--bypassDocumentValidation"));
    a.extend([
        s("--oplogReplay"),
        s("--oplogLimit"),
        r.limit.to_string(),
        dir.clone(),
    ]);
    Some(a)
}

/// Step 4: check the counts against the plan.
pub fn verify_argv(r: &RestoreSpec, v: &CommandValues) -> Vec<String> {
    vec![
        v.pitr.clone(),
        s("verify"),
        s("--uri"),
        format!("mongodb://{}:{}/", v.host, v.port),
        s("--expect"),
        r.plan_file.clone(),
    ]
}

/// Step 5: hand the restored data over (one mongodump per selected namespace, or
/// one for everything).
pub fn dump_argvs(r: &RestoreSpec, v: &CommandValues) -> Vec<Vec<String>> {
    if r.dump_namespaces.is_empty() {
        let mut a = connection(&v.mongodump, v);
        a.extend([s("--out"), v.dump_dir.clone()]);
        return vec![a];
    }
    r.dump_namespaces
        .iter()
        .map(|ns| {
            let (db, coll) = ns.split_once('.').unwrap_or((ns.as_str(), ""));
            let mut a = connection(&v.mongodump, v);
            a.extend([
                s("--db"),
                s(db),
                s("--collection"),
                s(coll),
                s("--out"),
                v.dump_dir.clone(),
            ]);
            a
        })
        .collect()
}

/// Step 6: shut the spare down cleanly.
pub fn shutdown_argv(v: &CommandValues) -> Vec<String> {
    vec![
        v.mongod.clone(),
        s("--dbpath"),
        v.dbpath.clone(),
        s("--shutdown"),
    ]
}

/// The whole runbook.
pub fn steps(r: &RestoreSpec, v: &CommandValues) -> Vec<Step> {
    let mut out = Vec::new();
    let mut add = |title: &str, commands: Vec<Vec<String>>, note: Option<String>| {
        out.push(Step {
            number: out.len() as u32 + 1,
            title: title.to_string(),
            commands,
            note,
        });
    };
    add(
        "Start a spare standalone mongod",
        vec![mongod_argv(v)],
        Some(format!(
            "{} must be a new empty directory; pick a free port. Loopback only, TTL monitor off (TTL deletes during a restore lose data). \
             Add --fork to run it in the background.",
            v.dbpath
        )),
    );
    let streamed = r.stream.as_ref().map(|st| match &st.slice {
        Some(slice) => format!(
            "Standard input: pitr streams the archive {} with the slice {slice} appended to its oplog (no copy on disk). \
             By hand, `pitr plan` writes that archive as OUT/restore.archive: give it with --archive=FILE. ",
            st.backup
        ),
        None => format!(
            "Standard input: pitr streams the archive {} (no copy on disk). By hand: --archive=FILE. ",
            st.backup
        ),
    });
    let restore_note = match (r.backup_oplog_replay, r.backup_oplog_limit) {
        (true, Some(l)) if r.combined && r.stream.is_some() => Some(format!(
            "One run: the backup's own oplog followed by the slice; --oplogLimit {l} is exclusive: \
             the entry at {l} and everything after it are not applied."
        )),
        (true, Some(l)) if r.combined => Some(format!(
            "One run: {} links the backup's database directories and holds its own oplog followed by the slice; \
             --oplogLimit {l} is exclusive: the entry at {l} and everything after it are not applied.",
            r.backup_dir
        )),
        (true, Some(l)) => Some(format!(
            "The restore point lies inside the backup's own oplog: it is replayed up to {l} (exclusive) and nothing else is needed."
        )),
        (true, None) => Some("Replays the backup's own oplog, which makes it consistent at its end.".to_string()),
        (false, _) if !r.ns_include.is_empty() => Some("Only the --ns namespaces are restored.".to_string()),
        (false, _) => None,
    };
    add(
        if r.combined {
            "Restore the backup and replay the oplog up to the limit"
        } else {
            "Restore the backup"
        },
        vec![restore_backup_argv(r, v)],
        match (streamed, restore_note) {
            (Some(s), Some(n)) => Some(format!("{s}{n}")),
            (Some(s), None) => Some(s.trim_end().to_string()),
            (None, n) => n,
        },
    );
    if let Some(a) = replay_slice_argv(r, v) {
        add(
            "Replay the oplog slice up to the limit",
            vec![a],
            Some(format!("--oplogLimit {} is exclusive: the entry at {} and everything after it are not applied.", r.limit, r.limit)),
        );
    }
    add(
        "Verify the restored counts against the plan",
        vec![verify_argv(r, v)],
        None,
    );
    add(
        "Optional: dump the restored data to hand over",
        dump_argvs(r, v),
        Some(format!(
            "then e.g. `mongorestore --nsInclude ... {}` into production, after review",
            v.dump_dir
        )),
    );
    add(
        "Shut the spare down",
        vec![shutdown_argv(v)],
        Some(format!("then remove {}", v.dbpath)),
    );
    out
}

/// An argv as one shell line; arguments with characters the shell would interpret
/// are single-quoted (`<` and `>` are left bare: they only occur in placeholders
/// such as `<PORT>`, which are to be replaced).
pub fn shell_line(argv: &[String]) -> String {
    argv.iter()
        .map(|a| {
            let plain = !a.is_empty()
                && a.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"_-./:=@%+,<>".contains(&b));
            if plain {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> RestoreSpec {
        RestoreSpec {
            backup_dir: "/b".into(),
            combined: false,
            archive: false,
            gzip: false,
            backup_oplog_replay: true,
            backup_oplog_limit: None,
            ns_include: vec![],
            slice_dir: Some("/s".into()),
            limit: Ts::new(1700000000, 3),
            plan_file: "/s/plan.json".into(),
            dump_namespaces: vec![],
            inputs_written: true,
            backup_in_spare: false,
            stream: None,
        }
    }

    #[test]
    fn placeholder_runbook() {
        let v = CommandValues::placeholders();
        let lines: Vec<String> = steps(&spec(), &v)
            .iter()
            .flat_map(|s| s.commands.iter().map(|c| shell_line(c)))
            .collect();
        assert_eq!(
            lines,
            vec![
                "mongod --port <PORT> --bind_ip 127.0.0.1 --dbpath <DBPATH> --setParameter ttlMonitorEnabled=false --logpath <DBPATH>/mongod.log",
                "mongorestore --host 127.0.0.1 --port <PORT> --bypassDocumentValidation --oplogReplay /b",
                "mongorestore --host 127.0.0.1 --port <PORT> --bypassDocumentValidation --oplogReplay --oplogLimit 1700000000:3 /s",
                "pitr verify --uri mongodb://127.0.0.1:<PORT>/ --expect /s/plan.json",
                "mongodump --host 127.0.0.1 --port <PORT> --out <DUMP_DIR>",
                "mongod --dbpath <DBPATH> --shutdown",
            ]
        );
    }

    #[test]
    fn real_values_credentials_and_variants() {
        let v = CommandValues {
            mongod: "/opt/mongo/bin/mongod".into(),
            port: "27999".into(),
            dbpath: "/tmp/pitr x".into(),
            config: Some("/tmp/pitr x/restore.yaml".into()),
            ..CommandValues::placeholders()
        };
        let mut r = spec();
        r.gzip = true;
        r.backup_oplog_limit = Some(Ts::new(5, 1));
        r.slice_dir = None;
        let a = restore_backup_argv(&r, &v);
        assert_eq!(shell_line(&a), "mongorestore --host 127.0.0.1 --port 27999 --config '/tmp/pitr x/restore.yaml' --bypassDocumentValidation --gzip --oplogReplay --oplogLimit 5:1 /b");
        assert!(replay_slice_argv(&r, &v).is_none());
        assert_eq!(steps(&r, &v).len(), 5);
        assert!(!a.iter().any(|x| x.contains("password")));
        r.backup_oplog_replay = false;
        r.ns_include = vec![r"shop.a\*b".into()];
        r.dump_namespaces = vec!["shop.orders".into()];
        assert_eq!(
            shell_line(&restore_backup_argv(&r, &v)),
            r"mongorestore --host 127.0.0.1 --port 27999 --config '/tmp/pitr x/restore.yaml' --bypassDocumentValidation --gzip --nsInclude 'shop.a\*b' /b"
        );
        assert_eq!(
            shell_line(&dump_argvs(&r, &v)[0]),
            "mongodump --host 127.0.0.1 --port 27999 --config '/tmp/pitr x/restore.yaml' --db shop --collection orders --out <DUMP_DIR>"
        );
        assert_eq!(
            shell_line(&mongod_argv(&v))[..22].to_string(),
            "/opt/mongo/bin/mongod "
        );
    }
}
