#!/usr/bin/env bash
# `pitr archive --dir s3://...` against the stand-in mongod and an s3s-fs server on
# loopback (the `storage_bench serve` example, its own process): an oplog written at
# RATE entries/s (default 50,000, 150-byte entries) for SECS seconds (default 30),
# archived into the bucket in 16 MiB chunks. Prints the archiver's entries/s per 5 s
# interval and its lag (from its own log lines), its peak RSS and CPU, and checks,
# reading the bucket back (`pitr oplog stats s3://...`), that the archive holds every
# entry from its first to its last exactly once.
#
#   scripts/bench-archive-s3.sh              RATE=... SECS=... PROFILE=debug|release
#
# PROFILE=release (the default) builds pitr and the stand-in in release; PROFILE=debug
# uses the debug builds the tests use (dependencies at opt-level 1). The s3s-fs server
# is always the debug example build, as in scripts/bench-storage.sh. Numbers, not
# pass/fail: these machines are shared and noisy.
set -euo pipefail
cd "$(dirname "$0")/.."
rate=${RATE:-50000}
secs=${SECS:-30}
profile=${PROFILE:-release}

case "$profile" in
  release) flag=--release ;;
  debug) flag= ;;
  *) echo "error: PROFILE=$profile: give release or debug" >&2; exit 2 ;;
esac
cargo build $flag --quiet --bin pitr -p pitr
cargo build $flag --quiet -p pitr-standins --bins
cargo build --quiet --example storage_bench
pitr=$PWD/target/$profile/pitr
mongod=$PWD/target/$profile/mongod
bench=$PWD/target/debug/examples/storage_bench
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pitr-bench-archive-s3.XXXX")
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  exec 3>&- 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

# The server serves until its stdin (fd 3) closes.
mkfifo "$tmp/server.in"
"$bench" serve "$tmp/root" bench < "$tmp/server.in" > "$tmp/server.out" &
pids+=($!)
exec 3> "$tmp/server.in"
for _ in $(seq 100); do grep -q '^endpoint ' "$tmp/server.out" 2>/dev/null && break; sleep 0.1; done
endpoint=$(awk '/^endpoint / {print $2}' "$tmp/server.out")
[ -n "$endpoint" ] || { echo "error: the s3s-fs server did not start" >&2; exit 2; }
export AWS_ACCESS_KEY_ID=AKIAPITRBENCH AWS_SECRET_ACCESS_KEY=pitr-bench-secret \
  AWS_REGION=us-east-1 AWS_ENDPOINT_URL="$endpoint" AWS_ALLOW_HTTP=true

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mkdir -p "$tmp/db"
env PITR_STANDIN_OPLOG_WRITER="rate=$rate,epoch=$(date +%s),pad=100" \
  PITR_STANDIN_OPLOG_MAX_ENTRIES=$((rate * 10)) \
  "$mongod" --port "$port" --bind_ip 127.0.0.1 --dbpath "$tmp/db" \
  --logpath "$tmp/mongod.log" --replSet rs0 &
pids+=($!)
for _ in $(seq 100); do (echo > "/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done

echo "== $profile pitr archive --dir s3://bench/oplog ($endpoint, s3s-fs 0.14.1): $rate entries/s for $secs s"
"$pitr" archive --uri "mongodb://127.0.0.1:$port/" --dir s3://bench/oplog --chunk-size 16MiB \
  --log-every 5s 2> "$tmp/follow.err" &
apid=$!
sleep "$secs"
hwm=$(awk '/VmHWM/ {print $2}' "/proc/$apid/status")
cpu=$(ps -o times= -p "$apid")
kill -TERM "$apid"; wait "$apid" || true
grep -v '^\s*$' "$tmp/follow.err" | tail -n 20
python3 - "$tmp/follow.err" <<'PY'
import re, sys
lines = [l for l in open(sys.argv[1]) if "archive: " in l]
lags = [float(m.group(1)) for l in lines for m in [re.search(r"max lag ([0-9.]+) s", l)] if m]
rates = [float(m.group(1)) for l in lines for m in [re.search(r" ([0-9]+) entries/s", l)] if m]
print(f"entries/s per 5 s interval: {', '.join(f'{r:.0f}' for r in rates) or 'none logged'}")
if lags:
    steady = lags[1:] or lags
    print(f"max lag after the first interval: {max(steady):.2f} s (first interval: {lags[0]:.2f} s)")
PY
echo "pitr archive: peak RSS $((hwm / 1024)) MB, CPU time ${cpu// /} s over ${secs} s"
"$pitr" oplog stats --json s3://bench/oplog > "$tmp/stats.json"
python3 - "$tmp/stats.json" "$rate" "$secs" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
rate, secs = int(sys.argv[2]), int(sys.argv[3])
first, last = s["first_ts"], s["last_ts"]
def k(ts):
    t, i = ts.split(":")
    return (int(t) - int(first.split(":")[0])) * rate + int(i) - 1
want = k(last) - k(first) + 1
ok = s["entries"] == want and s["out_of_order"] == 0
verdict = "every entry once" if ok else "MISMATCH, expected %d" % want
print("bucket archive: %d entries, %s to %s: %s; %.0f entries/s over the run"
      % (s["entries"], first, last, verdict, s["entries"] / secs))
PY
