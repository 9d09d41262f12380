//! Per-rule tests of the replica.
