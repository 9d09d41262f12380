//! The same operations on local files, with the same guarantees as on a store.
//!
//! A local "ETag" is the MD5 of the content (what S3 gives for a single-part object):
//! only manifests are compared by version, and they are small. A conditional update
//! holds an exclusive `flock` on `.<name>.lock` beside the file while it compares and
//! renames, so two pitr processes on one machine cannot interleave.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use md5::{Digest, Md5};

use super::error::{Op, StorageError};
use super::write::parent_dir;
use super::{ObjectInfo, Version};
use crate::storage::Location;

/// Ends the name of a temporary file of an unfinished write (`.<name>.XXXXXX.pitr-tmp`);
/// such files are never listed.
pub(crate) const TEMP_SUFFIX: &str = ".pitr-tmp";

/// Bytes of a file, or of every file under a directory. `p` itself is followed when
/// it is a link (`--backup /backups/latest`, a link to the newest dated directory,
/// is that directory's size, not 0), the links inside it are not (a plan's
/// `restore/` links the backup's directories; a link cycle cannot loop). 0 when it
/// cannot be read: the read itself then says why.
pub fn size_on_disk(p: &Path) -> u64 {
    match fs::metadata(p) {
        Ok(m) if m.is_file() => m.len(),
        Ok(m) if m.is_dir() => entries_bytes(p),
        _ => 0,
    }
}

fn entries_bytes(dir: &Path) -> u64 {
    let Ok(rd) = fs::read_dir(dir) else { return 0 };
    rd.filter_map(Result::ok)
        .map(|e| match fs::symlink_metadata(e.path()) {
            Ok(m) if m.is_file() => m.len(),
            Ok(m) if m.is_dir() => entries_bytes(&e.path()),
            _ => 0,
        })
        .sum()
}

/// For a local path that does not exist, the existing path it most likely meant:
/// the first missing component replaced by the closest name in its directory
/// (case-insensitive edit distance of at most a third of its length, at least 1,
/// at most 3: `bakup` for `backup`, `Oplog.bson` for `oplog.bson`), and only when
/// the whole path so corrected exists. Written in the user's own form (relative
/// stays relative). None when `path` exists or nothing is that close.
pub fn did_you_mean(path: &Path) -> Option<PathBuf> {
    use std::path::Component;
    if path.as_os_str().is_empty() || path.exists() {
        return None;
    }
    let parts: Vec<Component<'_>> = path.components().collect();
    let mut dir = PathBuf::new();
    for (i, part) in parts.iter().enumerate() {
        let next = dir.join(part);
        if next.exists() {
            dir = next;
            continue;
        }
        let Component::Normal(missing) = part else {
            return None;
        };
        let missing = missing.to_string_lossy().to_lowercase();
        let listed = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir.as_path()
        };
        let names: Vec<String> = fs::read_dir(listed)
            .ok()?
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        let limit = (missing.chars().count() / 3).clamp(1, 3);
        let best = names
            .iter()
            .map(|n| (strsim::levenshtein(&missing, &n.to_lowercase()), n))
            .filter(|(d, _)| *d <= limit)
            .min()?
            .1;
        let mut fixed = dir.join(best);
        fixed.extend(&parts[i + 1..]);
        return fixed.exists().then_some(fixed);
    }
    None
}

/// `hint` for a path that does not exist, led by [`did_you_mean`]'s guess when it
/// has one: "did you mean `fixtures/incident/backup`? pass the directory ...".
pub fn not_found_hint(path: &Path, hint: &str) -> String {
    match did_you_mean(path) {
        Some(p) => format!("did you mean `{}`? {hint}", p.display()),
        None => hint.to_string(),
    }
}

/// Free bytes for an unprivileged writer on the filesystem of `dir`, and its device
/// (None when it cannot be asked).
pub fn free_space(dir: &Path) -> Option<(u64, u64)> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::MetadataExt;
    let dev = fs::metadata(dir).ok()?.dev();
    let c = CString::new(dir.as_os_str().as_bytes()).ok()?;
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a valid NUL-terminated path and `st` a writable statvfs.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    Some((st.f_bavail as u64 * st.f_frsize as u64, dev))
}

/// Free bytes for an unprivileged writer on the filesystem of `dir`.
pub fn free_bytes(dir: &Path) -> Option<u64> {
    free_space(dir).map(|(free, _)| free)
}

pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

fn md5_hex(data: &[u8]) -> String {
    let d = Md5::digest(data);
    d.iter().map(|b| format!("{b:02x}")).collect()
}

pub(crate) fn version_of_file(p: &Path) -> io::Result<Version> {
    let mut f = File::open(p)?;
    let mut h = Md5::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    let hex: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    Ok(Version::etag(format!("\"{hex}\"")))
}

pub(super) fn io_err(url: &str, op: Op) -> impl Fn(io::Error) -> StorageError + '_ {
    move |source| {
        if source.kind() == io::ErrorKind::NotFound && op != Op::Write {
            StorageError::not_found(url)
        } else {
            StorageError::Io {
                url: url.to_string(),
                op,
                source,
            }
        }
    }
}

pub(crate) fn head(p: &Path) -> Result<ObjectInfo, StorageError> {
    let url = p.display().to_string();
    let md = fs::metadata(p).map_err(io_err(&url, Op::Head))?;
    Ok(ObjectInfo {
        location: Location::Local(p.to_path_buf()),
        size: md.len(),
        last_modified: md.modified().ok().map(chrono::DateTime::from),
        etag: None,
    })
}

/// Files under `dir`, recursively, sorted by path; temporary files of unfinished
/// writes and lock files are left out. A missing directory lists as empty, as an
/// empty prefix does on a store.
pub(crate) fn list(dir: &Path) -> Result<Vec<ObjectInfo>, StorageError> {
    let url = dir.display().to_string();
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries = match fs::read_dir(&d) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound && d == dir => return Ok(out),
            Err(e) => return Err(io_err(&url, Op::List)(e)),
        };
        for entry in entries {
            let entry = entry.map_err(io_err(&url, Op::List))?;
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            let ft = entry.file_type().map_err(io_err(&url, Op::List))?;
            if ft.is_dir() {
                stack.push(path);
            } else if !(name.ends_with(TEMP_SUFFIX) || is_lock_name(&name)) {
                out.push(head(&path)?);
            }
        }
    }
    out.sort_by_key(|o| o.location.to_string());
    Ok(out)
}

fn is_lock_name(name: &str) -> bool {
    name.starts_with('.') && name.ends_with(".pitr-lock")
}

pub(crate) fn delete(p: &Path) -> Result<(), StorageError> {
    match fs::remove_file(p) {
        // Idempotent, as a DELETE on a store is.
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        r => r.map_err(io_err(&p.display().to_string(), Op::Delete)),
    }
}

pub(crate) fn read_versioned(p: &Path, limit: u64) -> Result<(Vec<u8>, Version), StorageError> {
    let url = p.display().to_string();
    let f = File::open(p).map_err(io_err(&url, Op::Read))?;
    let size = f.metadata().map_err(io_err(&url, Op::Read))?.len();
    if size > limit {
        return Err(StorageError::TooLarge { url, size, limit });
    }
    let mut data = Vec::with_capacity(size as usize);
    f.take(limit.saturating_add(1))
        .read_to_end(&mut data)
        .map_err(io_err(&url, Op::Read))?;
    let v = Version::etag(format!("\"{}\"", md5_hex(&data)));
    Ok((data, v))
}

/// Writes `data` to a temporary file beside `p`, synced, and returns it.
fn staged(p: &Path, data: &[u8]) -> io::Result<tempfile::NamedTempFile> {
    let dir = parent_dir(p);
    fs::create_dir_all(dir)?;
    let name = p
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(TEMP_SUFFIX)
        .tempfile_in(dir)?;
    tmp.write_all(data)?;
    tmp.as_file().sync_all()?;
    Ok(tmp)
}

pub(crate) fn put_if_absent(p: &Path, data: &[u8]) -> Result<Version, StorageError> {
    let url = p.display().to_string();
    let tmp = staged(p, data).map_err(io_err(&url, Op::Write))?;
    // A hard link fails if the name exists: create-if-absent, atomically.
    match tmp.persist_noclobber(p) {
        Ok(_) => {}
        Err(e) if e.error.kind() == io::ErrorKind::AlreadyExists => {
            return Err(StorageError::AlreadyExists { url, source: None })
        }
        Err(e) => return Err(io_err(&url, Op::Write)(e.error)),
    }
    sync_dir(parent_dir(p)).map_err(io_err(&url, Op::Write))?;
    Ok(Version::etag(format!("\"{}\"", md5_hex(data))))
}

pub(crate) fn put_if_match(
    p: &Path,
    data: &[u8],
    expected: &Version,
) -> Result<Version, StorageError> {
    let url = p.display().to_string();
    let werr = io_err(&url, Op::Write);
    let _lock = Lock::take(&lock_path(p)).map_err(&werr)?;
    let current = match read_versioned(p, super::MAX_MANIFEST_BYTES) {
        Ok((_, v)) => Some(v),
        Err(StorageError::NotFound { .. }) => None,
        Err(e) => return Err(e),
    };
    if current.as_ref().and_then(|v| v.etag.as_deref()) != expected.etag.as_deref() {
        return Err(StorageError::ChangedByAnotherWriter {
            url: url.clone(),
            source: None,
        });
    }
    let tmp = staged(p, data).map_err(&werr)?;
    tmp.persist(p).map_err(|e| werr(e.error))?;
    sync_dir(parent_dir(p)).map_err(&werr)?;
    Ok(Version::etag(format!("\"{}\"", md5_hex(data))))
}

fn lock_path(p: &Path) -> PathBuf {
    let name = p
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    parent_dir(p).join(format!(".{name}.pitr-lock"))
}

/// An exclusive `flock`, released when dropped (the file stays, empty).
struct Lock(File);

impl Lock {
    fn take(path: &Path) -> io::Result<Lock> {
        let f = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)?;
        // SAFETY: flock on a descriptor this function owns.
        if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Lock(f))
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        // SAFETY: unlocking the descriptor locked in `take`.
        unsafe { libc::flock(self.0.as_raw_fd(), libc::LOCK_UN) };
    }
}

#[cfg(test)]
mod tests {
    use super::{did_you_mean, size_on_disk};
    use std::fs;

    #[test]
    fn sizes_of_files_and_trees_through_a_link_named_but_not_links_inside() {
        let d = tempfile::tempdir().unwrap();
        let b = d.path().join("b");
        fs::create_dir_all(b.join("s")).unwrap();
        fs::write(b.join("a"), [0u8; 10]).unwrap();
        fs::write(b.join("s/b"), [0u8; 5]).unwrap();
        assert_eq!(size_on_disk(&b), 15);
        assert_eq!(size_on_disk(&b.join("a")), 10);
        assert_eq!(size_on_disk(&b.join("none")), 0);
        // `latest -> b`: the directory it names.
        std::os::unix::fs::symlink(&b, d.path().join("latest")).unwrap();
        assert_eq!(size_on_disk(&d.path().join("latest")), 15);
        // A link inside (to the tree itself: a cycle) is not followed.
        std::os::unix::fs::symlink(&b, b.join("s/loop")).unwrap();
        assert_eq!(size_on_disk(&b), 15);
    }

    #[test]
    fn a_mistyped_path_gets_the_existing_one_it_meant() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        fs::create_dir_all(root.join("incident/backup/shop")).unwrap();
        fs::write(root.join("incident/oplog.bson"), b"").unwrap();
        fs::write(root.join("incident/backup/shop/orders.bson"), b"").unwrap();

        // The last component, one letter off or in another case.
        assert_eq!(
            did_you_mean(&root.join("incident/bakup")),
            Some(root.join("incident/backup"))
        );
        assert_eq!(
            did_you_mean(&root.join("incident/Oplog.bson")),
            Some(root.join("incident/oplog.bson"))
        );
        // A directory in the middle, the rest of the path kept.
        assert_eq!(
            did_you_mean(&root.join("incidnt/backup/shop/orders.bson")),
            Some(root.join("incident/backup/shop/orders.bson"))
        );
        // Nothing close; a fix whose rest still does not exist; a path that exists.
        assert_eq!(did_you_mean(&root.join("incident/somethingelse")), None);
        assert_eq!(did_you_mean(&root.join("incidnt/backup/nope.bson")), None);
        assert_eq!(did_you_mean(&root.join("incident/oplog.bson")), None);
        // Two letters off in a short name is not close.
        assert_eq!(did_you_mean(&root.join("incident/xx")), None);
    }

    #[test]
    fn a_relative_path_stays_relative() {
        // The tests run in the crate's directory: `fixtures/incident` is there.
        assert_eq!(
            did_you_mean(std::path::Path::new("fixtures/incidnt/oplog.bson")),
            Some(std::path::PathBuf::from("fixtures/incident/oplog.bson"))
        );
    }
}
