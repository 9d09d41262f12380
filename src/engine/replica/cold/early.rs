//! Cold collections' files checked and hashed while the plan's first pass over the
//! oplog runs.
//!
//! That pass reads and parses the whole oplog on one thread (1.2 s of the 1 GiB
//! bench's 7.7 s) and leaves the second core idle. Which collections stay cold is
//! known only at its end (no entry names them), but what makes them cold, their
//! file in `_id` order ([`ColdDocs::check`]), and what their hash costs, the MD5 of
//! the file, do not depend on the oplog. So [`Early`] starts on a thread of its own
//! before the pass: it checks every candidate file, then hashes the cold ones,
//! largest first. The seeding then says which files it wants ([`Early::want`]):
//! the others are let go (a check or a hash under way stops at its next block), it
//! takes the checks made ([`Early::checked`], waiting for the wanted ones), and the
//! hashing goes on for the wanted files only, at the lowest CPU priority, as
//! [`super::hash_in_background`] would ([`Early::hand_over`]).
//!
//! With a staging directory beside the dump (the embedded replay's plain directory
//! dump), the thread then copies the wanted files there ([`ColdDocs::copy_ahead`],
//! largest first), so that the dump renames them into place instead of writing
//! gigabytes in its last phase: the copies' writes reach the disk while the oplog
//! is applied.
//!
//! Nothing changes but when the work is done: a file the early thread could not
//! check (an error, Ctrl-C) is checked by the seeding, which meets the error in its
//! place; a hash or a copy not made is made by the dump. The results are the same
//! [`ColdDocs`] the seeding would have made, with the same guard against a file
//! changed since (its length and modification time, checked on every read).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use super::{interrupt, lowest_priority, Background, ColdDocs, CopyAhead, ReplicaError};

/// The early thread's handle: dropped before [`Early::hand_over`], it stops the
/// thread.
pub struct Early {
    shared: Arc<Shared>,
    handed: AtomicBool,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    changed: Condvar,
    stop: Arc<AtomicBool>,
    /// Where the wanted files are copied ahead of the dump, if anywhere.
    copies: Option<CopyAhead>,
}

#[derive(Default)]
struct State {
    /// What each check found: the cold documents, or None (not cold).
    checked: HashMap<PathBuf, Option<Arc<ColdDocs>>>,
    /// Every candidate checked, or given up.
    checks_done: bool,
    /// The files the seeding wants (None: all, until it says).
    wanted: Option<HashSet<PathBuf>>,
}

impl State {
    /// The files checked cold that the seeding wants (every one until it says).
    fn cold_wanted(&self) -> impl Iterator<Item = (&PathBuf, &Arc<ColdDocs>)> {
        self.checked
            .iter()
            .filter_map(|(p, d)| Some((p, d.as_ref()?)))
            .filter(|(p, _)| self.wanted.as_ref().is_none_or(|w| w.contains(*p)))
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    fn wanted(&self, path: &Path) -> bool {
        !self.stopped() && self.lock().wanted.as_ref().is_none_or(|w| w.contains(path))
    }
}

/// Starts checking `candidates` (local plain data files of a directory backup, in
/// the backup's order) on a thread of its own, then hashing and, with `copies`,
/// copying the wanted ones there; None when there are none or the thread cannot
/// start (the seeding checks them then).
pub fn early(candidates: Vec<PathBuf>, copies: Option<CopyAhead>) -> Option<Early> {
    if candidates.is_empty() {
        return None;
    }
    let shared = Arc::new(Shared {
        copies,
        ..Shared::default()
    });
    let on_thread = Arc::clone(&shared);
    std::thread::Builder::new()
        .name("pitr-cold-early".into())
        .spawn(move || work(&on_thread, &candidates))
        .ok()?;
    Some(Early {
        shared,
        handed: AtomicBool::new(false),
    })
}

impl Early {
    /// From now on only `paths` are checked and hashed.
    pub fn want(&self, paths: HashSet<PathBuf>) {
        self.shared.lock().wanted = Some(paths);
        self.shared.changed.notify_all();
    }

    /// What the check of `path` found, once the checks are made (waits for them):
    /// `Some(Some(docs))` cold, `Some(None)` not cold (loaded), `None` not checked
    /// (an error or a stop: the caller checks it).
    pub fn checked(&self, path: &Path) -> Option<Option<Arc<ColdDocs>>> {
        let mut st = self.shared.lock();
        while !st.checks_done {
            st = self
                .shared
                .changed
                .wait(st)
                .unwrap_or_else(PoisonError::into_inner);
        }
        st.checked.get(path).cloned()
    }

    /// The hashing of the wanted files goes on at the lowest CPU priority, stopped
    /// when the returned handle is dropped.
    pub fn hand_over(&self) -> Background {
        self.handed.store(true, Ordering::Relaxed);
        self.shared.changed.notify_all();
        Background {
            stop: Arc::clone(&self.shared.stop),
        }
    }
}

impl Drop for Early {
    fn drop(&mut self) {
        if !self.handed.load(Ordering::Relaxed) {
            self.shared.stop.store(true, Ordering::Relaxed);
            self.shared.changed.notify_all();
        }
    }
}

/// Marks the checks done however the thread ends (a panic included): a seeding
/// waiting for them must not wait forever.
struct ChecksDone<'a>(&'a Shared);

impl Drop for ChecksDone<'_> {
    fn drop(&mut self) {
        self.0.lock().checks_done = true;
        self.0.changed.notify_all();
    }
}

fn work(sh: &Shared, candidates: &[PathBuf]) {
    let done = ChecksDone(sh);
    for path in candidates {
        if sh.stopped() {
            return;
        }
        if !sh.wanted(path) {
            continue;
        }
        let mut n = 0u64;
        let mut each = || {
            n += 1;
            if n.is_multiple_of(interrupt::EVERY) {
                interrupt::check()?;
                if !sh.wanted(path) {
                    return Err(ReplicaError::Interrupted);
                }
            }
            Ok(())
        };
        if let Ok(found) = ColdDocs::check(path, &mut each) {
            sh.lock().checked.insert(path.clone(), found.map(Arc::new));
        }
    }
    drop(done);
    hash(sh);
}

/// The wanted cold files' MD5s, largest first; at the lowest priority once the
/// seeding has said what it wants (the apply then needs the cores).
fn hash(sh: &Shared) {
    let mut tried: HashSet<PathBuf> = HashSet::new();
    let lowered = std::cell::Cell::new(false);
    loop {
        let next = {
            let st = sh.lock();
            st.cold_wanted()
                .filter(|(p, d)| !tried.contains(*p) && !d.md5_known())
                .max_by(|a, b| a.1.len.cmp(&b.1.len).then_with(|| a.0.cmp(b.0)))
                .map(|(p, d)| (p.clone(), Arc::clone(d)))
        };
        let Some((path, docs)) = next else {
            // Nothing left: until the seeding says what it wants, more may be.
            let st = sh.lock();
            if sh.stopped() {
                return;
            }
            if st.wanted.is_some() {
                drop(st);
                copy(sh);
                return;
            }
            let _ = sh.changed.wait_timeout(st, Duration::from_millis(100));
            continue;
        };
        tried.insert(path.clone());
        let _ = docs.md5_unless(&|| {
            if !lowered.get() && sh.lock().wanted.is_some() {
                lowest_priority();
                lowered.set(true);
            }
            !sh.wanted(&path)
        });
    }
}

/// The wanted cold files copied into [`Shared::copies`], largest first (at the
/// lowest priority: the hashing lowered it), when they hold
/// [`CopyAhead::from_bytes`] together. Called once the seeding has said what it
/// wants. A copy that fails is left to the dump.
fn copy(sh: &Shared) {
    let Some(CopyAhead { dir, from_bytes }) = &sh.copies else {
        return;
    };
    let mut wanted: Vec<(PathBuf, Arc<ColdDocs>)> = sh
        .lock()
        .cold_wanted()
        .map(|(p, d)| (p.clone(), Arc::clone(d)))
        .collect();
    if wanted.iter().map(|(_, d)| d.len).sum::<u64>() < *from_bytes {
        return;
    }
    wanted.sort_by(|a, b| b.1.len.cmp(&a.1.len).then_with(|| a.0.cmp(&b.0)));
    for (path, docs) in wanted {
        if sh.stopped() || docs.copy_ahead(dir, &|| !sh.wanted(&path)).is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{check, file_of, ordered};
    use super::*;
    use md5::{Digest, Md5};

    /// What the early thread found is what the seeding's own check finds: the
    /// same documents, count and index for a file in order, not cold for one out of
    /// order, nothing for a file it could not read (the seeding meets the error in
    /// its place); and the wanted file's hash is the file's MD5.
    #[test]
    fn checks_and_hashes_made_early_are_the_seedings() {
        let dir = tempfile::tempdir().unwrap();
        let a = file_of(dir.path(), "a.bson", &ordered(3000));
        let b = file_of(dir.path(), "b.bson", &ordered(500));
        let mut reversed = ordered(200);
        reversed.reverse();
        let c = file_of(dir.path(), "c.bson", &reversed);
        let missing = dir.path().join("missing.bson");
        let e =
            early(vec![a.clone(), b.clone(), c.clone(), missing.clone()], None).expect("a thread");
        e.want(
            [a.clone(), c.clone(), missing.clone()]
                .into_iter()
                .collect(),
        );
        let got = e.checked(&a).unwrap().expect("cold");
        let direct = check(&a).unwrap();
        assert_eq!(
            (got.count, got.len, &got.index, &got.path),
            (direct.count, direct.len, &direct.index, &direct.path)
        );
        assert!(e.checked(&c).expect("checked").is_none(), "out of order");
        assert!(e.checked(&missing).is_none(), "not checked");
        let bg = e.hand_over();
        let md5: [u8; 16] = Md5::digest(std::fs::read(&a).unwrap()).into();
        // Waits for the thread when it is on the file; hashes it otherwise.
        assert_eq!(got.md5().unwrap(), md5);
        drop(bg);
        drop(e);
    }

    /// With a staging directory, the wanted cold files are copied there once hashed
    /// (only those: not a file the seeding did not want, not one out of order), and
    /// the dump renames the copy into place.
    #[test]
    fn wanted_cold_files_are_copied_ahead() {
        let dir = tempfile::tempdir().unwrap();
        let staging = tempfile::tempdir().unwrap();
        let a = file_of(dir.path(), "a.bson", &ordered(3000));
        let b = file_of(dir.path(), "b.bson", &ordered(500));
        let mut reversed = ordered(200);
        reversed.reverse();
        let c = file_of(dir.path(), "c.bson", &reversed);
        // The wanted cold files copied only from `from_bytes` on, together.
        let len = std::fs::metadata(&a).unwrap().len();
        for (from_bytes, copied) in [(len + 1, 0), (len, 1)] {
            let sh = Shared {
                copies: Some(CopyAhead {
                    dir: staging.path().to_path_buf(),
                    from_bytes,
                }),
                ..Shared::default()
            };
            {
                let mut st = sh.lock();
                st.checked
                    .insert(a.clone(), Some(Arc::new(check(&a).unwrap())));
                st.wanted = Some([a.clone()].into_iter().collect());
            }
            copy(&sh);
            let staged = std::fs::read_dir(staging.path()).unwrap().count();
            assert_eq!(staged, copied, "from {from_bytes} bytes, {len} wanted");
        }
        drop(std::fs::remove_dir_all(staging.path()));
        std::fs::create_dir(staging.path()).unwrap();

        let e = early(
            vec![a.clone(), b.clone(), c.clone()],
            Some(CopyAhead {
                dir: staging.path().to_path_buf(),
                from_bytes: 0,
            }),
        )
        .expect("a thread");
        e.want([a.clone(), c.clone()].into_iter().collect());
        let got = e.checked(&a).unwrap().expect("cold");
        let bg = e.hand_over();
        let start = std::time::Instant::now();
        while !got.copied_ahead() {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "no copy made ahead in 60 s"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        let staged: Vec<_> = std::fs::read_dir(staging.path())
            .unwrap()
            .map(|f| f.unwrap().path())
            .collect();
        assert_eq!(staged.len(), 1, "only the wanted cold file: {staged:?}");
        assert_eq!(
            std::fs::read(&staged[0]).unwrap(),
            std::fs::read(&a).unwrap()
        );
        let dest = dir.path().join("dump.bson");
        got.copy_to(&dest, &mut |_| {}).unwrap();
        assert_eq!(std::fs::read(&dest).unwrap(), std::fs::read(&a).unwrap());
        assert_eq!(std::fs::read_dir(staging.path()).unwrap().count(), 0);
        drop(bg);
        drop(e);
    }

    /// Files not wanted are let go: a seeding waiting for the checks waits only for
    /// the wanted ones (here the first; the others may have been checked before it
    /// said so).
    #[test]
    fn only_the_wanted_files_are_waited_for() {
        let dir = tempfile::tempdir().unwrap();
        let files: Vec<PathBuf> = (0..20)
            .map(|i| file_of(dir.path(), &format!("{i}.bson"), &ordered(2000)))
            .collect();
        let e = early(files.clone(), None).expect("a thread");
        e.want(files[..1].iter().cloned().collect());
        assert!(e.checked(&files[0]).flatten().is_some());
        let st = e.shared.lock();
        assert!(st.checks_done);
        assert!(st.checked.len() <= files.len());
    }
}
