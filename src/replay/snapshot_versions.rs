//! Which `mongod` can recover which snapshot (issue 23), decided before anything is
//! copied, from the version the `mongod` reports (`--version`) and what the files say
//! about the server that last ran on them ([`Snapshot::written_by`], from
//! `diagnostic.data`) and about how it stopped ([`Snapshot::unclean`]).
//!
//! The rules, each from the server's history:
//!
//! - **Before 4.2: refused.** The recovery pitr runs is `recoverFromOplogAsStandalone`
//!   with `takeUnstableCheckpointOnShutdown` (what Percona Backup for MongoDB's
//!   physical restore runs, `pbm/restore/physical.go` `recoverStandalone`). On 4.0 the
//!   standalone recovery skipped the oplog altogether when majority read concern was
//!   off, leaving the data at the checkpoint without a word, until 4.0.13
//!   (SERVER-41792); 3.6 has no such recovery at all.
//! - **4.2.0 and 4.2.1: a note.** A second recovery start on files that an earlier
//!   one already recovered (an unstable checkpoint, no stable one) is fatal there
//!   ("Cannot use 'recoverFromOplogAsStandalone' without a stable checkpoint", 31229);
//!   4.2.2 made it a no-op (SERVER-44612). pitr recovers a fresh copy once, so this
//!   matters only for a snapshot of files that had been recovered before.
//! - **4.4 and 5.0 on crash-consistent files: refused.** Started with
//!   `recoverFromOplogAsStandalone` on the files of a member that was killed (which a
//!   snapshot of a running member is), mongod 4.4.27 and 5.0.24 stop on an invariant
//!   failure; closed Won't Fix (SERVER-84432). Files of a cleanly stopped member
//!   (an empty `mongod.lock`) recover.
//! - **Older than the files: refused.** A binary starts only on data files whose
//!   featureCompatibilityVersion it knows: its own release or the one before
//!   (`startup_recovery.cpp`, "This version of MongoDB is too old/too recent to start
//!   up on the existing data files"; `feature_compatibility_version_parser.cpp`). The
//!   files' FCV can be read only by a mongod, so the rule is applied to the release
//!   that last ran on them: a binary of an older release than that is refused, and
//!   one more than a release newer too (the FCV is at most that release's).

use crate::backup::snapshot::Snapshot;

/// The long-term releases in order; the rule "one release at a time" counts on these.
const RELEASES: &[(u32, u32)] = &[
    (3, 6),
    (4, 0),
    (4, 2),
    (4, 4),
    (5, 0),
    (6, 0),
    (7, 0),
    (8, 0),
];

/// `7.0.14`, `v4.2.1-rc0`, `8.0.0-alpha` as numbers; `None` for anything else.
pub fn numbers(v: &str) -> Option<(u32, u32, u32)> {
    let v = v.trim().trim_start_matches(['v', 'r']);
    let mut it = v.split(['.', '-', '+']);
    let major = it.next()?.parse().ok()?;
    let minor = it.next()?.parse().ok()?;
    let patch = it.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    Some((major, minor, patch))
}

/// What the versions say: refusals (any one stops the replay before the copy) and
/// notes to show with the steps.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct VersionCheck {
    pub refusals: Vec<String>,
    pub notes: Vec<String>,
}

/// The rules of the module documentation, for the `mongod` that reports `binary`.
pub fn check(binary: Option<&str>, s: &Snapshot) -> VersionCheck {
    let mut c = VersionCheck::default();
    let Some(b) = binary.and_then(numbers) else {
        c.notes.push(format!(
            "mongod's version is unknown (`{}`): the version rules for snapshot recovery were not checked",
            binary.unwrap_or("?")
        ));
        return c;
    };
    let shown = format!("{}.{}.{}", b.0, b.1, b.2);
    if b < (4, 2, 0) {
        let why = if ((4, 0, 0)..(4, 0, 13)).contains(&b) {
            "its standalone recovery can skip the oplog and leave the data at the checkpoint (SERVER-41792, fixed in 4.0.13)"
        } else {
            "the recovery from the oplog as a standalone with takeUnstableCheckpointOnShutdown that pitr runs is a 4.2+ procedure"
        };
        c.refusals
            .push(format!("mongod {shown} cannot recover a snapshot: {why}"));
    }
    if b.0 == 4 && b.1 == 2 && b.2 < 2 {
        c.notes.push(format!(
            "mongod {shown}: files that an earlier recovery start already recovered cannot be recovered again before 4.2.2 (SERVER-44612); a snapshot of untouched member files is fine"
        ));
    }
    if matches!((b.0, b.1), (4, 4) | (5, 0)) && s.unclean == Some(true) {
        c.refusals.push(format!(
            "mongod {shown} stops on an invariant failure when it recovers the files of a member that was running or killed \
             (this snapshot's mongod.lock holds a process id), closed Won't Fix for 4.4 and 5.0 (SERVER-84432)"
        ));
    }
    if let Some(f) = s.written_by.as_deref().and_then(numbers) {
        let (bm, fm) = ((b.0, b.1), (f.0, f.1));
        let pos = |r| RELEASES.iter().position(|x| *x == r);
        if bm < fm {
            c.refusals.push(format!(
                "mongod {shown} is older than the files: a {}.{} mongod last ran on them (diagnostic.data), and a binary starts only on files of its own release or the one before",
                f.0, f.1
            ));
        } else if let (Some(bi), Some(fi)) = (pos(bm), pos(fm)) {
            if bi > fi + 1 {
                c.refusals.push(format!(
                    "mongod {shown} is more than one release newer than the files (a {}.{} mongod last ran on them): a binary starts only on files of its own release or the one before",
                    f.0, f.1
                ));
            }
        }
    } else {
        c.notes.push(
            "the files name no version (no diagnostic.data): a mongod of another release than the files' fails at the recovery start, and its log says why"
                .into(),
        );
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backup::snapshot::Packaging;

    fn snap(written_by: Option<&str>, unclean: Option<bool>) -> Snapshot {
        Snapshot {
            path: "/snap".into(),
            packaging: Packaging::Directory,
            markers: vec!["storage.bson".into()],
            engine: Some("wiredTiger".into()),
            wiredtiger_version: None,
            journal: Some(true),
            encrypted: Some(false),
            written_by: written_by.map(str::to_string),
            unclean,
            bytes: 0,
            files: Some(0),
        }
    }

    fn refused(binary: &str, files: Option<&str>, unclean: bool) -> Vec<String> {
        check(Some(binary), &snap(files, Some(unclean))).refusals
    }

    #[test]
    fn version_numbers() {
        assert_eq!(numbers("7.0.14"), Some((7, 0, 14)));
        assert_eq!(numbers("v4.2.1-rc0"), Some((4, 2, 1)));
        assert_eq!(numbers("8.0.0-alpha"), Some((8, 0, 0)));
        assert_eq!(numbers("5.0"), Some((5, 0, 0)));
        assert_eq!(numbers("stand-in"), None);
    }

    #[test]
    fn the_same_release_and_the_next_one_recover() {
        for (b, f) in [
            ("7.0.14", "7.0.2"),
            ("7.0.2", "7.0.14"),
            ("8.0.4", "7.0.14"),
            ("6.0.1", "5.0.30"),
        ] {
            assert_eq!(
                refused(b, Some(f), true),
                Vec::<String>::new(),
                "{b} on {f}"
            );
        }
    }

    #[test]
    fn older_than_the_files_or_two_releases_newer_is_refused() {
        let r = refused("6.0.14", Some("7.0.2"), false);
        assert!(
            r.len() == 1 && r[0].contains("older than the files") && r[0].contains("7.0"),
            "{r:?}"
        );
        let r = refused("8.0.1", Some("6.0.14"), false);
        assert!(
            r.len() == 1 && r[0].contains("more than one release newer"),
            "{r:?}"
        );
    }

    #[test]
    fn before_4_2_is_refused_and_4_0_before_13_names_server_41792() {
        let r = refused("4.0.12", Some("4.0.12"), false);
        assert!(r.iter().any(|x| x.contains("SERVER-41792")), "{r:?}");
        let r = refused("4.0.28", Some("4.0.28"), false);
        assert!(r.len() == 1 && r[0].contains("4.2+"), "{r:?}");
        assert_eq!(refused("3.6.23", None, false).len(), 1);
    }

    #[test]
    fn crash_consistent_files_are_refused_to_4_4_and_5_0_only() {
        for b in ["4.4.27", "5.0.24"] {
            let r = refused(b, Some(b), true);
            assert!(r.len() == 1 && r[0].contains("SERVER-84432"), "{b}: {r:?}");
            assert!(refused(b, Some(b), false).is_empty(), "{b} clean");
        }
        assert!(refused("6.0.14", Some("6.0.14"), true).is_empty());
        // No lock file at all: not known to be crash-consistent.
        assert!(check(Some("5.0.24"), &snap(Some("5.0.24"), None))
            .refusals
            .is_empty());
    }

    #[test]
    fn notes_for_4_2_before_2_and_for_files_without_a_version() {
        let c = check(Some("4.2.1"), &snap(Some("4.2.1"), Some(false)));
        assert!(c.refusals.is_empty());
        assert!(c.notes.iter().any(|n| n.contains("SERVER-44612")), "{c:?}");
        let c = check(Some("7.0.14"), &snap(None, None));
        assert!(c.refusals.is_empty() && c.notes.iter().any(|n| n.contains("no diagnostic.data")));
        let c = check(None, &snap(Some("7.0.1"), None));
        assert!(c.refusals.is_empty() && c.notes[0].contains("unknown"));
    }
}
