//! `replay --engine mongod --backup s3://...` with a directory backup: mongorestore
//! restores a directory from local files only, so the backup is downloaded into the
//! work dir before the spare starts, and the replay then runs exactly as from a local
//! backup. The oplog is not downloaded: the plan reads it in place and writes the
//! slice (all mongorestore reads of it) into the work dir, as for a local oplog. An
//! archive backup is never downloaded: the restore step streams it into
//! mongorestore's standard input (`plan::steps::StreamSpec`).
//!
//! The backup is checked first as any read of it is (a `pitr replay --out` upload
//! still in progress or cut, or objects that do not match its manifest, are refused),
//! measured by one listing (the space check and the message on stderr use it), then
//! copied object by object under a temporary name in the work dir, each object's
//! length checked against the listing, and renamed into place when complete.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::backup::dir::{UPLOAD_IN_PROGRESS, UPLOAD_MANIFEST};
use crate::error::Failure;
use crate::storage::{self, Found, Location, ObjectInfo};

/// The directory under the work dir that downloads go to.
pub const DOWNLOAD_DIR: &str = "download";

/// A backup to download: what the listing found, and where it goes.
#[derive(Debug)]
pub struct Download {
    pub url: Location,
    /// The objects and their paths relative to `dest` (`""` for a single object,
    /// which is `dest` itself).
    objects: Vec<(ObjectInfo, String)>,
    pub bytes: u64,
    /// The local copy: a file for an archive object, a directory for a prefix.
    pub dest: PathBuf,
}

impl Download {
    pub fn objects(&self) -> usize {
        self.objects.len()
    }

    /// One line for stderr: how much, from where, to where, and why.
    pub fn describe(&self) -> String {
        format!(
            "downloading the backup {} ({}, {} object{}) into {}: mongorestore reads local files only",
            self.url,
            crate::size::human(self.bytes),
            self.objects.len(),
            if self.objects.len() == 1 { "" } else { "s" },
            self.dest.display()
        )
    }
}

/// Checks the backup at `url` as every read of it does, and lists what a download
/// takes (nothing is written yet).
pub fn measure(url: &Location, work_root: &Path) -> Result<Download, Failure> {
    crate::backup::open(&url.display_path())?;
    let name = url.file_name();
    let dest = work_root
        .join(DOWNLOAD_DIR)
        .join(if name.is_empty() { "backup" } else { &name });
    let objects = match storage::global().stat(url)? {
        Found::Object(info) => vec![(info, String::new())],
        Found::Prefix(listed) => listed
            .into_iter()
            .filter_map(|o| {
                let rel = o.location.relative_to(url)?;
                // pitr's upload markers: checked above, not part of the dump.
                let leaf = rel.rsplit('/').next().unwrap_or("");
                (leaf != UPLOAD_MANIFEST && leaf != UPLOAD_IN_PROGRESS).then_some((o, rel))
            })
            .map(|(o, rel)| safe_relative(url, &o.location, rel).map(|r| (o, r)))
            .collect::<Result<Vec<_>, Failure>>()?,
        Found::Nothing => {
            return Err(Failure::new(format!("--backup `{url}`: nothing is there"))
                .with_hint("check the bucket and prefix (`aws s3 ls` the URL)"))
        }
    };
    let bytes = objects.iter().map(|(o, _)| o.size).sum();
    Ok(Download {
        url: url.clone(),
        objects,
        bytes,
        dest,
    })
}

/// A key below the backup's prefix as a relative path that stays below the download
/// directory (a listing could hold `a/../../x` or `a//b`).
fn safe_relative(url: &Location, obj: &Location, rel: String) -> Result<String, Failure> {
    if rel
        .split('/')
        .any(|s| s.is_empty() || s == "." || s == "..")
    {
        return Err(Failure::new(format!(
            "--backup `{url}`: the object `{obj}` has a key that cannot be a local path"
        ))
        .with_hint(
            "copy the backup to a prefix whose keys are plain paths, or download it yourself",
        ));
    }
    Ok(rel)
}

/// Copies every object to its place under a temporary name beside `dest`, checks
/// each length against the listing, then renames the whole into place. On an error
/// nothing is left behind.
pub fn fetch(d: &Download) -> Result<PathBuf, Failure> {
    let parent = d.dest.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(parent).map_err(|e| write_failure(parent, e))?;
    let tmp = tempfile::Builder::new()
        .prefix(".pitr-download-")
        .tempdir_in(parent)
        .map_err(|e| write_failure(parent, e))?;
    let single = d.objects.len() == 1 && d.objects[0].1.is_empty();
    for (o, rel) in &d.objects {
        let to = if single {
            tmp.path().join("object")
        } else {
            tmp.path().join(rel)
        };
        copy_object(o, &to)?;
    }
    let from = if single {
        tmp.path().join("object")
    } else {
        tmp.path().to_path_buf()
    };
    fs::rename(&from, &d.dest).map_err(|e| write_failure(&d.dest, e))?;
    if !single {
        // The directory was renamed away: nothing for the guard to remove.
        let _ = tmp.keep();
    }
    Ok(d.dest.clone())
}

fn copy_object(o: &ObjectInfo, to: &Path) -> Result<(), Failure> {
    if let Some(dir) = to.parent() {
        fs::create_dir_all(dir).map_err(|e| write_failure(dir, e))?;
    }
    let mut r = storage::global().open_read(&o.location)?;
    let mut f = fs::File::create(to).map_err(|e| write_failure(to, e))?;
    let n = io::copy(&mut r, &mut f).map_err(|e| match storage::storage_error(&e) {
        Some(se) => Failure::new(format!("downloading `{}`: {se}", o.location))
            .with_hint("run the replay again; the download starts over"),
        None => write_failure(to, e),
    })?;
    if n != o.size {
        return Err(Failure::new(format!(
            "downloading `{}`: {n} bytes read, the listing said {}",
            o.location, o.size
        ))
        .with_hint("the object changed during the download: run the replay again when nothing writes the backup"));
    }
    f.sync_all().map_err(|e| write_failure(to, e))
}

fn write_failure(path: &Path, e: io::Error) -> Failure {
    Failure::new(format!(
        "cannot write the downloaded backup to `{}`: {e}",
        path.display()
    ))
    .with_hint("check the work dir's free space and permissions (--workdir puts it elsewhere)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_that_leave_the_download_directory_are_refused() {
        let url = Location::parse("s3://bucket/backup").unwrap();
        let obj = url.join("x");
        for bad in ["a/../../x", "a//b", "./a", ".."] {
            let e = safe_relative(&url, &obj, bad.to_string()).unwrap_err();
            assert!(e.render().contains("cannot be a local path"), "{bad}");
        }
        assert_eq!(
            safe_relative(&url, &obj, "shop/orders.bson".into()).unwrap(),
            "shop/orders.bson"
        );
    }
}
