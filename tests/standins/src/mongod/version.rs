//! Which MongoDB release the stand-in mongod plays (`PITR_STANDIN_VERSION`, default
//! 7.0.14), and every behaviour that depends on it, each pinned to the server source
//! or test that shows the release where it changed.
//!
//! Only 6.0.x, 7.0.x and 8.0.x are accepted as full releases: those are the releases
//! whose rules below could be pinned. A claim outside them would have to guess (8.1
//! drops the `authSchema` document, 8.3 adds `rawData` and viewless time-series
//! collections, dbHash scans capped collections in natural order after
//! SERVER-106005), so it is refused rather than half-played.
//!
//! 4.4.x and 5.0.x are accepted for one purpose: reading as of a cluster time
//! ([`ServerVersion::snapshot_reads_outside_transactions`], `pitr rehearse`). They set
//! `buildInfo`, `maxWireVersion` (9, 13) and the FCV; every other rule plays 6.0's, so a
//! test claiming them must rely only on the version checks and snapshot reads.

use std::fmt;

/// A release `major.minor.patch` that the stand-in claims to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ServerVersion {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

pub const DEFAULT: ServerVersion = ServerVersion {
    major: 7,
    minor: 0,
    patch: 14,
};

impl fmt::Display for ServerVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

impl ServerVersion {
    /// Parse `PITR_STANDIN_VERSION`; `Err` says what is accepted.
    pub fn parse(s: &str) -> Result<ServerVersion, String> {
        let parts: Vec<&str> = s.trim().split('.').collect();
        let nums: Option<Vec<u32>> = parts.iter().map(|p| p.parse::<u32>().ok()).collect();
        let v = match nums.as_deref() {
            Some([a, b, c]) => ServerVersion {
                major: *a,
                minor: *b,
                patch: *c,
            },
            _ => {
                return Err(format!(
                    "PITR_STANDIN_VERSION=`{s}` is not a version like 7.0.14"
                ))
            }
        };
        if !matches!(
            (v.major, v.minor),
            (4, 4) | (5, 0) | (6, 0) | (7, 0) | (8, 0)
        ) {
            return Err(format!(
                "PITR_STANDIN_VERSION=`{s}`: the stand-in plays 6.0.x, 7.0.x or 8.0.x only (and 4.4.x, 5.0.x for snapshot reads; see tests/standins/README.md)"
            ));
        }
        Ok(v)
    }

    /// From the environment; unset or empty means [`DEFAULT`].
    pub fn from_env() -> Result<ServerVersion, String> {
        match std::env::var("PITR_STANDIN_VERSION") {
            Ok(s) if !s.trim().is_empty() => ServerVersion::parse(&s),
            _ => Ok(DEFAULT),
        }
    }

    pub fn at_least(&self, major: u32, minor: u32, patch: u32) -> bool {
        (self.major, self.minor, self.patch) >= (major, minor, patch)
    }

    /// `buildInfo.versionArray`.
    pub fn array(&self) -> [i32; 4] {
        [self.major as i32, self.minor as i32, self.patch as i32, 0]
    }

    /// `featureCompatibilityVersion` of a fresh server: `major.minor`.
    pub fn fcv(&self) -> String {
        format!("{}.{}", self.major, self.minor)
    }

    /// `hello.maxWireVersion`: 9 for 4.4, 13 for 5.0, 17 for 6.0, 21 for 7.0, 25 for
    /// 8.0 (`src/mongo/db/wire_version.h`, `WireVersion::WIRE_VERSION_44/50/60/70/80`).
    pub fn max_wire_version(&self) -> i32 {
        match self.major {
            4 => 9,
            5 => 13,
            6 => 17,
            7 => 21,
            _ => 25,
        }
    }

    /// Does the `insert` command know `bypassEmptyTsReplacement` (SERVER-88750)?
    /// Released with 8.0 and backported to 7.0.13, 6.0.17 and 5.0.29: mongo-tools
    /// `common/db/empty_timestamp.go` `MongoCanAcceptLiteralZeroTimestamp` (100.18.0),
    /// which decides whether mongorestore sends it. Older servers reject the unknown
    /// field like any other (IDL, code 40415).
    pub fn knows_bypass_empty_ts(&self) -> bool {
        match self.major {
            4 => false,
            5 => self.patch >= 29,
            6 => self.patch >= 17,
            7 => self.patch >= 13,
            _ => true,
        }
    }

    /// applyOps `alwaysUpsert` defaults to true and may be given until 6.1; 6.2
    /// removed atomic applyOps, made the default false and refuses the option with
    /// code 6711601 (`jstests/core/apply_ops2.js`, tag "6.2 removes support for atomic
    /// applyOps", `requires_fcv_62`; `src/mongo/db/repl/apply_ops.cpp` passes
    /// `false /* alwaysUpsert */`).
    pub fn apply_ops_always_upsert(&self) -> bool {
        self.major <= 5 || (self.major == 6 && self.minor < 2)
    }

    /// May a `u` entry in applyOps be a `$v:1` or unversioned modifier update?
    /// 6.0: yes (a `$v:1` entry applies on 6.0 but not on 6.1: the tag comment of the
    /// apply-ops jstest "This test will fail on a mixed 6.1/6.0 cluster because a 6.0
    /// node can successfully apply a $v: 1 oplog entry, but a 6.1 node cannot").
    /// 6.1 to 7.x: no, `UpdateModification::parseFromOplogEntry` refuses it (4772600).
    /// 8.0+: yes again, converted to a `$v:2` entry (jstest "These tests verify that we
    /// don't create v1 oplog entries when applying v1 updates supplied to applyOps",
    /// tagged "Applying v1 oplog entries with applyOps is only supported in 8.0
    /// onwards", `requires_fcv_80`).
    pub fn apply_ops_accepts_v1_updates(&self) -> bool {
        !(self.major == 7 || (self.major == 6 && self.minor >= 1))
    }

    /// A fresh time-series collection with a `metaField` gets a `{meta: 1, time: 1}`
    /// index from 6.3 on (`src/mongo/db/timeseries/README.md`: "This index is created
    /// by default for new time series collections created in v6.3+").
    pub fn timeseries_default_index(&self) -> bool {
        self.at_least(6, 3, 0)
    }

    /// May `find`, `aggregate` and `distinct` read with `readConcern: {level:
    /// "snapshot"}` (and `atClusterTime`) outside a multi-document transaction? From
    /// 5.0 (the driver specification `source/sessions/snapshot-sessions.rst`: "Version
    /// 5.0 of the server introduces support for read concern level snapshot
    /// (non-speculative) for read commands outside of transactions"). Before, the
    /// server refuses them with InvalidOptions ([`super::snapshot`]).
    pub fn snapshot_reads_outside_transactions(&self) -> bool {
        self.major >= 5
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_rules() {
        let v = ServerVersion::parse("6.0.16").unwrap();
        assert!(!v.knows_bypass_empty_ts());
        assert!(v.apply_ops_always_upsert());
        assert!(v.apply_ops_accepts_v1_updates());
        assert_eq!(v.max_wire_version(), 17);
        assert!(ServerVersion::parse("6.0.17")
            .unwrap()
            .knows_bypass_empty_ts());
        let v = ServerVersion::parse("7.0.12").unwrap();
        assert!(!v.knows_bypass_empty_ts());
        assert!(!v.apply_ops_always_upsert());
        assert!(!v.apply_ops_accepts_v1_updates());
        assert!(DEFAULT.knows_bypass_empty_ts());
        let v = ServerVersion::parse("8.0.4").unwrap();
        assert!(v.apply_ops_accepts_v1_updates());
        assert!(!v.apply_ops_always_upsert());
        assert_eq!(v.fcv(), "8.0");
        assert!(ServerVersion::parse("8.2.0").is_err());
        assert!(ServerVersion::parse("4.2.0").is_err());
        let v = ServerVersion::parse("4.4.29").unwrap();
        assert_eq!(v.max_wire_version(), 9);
        assert!(!v.snapshot_reads_outside_transactions());
        assert!(ServerVersion::parse("5.0.0")
            .unwrap()
            .snapshot_reads_outside_transactions());
        assert!(ServerVersion::parse("7.0").is_err());
        assert!(ServerVersion::parse("seven").is_err());
    }
}
