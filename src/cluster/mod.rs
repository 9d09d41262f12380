//! A sharded cluster as members: the config server's replica set and each shard's,
//! each with its own backup and oplog (issue 19).
//!
//! Phase A: the cluster file ([`file`]), the members checked against the config
//! server's `config.shards` ([`topology`]), and one logical incident per cluster
//! operation from every member's findings ([`incidents`], for `find-drop --cluster`).
//! Planned: the restore plan at one cluster time (coverage, transactions decided by
//! `commitTimestamp`, no cut inside a DDL), chunk ownership at the limit, and merging
//! the members' states into one logical dump (shared/reference/sharded-pitr.md).

pub mod error;
pub mod file;
pub mod incidents;
pub mod topology;

pub use error::ClusterError;
pub use file::{ClusterFile, Member, Role};
pub use incidents::{merge, ClusterFinding, MemberPart, MemberScan};
