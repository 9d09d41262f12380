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
//!   `replSetGetStatus`, `collStats` of `local.oplog.rs`.
//!
//! There is no write helper here, nor a way to send an arbitrary command: anything
//! else needs a change to this file, where review will see it.

use std::time::Duration;

use bson::{doc, Document, RawDocumentBuf};
use mongodb::options::{ClientOptions, CursorType, SelectionCriteria};
use mongodb::raw_batch_cursor::RawBatchCursor;
use mongodb::{Client, Cursor};

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

    /// Closes the connections (best effort).
    pub async fn close(self) {
        self.client.shutdown().await;
    }
}
