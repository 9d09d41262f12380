//! `replay --cluster --out`: a local directory, or a bucket (`s3://`, `gs://`,
//! `az://`). Taken as a path, `s3://b/x` would quietly become the relative
//! directory `s3:/b/x`. A URL must hold nothing yet (checked before any work); the
//! merged dump is then streamed there by the dump writer as a local one is written
//! ([`crate::engine::replica::dump`]: between the in-progress marker and the
//! manifest, all or nothing), `sharding.json` and the members' own dumps
//! (`--per-member`) uploaded beside it before the manifest. Nothing of it is
//! staged on local disk.

use std::path::{Path, PathBuf};

use crate::backup::upload;
use crate::error::Failure;
use crate::storage::Location;

/// Where the merged dump goes.
pub(super) struct ClusterOut {
    /// The dump's path for the dump writer: a local directory, or the URL as a path
    /// ([`Location::display_path`]).
    pub path: PathBuf,
    /// `--out` in a bucket.
    url: Option<Location>,
}

impl ClusterOut {
    pub fn new(out: &Path, cwd: &Path) -> Result<ClusterOut, Failure> {
        match Location::of_path(out)? {
            Location::Local(p) => Ok(ClusterOut {
                path: cwd.join(p),
                url: None,
            }),
            url => {
                upload::check_new(&url)?;
                Ok(ClusterOut {
                    path: url.display_path(),
                    url: Some(url),
                })
            }
        }
    }

    /// The directory the work dir goes beside when no `--workdir` is given: `--out`'s
    /// parent, or the current directory for a bucket.
    pub fn work_home(&self, cwd: &Path) -> PathBuf {
        match &self.url {
            Some(_) => cwd.to_path_buf(),
            None => self.path.parent().unwrap_or(cwd).to_path_buf(),
        }
    }

    /// How the report names the dump: the URL, or the local directory.
    pub fn shown(&self) -> String {
        match &self.url {
            Some(url) => url.to_string(),
            None => self.path.display().to_string(),
        }
    }

    /// How the report names a file in the dump.
    pub fn shown_file(&self, name: &str) -> String {
        match &self.url {
            Some(url) => url.join(name).to_string(),
            None => self.path.join(name).display().to_string(),
        }
    }

    /// For a bucket: the command that downloads the merged dump for mongorestore.
    pub fn download(&self) -> Option<String> {
        let url = self.url.as_ref()?;
        Some(crate::replay::embedded::download_command(url, false))
    }

    /// Says on stderr where a dump to a bucket goes (not in a dry run, which
    /// writes nothing).
    pub fn announce(&self) {
        if let Some(url) = &self.url {
            eprintln!(
                "--out {url}: the merged dump is streamed there as it is written (no copy on local disk), readable once complete"
            );
        }
    }

    /// Is the dump going to a bucket?
    pub fn in_bucket(&self) -> bool {
        self.url.is_some()
    }
}
