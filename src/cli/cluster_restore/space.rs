//! `replay --cluster`'s free-space check (unless `--dry-run` or `--no-space-check`),
//! before any member is read, as the replica set's replay checks its own
//! (`super::super::replay`): a cluster restore that fills the disk after an hour
//! helps nobody at 3 a.m.
//!
//! Per member, its backup's bytes `b` and its oplog's `o` (an object's or a prefix's
//! size when they are in a bucket). What the run writes:
//!
//! - beside `--out`: the merged dump, at most every member's data: Σ(b + o);
//! - in the work dir, embedded engine (the members replayed one after the other,
//!   each one's files removed before the next): past `--memory`, the largest
//!   member's on-disk store: max(`preflight::store_bytes(b, o, --memory)`) (a
//!   member's slice is applied as it is read, not written);
//! - in the work dir, `--engine mongod`: every member's slice and resolved inputs
//!   (Σ o), the spares' data of the `--jobs` largest members at once (b + o each;
//!   each spare's dbpath is removed at its end), and every member's `mongodump`
//!   until the merge (Σ(b + o)).

use std::path::Path;

use crate::cluster;
use crate::error::Failure;
use crate::replay::preflight::{self, Need};

/// One member's input sizes: its backup's and its oplog's bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Sizes {
    backup: u64,
    oplog: u64,
}

/// Checks that the run fits (see the module documentation); `dirs`: where the work
/// dir goes (it may not exist yet) and `--out` (None: a bucket, where the merged
/// dump is streamed, with no local copy).
pub(super) fn check(
    file: &cluster::ClusterFile,
    (work, out): (&Path, Option<&Path>),
    budget: u64,
    mongod: bool,
    jobs: usize,
) -> Result<(), Failure> {
    let sizes: Vec<Sizes> = file
        .members()
        .map(|m| Sizes {
            backup: preflight::input_size(&m.backup),
            oplog: m.oplog.iter().map(|o| preflight::input_size(o)).sum(),
        })
        .collect();
    let needs = needs(
        &sizes,
        mongod,
        budget,
        jobs,
        (
            &preflight::nearest_existing(work),
            out.map(preflight::nearest_existing).as_deref(),
        ),
    );
    preflight::check_space(&needs).map_err(Failure::from)
}

/// `pitr plan --cluster`'s check (unless `--no-space-check`), before any member is
/// read: beside `--out` (`out_parent`: the plan is staged there), every member's
/// slice (at most its oplog's bytes) and, past `--memory`, the config server's
/// on-disk store (its routing is read from its documents at the limit).
pub(super) fn check_plan(
    file: &cluster::ClusterFile,
    out_parent: &Path,
    budget: u64,
) -> Result<(), Failure> {
    let mut slices = 0;
    let mut store = 0;
    for m in file.members() {
        let oplog: u64 = m.oplog.iter().map(|o| preflight::input_size(o)).sum();
        slices += oplog;
        if m.role == cluster::Role::Config {
            store = preflight::store_bytes(preflight::input_size(&m.backup), oplog, budget);
        }
    }
    let need = Need {
        dir: preflight::nearest_existing(out_parent),
        bytes: slices + store,
        what: match store {
            0 => "every member's slice".into(),
            _ => "every member's slice and the config server's on-disk store".into(),
        },
    };
    preflight::check_space(&[need])
        .map_err(|e| crate::cli::room::failure(e, &crate::cli::room::PLAN))
}

/// `pitr plan --cluster`'s check once a member's scan finds its oplog out of order,
/// one per member in `file.members()`'s order: in `dir` (the plan's staging
/// directory), the sorted slice (and its runs past `--sort-memory`) beside what is
/// still to be written there, the slices of the members after it and, for the
/// config server, its on-disk store past `--memory` (freed once its routing is
/// read), against what is free then.
pub(super) fn plan_sort_rooms(
    file: &cluster::ClusterFile,
    dir: &Path,
    budget: u64,
) -> Vec<crate::plan::SortRoom> {
    let oplogs: Vec<u64> = file
        .members()
        .map(|m| m.oplog.iter().map(|o| preflight::input_size(o)).sum())
        .collect();
    file.members()
        .enumerate()
        .map(|(i, m)| {
            let later: u64 = oplogs[i + 1..].iter().sum();
            let store = match m.role {
                cluster::Role::Config => {
                    preflight::store_bytes(preflight::input_size(&m.backup), oplogs[i], budget)
                }
                _ => 0,
            };
            let what = match (later, store) {
                (0, 0) => "the sorted slice",
                (_, 0) => "the sorted slice and the slices of the members still to come",
                (0, _) => "the sorted slice and the config server's on-disk store",
                _ => "the sorted slice, the config server's on-disk store and the slices of the members still to come",
            };
            let dir = dir.to_path_buf();
            crate::cli::room::sort_room(
                move |sorted| {
                    vec![Need {
                        dir: dir.clone(),
                        bytes: sorted + later + store,
                        what: what.into(),
                    }]
                },
                &crate::cli::room::PLAN,
            )
        })
        .collect()
}

/// What the run writes where (see the module documentation); `dirs`: the work dir's
/// and `--out`'s nearest existing directories.
fn needs(
    sizes: &[Sizes],
    mongod: bool,
    budget: u64,
    jobs: usize,
    (work, out): (&Path, Option<&Path>),
) -> Vec<Need> {
    let data: u64 = sizes.iter().map(|s| s.backup + s.oplog).sum();
    let mut needs: Vec<Need> = out
        .map(|out| Need {
            dir: out.to_path_buf(),
            bytes: data,
            what: "the merged dump of the cluster".into(),
        })
        .into_iter()
        .collect();
    if mongod {
        let mut spares: Vec<u64> = sizes.iter().map(|s| s.backup + s.oplog).collect();
        spares.sort_unstable_by(|a, b| b.cmp(a));
        needs.push(Need {
            dir: work.to_path_buf(),
            bytes: sizes.iter().map(|s| s.oplog).sum::<u64>()
                + spares.iter().take(jobs).sum::<u64>()
                + data,
            what: format!(
                "every member's slice, {} and every member's mongodump until the merge",
                if jobs > 1 {
                    format!("the data of {jobs} spare mongods at once")
                } else {
                    "one spare mongod's data at a time".to_string()
                }
            ),
        });
    } else {
        let largest = sizes
            .iter()
            .map(|s| preflight::store_bytes(s.backup, s.oplog, budget))
            .max()
            .unwrap_or(0);
        if largest > 0 {
            needs.push(Need {
                dir: work.to_path_buf(),
                bytes: largest,
                what: "the engine's on-disk store for a member (one member at a time)".into(),
            });
        }
    }
    needs
}

#[cfg(test)]
mod tests {
    use super::*;

    const MB: u64 = 1 << 20;

    fn sizes() -> Vec<Sizes> {
        [(10, 4), (300, 50), (200, 80), (1, 1)]
            .into_iter()
            .map(|(b, o)| Sizes {
                backup: b * MB,
                oplog: o * MB,
            })
            .collect()
    }

    fn bytes(n: &[Need]) -> Vec<(String, u64)> {
        n.iter()
            .map(|n| (n.dir.display().to_string(), n.bytes / MB))
            .collect()
    }

    /// The embedded engine holds one member's on-disk store at a time (its slice
    /// is not written); the mongod engine every slice, the `--jobs` largest spares
    /// and every member's dump.
    #[test]
    fn what_each_engine_writes_where() {
        let dirs = (Path::new("/w"), Some(Path::new("/o")));
        let data = 10 + 4 + 300 + 50 + 200 + 80 + 1 + 1;
        // Past --memory (100 MB) the largest member's on-disk store: twice its
        // data (`preflight::store_bytes`), 2 x 350 MB.
        assert_eq!(
            bytes(&needs(&sizes(), false, 100 * MB, 1, dirs)),
            [("/o".into(), data), ("/w".into(), 700)]
        );
        // A member whose backup fits but whose oplog's writes pass the budget
        // (200 + 80 MB past 250 MB) has a store too; within 300 MB, none has.
        assert_eq!(
            bytes(&needs(&sizes(), false, 250 * MB, 1, dirs))[1],
            ("/w".into(), 2 * 350)
        );
        assert_eq!(
            bytes(&needs(&sizes()[2..], false, 300 * MB, 1, dirs)),
            [("/o".into(), 280 + 2)]
        );
        // Within it, nothing in the work dir.
        assert_eq!(
            bytes(&needs(&sizes(), false, 1000 * MB, 1, dirs)),
            [("/o".into(), data)]
        );
        let slices = 4 + 50 + 80 + 1;
        assert_eq!(
            bytes(&needs(&sizes(), true, 100 * MB, 1, dirs)),
            [("/o".into(), data), ("/w".into(), slices + 350 + data)]
        );
        assert_eq!(
            bytes(&needs(&sizes(), true, 100 * MB, 2, dirs)),
            [
                ("/o".into(), data),
                ("/w".into(), slices + 350 + 280 + data)
            ]
        );
        // `--out` in a bucket: the merged dump takes no local room (streamed);
        // mongod's spares still dump into the work dir.
        let bucket = (Path::new("/w"), None);
        assert_eq!(
            bytes(&needs(&sizes(), false, 100 * MB, 1, bucket)),
            [("/w".into(), 700)]
        );
        assert_eq!(
            bytes(&needs(&sizes(), true, 100 * MB, 1, bucket)),
            [("/w".into(), slices + 350 + data)]
        );
    }

    /// A cluster that needs more than the filesystem holds is refused before
    /// anything is read, naming the directory, the bytes and what they are for.
    #[test]
    fn a_cluster_past_the_free_space_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let huge = vec![Sizes {
            backup: u64::MAX / 8,
            oplog: 1,
        }];
        let n = needs(&huge, true, MB, 1, (dir.path(), Some(dir.path())));
        let e = Failure::from(preflight::check_space(&n).unwrap_err());
        let text = e.to_string();
        assert!(
            text.contains("not enough free space") && text.contains("merged dump"),
            "{text}"
        );
        // A cluster of a few kilobytes fits on any disk a test runs on (the
        // sizes above need about 1.5 GB, more than a CI machine may have free).
        let small = vec![Sizes {
            backup: 4096,
            oplog: 1024,
        }];
        let n = needs(&small, true, MB, 1, (dir.path(), Some(dir.path())));
        assert!(n.iter().map(|n| n.bytes).sum::<u64>() > 0);
        assert!(preflight::check_space(&n).is_ok());
    }

    /// A member's sort asks for its sorted slice beside the slices of the members
    /// still to come: with the last member's oplog of 8 TiB (sparse), every earlier
    /// member's sort is refused, the last one's is not.
    #[test]
    fn a_members_sort_counts_the_slices_still_to_come() {
        let d = tempfile::tempdir().unwrap();
        let mut toml = String::new();
        for (i, id) in ["config", "shard0", "shard1"].iter().enumerate() {
            std::fs::create_dir_all(d.path().join(id).join("backup")).unwrap();
            let f = std::fs::File::create(d.path().join(id).join("oplog.bson")).unwrap();
            f.set_len(if i == 2 { 8 << 40 } else { 1000 }).unwrap();
            toml += &match i {
                0 => format!("[config]\nbackup = \"{id}/backup\"\noplog = [\"{id}/oplog.bson\"]\n"),
                _ => format!("[[shard]]\nid = \"{id}\"\nbackup = \"{id}/backup\"\noplog = [\"{id}/oplog.bson\"]\n"),
            };
        }
        let path = d.path().join("cluster.toml");
        let file = cluster::file::parse(&path, &toml).unwrap();
        let rooms = plan_sort_rooms(&file, d.path(), 1 << 30);
        assert_eq!(rooms.len(), 3);
        for room in &rooms[..2] {
            let e = (room.0)(0).unwrap_err().to_string();
            assert!(
                e.starts_with("the oplog is out of order, so its slice is sorted in the plan's directory first")
                    && e.contains("the plan writes about 8.0 TiB there (the sorted slice and the slices of the members still to come)"),
                "{e}"
            );
        }
        (rooms[2].0)(1 << 20).unwrap();
        assert!((rooms[2].0)(u64::MAX / 4).is_err());
    }
}
