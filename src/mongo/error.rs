//! Errors from talking to a live server, each with what the user can do about it.
//!
//! The driver's own errors never travel on as they are: their text passes through
//! [`crate::mongo::connect::Target::scrub`] first (a driver message could quote a
//! connection string), and they are classified once ([`Class`]) so that retry and
//! rollover decisions do not depend on message wording.

use std::fmt;

use crate::error::Hint;
use crate::oplog::Ts;

/// The minimal role, for hints (docs/live-source-and-archive.md, "Minimal role").
pub const MINIMAL_ROLE: &str = "db.getSiblingDB(\"admin\").createRole({role: \"pitrOplogReader\", \
    privileges: [{resource: {db: \"local\", collection: \"oplog.rs\"}, actions: [\"find\"]}], roles: []})";

/// What kind of failure a driver error is, for deciding what to do next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// Worth retrying from the last position: network errors, elections, shutdowns,
    /// a cursor the server forgot.
    Transient,
    /// Code 136 `CappedPositionLost`: the oplog wrapped past the cursor.
    CappedPositionLost,
    /// The credentials were rejected.
    Authentication,
    /// Authenticated (or anonymous) but not allowed to run this.
    Unauthorized,
    /// No suitable server could be reached within the selection timeout.
    ServerSelection,
    /// The connection string or an option in it is invalid.
    InvalidArgument,
    Other,
}

/// Server error codes that mean "try again": the operation can be repeated from the
/// last position read. Names as in the server's `error_codes.yml`.
const TRANSIENT_CODES: &[(i32, &str)] = &[
    (6, "HostUnreachable"),
    (7, "HostNotFound"),
    // The cursor timed out or was killed (e.g. by a restart): reopen it.
    (43, "CursorNotFound"),
    (89, "NetworkTimeout"),
    (91, "ShutdownInProgress"),
    (134, "ReadConcernMajorityNotAvailableYet"),
    (189, "PrimarySteppedDown"),
    (237, "CursorKilled"),
    (262, "ExceededTimeLimit"),
    (9001, "SocketException"),
    (10107, "NotWritablePrimary"),
    (11600, "InterruptedAtShutdown"),
    (11602, "InterruptedDueToReplStateChange"),
    (13435, "NotPrimaryNoSecondaryOk"),
    (13436, "NotPrimaryOrSecondary"),
];

/// A driver error reduced to what pitr needs: a scrubbed message, the server's
/// code when there is one, and its [`Class`].
#[derive(Clone, Debug)]
pub struct DriverError {
    pub class: Class,
    pub code: Option<i32>,
    pub code_name: Option<String>,
    /// The driver's message with any secret of the connection string removed.
    pub message: String,
}

impl DriverError {
    /// Classifies `e`; `scrub` removes secrets from its text.
    pub fn new(e: &mongodb::error::Error, scrub: impl Fn(&str) -> String) -> DriverError {
        use mongodb::error::ErrorKind;
        let (code, code_name) = match e.kind.as_ref() {
            ErrorKind::Command(c) => (Some(c.code), Some(c.code_name.clone())),
            _ => (None, None),
        };
        // The kind's text, not the error's: that one is a Debug dump of labels and
        // raw server replies.
        let text = e.kind.to_string();
        let class = match e.kind.as_ref() {
            ErrorKind::Authentication { .. } => Class::Authentication,
            ErrorKind::Io(_) | ErrorKind::ConnectionPoolCleared { .. } => Class::Transient,
            ErrorKind::ServerSelection { .. } => Class::ServerSelection,
            ErrorKind::InvalidArgument { .. }
            | ErrorKind::DnsResolve { .. }
            | ErrorKind::InvalidTlsConfig { .. } => Class::InvalidArgument,
            ErrorKind::Command(c) => classify_code(c.code, &c.message),
            _ => Class::Other,
        };
        DriverError {
            class,
            code,
            code_name: code_name.filter(|n| !n.is_empty()),
            message: scrub(&text),
        }
    }

    pub fn is_transient(&self) -> bool {
        self.class == Class::Transient
    }
}

fn classify_code(code: i32, message: &str) -> Class {
    match code {
        136 => Class::CappedPositionLost,
        // Servers before 4.0 reported a lost capped position as OperationFailed.
        96 if message.contains("capped collection being deleted") => Class::CappedPositionLost,
        18 => Class::Authentication,
        13 => Class::Unauthorized,
        c if TRANSIENT_CODES.iter().any(|(t, _)| *t == c) => Class::Transient,
        _ => Class::Other,
    }
}

impl fmt::Display for DriverError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        if let Some(code) = self.code {
            if !self.message.contains(&code.to_string()) {
                match &self.code_name {
                    Some(n) => write!(f, " (code {code} {n})")?,
                    None => write!(f, " (code {code})")?,
                }
            }
        }
        Ok(())
    }
}

impl std::error::Error for DriverError {}

/// Where a read stopped: how much was delivered and the last position.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reached {
    pub entries: u64,
    pub last: Option<Ts>,
}

impl fmt::Display for Reached {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.last {
            Some(l) => write!(
                f,
                "after {} entries, the last at {l} ({})",
                self.entries,
                l.utc_string()
            ),
            None => write!(f, "before the first entry"),
        }
    }
}

/// Everything that can go wrong reading a live server. `target` is always the
/// redacted connection string.
#[derive(Debug, thiserror::Error)]
pub enum MongoError {
    #[error("`{target}` is not a usable MongoDB connection string")]
    InvalidUri {
        target: String,
        #[source]
        source: DriverError,
    },

    #[error("cannot reach a server for `{target}`")]
    Unreachable {
        target: String,
        #[source]
        source: DriverError,
    },

    #[error("authentication failed for {user} on `{target}`")]
    Authentication {
        target: String,
        /// `user `name`` or "the connection" when no user was given.
        user: String,
        #[source]
        source: DriverError,
    },

    #[error("not authorized to {action} on `{target}`")]
    Unauthorized {
        target: String,
        action: String,
        #[source]
        source: DriverError,
    },

    #[error("`{target}` is a mongos (sharded cluster): pitr reads the oplog of each member's own replica set, not the router's")]
    Mongos { target: String },

    #[error("`{target}` is {what}, not a mongos: `pitr cluster discover` reads a sharded cluster's members through its router")]
    NotMongos { target: String, what: String },

    #[error("`{target}` is {found}, but the cluster file names it as {expected}")]
    WrongRole {
        target: String,
        expected: String,
        found: String,
    },

    #[error("not authorized to {action} on the mongos `{target}`")]
    DiscoveryUnauthorized {
        target: String,
        action: String,
        #[source]
        source: DriverError,
    },

    #[error("the mongos `{target}` answered `{command}` with {what}")]
    Discovery {
        target: String,
        command: String,
        what: String,
    },

    #[error(
        "`{target}` is a standalone mongod without an oplog (`local.oplog.rs` is missing or empty)"
    )]
    NoOplog { target: String },

    #[error("`{command}` failed on `{target}`")]
    Command {
        target: String,
        command: String,
        #[source]
        source: DriverError,
    },

    #[error(
        "an entry read from `{target}` has no BSON Timestamp `ts` ({reached}): not an oplog entry"
    )]
    NotAnEntry { target: String, reached: Reached },

    #[error(
        "the oplog no longer reaches back to {wanted} ({}): its oldest entry is {oldest} ({}), {} later",
        wanted.utc_string(),
        oldest.utc_string(),
        span(*wanted, *oldest)
    )]
    SinceRolledOff {
        /// The position the read had to start from (inclusive).
        wanted: Ts,
        oldest: Ts,
    },

    #[error(
        "the oplog rolled over past the read position ({reached}): the server dropped entries the \
         cursor had not read yet{}",
        oldest_now.map(|o| format!("; its oldest entry is now {o} ({})", o.utc_string())).unwrap_or_default()
    )]
    PositionLost {
        reached: Reached,
        oldest_now: Option<Ts>,
        #[source]
        source: Option<DriverError>,
    },

    #[error("reading the oplog failed {attempts} times in a row ({reached}); giving up")]
    RetriesExhausted {
        attempts: u32,
        reached: Reached,
        #[source]
        source: DriverError,
    },

    #[error("`{target}` did not deliver the oplog up to {end}, its newest entry when the read was planned ({reached}): the server being read lags behind, or that entry was rolled back")]
    EndNotReached {
        target: String,
        end: Ts,
        reached: Reached,
    },

    #[error("reading the oplog of `{target}` failed ({reached})")]
    Read {
        target: String,
        reached: Reached,
        #[source]
        source: DriverError,
    },
}

/// `3 h 12 min`, `42 s`: how far apart two positions are.
pub fn span(a: Ts, b: Ts) -> String {
    let secs = (b.t as i64 - a.t as i64).unsigned_abs();
    human_secs(secs)
}

pub use crate::size::human_secs;

impl Hint for MongoError {
    fn hint(&self) -> Option<String> {
        Some(match self {
            MongoError::InvalidUri { .. } => {
                "a connection string looks like `mongodb://user@host1:27017,host2:27017/?replicaSet=rs0&authSource=admin`; \
                 put the password in it percent-encoded, or set it in PITR_URI to keep it out of the shell history"
                    .into()
            }
            MongoError::Unreachable { .. } => {
                "check the hosts, ports and TLS options (`tls=true`, `tlsCAFile=...`) and that this machine may connect; \
                 the wait is `serverSelectionTimeoutMS` in the URI (pitr's default 15000)"
                    .into()
            }
            MongoError::Authentication { .. } => {
                "check the user name, the password (percent-encoded in the URI) and `authSource` (usually `?authSource=admin`); \
                 the password is never shown"
                    .into()
            }
            MongoError::Unauthorized { .. } => format!(
                "pitr needs only `find` on `local.oplog.rs`; create a role for it and grant it to the user: {MINIMAL_ROLE}"
            ),
            MongoError::Mongos { target } => format!(
                "for a sharded cluster, `pitr cluster discover --uri '{target}' --out cluster.toml` writes its members \
                 (the config server's and each shard's replica set), then `pitr dump-oplog --cluster cluster.toml --out DIR` \
                 dumps each one's oplog; restore with `pitr replay --cluster` (docs/sharded.md)"
            ),
            MongoError::NotMongos { .. } => {
                "give the URI of a mongos (the router the applications connect to); for a single replica set, use \
                 `pitr dump-oplog --uri` and the other commands without --cluster"
                    .into()
            }
            MongoError::WrongRole { .. } => {
                "check the members' `uri` in the cluster file (`pitr cluster discover --uri mongodb://MONGOS` writes \
                 them): the config server's replica set goes in [config], each shard's in its [[shard]]"
                    .into()
            }
            MongoError::DiscoveryUnauthorized { .. } => {
                "`pitr cluster discover` reads `config.shards` and runs `serverStatus` through the mongos: grant the \
                 user the `clusterMonitor` role (src/mongo/db/auth/builtin_roles.cpp: serverStatus, and find on the \
                 config database), or write cluster.toml by hand (docs/sharded.md)"
                    .into()
            }
            MongoError::Discovery { .. } => {
                "pitr reads `config.shards` and `serverStatus.sharding` through the mongos; the user needs the \
                 `clusterMonitor` role (src/mongo/db/auth/builtin_roles.cpp: serverStatus, and find on the config database)"
                    .into()
            }
            MongoError::NoOplog { .. } => {
                "point-in-time recovery needs an oplog: connect to a member of the replica set instead; a standalone \
                 only has an oplog once it runs as a (one-member) replica set, and then only from that moment on"
                    .into()
            }
            MongoError::Command { .. } | MongoError::Read { .. } => return None,
            MongoError::NotAnEntry { .. } => "the server returned something that is not an oplog entry; is this really `local.oplog.rs`?".into(),
            MongoError::SinceRolledOff { oldest, .. } => format!(
                "whatever was written between the two is no longer in the capped oplog; use a backup taken after \
                 {oldest} and start there (`--since {oldest}`), or pass `--allow-gap` to continue with what is left"
            ),
            MongoError::PositionLost { .. } => {
                "the oplog is too small for how long the read takes: read from a less busy member, or grow the oplog \
                 (`replSetResizeOplog`)"
                    .into()
            }
            MongoError::EndNotReached { .. } => {
                "nothing was called complete; run the command again with --resume once the members have caught up \
                 (`pitr status` shows their optimes), read from the primary (`readPreference=primary` in the URI), \
                 or give --until"
                    .into()
            }
            MongoError::RetriesExhausted { .. } => {
                "check the network and the server's health, then run the command again".into()
            }
        })
    }
}
