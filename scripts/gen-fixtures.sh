#!/usr/bin/env bash
# Regenerates the committed fixture fixtures/incident/ (backup/, oplog.bson,
# truth.json) with the project's own generator (`pitr-gen`, the test-only crate `tests/fixturegen`).
#
# tests/gen_fixtures.rs regenerates it with the SEED and START below and fails if
# the committed files differ: change the generator, run this script, commit the
# result. Never edit the fixture by hand.
set -euo pipefail
cd "$(dirname "$0")/.."

SEED=7
START=2026-11-21T01:00:00Z

cargo run --quiet -p pitr-fixturegen -- --scenario incident --seed "$SEED" --start "$START" --out fixtures/incident
