#!/usr/bin/env bash
# Measures `pitr rehearse` on a generated chain against pitr's STAND-IN mongod
# (tests/standins: a wire-protocol stand-in, NOT MongoDB). The stand-in answers reads
# from memory in one process, so "server reads/s" is what pitr's side sustains over
# the wire protocol, not what a real server's storage engine gives.
#
#   1. start the stand-in mongod (replica set rs0, snapshot history kept for a day)
#   2. load SIZE*3/4 MiB of ~1 KiB documents (bench.orders, bench.events) through the
#      driver (examples/rehearse_bench.rs)
#   3. back it up with the REAL mongodump --oplog (../shared/tools, or
#      PITR_MONGO_TOOLS_BIN)
#   4. SIZE/4 MiB of oplog after the backup: inserts, updates rewriting a 700-byte
#      field, deletes
#   5. pitr rehearse --margin 0 (the oplog read from the server), sampled (default
#      --sample 1000), then --full
#
# Prints, per run: the rebuild's seconds (backup + oplog with the embedded engine), the
# oplog read, the compare, documents compared per second, documents read from the
# server per second and read commands per second, the total, the verdict and peak RSS.
#
# Usage: scripts/bench-rehearse.sh [SIZE_MIB]   (default 128; about 2x SIZE on disk in
#                                                 bench-data/, removed unless KEEP=1)
# The stand-in keeps everything in memory (its data, its oplog, its history for
# snapshot reads, buffered cursors); its peak RSS is printed after each step
# (`stand-in peak RSS`), and it is stopped when its RSS passes STANDIN_MAX_MIB.
# Env:   MEMORY=384MiB (pitr's --memory)  KEEP=1  PROFILE=release|dev
#        SKIP_BUILD=1 (use the binaries as built)  STANDIN_MONGOD=PATH
#        STANDIN_MAX_MIB=12288 (the stand-in is killed past this RSS: the machine is shared)
set -euo pipefail
cd "$(dirname "$0")/.."

size=${1:-128}
memory=${MEMORY:-384MiB}
profile=${PROFILE:-release}
dir=$([ "$profile" = dev ] && echo debug || echo release)

if [ "${SKIP_BUILD:-}" != 1 ]; then
  cargo build --profile "$profile" --quiet --bin pitr --example rehearse_bench
  cargo build --profile "$profile" --quiet -p pitr-standins --bin mongod
fi
PITR=target/$dir/pitr
BENCH=target/$dir/examples/rehearse_bench
# STANDIN_MONGOD: another build of the stand-in (e.g. an older one, to compare its RSS).
MONGOD=${STANDIN_MONGOD:-target/$dir/mongod}

tools=${PITR_MONGO_TOOLS_BIN:-}
if [ -z "$tools" ]; then
  tools=$(ls -d ../shared/tools/mongo-tools-* 2>/dev/null | sort -V | tail -1 || true)
fi
if [ -z "$tools" ] || [ ! -x "$tools/mongodump" ]; then
  echo "error: no real mongodump (looked in ../shared/tools/mongo-tools-*); hint: set PITR_MONGO_TOOLS_BIN" >&2
  exit 2
fi

mkdir -p bench-data
work=$(mktemp -d bench-data/rehearse.XXXXXX)
mongod_pid=
cleanup() {
  if [ -n "$mongod_pid" ]; then
    kill "$mongod_pid" 2>/dev/null || true
    # A stand-in busy inside a long command answers SIGTERM late: then SIGKILL.
    for _ in $(seq 50); do kill -0 "$mongod_pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$mongod_pid" 2>/dev/null || true
    wait "$mongod_pid" 2>/dev/null || true
  fi
  if [ "${KEEP:-}" != 1 ]; then rm -rf "$work"; else echo "kept $work" >&2; fi
}
trap cleanup EXIT

port=$((20000 + RANDOM % 20000))
mkdir -p "$work/db"
"$MONGOD" --port "$port" --bind_ip 127.0.0.1 --dbpath "$work/db" --logpath "$work/mongod.log" \
  --replSet rs0 --setParameter minSnapshotHistoryWindowInSeconds=86400 </dev/null >/dev/null 2>&1 &
mongod_pid=$!
# The stand-in's peak RSS so far (VmHWM), and a watchdog: past STANDIN_MAX_MIB it is
# killed rather than let it take the shared machine's memory.
standin_rss() {
  echo "stand-in peak RSS after $1: $(awk '/VmHWM/ {printf "%d MiB", $2 / 1024}' "/proc/$mongod_pid/status" 2>/dev/null || echo '?')"
}
max_kib=$(( ${STANDIN_MAX_MIB:-12288} * 1024 ))
( while kill -0 "$mongod_pid" 2>/dev/null; do
    rss=$(awk '/VmRSS/ {print $2}' "/proc/$mongod_pid/status" 2>/dev/null || echo 0)
    if [ "${rss:-0}" -gt "$max_kib" ]; then
      echo "stand-in RSS $((rss / 1024)) MiB passed STANDIN_MAX_MIB: killed" >&2
      kill -9 "$mongod_pid"; break
    fi
    sleep 1
  done ) &
for _ in $(seq 100); do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then break; fi
  sleep 0.1
done

echo "stand-in mongod (NOT MongoDB) on port $port; chain of about $size MiB: $((size * 3 / 4)) MiB backup, $((size / 4)) MiB oplog" >&2
load=$("$BENCH" load "$port" $((size * 3 / 4)))
echo "$load"
standin_rss load
loaded=$(echo "$load" | awk '{print $2}')
t0=$(date +%s.%N)
"$tools/mongodump" --host 127.0.0.1 --port "$port" --oplog --out "$work/backup" --quiet
echo "mongodump $(du -sb "$work/backup" | cut -f1) bytes $(echo "$(date +%s.%N) - $t0" | bc) s"
standin_rss mongodump
"$BENCH" churn "$port" $((size / 4)) "$loaded"
standin_rss churn

run() {
  local name=$1; shift
  local out=$work/$name.json
  local code=0
  /usr/bin/time -f "%M" -o "$work/$name.rss" "$PITR" rehearse --uri "mongodb://127.0.0.1:$port/" \
    --backup "$work/backup" --margin 0 --memory "$memory" --work-dir "$work" --json "$@" >"$out" || code=$?
  jq -r --arg name "$name" --arg rss "$(tail -1 "$work/$name.rss")" --arg code "$code" '
    "\($name): exit \($code) \(.result); oplog \(.oplog.entries) entries read in \(.timing.oplog_read_secs * 10 | round / 10) s; " +
    "rebuild \(.timing.rebuild_secs * 10 | round / 10) s; compare \(.timing.compare_secs * 10 | round / 10) s: " +
    "\(.documents_compared) documents compared (\(.documents_compared_per_sec | round)/s), " +
    "\(.reads.documents) read from the server (\(.reads.documents_per_sec | round)/s) in \(.reads.commands) commands " +
    "(\(if .timing.compare_secs > 0 then (.reads.commands / .timing.compare_secs | round) else 0 end)/s); " +
    "total \(.timing.total_secs * 10 | round / 10) s; peak RSS \(($rss | tonumber) / 1024 | round) MiB"' "$out"
}
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
run sample
standin_rss "the sampled rehearsal"
run full --full
standin_rss "the full rehearsal"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
