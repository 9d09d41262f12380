#!/usr/bin/env bash
# Regenerates the committed fixtures with the project's own generator (`pitr-gen`,
# the test-only crate `tests/fixturegen`): fixtures/incident/ (backup/, oplog.bson,
# truth.json) and fixtures/cluster/ (a sharded cluster: cluster.toml, truth.json, and
# per member backup/ and oplog.bson).
#
# tests/gen_fixtures.rs and tests/gen_cluster.rs regenerate them with the SEED and
# START below and fail if the committed files differ: change the generator, run this script, commit the
# result. Never edit the fixture by hand.
set -euo pipefail
cd "$(dirname "$0")/.."

SEED=7
START=2026-11-21T01:00:00Z

cargo run --quiet -p pitr-fixturegen -- --scenario incident --seed "$SEED" --start "$START" --out fixtures/incident
cargo run --quiet -p pitr-fixturegen -- --scenario cluster --seed "$SEED" --start "$START" --out fixtures/cluster
