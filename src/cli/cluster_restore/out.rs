//! `replay --cluster --out`: a local directory, or a bucket (`s3://`, `gs://`,
//! `az://`). Taken as a path, `s3://b/x` would quietly become the relative
//! directory `s3:/b/x`. A URL must hold nothing yet (checked before any work); the
//! merged dump is written in a staging directory (in `--workdir`, else the current
//! directory), then uploaded all or nothing as `replay --out`'s
//! ([`crate::backup::upload`]) and the staged copy removed.

use std::path::{Path, PathBuf};

use crate::backup::upload;
use crate::error::{exit, Failure};
use crate::storage::Location;

/// Where the merged dump goes.
pub(super) struct ClusterOut {
    /// Where it is written on this machine.
    pub path: PathBuf,
    /// `--out` in a bucket, and the staging directory's guard (removed on drop).
    upload: Option<(Location, tempfile::TempDir)>,
}

impl ClusterOut {
    pub fn new(out: &Path, cwd: &Path, workdir: Option<&Path>) -> Result<ClusterOut, Failure> {
        let url = match Location::of_path(out)? {
            Location::Local(p) => {
                return Ok(ClusterOut {
                    path: cwd.join(p),
                    upload: None,
                })
            }
            url => url,
        };
        upload::check_new(&url)?;
        let home = workdir.map_or_else(|| cwd.to_path_buf(), |w| cwd.join(w));
        std::fs::create_dir_all(&home)?;
        let staging = tempfile::Builder::new()
            .prefix(".pitr-cluster-upload-")
            .tempdir_in(&home)?;
        Ok(ClusterOut {
            path: upload::staging(staging.path(), &url),
            upload: Some((url, staging)),
        })
    }

    /// How the report names the dump: the URL, or the local directory.
    pub fn shown(&self) -> String {
        match &self.upload {
            Some((url, _)) => url.to_string(),
            None => self.path.display().to_string(),
        }
    }

    /// How the report names a file in the dump.
    pub fn shown_file(&self, name: &str) -> String {
        match &self.upload {
            Some((url, _)) => url.join(name).to_string(),
            None => self.path.join(name).display().to_string(),
        }
    }

    /// For a bucket: uploads the merged dump, removes the staged copy, and returns
    /// the command that downloads it for mongorestore. A failed upload (which
    /// deletes what it wrote) is the run's error, exit 2.
    pub fn upload(self) -> Result<Option<String>, Failure> {
        let Some((url, staging)) = self.upload else {
            return Ok(None);
        };
        eprintln!(
            "pitr replay: uploading the merged dump to {url} ({})",
            crate::size::human(crate::storage::size_on_disk(&self.path))
        );
        let result = upload::upload(&self.path, &url);
        drop(staging);
        let up = result.map_err(|e| {
            Failure::from(e)
                .with_hint("the merged dump was not written to the bucket (nothing partial is left there); check the bucket's permissions, or give a local --out and copy it")
                .with_exit_code(exit::ERROR)
        })?;
        eprintln!(
            "pitr replay: uploaded {} objects, {} bytes to {url}",
            up.objects, up.bytes
        );
        Ok(Some(crate::replay::embedded::download_command(&url, false)))
    }
}
