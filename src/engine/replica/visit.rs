//! Feeding the replica from [`crate::engine::walk::Walker`]'s walk: the one place
//! that decides which entries apply and when (transactions at their commit,
//! `applyOps` unpacked, what mongorestore skips).
//!
//! The walk's visitor cannot fail, so the first error is kept and every later
//! operation ignored; the driver checks [`ReplicaVisitor::take_error`] after each
//! top-level entry and stops there.

use super::super::walk::{Source, Visitor};
use super::{Phase, Replica, ReplicaError};
use crate::oplog::{Entry, Ts};

/// Applies what the walk applies; see the module documentation.
pub struct ReplicaVisitor<'a> {
    pub replica: &'a mut Replica,
    /// How the backup's own oplog applies (idempotent with documents, lenient for counts).
    pub backup_phase: Phase,
    /// How the slice after the backup's end applies.
    pub slice_phase: Phase,
    error: Option<ReplicaError>,
}

impl<'a> ReplicaVisitor<'a> {
    pub fn new(replica: &'a mut Replica, backup_phase: Phase, slice_phase: Phase) -> Self {
        ReplicaVisitor {
            replica,
            backup_phase,
            slice_phase,
            error: None,
        }
    }

    /// The first error since the last call.
    pub fn take_error(&mut self) -> Option<ReplicaError> {
        self.error.take()
    }

    /// The replica as it stands (for the lint, before each operation).
    pub fn replica(&self) -> &Replica {
        self.replica
    }
}

impl Visitor for ReplicaVisitor<'_> {
    fn applied(&mut self, op: &Entry<'_>, _at: Ts, src: Source, _in_txn: bool) {
        if self.error.is_some() {
            return;
        }
        let phase = match src {
            Source::BackupOplog => self.backup_phase,
            Source::Slice => self.slice_phase,
        };
        if let Err(e) = self.replica.apply(op, phase) {
            self.error = Some(e);
        }
    }
}
