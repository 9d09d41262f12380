//! `replay --cluster --engine mongod`: the **resolved slice** one member's spare is
//! restored with, so that the real `mongorestore --oplogReplay` does what rule R2
//! (shared/reference/sharded-pitr.md) says at the cluster limit `L`.
//!
//! The member's own plan ([`super::restore::member_plan`]) writes what mongorestore
//! replays: the entries of the member's oplog after its backup's end and before `L`
//! (in one run after the backup's own oplog, `OUT/restore/oplog.bson`, when the
//! backup is a directory; else the slice `OUT/oplog.bson`). Two things make that
//! differ from the cluster's state at `L`, and the resolved slice mends both:
//!
//! - **cross-shard transactions committed before `L` whose commit entry on this
//!   member is at or after `L`** (its `commitTimestamp` is before `L`, its
//!   participant logged `commitTransaction` later). mongorestore buffers a
//!   `prepare: true` applyOps and applies its writes only at the transaction's
//!   `commitTransaction` entry (mongo-tools `common/txn/meta.go`: `IsCommit` is
//!   `commit || (IsTxn && !prepare && !partial)`; `mongorestore/oplog.go`
//!   `HandleTxnOp`: `AddOp`, then `GetTxnStream` on the commit), drops it at an
//!   `abortTransaction` (`PurgeTxn`), and applies nothing for a transaction still
//!   buffered when the oplog ends (`txn.Buffer.Stop`). So each such commit entry
//!   is appended after the entries before `L`, and `--oplogLimit` is set one tick
//!   past the last entry (mongorestore stops at the first entry not below it,
//!   `TimestampBeforeLimit`); excluded transactions (aborted, or committing at or
//!   after `L`) have no commit entry in the slice and stay buffered: applied
//!   nowhere. The prepare must be in the same mongorestore run as its commit (the
//!   buffer is per run): in one run with the backup's own oplog it is (a directory
//!   backup's `restore/oplog.bson`; an archive's oplog namespace with the slice
//!   appended, streamed from a bucket or, for a local archive, `restore.archive`
//!   written again from the backup and the resolved slice); when the
//!   backup is restored in a run of its own (a member with no entry between its
//!   backup's end and `L`: no one-run input is written), a prepare at or before the backup's end is copied from the
//!   member's oplog to the head of the slice (the backup's run buffers it and drops
//!   it at its end, so it is applied once), or the member is refused when the
//!   member's oplog does not hold it.
//! - **the config server's chunk commits**: logged as `applyOps` on `config.$cmd`,
//!   which mongorestore skips whole (`shouldIgnoreNamespace`: `config.*` other than
//!   `dumprestore.ConfigCollectionsToKeep`), while a config server applies them (the
//!   embedded engine's config-server rules, `RestoreRules::config_server`). In the
//!   resolved slice they are on `admin.$cmd`: mongorestore then takes each inner
//!   operation through `HandleOp` (`case "applyOps"` in `HandleNonTxnOp`), and the
//!   inner operations are on the kept `config.chunks`/`config.collections`.
//!
//! The verification of each spare against the embedded engine's prediction for the
//! member (counts and dbHash of every namespace) is what proves the slice right.

use std::collections::HashSet;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use bson::Document;
use serde::Serialize;

use crate::error::Failure;
use crate::oplog::{self, Entry, ReadOptions, Ts};
use crate::plan::RestorePlan;

use super::file::Role;

/// What the resolved slice holds. JSON: `file`, `entries` (entries in the file
/// mongorestore replays that are after the backup's end: the plan's slice and the
/// commit entries appended), `oplog_limit` (`"t:i"`, exclusive),
/// `commits_appended[]` (`txn`, `ts`), `prepares_copied`, `config_apply_ops`.
#[derive(Clone, Debug, Serialize)]
pub struct ResolvedSlice {
    pub file: Option<String>,
    pub entries: u64,
    pub oplog_limit: Ts,
    pub commits_appended: Vec<CommitAppended>,
    pub prepares_copied: u64,
    /// The config server's `applyOps` on `config.$cmd` given to mongorestore on
    /// `admin.$cmd`.
    pub config_apply_ops: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct CommitAppended {
    pub txn: String,
    pub ts: Ts,
}

/// `--engine mongod`: one member's spare, its resolved slice and its verification,
/// in the cluster report (`members[].mongod`).
#[derive(Clone, Debug, Serialize)]
pub struct MongodMember {
    /// Where the member's plan, logs and report are (`plan/`, `logs/`).
    pub work_dir: String,
    pub spare: Option<SpareBrief>,
    pub slice: ResolvedSlice,
    pub verification: Option<Verification>,
}

/// JSON: `uri`, `port`, `pid`, `kept` (`--keep`: still running), `stopped` (how it
/// ended).
#[derive(Clone, Debug, Serialize)]
pub struct SpareBrief {
    pub uri: String,
    pub port: u16,
    pub pid: u32,
    pub log: String,
    pub kept: bool,
    pub stopped: Option<String>,
}

/// Counts and dbHash of every namespace of the spare against the embedded engine's
/// prediction for the member at the limit. JSON: `passed`, `checked`, `failed`,
/// `failed_namespaces`, `server_version`, `standin`.
#[derive(Clone, Debug, Serialize)]
pub struct Verification {
    pub passed: bool,
    pub checked: usize,
    pub failed: usize,
    pub failed_namespaces: Vec<String>,
    pub server_version: Option<String>,
    pub standin: bool,
    /// The config server: its routing collections (`config.chunks`, ...) compared,
    /// by count and md5 in `_id` order, between its spare's dump and the prediction
    /// (the plan's checks cover user databases only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub routing_checked: Vec<String>,
}

/// One tick past `ts`: the exclusive `--oplogLimit` that takes `ts` in.
pub fn next_tick(ts: Ts) -> Ts {
    match ts.i.checked_add(1) {
        Some(i) => Ts::new(ts.t, i),
        None => Ts::new(ts.t + 1, 0),
    }
}

/// What [`resolve`] needs of the member.
pub struct Member<'a> {
    pub id: &'a str,
    pub role: Role,
    /// The member's oplog source (its one `oplog` entry in the cluster file).
    pub oplog: &'a str,
    pub opts: ReadOptions,
    /// [`super::txns::TxnTable::commits_past_limit`]: key, label, commit entry ts.
    pub commits: Vec<(Vec<u8>, String, Ts)>,
}

fn fail(member: &str, what: impl std::fmt::Display) -> Failure {
    Failure::new(format!("member `{member}`: {what}"))
}

/// Rewrites what mongorestore replays for `m` (see the module documentation) and
/// the plan's restore limits to match; returns what the slice holds.
pub fn resolve(
    m: &Member<'_>,
    plan: &mut RestorePlan,
    plan_dir: &Path,
) -> Result<ResolvedSlice, Failure> {
    let limit = plan.limit();
    let backup_end = plan.coverage.backup_end;
    refuse_commit_missing(m, plan, limit)?;
    let r = &plan.restore;
    let config = m.role == Role::Config;
    // Where mongorestore reads the entries after the backup's end, and whether the
    // backup's own oplog is in the same run.
    if config && (r.archive || r.stream.is_some()) {
        return Err(fail(m.id, "the config server's backup is an archive: its own oplog goes to mongorestore inside the archive, where pitr cannot give the chunk commits (applyOps on config.$cmd) to mongorestore on admin.$cmd")
            .with_hint("use a directory backup (`mongodump --oplog --out DIR`) of the config server, or the embedded engine"));
    }
    let (file, same_run, gzip) = if r.stream.is_some() {
        let slice = r.stream.as_ref().and_then(|s| s.slice.clone());
        (slice.map(PathBuf::from), true, false)
    } else if r.combined && r.archive {
        // `OUT/restore.archive`: the backup archive with the plan's slice
        // (`OUT/oplog.bson`) appended to its oplog; rebuilt below from the resolved
        // slice (`plan::onerun::write_archive`), as the plan built it.
        (Some(PathBuf::from(&plan.slice.oplog_file)), true, false)
    } else if r.combined {
        let dir = Path::new(&r.backup_dir);
        let plain = dir.join("oplog.bson");
        let gz = dir.join("oplog.bson.gz");
        let f = if plain.exists() { plain } else { gz };
        (Some(f), true, r.gzip)
    } else {
        let f = r
            .slice_dir
            .as_ref()
            .map(|d| Path::new(d).join("oplog.bson"));
        (f, false, false)
    };
    let need_prepares: Vec<&(Vec<u8>, String, Ts)> = if same_run {
        Vec::new()
    } else {
        m.commits
            .iter()
            .filter(|(_, label, _)| {
                plan.prepared_at_limit
                    .iter()
                    .any(|p| &p.txn == label && p.first <= backup_end)
            })
            .collect()
    };
    // Test hook: the member's plain slice, as restoring each member with its own
    // `--oplogLimit L` would replay it (no commit entries past `L`, the chunk
    // commits on `config.$cmd`): what the verification must catch
    // (tests/replay_cluster_mongod.rs).
    let unresolved = std::env::var_os("PITR_TEST_UNRESOLVED_SLICE").is_some();
    if (m.commits.is_empty() && !config) || unresolved {
        // Nothing differs from the member's own plan.
        return Ok(ResolvedSlice {
            file: file.map(|f| f.display().to_string()),
            entries: plan.slice.entries,
            oplog_limit: r.limit,
            commits_appended: Vec::new(),
            prepares_copied: 0,
            config_apply_ops: 0,
        });
    }
    let (head, tail) = from_member_oplog(m, &need_prepares, backup_end, limit)?;
    let file = match file {
        Some(f) => f,
        None => {
            let d = plan_dir.join("resolved");
            fs::create_dir_all(&d)
                .map_err(|e| fail(m.id, format!("cannot create `{}`: {e}", d.display())))?;
            if plan.restore.stream.is_none() {
                plan.restore.slice_dir = Some(d.display().to_string());
            }
            d.join("oplog.bson")
        }
    };
    let copied = head.len() as u64;
    let mut w = Rewriter {
        config,
        backup_end,
        out: Output::new(&file, gzip).map_err(|e| {
            fail(
                m.id,
                format!("cannot write beside `{}`: {e}", file.display()),
            )
        })?,
        rewritten: 0,
        after_backup: 0,
        last: None,
    };
    for b in &head {
        w.push(b).map_err(|e| fail(m.id, e))?;
    }
    // Entry by entry: the slice may be large.
    if file.exists() {
        let mut r = oplog::open(&file.display().to_string(), m.opts).map_err(|e| fail(m.id, e))?;
        while let Some((b, _, _)) = r.next_bytes().map_err(|e| fail(m.id, e))? {
            w.push(b).map_err(|e| fail(m.id, e))?;
        }
    }
    for (b, _, _) in &tail {
        w.push(b).map_err(|e| fail(m.id, e))?;
    }
    let (rewritten, after_backup, last) = (w.rewritten, w.after_backup, w.last);
    w.out
        .commit(&file)
        .map_err(|e| fail(m.id, format!("cannot write `{}`: {e}", file.display())))?;
    if plan.restore.combined && plan.restore.archive && plan.restore.stream.is_none() {
        rebuild_archive(m.id, plan, &file)?;
    }
    let oplog_limit = last.map_or(limit, |l| next_tick(l).max(limit));
    plan.restore.limit = oplog_limit;
    if plan.restore.backup_oplog_limit.is_some() && same_run {
        plan.restore.backup_oplog_limit = Some(oplog_limit);
    }
    if let Some(st) = plan.restore.stream.as_mut() {
        st.slice = Some(file.display().to_string());
    }
    Ok(ResolvedSlice {
        file: Some(file.display().to_string()),
        entries: after_backup,
        oplog_limit,
        commits_appended: tail
            .iter()
            .map(|(_, label, ts)| CommitAppended {
                txn: label.clone(),
                ts: *ts,
            })
            .collect(),
        prepares_copied: copied,
        config_apply_ops: rewritten,
    })
}

/// An included transaction open here at the limit needs this member's own
/// commitTransaction entry in what mongorestore replays; one decided only by another
/// member's entry or by the coordinator's document (this member's commit entry is past
/// the oplog read) has none to give it: refused, naming the member.
fn refuse_commit_missing(m: &Member<'_>, plan: &RestorePlan, limit: Ts) -> Result<(), Failure> {
    if let Some(t) = plan
        .prepared_at_limit
        .iter()
        .find(|t| t.included && !m.commits.iter().any(|c| c.1 == t.txn))
    {
        return Err(fail(m.id, format!(
            "the cross-shard transaction {} is in the restore (its commitTimestamp {} is before the limit {limit}), but this member's commitTransaction entry is not in its oplog: mongorestore applies a prepared transaction only at that entry",
            t.txn,
            t.commit_timestamp.map_or_else(|| "?".into(), |c| c.to_string())
        ))
        .with_hint("dump this member's oplog further (past its commit entry), or use the embedded engine, which applies it at its commitTimestamp"));
    }
    Ok(())
}

/// `OUT/restore.archive` written again: the member's backup archive with the
/// resolved slice appended to its oplog namespace, renamed over the plan's.
fn rebuild_archive(member: &str, plan: &RestorePlan, slice: &Path) -> Result<(), Failure> {
    let restore = Path::new(&plan.restore.backup_dir);
    let out = restore.parent().unwrap_or(Path::new("."));
    let written = crate::plan::onerun::write_archive(out, Path::new(&plan.backup.dir), slice)
        .map_err(|e| Failure::from(e).in_context(format!("member `{member}`")))?;
    crate::plan::onerun::install(written, out)
        .map_err(|e| Failure::from(e).in_context(format!("member `{member}`")))?;
    Ok(())
}

/// `raw` with its `ns` set to `admin.$cmd` (field order kept).
fn on_admin(raw: &bson::RawDocument) -> Result<Vec<u8>, String> {
    let mut d = Document::try_from(raw).map_err(|e| e.to_string())?;
    d.insert("ns", "admin.$cmd");
    bson::to_vec(&d).map_err(|e| e.to_string())
}

type Picked = Vec<(Vec<u8>, String, Ts)>;

/// From the member's oplog: the parts (prepares) at or before the backup's end of
/// the transactions in `prepares`, and each commit entry of `m.commits` (at or
/// after `limit`), with their labels.
fn from_member_oplog(
    m: &Member<'_>,
    prepares: &[&(Vec<u8>, String, Ts)],
    backup_end: Ts,
    limit: Ts,
) -> Result<(Vec<Vec<u8>>, Picked), Failure> {
    if m.commits.is_empty() {
        return Ok((Vec::new(), Vec::new()));
    }
    let want_parts: HashSet<&[u8]> = prepares.iter().map(|p| p.0.as_slice()).collect();
    let want_commits: HashSet<(&[u8], Ts)> =
        m.commits.iter().map(|c| (c.0.as_slice(), c.2)).collect();
    let mut head: Vec<(Ts, Vec<u8>)> = Vec::new();
    let mut tail: Picked = Vec::new();
    let mut found_parts: HashSet<Vec<u8>> = HashSet::new();
    let mut r = oplog::open(m.oplog, m.opts).map_err(|e| fail(m.id, e))?;
    let last_commit = m.commits.iter().map(|c| c.2).max().unwrap_or(limit);
    while let Some(e) = r.next_entry().map_err(|e| fail(m.id, e))? {
        if e.ts > last_commit && e.ts > backup_end {
            break;
        }
        let Some(key) = e.transaction_key() else {
            continue;
        };
        if e.ts <= backup_end
            && want_parts.contains(key.as_slice())
            && e.command_name() == Some("applyOps")
        {
            found_parts.insert(key.clone());
            head.push((e.ts, e.raw.as_bytes().to_vec()));
        }
        if e.ts >= limit
            && e.command_name() == Some("commitTransaction")
            && want_commits.contains(&(key.as_slice(), e.ts))
        {
            let label = m
                .commits
                .iter()
                .find(|c| c.0 == key)
                .map(|c| c.1.clone())
                .unwrap_or_default();
            tail.push((e.raw.as_bytes().to_vec(), label, e.ts));
        }
    }
    for p in prepares {
        if !found_parts.contains(&p.0) {
            return Err(fail(m.id, format!("the cross-shard transaction {} is in the restore (its commitTimestamp is before the limit {limit}) and was prepared at or before the backup's end {backup_end}; the backup is restored by a mongorestore run of its own, and the member's oplog does not hold the prepare to give the slice's run: mongorestore would apply its commit with nothing buffered", p.1))
                .with_hint("give that member's oplog from before the prepare, use a directory backup restored whole (one run with its own oplog), or the embedded engine"));
        }
    }
    if tail.len() != m.commits.len() {
        return Err(fail(m.id, format!(
            "{} commit entr{} at or after the limit {limit} of included cross-shard transactions not found in the oplog `{}`",
            m.commits.len() - tail.len(),
            if m.commits.len() - tail.len() == 1 { "y" } else { "ies" },
            m.oplog
        )));
    }
    head.sort_by_key(|h| h.0);
    tail.sort_by_key(|t| t.2);
    Ok((head.into_iter().map(|h| h.1).collect(), tail))
}

/// Writes the resolved slice entry by entry, the config server's chunk commits
/// moved to `admin.$cmd`, counting as it goes.
struct Rewriter {
    config: bool,
    backup_end: Ts,
    out: Output,
    rewritten: u64,
    after_backup: u64,
    last: Option<Ts>,
}

impl Rewriter {
    fn push(&mut self, bytes: &[u8]) -> Result<(), String> {
        let raw = bson::RawDocument::from_bytes(bytes).map_err(|e| e.to_string())?;
        let e = Entry::parse(raw).map_err(|e| e.to_string())?;
        if e.ts > self.backup_end {
            self.after_backup += 1;
        }
        self.last = Some(self.last.map_or(e.ts, |l| l.max(e.ts)));
        if self.config && e.ns == "config.$cmd" && e.command_name() == Some("applyOps") {
            self.rewritten += 1;
            self.out.write(&on_admin(raw)?)
        } else {
            self.out.write(bytes)
        }
        .map_err(|e| e.to_string())
    }
}

/// A temporary file beside the slice, renamed over it when complete (a hard link
/// to the plan's slice is replaced, not written through), gzip-compressed when the
/// backup is.
struct Output {
    tmp: tempfile::NamedTempFile,
    w: Box<dyn Write>,
    gz: Option<flate2::write::GzEncoder<io::BufWriter<fs::File>>>,
}

impl Output {
    fn new(path: &Path, gzip: bool) -> io::Result<Output> {
        let dir = path.parent().unwrap_or(Path::new("."));
        let tmp = tempfile::Builder::new()
            .prefix(".pitr-resolved-")
            .tempfile_in(dir)?;
        let f = io::BufWriter::new(tmp.reopen()?);
        let (w, gz): (Box<dyn Write>, _) = if gzip {
            (
                Box::new(io::sink()),
                Some(flate2::write::GzEncoder::new(
                    f,
                    flate2::Compression::fast(),
                )),
            )
        } else {
            (Box::new(f), None)
        };
        Ok(Output { tmp, w, gz })
    }

    fn write(&mut self, b: &[u8]) -> io::Result<()> {
        match &mut self.gz {
            Some(g) => g.write_all(b),
            None => self.w.write_all(b),
        }
    }

    fn commit(mut self, path: &Path) -> io::Result<()> {
        match self.gz.take() {
            Some(g) => g.finish()?.flush()?,
            None => self.w.flush()?,
        }
        drop(self.w);
        self.tmp.as_file().sync_all()?;
        self.tmp.persist(path).map_err(|e| e.error)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(t: u32, o: bson::Document, txn: bool) -> Vec<u8> {
        let mut d = bson::doc! { "op": "c", "ns": "admin.$cmd", "o": o, "ts": bson::Timestamp { time: t, increment: 1 }, "t": 1i64 };
        if txn {
            d.insert("lsid", bson::doc! { "id": bson::Binary { subtype: bson::spec::BinarySubtype::Uuid, bytes: vec![7; 16] } });
            d.insert("txnNumber", 1i64);
        }
        bson::to_vec(&d).unwrap()
    }

    /// A prepare at or before the backup's end is copied to the head of a slice
    /// restored in a run of its own, the commit entry past the limit appended; a
    /// prepare the member's oplog does not hold is refused.
    #[test]
    fn prepares_before_the_backup_end_and_commits_past_the_limit() {
        let prepare = entry(
            10,
            bson::doc! { "applyOps": [ { "op": "i", "ns": "shop.x", "o": { "_id": 1 } } ], "prepare": true },
            true,
        );
        let other = entry(11, bson::doc! { "applyOps": [] }, false);
        let commit = entry(
            21,
            bson::doc! { "commitTransaction": 1, "commitTimestamp": bson::Timestamp { time: 15, increment: 1 } },
            true,
        );
        let later = entry(22, bson::doc! { "applyOps": [] }, false);
        let key = Entry::parse(bson::RawDocument::from_bytes(&commit).unwrap())
            .unwrap()
            .transaction_key()
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("oplog.bson");
        std::fs::write(
            &path,
            [prepare.clone(), other, commit.clone(), later].concat(),
        )
        .unwrap();
        let spec = path.display().to_string();
        let txn = (key.clone(), "the txn".to_string(), Ts::new(21, 1));
        let m = Member {
            id: "shard1",
            role: Role::Shard,
            oplog: &spec,
            opts: ReadOptions::default(),
            commits: vec![txn.clone()],
        };
        let (head, tail) = from_member_oplog(&m, &[&txn], Ts::new(12, 1), Ts::new(20, 1)).unwrap();
        assert_eq!(head, vec![prepare]);
        assert_eq!(tail.len(), 1);
        assert_eq!(tail[0].0, commit);
        assert_eq!(tail[0].2, Ts::new(21, 1));
        // Without the prepare in the member's oplog: refused, naming the member.
        std::fs::write(&path, commit.clone()).unwrap();
        let e = from_member_oplog(&m, &[&txn], Ts::new(12, 1), Ts::new(20, 1)).unwrap_err();
        assert!(
            e.message().contains("member `shard1`") && e.message().contains("prepare"),
            "{}",
            e.message()
        );
        // A commit entry the oplog lacks: refused too.
        std::fs::write(&path, prepare_less()).unwrap();
        let e = from_member_oplog(&m, &[], Ts::new(12, 1), Ts::new(20, 1)).unwrap_err();
        assert!(e.message().contains("not found"), "{}", e.message());
    }

    fn prepare_less() -> Vec<u8> {
        entry(11, bson::doc! { "applyOps": [] }, false)
    }

    #[test]
    fn next_tick_carries() {
        assert_eq!(next_tick(Ts::new(5, 2)), Ts::new(5, 3));
        assert_eq!(next_tick(Ts::new(5, u32::MAX)), Ts::new(6, 0));
    }

    #[test]
    fn config_apply_ops_go_to_admin() {
        let d = bson::doc! { "op": "c", "ns": "config.$cmd", "o": { "applyOps": [] }, "ts": bson::Timestamp { time: 1, increment: 1 } };
        let bytes = bson::to_vec(&d).unwrap();
        let out = on_admin(bson::RawDocument::from_bytes(&bytes).unwrap()).unwrap();
        let back: Document = bson::from_slice(&out).unwrap();
        assert_eq!(back.get_str("ns").unwrap(), "admin.$cmd");
        let keys: Vec<&String> = back.keys().collect();
        assert_eq!(keys, ["op", "ns", "o", "ts"]);
    }
}
