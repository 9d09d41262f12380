//! The work directory of one replay: the plan and its oplog slice, every log, the
//! report, and (while it runs) the spare mongod's temporary directory.
//!
//! ```text
//! plan/plan.json, plan/oplog.bson   what `pitr plan` writes (the slice mongorestore replays)
//! logs/mongod.log                   the spare mongod's log (kept after the spare is removed)
//! logs/<n>-<step>.log               each step's output, framed by pitr's start/end lines
//! report.md, report.json            for the post-mortem
//! pitr-spare-XXXXXX/                the spare's dbpath; removed at the end unless --keep
//! ```

use std::fs;
use std::path::{Path, PathBuf};

use super::error::ReplayError;

/// Prefix of the spare mongod's temporary directory inside the work dir.
pub const SPARE_PREFIX: &str = "pitr-spare-";

/// A created work directory.
#[derive(Clone, Debug)]
pub struct WorkDir {
    pub root: PathBuf,
    /// pitr created `root` (rather than being given an existing empty directory).
    created: bool,
}

impl WorkDir {
    /// Where [`WorkDir::create`] puts the work dir: `given` (relative to `cwd`), or
    /// `cwd`, which holds a new `pitr-replay-<UTC time>` (the free-space check asks
    /// here which filesystem that is).
    pub fn home(given: Option<&Path>, cwd: &Path) -> PathBuf {
        match given {
            Some(dir) if dir.is_absolute() => dir.to_path_buf(),
            Some(dir) => cwd.join(dir),
            None => cwd.to_path_buf(),
        }
    }

    /// Creates `given` (which must be new or empty), or a new
    /// `pitr-replay-<UTC time>` directory in `cwd`.
    pub fn create(given: Option<&Path>, cwd: &Path) -> Result<WorkDir, ReplayError> {
        let mut created = true;
        let root = match given {
            Some(_) => {
                let dir = Self::home(given, cwd);
                if dir.exists() {
                    if !dir.is_dir() {
                        return Err(ReplayError::WorkDirNotDir(dir));
                    }
                    let first = fs::read_dir(&dir)
                        .map_err(|source| ReplayError::Create {
                            path: dir.clone(),
                            source,
                        })?
                        .filter_map(Result::ok)
                        .next();
                    if let Some(e) = first {
                        return Err(ReplayError::WorkDirNotEmpty {
                            dir,
                            entry: e.file_name().to_string_lossy().into_owned(),
                        });
                    }
                    created = false;
                } else {
                    fs::create_dir_all(&dir).map_err(|source| ReplayError::Create {
                        path: dir.clone(),
                        source,
                    })?;
                }
                dir
            }
            None => {
                let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%SZ").to_string();
                let mut n = 1;
                loop {
                    let name = if n == 1 {
                        format!("pitr-replay-{stamp}")
                    } else {
                        format!("pitr-replay-{stamp}-{n}")
                    };
                    let dir = cwd.join(name);
                    match fs::create_dir(&dir) {
                        Ok(()) => break dir,
                        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < 100 => {
                            n += 1
                        }
                        Err(source) => return Err(ReplayError::Create { path: dir, source }),
                    }
                }
            }
        };
        let root = fs::canonicalize(&root).unwrap_or(root);
        let logs = root.join("logs");
        fs::create_dir_all(&logs).map_err(|source| ReplayError::Create {
            path: logs.clone(),
            source,
        })?;
        Ok(WorkDir { root, created })
    }

    /// After a failure before anything was written (no plan could be made):
    /// removes the empty directories this run created, so a typo leaves no trace.
    pub fn discard_if_unused(&self) {
        let _ = fs::remove_dir(self.logs());
        if self.created {
            let _ = fs::remove_dir(&self.root);
        }
    }

    /// Where the plan writes `oplog.bson` and `plan.json`.
    pub fn plan_dir(&self) -> PathBuf {
        self.root.join("plan")
    }

    pub fn logs(&self) -> PathBuf {
        self.root.join("logs")
    }

    pub fn mongod_log(&self) -> PathBuf {
        self.logs().join("mongod.log")
    }

    /// `logs/<n>-<slug>.log`.
    pub fn step_log(&self, number: u32, slug: &str) -> PathBuf {
        self.logs().join(format!("{number}-{slug}.log"))
    }

    pub fn report_md(&self) -> PathBuf {
        self.root.join("report.md")
    }

    pub fn report_json(&self) -> PathBuf {
        self.root.join("report.json")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_must_be_new_or_empty_default_is_unique() {
        let tmp = tempfile::tempdir().unwrap();
        let w = WorkDir::create(Some(Path::new("w")), tmp.path()).unwrap();
        assert!(w.logs().is_dir());
        assert!(matches!(
            WorkDir::create(Some(Path::new("w")), tmp.path()),
            Err(ReplayError::WorkDirNotEmpty { .. })
        ));
        fs::write(tmp.path().join("f"), "x").unwrap();
        assert!(matches!(
            WorkDir::create(Some(Path::new("f")), tmp.path()),
            Err(ReplayError::WorkDirNotDir(_))
        ));
        let a = WorkDir::create(None, tmp.path()).unwrap();
        let b = WorkDir::create(None, tmp.path()).unwrap();
        assert_ne!(a.root, b.root);
        assert!(a
            .root
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("pitr-replay-"));
        assert_eq!(
            w.step_log(2, "restore-backup").file_name().unwrap(),
            "2-restore-backup.log"
        );
    }
}
