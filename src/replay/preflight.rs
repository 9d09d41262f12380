//! Checks before any work starts: that `--out` can be written, and that the disks
//! have room for what the replay writes. A read-only `--out` used to be found at the
//! final rename, after the whole replay.
//!
//! The space needed is estimated from the inputs' sizes on disk: the slice is at
//! most the oplog, the dump (and the dump of what the incident destroys) at most
//! about the backup plus the oplog's inserts, and the embedded engine's on-disk store
//! past `--memory` up to twice the backup and the oplog ([`store_bytes`]). The
//! estimate is deliberately generous (a drop makes the output smaller);
//! `--no-space-check` skips it when the user knows better.

use std::path::{Path, PathBuf};

use crate::error::Hint;

/// The embedded engine's on-disk store (`engine::replica::sorted`) for a backup of
/// `backup` bytes and an oplog of `oplog` bytes under a `--memory` of `budget`:
/// nothing while they fit in it; else, at a collection's merge, its old base, the
/// writes deferred to it and its new base are on disk at once: up to about twice
/// the data (the backup, and the oplog's writes). Measured on the 1 GiB bench at
/// `--memory 64MiB`: the work dir peaked at 3.2 GB for a 1.09 GB backup and a 1.08 GB
/// oplog, where the estimate before (the slice and the backup: 2.2 GB) fell short.
pub fn store_bytes(backup: u64, oplog: u64, budget: u64) -> u64 {
    match backup.saturating_add(oplog) {
        data if data > budget => data.saturating_mul(2),
        _ => 0,
    }
}

/// `--out` cannot be written, or the disks lack room.
#[derive(Debug, thiserror::Error)]
pub enum PreflightError {
    #[error("--out `{}`: its directory `{}` cannot be written ({source})", out.display(), parent.display())]
    NotWritable {
        out: PathBuf,
        parent: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("--out `{}` is an empty directory, but --archive writes one file", .0.display())]
    ArchiveOverDir(PathBuf),

    #[error("{}", no_space_message(dir, *needed, *free, what, &REPLAY))]
    NoSpace {
        dir: PathBuf,
        needed: u64,
        free: u64,
        what: String,
    },
}

impl Hint for PreflightError {
    fn hint(&self) -> Option<String> {
        Some(match self {
            PreflightError::NotWritable { .. } => {
                "choose an --out in a directory you can write (the dump is written there under a temporary name and \
                 renamed when complete)"
                    .into()
            }
            PreflightError::ArchiveOverDir(_) => "name a new file for --archive, e.g. `--out restored.archive`".into(),
            PreflightError::NoSpace { .. } => no_space_hint(&REPLAY),
        })
    }
}

/// How a command speaks of a filesystem without room: the replay's words name
/// `--out` and `--workdir`, but `pitr rehearse` has a `--work-dir` and `pitr plan`
/// no work dir at all.
pub struct Words {
    /// Who writes there: "the rehearsal", "the plan".
    pub who: &'static str,
    /// The hint's way out, with what to know of the estimate.
    pub way_out: &'static str,
    /// Where an oplog out of order is sorted: "the work dir".
    pub sort_place: &'static str,
}

/// `pitr replay`'s (and `replay --cluster`'s) words, those of [`PreflightError::NoSpace`].
pub const REPLAY: Words = Words {
    who: "the replay",
    way_out: "put --out and --workdir on a larger filesystem; the estimate is generous (a drop makes the \
              output smaller)",
    sort_place: "the work dir",
};

/// `pitr plan`'s (and `plan --cluster`'s) words: no work dir.
pub const PLAN: Words = Words {
    who: "the plan",
    way_out: "give --out on a larger filesystem; the estimate is generous",
    sort_place: "the plan's directory",
};

/// `pitr rehearse`'s words: its flag is `--work-dir`.
pub const REHEARSE: Words = Words {
    who: "the rehearsal",
    way_out: "give --work-dir (and --out) on a larger filesystem; the estimate is generous",
    sort_place: "the work dir",
};

/// `pitr dump-oplog`'s words: its only output is `--out`.
pub const DUMP_OPLOG: Words = Words {
    who: "the dump",
    way_out:
        "give --out on a larger filesystem, or add --gzip (then only warned about: its size is \
              known only once written); the estimate is the oplog's average rate over the range",
    sort_place: "--out's directory",
};

/// A filesystem without room, in `w`'s words.
pub fn no_space_message(dir: &Path, needed: u64, free: u64, what: &str, w: &Words) -> String {
    use crate::size::human;
    format!(
        "not enough free space on the filesystem of `{}`: {} writes about {} there ({what}), {} are free",
        dir.display(),
        w.who,
        human(needed),
        human(free)
    )
}

/// The hint of a filesystem without room, in `w`'s words.
pub fn no_space_hint(w: &Words) -> String {
    format!(
        "free some space, or {}: --no-space-check skips it",
        w.way_out
    )
}

impl PreflightError {
    /// The message and the hint of a filesystem without room in `w`'s words; other
    /// errors as they are.
    pub fn in_words(self, w: &Words) -> Result<(String, String), PreflightError> {
        match self {
            PreflightError::NoSpace {
                dir,
                needed,
                free,
                what,
            } => Ok((
                no_space_message(&dir, needed, free, &what, w),
                no_space_hint(w),
            )),
            e => Err(e),
        }
    }
}

/// The directory `out` will be renamed into: it must exist and be writable (a
/// temporary file is created and removed there).
pub fn check_writable(out: &Path) -> Result<(), PreflightError> {
    let parent = crate::storage::parent_dir(out).to_path_buf();
    tempfile::Builder::new()
        .prefix(".pitr-write-check-")
        .tempfile_in(&parent)
        .map(drop)
        .map_err(|source| PreflightError::NotWritable {
            out: out.to_path_buf(),
            parent,
            source,
        })
}

/// [`size_on_disk`] for an input that may be a URL: the object's size, or the total
/// of the objects under the prefix (one listing). 0 when it cannot be read: the read
/// itself then says why.
pub fn input_size(p: &Path) -> u64 {
    use crate::storage::{global, Found, Location};
    match Location::of_path(p) {
        Ok(Location::Local(p)) => crate::storage::size_on_disk(&p),
        Ok(loc) => match global().stat(&loc) {
            Ok(Found::Object(info)) => info.size,
            Ok(Found::Prefix(v)) => v.iter().map(|o| o.size).sum(),
            Ok(Found::Nothing) | Err(_) => 0,
        },
        Err(_) => 0,
    }
}

/// The nearest directory of `p` that exists (the one whose filesystem will hold it,
/// when it is created).
pub fn nearest_existing(p: &Path) -> PathBuf {
    p.ancestors()
        .find(|d| d.is_dir())
        .unwrap_or(Path::new("."))
        .to_path_buf()
}

/// One place the replay writes to, and how much.
pub struct Need {
    pub dir: PathBuf,
    pub bytes: u64,
    pub what: String,
}

/// Sums the needs per filesystem and refuses the first that does not fit. A
/// directory not created yet counts on the filesystem of its nearest existing
/// ancestor, where it will be created; a URL (a bucket) on none.
pub fn check_space(needs: &[Need]) -> Result<(), PreflightError> {
    let mut per_dev: Vec<(u64, u64, PathBuf, u64, Vec<String>)> = Vec::new();
    for n in needs.iter().filter(|n| n.bytes > 0) {
        // A `file://` URL is a local directory like any other; a bucket (or a
        // value that is no URL pitr can read, refused where it is read) is none.
        let Ok(crate::storage::Location::Local(dir)) = crate::storage::Location::of_path(&n.dir)
        else {
            continue;
        };
        let Some((free, dev)) = crate::storage::free_space(&nearest_existing(&dir)) else {
            continue;
        };
        match per_dev.iter_mut().find(|d| d.0 == dev) {
            Some(d) => {
                d.3 += n.bytes;
                d.4.push(n.what.clone());
            }
            None => per_dev.push((dev, free, n.dir.clone(), n.bytes, vec![n.what.clone()])),
        }
    }
    for (_, free, dir, needed, what) in per_dev {
        if needed > free {
            return Err(PreflightError::NoSpace {
                dir,
                needed,
                free,
                what: what.join(" + "),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nearest_existing_directory_holds_a_new_one() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(nearest_existing(&dir.path().join("a/b/c")), dir.path());
        assert_eq!(nearest_existing(dir.path()), dir.path());
    }

    #[test]
    fn an_unwritable_parent_and_a_missing_one_are_refused() {
        let d = tempfile::tempdir().unwrap();
        assert!(check_writable(&d.path().join("out")).is_ok());
        let e = check_writable(&d.path().join("missing/out")).unwrap_err();
        assert!(e.to_string().contains("cannot be written"), "{e}");
        assert!(e.hint().unwrap().contains("--out"));
    }

    /// The on-disk store: nothing while the backup and the oplog fit in the budget,
    /// twice them past it (a budget crossed by the oplog's writes included).
    #[test]
    fn the_store_is_twice_the_data_past_the_budget() {
        assert_eq!(store_bytes(100, 50, 150), 0);
        assert_eq!(store_bytes(100, 51, 150), 302);
        assert_eq!(store_bytes(200, 0, 150), 400);
        assert_eq!(store_bytes(u64::MAX, 1, 0), u64::MAX);
    }

    #[test]
    fn needs_on_one_filesystem_add_up() {
        let d = tempfile::tempdir().unwrap();
        let (free, _) = crate::storage::free_space(d.path()).unwrap();
        // A margin both ways: other tests write and remove files on the same
        // filesystem meanwhile (with `free / 2 + 1`, a few bytes freed by another
        // test made both fit; a CI machine may have little free, so one alone
        // must still fit after others took 40% of it).
        let half = free / 5 * 3;
        let one = |what: &str| Need {
            dir: d.path().to_path_buf(),
            bytes: half,
            what: what.into(),
        };
        assert!(check_space(&[one("the dump")]).is_ok());
        let e = check_space(&[one("the dump"), one("the slice")]).unwrap_err();
        let m = e.to_string();
        assert!(m.contains("the dump + the slice"), "{m}");
        // A directory not created yet (a new --workdir) counts where it will be:
        // it used to be passed over.
        let new = d.path().join("not/yet");
        let e = check_space(&[Need {
            dir: new.clone(),
            bytes: u64::MAX / 4,
            what: "the store".into(),
        }])
        .unwrap_err();
        assert!(
            e.to_string().contains(&format!("`{}`", new.display())),
            "{e}"
        );
        // A bucket is no local filesystem.
        let url = Need {
            dir: PathBuf::from("s3://bucket/prefix"),
            bytes: u64::MAX / 4,
            what: "the dump".into(),
        };
        assert!(check_space(&[url]).is_ok());
        // A `file://` URL is a local directory, counted where it is (it was
        // passed over with the buckets).
        let file_url = Need {
            dir: PathBuf::from(format!("file://{}", d.path().display())),
            bytes: u64::MAX / 4,
            what: "the dump".into(),
        };
        let e = check_space(&[file_url]).unwrap_err();
        assert!(e.to_string().contains("the dump"), "{e}");
    }
}
