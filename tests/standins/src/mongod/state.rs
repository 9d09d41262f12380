//! Everything the stand-in mongod knows while it runs: the data, open cursors, the
//! oplog clock, the mode it plays (standalone, replica-set primary, mongos, auth
//! required) and the fault knobs that act on requests.

use super::log::Logger;
use super::store::{Collection, Store};
use super::version::ServerVersion;
use crate::faults::Faults;
use bson::{doc, Bson, Document, Timestamp};
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

/// What kind of server the stand-in pretends to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Standalone,
    /// An initiated single-member replica set, already primary.
    Replset,
    /// A router: `hello.msg == "isdbgrid"`, no replication commands.
    Mongos,
    /// Authentication required; every login fails.
    Auth,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Standalone => "standalone",
            Mode::Replset => "replset",
            Mode::Mongos => "mongos",
            Mode::Auth => "auth",
        }
    }
}

/// A server error reply.
#[derive(Debug, Clone)]
pub struct CmdError {
    pub code: i32,
    pub name: &'static str,
    pub msg: String,
}

impl CmdError {
    pub fn new(code: i32, name: &'static str, msg: impl Into<String>) -> Self {
        CmdError {
            code,
            name,
            msg: msg.into(),
        }
    }
    pub fn bad_value(msg: impl Into<String>) -> Self {
        Self::new(2, "BadValue", msg)
    }
    pub fn ns_not_found(msg: impl Into<String>) -> Self {
        Self::new(26, "NamespaceNotFound", msg)
    }
    pub fn type_mismatch(msg: impl Into<String>) -> Self {
        Self::new(14, "TypeMismatch", msg)
    }
    pub fn to_doc(&self) -> Document {
        doc! {"ok": 0.0, "errmsg": self.msg.clone(), "code": self.code, "codeName": self.name}
    }
}

impl From<crate::update::UpdateError> for CmdError {
    fn from(e: crate::update::UpdateError) -> Self {
        CmdError::new(e.code, e.code_name, e.msg)
    }
}

pub type CmdResult<T> = Result<T, CmdError>;

/// An open cursor.
#[derive(Debug)]
pub struct Cursor {
    pub db: String,
    pub coll: String,
    pub kind: CursorKind,
    /// The `ts` of the last oplog entry handed out (for the rollover fault).
    pub last_ts: Option<Timestamp>,
}

#[derive(Debug)]
pub enum CursorKind {
    /// Results computed up front, handed out batch by batch; as BSON bytes (a
    /// whole collection's scan waits here: parsed, it would cost several times more).
    Buffered(VecDeque<Vec<u8>>),
    /// A tailable cursor on a capped collection: rescans after `last_rid`.
    Tailable {
        filter: Document,
        last_rid: u64,
        await_data: bool,
    },
}

pub struct State {
    pub store: Store,
    pub mode: Mode,
    pub set_name: String,
    /// `host:port` this server calls itself.
    pub me: String,
    pub cursors: HashMap<i64, Cursor>,
    next_cursor: i64,
    pub last_ts: Timestamp,
    pub term: i64,
    pub getmores: u64,
    pub rollover_fired: bool,
    pub drop_fired: bool,
    /// Snapshot reads so far (`fail-snapshot-reads`).
    pub snapshot_reads_seen: u64,
    pub faults: Faults,
    /// `--setParameter` values and their defaults, for `getParameter`.
    pub params: Document,
    pub argv: Vec<String>,
    pub parsed: Document,
    pub started: Instant,
    pub next_conn_id: i64,
    pub logger: Arc<Logger>,
    /// Log every command and its reply (`-v` or `--slowms -1`), as a real server
    /// logs operations slower than `slowms` ("Slow query", id 51803).
    pub log_commands: bool,
    /// The release this server plays (`PITR_STANDIN_VERSION`).
    pub version: ServerVersion,
    /// `PITR_STANDIN_OPLOG_WRITER`: an oplog that keeps being written.
    pub writer: Option<super::oplog_writer::Writer>,
    /// `PITR_STANDIN_OPLOG_MAX_ENTRIES`: old entries fall off beyond this many.
    pub oplog_max_entries: Option<usize>,
    /// `PITR_STANDIN_MEMBERS`: the replica set's members and who is primary.
    pub members: Option<super::members::Members>,
    pub rollback_fired: bool,
    /// What snapshot reads (`readConcern: {level: "snapshot", atClusterTime}`) are
    /// answered from: see [`super::snapshot`].
    pub history: super::snapshot::History,
    /// Writes apply without being logged (the history being rebuilt).
    pub replaying: bool,
    /// Open cursors of snapshot reads, and the point they read at (each `getMore`
    /// reply carries it too).
    pub snapshot_cursors: HashMap<i64, Timestamp>,
    /// Data files (see [`super::persist`]): the journal the oplog is appended to.
    pub persist: Option<super::persist::Persist>,
    /// The last checkpoint taken or found, and whether it is stable.
    pub last_checkpoint: Option<(Timestamp, bool)>,
    /// Started with `recoverFromOplogAsStandalone`: user writes refused.
    pub read_only: bool,
    /// `PITR_STANDIN_CLUSTER`: the sharded cluster a mongos routes to (router.rs).
    pub cluster: Option<super::router::Cluster>,
}

impl State {
    pub fn new(
        mode: Mode,
        set_name: String,
        me: String,
        faults: Faults,
        logger: Arc<Logger>,
        version: ServerVersion,
    ) -> Self {
        let mut st = State {
            store: Store::default(),
            mode,
            set_name,
            me,
            cursors: HashMap::new(),
            next_cursor: 0x5eed_0000_0000 + (std::process::id() as i64) * 1000,
            last_ts: Timestamp {
                time: 0,
                increment: 0,
            },
            term: 1,
            getmores: 0,
            rollover_fired: false,
            drop_fired: false,
            snapshot_reads_seen: 0,
            faults,
            params: doc! {
                "ttlMonitorEnabled": true,
                "featureCompatibilityVersion": {"version": version.fcv()},
                // What mongorestore asks before restoring users (mongo-tools
                // common/auth/auth_info.go GetAuthVersion): 5 = SCRAM, every
                // release since 3.0.
                "authSchemaVersion": 5,
                // How far back snapshot reads reach (5.0+; default 300 s:
                // `src/mongo/db/storage/storage_parameters.idl`,
                // `minSnapshotHistoryWindowInSeconds`). Read by `snapshot.rs`.
                "minSnapshotHistoryWindowInSeconds": 300,
            },
            argv: Vec::new(),
            parsed: Document::new(),
            started: Instant::now(),
            next_conn_id: 1,
            logger,
            log_commands: false,
            version,
            writer: None,
            oplog_max_entries: None,
            members: None,
            rollback_fired: false,
            history: super::snapshot::History::default(),
            replaying: false,
            snapshot_cursors: HashMap::new(),
            persist: None,
            last_checkpoint: None,
            read_only: false,
            cluster: None,
        };
        // What a fresh server has.
        let mut sysver = Collection::new(Document::new());
        let _ =
            sysver.insert(doc! {"_id": "featureCompatibilityVersion", "version": version.fcv()});
        st.store.put("admin", "system.version", sysver);
        st.store.put(
            "config",
            "system.sessions",
            Collection::new(Document::new()),
        );
        let mut startup = Collection::new(Document::new());
        let _ = startup.insert(doc! {
            "_id": format!("standin-{}", std::process::id()),
            "hostname": "localhost",
            "startTime": bson::DateTime::now(),
            "pid": std::process::id() as i64,
            "buildinfo": {"version": version.to_string()},
        });
        st.store.put("local", "startup_log", startup);
        if mode == Mode::Replset {
            st.ensure_oplog();
            let mut rs = Collection::new(Document::new());
            let _ = rs.insert(doc! {"_id": st.set_name.clone(), "version": 1, "members": [{"_id": 0, "host": st.me.clone()}]});
            st.store.put("local", "system.replset", rs);
        }
        st
    }

    pub fn ensure_oplog(&mut self) {
        if !self.store.exists("local", "oplog.rs") {
            self.store.put(
                "local",
                "oplog.rs",
                Collection::without_id_index(
                    doc! {"capped": true, "size": 1_073_741_824i64, "autoIndexId": false},
                )
                .stored_as_bytes(),
            );
        }
    }

    pub fn new_cursor_id(&mut self) -> i64 {
        self.next_cursor += 1;
        self.next_cursor
    }

    /// Load `PITR_STANDIN_OPLOG` entries into `local.oplog.rs`, in file order.
    pub fn seed_oplog(&mut self, entries: Vec<Document>) {
        self.ensure_oplog();
        let mut max = self.last_ts;
        let oplog = self.store.get_mut("local", "oplog.rs").expect("created");
        for e in entries {
            if let Some(Bson::Timestamp(ts)) = e.get("ts") {
                if (ts.time, ts.increment) > (max.time, max.increment) {
                    max = *ts;
                }
            }
            let _ = oplog.insert(e);
        }
        self.last_ts = max;
    }

    /// The next oplog time: now, or one tick after the newest entry.
    pub fn next_ts(&mut self) -> Timestamp {
        let now = (crate::logline::now_millis() / 1000) as u32;
        let ts = if now > self.last_ts.time {
            Timestamp {
                time: now,
                increment: 1,
            }
        } else {
            Timestamp {
                time: self.last_ts.time,
                increment: self.last_ts.increment + 1,
            }
        };
        self.last_ts = ts;
        ts
    }

    /// The newest optime (for `hello.lastWrite` and `replSetGetStatus`).
    pub fn last_optime(&self) -> Timestamp {
        self.last_ts
    }

    /// In replica-set mode, record a write in `local.oplog.rs` like a primary would.
    pub fn log_op(
        &mut self,
        op: &str,
        ns: &str,
        ui: Option<bson::Uuid>,
        o: Document,
        o2: Option<Document>,
    ) {
        if self.mode != Mode::Replset || ns.starts_with("local.") || self.replaying {
            return;
        }
        let ts = self.next_ts();
        let mut e = doc! {"op": op, "ns": ns};
        if let Some(u) = ui {
            e.insert("ui", bson::Binary::from_uuid(u));
        }
        e.insert("o", o);
        if let Some(o2) = o2 {
            e.insert("o2", o2);
        }
        e.insert("ts", ts);
        e.insert("t", self.term);
        e.insert("v", 2i64);
        e.insert("wall", bson::DateTime::now());
        self.ensure_oplog();
        self.history.record(&e);
        if let Some(p) = &mut self.persist {
            p.journal(&e);
        }
        let _ = self
            .store
            .get_mut("local", "oplog.rs")
            .expect("created")
            .insert(e);
    }
}
