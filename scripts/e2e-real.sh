#!/usr/bin/env bash
# Runs the end-to-end replay tests (tests/replay_e2e.rs) and the snapshot backup
# tests (tests/snapshot_recovery.rs: a real member's files copied, recovered with
# recoverFromOplogAsStandalone, replayed) against REAL MongoDB programs instead of
# pitr's stand-ins.
#
# Usage: PITR_MONGODB_BIN=/opt/mongodb/bin scripts/e2e-real.sh [extra cargo test args]
#
# PITR_MONGODB_BIN must name a directory holding `mongod`, `mongorestore` and
# `mongodump` (the MongoDB Community Server and Database Tools). The tests read it
# as PITR_E2E_BIN and pass it to `pitr replay --mongodb-bin`; each test prints
# which programs ran. Without PITR_MONGODB_BIN this script prints SKIPPED and
# exits 0, so CI can call it unconditionally.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -z "${PITR_MONGODB_BIN:-}" ]; then
  echo "SKIPPED e2e-real: PITR_MONGODB_BIN is not set (point it at a directory with mongod, mongorestore and mongodump to run the end-to-end tests against real MongoDB)"
  exit 0
fi
missing=()
for tool in mongod mongorestore mongodump; do
  [ -x "$PITR_MONGODB_BIN/$tool" ] || missing+=("$tool")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "error: PITR_MONGODB_BIN=$PITR_MONGODB_BIN lacks: ${missing[*]}" >&2
  echo "hint: install MongoDB Community Server (mongod) and the MongoDB Database Tools (mongorestore, mongodump) there" >&2
  exit 2
fi
for tool in mongod mongorestore mongodump; do
  echo "using $("$PITR_MONGODB_BIN/$tool" --version 2>&1 | head -n 1)  ($PITR_MONGODB_BIN/$tool)"
done

# The fault tests inject failures through the stand-ins' PITR_STANDIN_* knobs,
# which real programs ignore: they stay on the stand-ins (plain `cargo test`).
PITR_E2E_BIN="$PITR_MONGODB_BIN" exec cargo test --test replay_e2e --test snapshot_recovery "$@" -- --nocapture --test-threads=1
