//! A sharded cluster as members: the config server's replica set and each shard's,
//! each with its own backup and oplog (issue 19).
//!
//! Phase A: the cluster file ([`file`]), the members checked against the config
//! server's `config.shards` ([`topology`]), and one logical incident per cluster
//! operation from every member's findings ([`incidents`], for `find-drop --cluster`).
//! Phase B: one limit for every member and the checks that make it consistent
//! ([`limit`]: coverage, no cut inside a cluster DDL, every shard present), which
//! shard owns a document at the limit ([`owner`]), and each member's own plan and
//! state at the limit merged into one logical dump ([`restore`]).
//! Cross-shard prepared transactions are decided by their `commitTimestamp` on every
//! participant at once ([`txns`], rule R2 of shared/reference/sharded-pitr.md).

pub mod coordinator;
pub mod error;
pub mod file;
pub mod hasher;
pub mod incidents;
pub mod limit;
pub mod mongod_slice;
pub mod owner;
pub mod restore;
pub mod topology;
pub mod txns;

pub use error::ClusterError;
pub use file::{ClusterFile, Member, Role};
pub use incidents::{merge, ClusterFinding, MemberPart, MemberScan};
