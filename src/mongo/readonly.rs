//! The only door to the server, and it opens one way: reads.
//!
//! [`ReadOnlyClient`] owns the driver's `Client` and never hands it (or a
//! `Database`/`Collection`) out. What it can do is the whole list of what pitr ever
//! asks a source server:
//!
//! - `find` on `local.oplog.rs` (a range scan, the oldest/newest entry, the first
//!   entry from a position, or a tailable awaitData cursor that follows new entries,
//!   for `pitr archive`);
//! - the read-only commands of [`ReadCommand`]: `hello` (`isMaster` on servers
//!   without it), `ping`, `buildInfo`,
//!   `replSetGetStatus`, `collStats` of `local.oplog.rs`, `getParameter
//!   minSnapshotHistoryWindowInSeconds`, `listDatabases`;
//! - for `pitr cluster discover`, through a mongos: `serverStatus` (its `sharding`
//!   section names the config server's replica set) and `find` on `config.shards`;
//! - for `pitr rehearse`: the catalog as it is now (`listCollections`,
//!   `listIndexes`), and user collections read as of a cluster time through a
//!   [`SnapshotReader`] (`find` and `aggregate` with `readConcern: {level:
//!   "snapshot", atClusterTime}`, MongoDB 5.0+): a document count, the documents in
//!   `_id` order, a random sample of `_id`s, the documents with given `_id`s. The
//!   aggregation pipelines are fixed here (`$count`, `$sample` + `$project`): none
//!   can write (`$out`, `$merge`).
//!
//! There is no write helper here, nor a way to send an arbitrary command: anything
//! else needs a change to this file, where review will see it.

use std::time::Duration;

use bson::{doc, Bson, Document, RawDocumentBuf, Timestamp};
use futures_util::StreamExt;
use mongodb::options::{ClientOptions, CursorType, SelectionCriteria};
use mongodb::raw_batch_cursor::{RawBatch, RawBatchCursor, SessionRawBatchCursor};
use mongodb::{Client, ClientSession, Cursor};

use super::connect::Target;
use super::error::{DriverError, MongoError};

/// The read-only commands pitr runs. `find` on the oplog has its own methods.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadCommand {
    /// Topology: replica set name, hosts, `isdbgrid` for mongos. Needs no privilege.
    Hello,
    /// The same, under its legacy name: servers before 4.4.2 (and 4.4.0/4.4.1) have
    /// no `hello` command (SERVER-49987, added in 4.4.2 and 5.0).
    IsMaster,
    /// Liveness. Needs no privilege.
    Ping,
    /// Server version. Needs no privilege.
    BuildInfo,
    /// Members and their states. Needs `replSetGetStatus` (clusterMonitor); optional.
    ReplSetGetStatus,
    /// Size and configured maximum of `local.oplog.rs`. Needs `collStats`; optional.
    OplogCollStats,
    /// How far back snapshot reads reach (`getParameter
    /// minSnapshotHistoryWindowInSeconds`, 5.0+). Needs `getParameter`; optional.
    SnapshotWindow,
    /// The databases, by name (`listDatabases {nameOnly: true}`). Needs
    /// `listDatabases`, or lists only the databases the user may read.
    ListDatabases,
    /// The server's status; on a mongos its `sharding.configsvrConnectionString`
    /// names the config server's replica set (server `src/mongo/s/s_sharding_server_status.cpp`).
    /// Needs `serverStatus` (clusterMonitor).
    ServerStatus,
}

impl ReadCommand {
    fn database_and_body(self) -> (&'static str, Document) {
        match self {
            ReadCommand::Hello => ("admin", doc! {"hello": 1}),
            ReadCommand::IsMaster => ("admin", doc! {"isMaster": 1}),
            ReadCommand::Ping => ("admin", doc! {"ping": 1}),
            ReadCommand::BuildInfo => ("admin", doc! {"buildInfo": 1}),
            ReadCommand::ReplSetGetStatus => ("admin", doc! {"replSetGetStatus": 1}),
            ReadCommand::OplogCollStats => ("local", doc! {"collStats": "oplog.rs"}),
            ReadCommand::SnapshotWindow => (
                "admin",
                doc! {"getParameter": 1, "minSnapshotHistoryWindowInSeconds": 1},
            ),
            ReadCommand::ListDatabases => (
                "admin",
                doc! {"listDatabases": 1, "nameOnly": true, "authorizedDatabases": true},
            ),
            ReadCommand::ServerStatus => ("admin", doc! {"serverStatus": 1}),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ReadCommand::Hello => "hello",
            ReadCommand::IsMaster => "isMaster",
            ReadCommand::Ping => "ping",
            ReadCommand::BuildInfo => "buildInfo",
            ReadCommand::ReplSetGetStatus => "replSetGetStatus",
            ReadCommand::OplogCollStats => "collStats",
            ReadCommand::SnapshotWindow => "getParameter",
            ReadCommand::ListDatabases => "listDatabases",
            ReadCommand::ServerStatus => "serverStatus",
        }
    }
}

/// Which end of the oplog.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Edge {
    Oldest,
    Newest,
}

/// A connection that can only read (see the module comment).
pub struct ReadOnlyClient {
    client: Client,
    criteria: SelectionCriteria,
    target: Target,
}

impl ReadOnlyClient {
    /// Wraps driver options (see [`super::connect::client_options`]); nothing is
    /// contacted until the first command.
    pub fn new(opts: ClientOptions, target: Target) -> Result<ReadOnlyClient, MongoError> {
        let criteria =
            opts.selection_criteria
                .clone()
                .unwrap_or(SelectionCriteria::ReadPreference(
                    mongodb::options::ReadPreference::SecondaryPreferred { options: None },
                ));
        let client = Client::with_options(opts).map_err(|e| MongoError::InvalidUri {
            target: target.display.clone(),
            source: target.driver_error(&e),
        })?;
        Ok(ReadOnlyClient {
            client,
            criteria,
            target,
        })
    }

    /// How messages name this server (redacted).
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// Runs one of the read-only commands, routed by the read preference.
    pub async fn command(&self, c: ReadCommand) -> Result<Document, DriverError> {
        let (db, body) = c.database_and_body();
        self.client
            .database(db)
            .run_command(body)
            .selection_criteria(self.criteria.clone())
            .await
            .map_err(|e| self.target.driver_error(&e))
    }

    /// `find` on `local.oplog.rs` with `filter`, in natural (= ts) order. Never a
    /// sort on `ts`: the oplog has no index on it, and natural order is ts order.
    pub async fn oplog_cursor(
        &self,
        filter: Document,
        batch_size: Option<u32>,
    ) -> Result<Cursor<RawDocumentBuf>, DriverError> {
        let coll = self
            .client
            .database("local")
            .collection::<RawDocumentBuf>("oplog.rs");
        let mut find = coll
            .find(filter)
            .hint(mongodb::options::Hint::Keys(doc! {"$natural": 1}));
        if let Some(n) = batch_size {
            find = find.batch_size(n);
        }
        find.await.map_err(|e| self.target.driver_error(&e))
    }

    /// A tailable, awaitData `find` on `local.oplog.rs` with `filter`, in natural
    /// order, delivered batch by batch as the server sends them: each `getMore`
    /// waits up to `await_time` for new entries and may come back empty (the reader
    /// is then caught up). The cursor stays open at the end of the oplog, so entries
    /// written later arrive on it.
    pub async fn oplog_tail(
        &self,
        filter: Document,
        await_time: Duration,
        batch_size: Option<u32>,
    ) -> Result<RawBatchCursor, DriverError> {
        let coll = self
            .client
            .database("local")
            .collection::<RawDocumentBuf>("oplog.rs");
        let mut find = coll
            .find(filter)
            .cursor_type(CursorType::TailableAwait)
            .max_await_time(await_time)
            .hint(mongodb::options::Hint::Keys(doc! {"$natural": 1}));
        if let Some(n) = batch_size {
            find = find.batch_size(n);
        }
        find.batch().await.map_err(|e| self.target.driver_error(&e))
    }

    /// The first oplog entry (natural order) matching `filter`, or `None`.
    pub async fn oplog_find_one(
        &self,
        filter: Document,
    ) -> Result<Option<RawDocumentBuf>, DriverError> {
        self.client
            .database("local")
            .collection::<RawDocumentBuf>("oplog.rs")
            .find_one(filter)
            .hint(mongodb::options::Hint::Keys(doc! {"$natural": 1}))
            .await
            .map_err(|e| self.target.driver_error(&e))
    }

    /// The oldest or newest oplog entry, or `None` when there is no oplog.
    pub async fn oplog_edge(&self, edge: Edge) -> Result<Option<RawDocumentBuf>, DriverError> {
        let dir = match edge {
            Edge::Oldest => 1,
            Edge::Newest => -1,
        };
        self.client
            .database("local")
            .collection::<RawDocumentBuf>("oplog.rs")
            .find_one(doc! {})
            .sort(doc! {"$natural": dir})
            .await
            .map_err(|e| self.target.driver_error(&e))
    }

    /// `hello`, or `isMaster` on a server that does not know `hello` (code 59
    /// CommandNotFound: 4.4.0, 4.4.1 and older). The replies carry the same fields
    /// pitr reads (`setName`, `hosts`, `primary`, `me`, `msg`).
    pub async fn hello(&self) -> Result<Document, DriverError> {
        match self.command(ReadCommand::Hello).await {
            Err(e) if e.code == Some(59) => self.command(ReadCommand::IsMaster).await,
            other => other,
        }
    }

    /// The newest oplog entry at or before `at` (a reverse scan from the newest end),
    /// or `None` when there is none.
    pub async fn oplog_newest_at_or_before(
        &self,
        at: Timestamp,
    ) -> Result<Option<RawDocumentBuf>, DriverError> {
        self.client
            .database("local")
            .collection::<RawDocumentBuf>("oplog.rs")
            .find_one(doc! {"ts": {"$lte": at}})
            .sort(doc! {"$natural": -1})
            .selection_criteria(self.criteria.clone())
            .await
            .map_err(|e| self.target.driver_error(&e))
    }

    /// Every document of `config.shards` (through a mongos: the config server's
    /// list of shards, `{_id, host: "set/h1:p1,h2:p2", ...}`), in `_id` order.
    pub async fn config_shards(&self) -> Result<Vec<Document>, DriverError> {
        self.all_of(
            "config",
            doc! {"find": "shards", "filter": {}, "sort": {"_id": 1}},
        )
        .await
    }

    /// Runs a cursor command to its end and returns every document.
    async fn all_of(&self, db: &str, command: Document) -> Result<Vec<Document>, DriverError> {
        let mut cursor: Cursor<Document> = self
            .client
            .database(db)
            .run_cursor_command(command)
            .selection_criteria(self.criteria.clone())
            .await
            .map_err(|e| self.target.driver_error(&e))?;
        let mut out = Vec::new();
        while cursor
            .advance()
            .await
            .map_err(|e| self.target.driver_error(&e))?
        {
            out.push(
                cursor
                    .deserialize_current()
                    .map_err(|e| self.target.driver_error(&e))?,
            );
        }
        Ok(out)
    }

    /// `listCollections` of `db` as it is now (a catalog cannot be read as of a
    /// cluster time: `jstests/noPassthrough/readConcern_snapshot.js`, "readConcern
    /// 'snapshot' is not supported by non-CRUD commands").
    pub async fn list_collections(&self, db: &str) -> Result<Vec<Document>, DriverError> {
        self.all_of(db, doc! {"listCollections": 1}).await
    }

    /// `listIndexes` of `db.coll` as it is now; empty when the collection does not
    /// exist (26 NamespaceNotFound).
    pub async fn list_indexes(&self, db: &str, coll: &str) -> Result<Vec<Document>, DriverError> {
        match self.all_of(db, doc! {"listIndexes": coll}).await {
            Err(e) if e.code == Some(26) => Ok(Vec::new()),
            other => other,
        }
    }

    /// A reader of user collections as of cluster time `at` (a snapshot session:
    /// every read carries `readConcern: {level: "snapshot", atClusterTime: at}`). The
    /// driver refuses it before sending anything to a server older than 5.0 (wire
    /// version 13: "Snapshot reads require MongoDB 5.0 or later").
    pub async fn snapshot_reader(&self, at: Timestamp) -> Result<SnapshotReader, DriverError> {
        let session = self
            .client
            .start_session()
            .snapshot(true)
            .snapshot_time(at)
            .await
            .map_err(|e| self.target.driver_error(&e))?;
        Ok(SnapshotReader {
            client: self.client.clone(),
            criteria: self.criteria.clone(),
            target: self.target.clone(),
            session,
        })
    }

    /// Closes the connections (best effort). Every path that ends with the client
    /// should close it rather than drop it: a dropped client ends its sessions from a
    /// task the driver spawns, and if the runtime shuts down while that task runs, the
    /// driver panics (see `verify::connect::close`).
    pub async fn close(self) {
        self.client.shutdown().await;
    }
}

/// Reads user collections as of one cluster time (see
/// [`ReadOnlyClient::snapshot_reader`]); only `find` and `aggregate` with fixed,
/// read-only pipelines.
pub struct SnapshotReader {
    client: Client,
    criteria: SelectionCriteria,
    target: Target,
    session: ClientSession,
}

/// Documents of one collection in `_id` order, batch by batch (see
/// [`SnapshotReader::scan`]).
pub struct SnapshotScan {
    cursor: SessionRawBatchCursor,
}

impl SnapshotReader {
    fn coll(&self, db: &str, coll: &str) -> mongodb::Collection<RawDocumentBuf> {
        self.client.database(db).collection::<RawDocumentBuf>(coll)
    }

    /// How many documents `db.coll` held (`aggregate [{$count: "n"}]`; 0 when it
    /// held none or did not exist).
    pub async fn count(&mut self, db: &str, coll: &str) -> Result<u64, DriverError> {
        let c = self.coll(db, coll);
        let mut cursor = c
            .aggregate([doc! {"$count": "n"}])
            .selection_criteria(self.criteria.clone())
            .session(&mut self.session)
            .await
            .map_err(|e| self.target.driver_error(&e))?;
        let mut n = 0u64;
        while let Some(d) = cursor.next(&mut self.session).await {
            let d = d.map_err(|e| self.target.driver_error(&e))?;
            n = match d.get("n") {
                Some(Bson::Int32(v)) => *v as u64,
                Some(Bson::Int64(v)) => *v as u64,
                Some(Bson::Double(v)) => *v as u64,
                _ => n,
            };
        }
        Ok(n)
    }

    /// The documents of `db.coll` with `_id` greater than `after` (all, without), in
    /// `_id` order, `batch_size` per batch.
    pub async fn scan(
        &mut self,
        db: &str,
        coll: &str,
        after: Option<&Bson>,
        batch_size: u32,
    ) -> Result<SnapshotScan, DriverError> {
        let filter = match after {
            Some(id) => doc! {"_id": {"$gt": id.clone()}},
            None => doc! {},
        };
        let cursor = self
            .coll(db, coll)
            .find(filter)
            .sort(doc! {"_id": 1})
            .batch_size(batch_size)
            .selection_criteria(self.criteria.clone())
            .session(&mut self.session)
            .batch()
            .await
            .map_err(|e| self.target.driver_error(&e))?;
        Ok(SnapshotScan { cursor })
    }

    /// The next batch of `scan` (`None` at its end).
    pub async fn next_batch(
        &mut self,
        scan: &mut SnapshotScan,
    ) -> Option<Result<RawBatch, DriverError>> {
        let target = &self.target;
        scan.cursor
            .stream(&mut self.session)
            .next()
            .await
            .map(|r| r.map_err(|e| target.driver_error(&e)))
    }

    /// Up to `size` `_id`s of `db.coll` drawn at random (`$sample`, then `$project`).
    pub async fn sample_ids(
        &mut self,
        db: &str,
        coll: &str,
        size: u64,
    ) -> Result<Vec<Bson>, DriverError> {
        let c = self.coll(db, coll);
        let mut cursor = c
            .aggregate([
                doc! {"$sample": {"size": size as i64}},
                doc! {"$project": {"_id": 1}},
            ])
            .selection_criteria(self.criteria.clone())
            .session(&mut self.session)
            .await
            .map_err(|e| self.target.driver_error(&e))?;
        let mut out = Vec::new();
        while let Some(d) = cursor.next(&mut self.session).await {
            let d = d.map_err(|e| self.target.driver_error(&e))?;
            if let Some(id) = d.get("_id") {
                out.push(id.clone());
            }
        }
        Ok(out)
    }

    /// The documents of `db.coll` whose `_id` is one of `ids`, as raw BSON, in `_id`
    /// order.
    pub async fn by_ids(
        &mut self,
        db: &str,
        coll: &str,
        ids: &[Bson],
    ) -> Result<Vec<RawDocumentBuf>, DriverError> {
        let mut cursor = self
            .coll(db, coll)
            .find(doc! {"_id": {"$in": ids.to_vec()}})
            .sort(doc! {"_id": 1})
            .selection_criteria(self.criteria.clone())
            .session(&mut self.session)
            .await
            .map_err(|e| self.target.driver_error(&e))?;
        let mut out = Vec::new();
        while let Some(d) = cursor.next(&mut self.session).await {
            out.push(d.map_err(|e| self.target.driver_error(&e))?);
        }
        Ok(out)
    }
}
