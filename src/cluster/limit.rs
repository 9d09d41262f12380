//! One exclusive limit `L` for every member of a cluster, and the checks that make a
//! restore at `L` consistent (rules R1, R3, R4 of shared/reference/sharded-pitr.md):
//!
//! - **one limit** (R1): every member's `ts` is a tick of one gossiped cluster clock
//!   (server `src/mongo/db/vector_clock.cpp`), so `{ts < L}` on every member is one
//!   cluster time; a wall time maps to the first entry at or after it across all
//!   members;
//! - **coverage** (R3): for each member, its backup ends before `L` and its oplog
//!   reaches from the backup's end to an entry at or after `L` (gaps inside the
//!   oplog are found by each member's own plan, [`crate::plan::coverage`]);
//! - **no cut inside a cluster DDL** (R4): a drop, dropDatabase or rename logged on
//!   several members (`drop_collection_coordinator.cpp`,
//!   `drop_database_coordinator.cpp`, `rename_collection_participant_service.cpp`):
//!   `L` at or before its first entry on any member, or after its last on all;
//! - **every shard present**: the config server's `config.shards` at `L` lists no
//!   shard the cluster file lacks.

use std::path::PathBuf;

use crate::backup::{self, Layout};
use crate::forensics::Kind;
use crate::oplog::{self, ReadOptions, Ts};

use super::file::Member;
use super::incidents::{ClusterFinding, Reshard};
use super::txns::DecisionEntry;

/// What a member's backup and oplog hold, read from their entries' `ts`.
#[derive(Clone, Debug, serde::Serialize)]
pub struct MemberRange {
    pub member: String,
    /// The last entry of the backup's own oplog: its data is complete up to there.
    pub backup_end: Option<Ts>,
    pub oplog_first: Option<Ts>,
    pub oplog_last: Option<Ts>,
    /// The first entry at or after the asked time (in the backup's oplog or the
    /// member's oplog), when a time was asked.
    #[serde(skip)]
    pub at_or_after: Option<Ts>,
    /// The oplog source the member's plan replays (its one `oplog` entry).
    #[serde(skip)]
    pub oplog: String,
    /// Its `commitTransaction` and `abortTransaction` entries (backup oplog and
    /// oplog): the decisions of prepared transactions ([`super::txns`]).
    #[serde(skip)]
    pub decisions: Vec<DecisionEntry>,
}

/// Why a cluster cannot be restored at `L`; each names the member and says what to do.
#[derive(Debug, thiserror::Error)]
pub enum LimitError {
    #[error("member `{member}`: {why}")]
    Read { member: String, why: String },
    #[error("member `{member}` lists {n} oplog sources; a cluster restore replays one per member")]
    ManyOplogs { member: String, n: usize },
    #[error("member `{member}`: the backup `{}` has no oplog of its own, so where its data is complete is unknown", backup.display())]
    NoBackupOplog { member: String, backup: PathBuf },
    #[error("member `{member}`: its backup ends at {backup_end}, not before the limit {limit}")]
    BackupAfterLimit {
        member: String,
        backup_end: Ts,
        limit: Ts,
    },
    #[error("member `{member}`: its oplog ends at {last}, before the limit {limit} (it must reach an entry at or after the limit to prove nothing is missing before it)")]
    OplogEndsBefore { member: String, last: Ts, limit: Ts },
    #[error("member `{member}`: its oplog starts at {first}, after its backup's end {backup_end}: the entries between are missing")]
    OplogStartsLate {
        member: String,
        first: Ts,
        backup_end: Ts,
    },
    #[error("member `{member}`: its oplog is empty")]
    EmptyOplog { member: String },
    #[error("no member has an entry at or after {time}: every member's oplog ends before it")]
    TimeAfterAll { time: String },
    #[error("the limit {limit} falls inside the {kind} of `{ns}`, which the members logged from {first} to {last}: some members would have it and others not")]
    InsideDdl {
        limit: Ts,
        kind: &'static str,
        ns: String,
        first: Ts,
        last: Ts,
    },
    #[error("the config server's config.shards at the limit {limit} lists shard{} {} that the cluster file does not", if missing.len() == 1 { "" } else { "s" }, missing.iter().map(|m| format!("`{m}`")).collect::<Vec<_>>().join(", "))]
    ShardMissing { limit: Ts, missing: Vec<String> },
    #[error("member `{member}`: a prepared (cross-shard) transaction is open at the limit {limit} (prepared at {first}) and undecided: {message}; whether it is in the restore depends on its commitTimestamp")]
    PreparedOpen {
        member: String,
        limit: Ts,
        first: Ts,
        /// The member's oplog's last entry.
        last: Ts,
        message: String,
    },
    #[error(
        "member `{member}`: {message}; the other participants would hold it and this member not"
    )]
    CommitWithoutParts { member: String, message: String },
    #[error("member `{member}` is not a shard of the config server's config.shards at the limit {limit} ({})", known.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", "))]
    NotAShard {
        limit: Ts,
        member: String,
        known: Vec<String>,
    },
    #[error("`{ns}` was resharded from {first} to {last} (resharding {uuid}, last state `{state}`), between the members' backups (the latest ends at {backup_end}) and the limit {limit}: a resharding cannot be replayed from the oplog")]
    Resharding {
        ns: String,
        uuid: String,
        state: String,
        first: Ts,
        last: Ts,
        backup_end: Ts,
        limit: Ts,
    },
    #[error("--until end is not defined for a cluster: each member's oplog ends at its own time")]
    End,
    #[error("no critical or high-severity incident after every member's backup end (the latest is {backup_end}) for --until auto")]
    NoIncident { backup_end: Ts },
}

impl crate::error::Hint for LimitError {
    fn hint(&self) -> Option<String> {
        Some(match self {
            LimitError::Read { .. } => "check the member's paths in the cluster file".into(),
            LimitError::ManyOplogs { .. } => {
                "merge them first (`pitr archive --oplog A --oplog B --dir DIR`) and list the archive directory".into()
            }
            LimitError::NoBackupOplog { .. } => {
                "use a `mongodump --oplog` of the member's replica set (never through mongos)".into()
            }
            LimitError::BackupAfterLimit { backup_end, .. } => format!(
                "choose a limit after {backup_end} (every member's backup must end before it), or use an older backup of that member"
            ),
            LimitError::OplogEndsBefore { last, .. } => format!(
                "dump more of that member's oplog (up to or past the limit), or choose a limit at or before {last}"
            ),
            LimitError::OplogStartsLate { .. } => {
                "dump that member's oplog from before its backup ended, or use a later backup of it".into()
            }
            LimitError::EmptyOplog { .. } => "list the member's oplog dump in the cluster file".into(),
            LimitError::TimeAfterAll { .. } => "choose an earlier time, or dump more oplog".into(),
            LimitError::InsideDdl { first, last, .. } => format!(
                "restore to just before it (--until {first}) or after it on every member (--until {})",
                Ts::new(last.t, last.i.saturating_add(1))
            ),
            LimitError::ShardMissing { .. } => {
                "add a [[shard]] for each to the cluster file: a shard left out would lose its documents".into()
            }
            LimitError::PreparedOpen { first, last, .. } => format!(
                "dump more oplog of the transaction's participants, past this member's last entry {last}, until one \
                 of them holds its commitTransaction or abortTransaction (a prepared transaction waits for its \
                 coordinator's decision; docs/sharded.md); or choose a limit at or before {first}"
            ),
            LimitError::CommitWithoutParts { .. } => {
                "give that member's oplog from before the transaction's prepare (its backup's oplog starts after it), or \
                 choose a limit before that commit"
                    .into()
            }
            LimitError::NotAShard { .. } => {
                "check the shard's id (config.shards._id) in the cluster file; a shard removed before the limit \
                 has nothing to restore there: take it out of the file"
                    .into()
            }
            LimitError::Resharding { first, .. } => format!(
                "restore to before it (--until {first} or earlier), or from backups of every member taken after it \
                 ended (the recipients clone and rename outside what the oplog replays; PBM refuses the same)"
            ),
            LimitError::End => "give a time or an exact t:i, or `auto`".into(),
            LimitError::NoIncident { .. } => "give a time or an exact t:i".into(),
        })
    }
}

fn read_err(member: &str) -> impl Fn(String) -> LimitError + '_ {
    move |why| LimitError::Read {
        member: member.to_string(),
        why,
    }
}

/// Reads a member's backup end and oplog range (a pass over the `ts` of each), and
/// the first entry at or after `target`.
pub fn member_range(
    m: &Member,
    target: Option<Ts>,
    opts: ReadOptions,
) -> Result<MemberRange, LimitError> {
    if m.oplog.len() != 1 {
        return Err(LimitError::ManyOplogs {
            member: m.id.clone(),
            n: m.oplog.len(),
        });
    }
    let e = read_err(&m.id);
    let b = backup::open(&m.backup).map_err(|x| e(x.to_string()))?;
    let own = match (b.layout, &b.oplog) {
        (Layout::Directory, Some(p)) => p.display().to_string(),
        (Layout::Archive, Some(_)) => m.backup.display().to_string(),
        _ => {
            return Err(LimitError::NoBackupOplog {
                member: m.id.clone(),
                backup: m.backup.clone(),
            })
        }
    };
    let mut at_or_after: Option<Ts> = None;
    let mut decisions: Vec<DecisionEntry> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut pass = |spec: &str| -> Result<(Option<Ts>, Option<Ts>), LimitError> {
        let mut r = oplog::open(spec, opts).map_err(|x| e(x.to_string()))?;
        let (mut first, mut last) = (None, None);
        while let Some(en) = r.next_entry().map_err(|x| e(x.to_string()))? {
            if let Some(d) = DecisionEntry::of(&en).map_err(|x| e(format!("`{spec}`: {x}")))? {
                // The backup's oplog and the oplog overlap: one entry per ts.
                if seen.insert(d.ts) {
                    decisions.push(d);
                }
            }
            first.get_or_insert(en.ts);
            last = Some(last.map_or(en.ts, |l: Ts| l.max(en.ts)));
            if target.is_some_and(|t| en.ts >= t) && at_or_after.is_none_or(|a| en.ts < a) {
                at_or_after = Some(en.ts);
            }
        }
        Ok((first, last))
    };
    let (_, backup_end) = pass(&own)?;
    let oplog = m.oplog[0].display().to_string();
    let (oplog_first, oplog_last) = pass(&oplog)?;
    Ok(MemberRange {
        member: m.id.clone(),
        backup_end,
        oplog_first,
        oplog_last,
        at_or_after,
        oplog,
        decisions,
    })
}

/// What `--until` asked, resolved by the caller where it needs the members' scans.
#[derive(Clone, Debug)]
pub enum Asked {
    /// An exact `t:i`.
    Exact(Ts),
    /// A wall time: the first entry at or after it across all members.
    Time { ts: Ts, input: String },
    /// `auto`: the first critical or high cluster incident after every backup's end.
    Auto,
}

/// The limit: for a time, the first entry at or after it across all members; for
/// `auto`, the first critical or high-severity cluster finding after every member's
/// backup end (as `pitr plan --until auto` takes the first after the backup's end).
pub fn resolve(
    asked: &Asked,
    ranges: &[MemberRange],
    findings: &[ClusterFinding],
) -> Result<Ts, LimitError> {
    match asked {
        Asked::Exact(ts) => Ok(*ts),
        Asked::Time { input, .. } => ranges
            .iter()
            .filter_map(|r| r.at_or_after)
            .min()
            .ok_or_else(|| LimitError::TimeAfterAll {
                time: input.clone(),
            }),
        Asked::Auto => {
            let latest = ranges
                .iter()
                .filter_map(|r| r.backup_end)
                .max()
                .unwrap_or(Ts::ZERO);
            findings
                .iter()
                .map(|f| &f.finding)
                .find(|f| {
                    f.ts > latest
                        && !f.is_routine()
                        && f.severity >= crate::forensics::Severity::High
                })
                .map(|f| f.oplog_limit)
                .ok_or(LimitError::NoIncident { backup_end: latest })
        }
    }
}

/// R3 for every member at `limit`.
pub fn check_coverage(ranges: &[MemberRange], limit: Ts) -> Result<(), LimitError> {
    for r in ranges {
        let member = r.member.clone();
        let Some(backup_end) = r.backup_end else {
            return Err(LimitError::Read {
                member,
                why: "its backup's oplog is empty".into(),
            });
        };
        if backup_end >= limit {
            return Err(LimitError::BackupAfterLimit {
                member,
                backup_end,
                limit,
            });
        }
        let (Some(first), Some(last)) = (r.oplog_first, r.oplog_last) else {
            return Err(LimitError::EmptyOplog { member });
        };
        if last < limit {
            return Err(LimitError::OplogEndsBefore {
                member,
                last,
                limit,
            });
        }
        if first > backup_end {
            return Err(LimitError::OplogStartsLate {
                member,
                first,
                backup_end,
            });
        }
    }
    Ok(())
}

/// R4: `limit` is not inside a DDL that several members logged.
pub fn check_ddl(findings: &[ClusterFinding], limit: Ts) -> Result<(), LimitError> {
    for f in findings {
        let kind = f.finding.kind;
        if !matches!(
            kind,
            Kind::Drop | Kind::DropDatabase | Kind::RenameDropTarget
        ) {
            continue;
        }
        let mut members: Vec<&str> = f.members.iter().map(|m| m.member.as_str()).collect();
        members.sort_unstable();
        members.dedup();
        if members.len() < 2 {
            continue;
        }
        let first = f.members.iter().map(|m| m.ts).min().unwrap_or(f.finding.ts);
        let last = f
            .members
            .iter()
            .map(|m| m.last_ts)
            .max()
            .unwrap_or(f.finding.last_ts);
        if first < limit && limit <= last {
            return Err(LimitError::InsideDdl {
                limit,
                kind: kind.as_str(),
                ns: f.finding.ns.clone(),
                first,
                last,
            });
        }
    }
    Ok(())
}

/// R4 for resharding (`reshardCollection`, `moveCollection`, `unshardCollection`):
/// no resharding may run between the members' backups and the limit. Its recipients
/// clone the collection into `system.resharding.*` and rename it over the original
/// at commit, while the config server swaps the routing table; what a replay of the
/// oplog would make of that is neither the old collection nor the new one (mongodump
/// itself refuses `--oplog` during a resharding, mongo-tools `mongodump/prepare.go`;
/// PBM's known limitations say the same of its point-in-time restore).
pub fn check_resharding(
    reshards: &[Reshard],
    ranges: &[MemberRange],
    limit: Ts,
) -> Result<(), LimitError> {
    let backup_end = ranges
        .iter()
        .filter_map(|r| r.backup_end)
        .max()
        .unwrap_or(Ts::ZERO);
    match reshards
        .iter()
        .find(|r| r.first < limit && r.last > backup_end)
    {
        Some(r) => Err(LimitError::Resharding {
            ns: r.ns.clone(),
            uuid: r.resharding_uuid.clone(),
            state: r.state.clone(),
            first: r.first,
            last: r.last,
            backup_end,
            limit,
        }),
        None => Ok(()),
    }
}

/// Every shard of `config.shards` at the limit is a member, and every member is one
/// of them.
pub fn check_shards(known: &[String], members: &[&str], limit: Ts) -> Result<(), LimitError> {
    let missing: Vec<String> = known
        .iter()
        .filter(|k| !members.contains(&k.as_str()))
        .cloned()
        .collect();
    if !missing.is_empty() {
        return Err(LimitError::ShardMissing { limit, missing });
    }
    match members.iter().find(|m| !known.iter().any(|k| k == *m)) {
        Some(m) => Err(LimitError::NotAShard {
            limit,
            member: m.to_string(),
            known: known.to_vec(),
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(member: &str, end: u32, first: u32, last: u32) -> MemberRange {
        MemberRange {
            member: member.into(),
            backup_end: Some(Ts::new(end, 1)),
            oplog_first: Some(Ts::new(first, 1)),
            oplog_last: Some(Ts::new(last, 1)),
            at_or_after: None,
            oplog: String::new(),
            decisions: Vec::new(),
        }
    }

    #[test]
    fn coverage_names_the_member() {
        let rs = vec![range("config", 10, 8, 100), range("s0", 12, 11, 50)];
        check_coverage(&rs, Ts::new(20, 1)).unwrap();
        let e = check_coverage(&rs, Ts::new(60, 1)).unwrap_err();
        assert!(
            matches!(e, LimitError::OplogEndsBefore { ref member, .. } if member == "s0"),
            "{e}"
        );
        let e = check_coverage(&rs, Ts::new(11, 1)).unwrap_err();
        assert!(
            e.to_string()
                .contains("member `s0`: its backup ends at 12:1"),
            "{e}"
        );
        let rs = vec![range("s1", 10, 15, 100)];
        let e = check_coverage(&rs, Ts::new(20, 1)).unwrap_err();
        assert!(matches!(e, LimitError::OplogStartsLate { .. }), "{e}");
    }

    #[test]
    fn a_time_maps_to_the_first_entry_across_members() {
        let mut a = range("config", 1, 1, 9);
        a.at_or_after = Some(Ts::new(7, 3));
        let mut b = range("s0", 1, 1, 9);
        b.at_or_after = Some(Ts::new(7, 1));
        let c = range("s1", 1, 1, 9);
        let asked = Asked::Time {
            ts: Ts::new(7, 0),
            input: "7".into(),
        };
        assert_eq!(
            resolve(&asked, &[a, b, c.clone()], &[]).unwrap(),
            Ts::new(7, 1)
        );
        assert!(resolve(&asked, &[c], &[]).is_err());
    }

    #[test]
    fn no_resharding_between_the_backups_and_the_limit() {
        let rs = vec![range("config", 10, 8, 100), range("s0", 12, 11, 100)];
        let r = Reshard {
            ns: "shop.events".into(),
            resharding_uuid: "u".into(),
            first: Ts::new(30, 1),
            last: Ts::new(40, 1),
            state: "done".into(),
        };
        // Before it, or with backups taken after it: fine.
        check_resharding(std::slice::from_ref(&r), &rs, Ts::new(30, 1)).unwrap();
        let later = vec![range("config", 41, 8, 100), range("s0", 45, 11, 100)];
        check_resharding(std::slice::from_ref(&r), &later, Ts::new(60, 1)).unwrap();
        // Inside it, or after it with backups from before it: refused.
        for limit in [Ts::new(35, 1), Ts::new(60, 1)] {
            let e = check_resharding(std::slice::from_ref(&r), &rs, limit).unwrap_err();
            assert!(
                e.to_string()
                    .contains("`shop.events` was resharded from 30:1 to 40:1"),
                "{e}"
            );
        }
    }

    #[test]
    fn shards_of_config_must_be_members() {
        let known = vec!["s0".to_string(), "s1".to_string()];
        check_shards(&known, &["s0", "s1"], Ts::new(1, 1)).unwrap();
        let e = check_shards(&known, &["s0"], Ts::new(1, 1)).unwrap_err();
        assert!(e.to_string().contains("`s1`"), "{e}");
        let e = check_shards(&known, &["s0", "s1", "s9"], Ts::new(1, 1)).unwrap_err();
        assert!(e.to_string().contains("member `s9`"), "{e}");
    }
}
