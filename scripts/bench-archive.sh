#!/usr/bin/env bash
# Measures `pitr archive` against the stand-in mongod (release builds):
#  1. follow: an oplog written at RATE entries/s (default 50,000, 150-byte entries)
#     for SECS seconds (default 30); reports entries/s, the lag behind the newest
#     entry (from the archiver's own log lines: the age of the newest entry archived
#     by its wall clock, at every batch), pitr's peak RSS and CPU, and checks that
#     the archive holds every entry from first to last exactly once;
#  2. scan: a generated ~128 MiB oplog (pitr-gen --scenario bench) archived with
#     --once into 16 MiB chunks, then `pitr find-drop --json` on the archive, on the
#     same chunk bytes concatenated into one file, and on the plain file, pinned to
#     one core, best of RUNS (default 3); the three must find the same.
# Everything lives in a temp dir that is deleted at the end. Numbers, not
# pass/fail: these machines are noisy.
#
# Usage: scripts/bench-archive.sh            RATE=... SECS=... RUNS=... to change
set -euo pipefail
cd "$(dirname "$0")/.."
rate=${RATE:-50000}
secs=${SECS:-30}
runs=${RUNS:-3}

cargo build --release --quiet --bin pitr -p pitr
cargo build --release --quiet -p pitr-standins --bins
cargo build --release --quiet -p pitr-fixturegen --bin pitr-gen
pitr=$PWD/target/release/pitr
mongod=$PWD/target/release/mongod
tmp=$(mktemp -d /tmp/pitr-bench-archive.XXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT

start_mongod() {  # PORT, then env assignments
  local port=$1; shift
  mkdir -p "$tmp/db$port"
  env "$@" "$mongod" --port "$port" --bind_ip 127.0.0.1 --dbpath "$tmp/db$port" \
    --logpath "$tmp/mongod$port.log" --replSet rs0 &
  pids+=($!)
  for _ in $(seq 100); do (echo > "/dev/tcp/127.0.0.1/$port") 2>/dev/null && return; sleep 0.1; done
  echo "mongod did not start" >&2; exit 1
}
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

echo "== follow: $rate entries/s for $secs s"
p=$(port)
start_mongod "$p" PITR_STANDIN_OPLOG_WRITER="rate=$rate,epoch=$(date +%s),pad=100" \
  PITR_STANDIN_OPLOG_MAX_ENTRIES=$((rate * 10))
"$pitr" archive --uri "mongodb://127.0.0.1:$p/" --dir "$tmp/follow" --log-every 5s 2> "$tmp/follow.err" &
apid=$!
sleep "$secs"
hwm=$(awk '/VmHWM/ {print $2}' "/proc/$apid/status")
cpu=$(ps -o times= -p "$apid")
kill -TERM "$apid"; wait "$apid"
cat "$tmp/follow.err"
python3 - "$tmp/follow.err" "$secs" <<'PY'
import re, sys
lines = [l for l in open(sys.argv[1]) if "archive: " in l]
lags = [float(m.group(1)) for l in lines for m in [re.search(r"max lag ([0-9.]+) s", l)] if m]
rates = [float(m.group(1)) for l in lines for m in [re.search(r" ([0-9]+) entries/s", l)] if m]
# The first line includes catching up with what was written before the archiver started.
steady = lags[1:] or lags
print(f"entries/s per 5 s interval: {', '.join(f'{r:.0f}' for r in rates)}")
print(f"max lag after the first interval: {max(steady):.2f} s (first interval, catching up: {lags[0]:.2f} s)")
PY
echo "pitr archive: peak RSS $((hwm / 1024)) MB, CPU time ${cpu// /} s over ${secs} s"
"$pitr" oplog stats --json "$tmp/follow" > "$tmp/stats.json"
python3 - "$tmp/stats.json" "$rate" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
rate = int(sys.argv[2])
first, last = s["first_ts"], s["last_ts"]
def k(ts):
    t, i = ts.split(":")
    return (int(t) - int(first.split(":")[0])) * rate + int(i) - 1
want = k(last) - k(first) + 1
ok = s["entries"] == want and s["out_of_order"] == 0
verdict = "every entry once" if ok else "MISMATCH, expected %d" % want
print("archive: %d entries, %s to %s: %s" % (s["entries"], first, last, verdict))
PY
kill "${pids[0]}"

echo
echo "== scan: a generated oplog, archived, read back"
"$PWD/target/release/pitr-gen" --scenario bench --target-bytes 134217728 --out "$tmp/gen" --seed 1 > /dev/null
p=$(port)
start_mongod "$p" PITR_STANDIN_OPLOG="$tmp/gen/oplog.bson"
"$pitr" archive --uri "mongodb://127.0.0.1:$p/" --dir "$tmp/scan" --once --chunk-size 16MiB 2> /dev/null
cat "$tmp"/scan/chunks/*.bson.gz > "$tmp/one.bson.gz"
best() {
  local b=""
  for _ in $(seq "$runs"); do
    local s e
    s=$(date +%s.%N); taskset -c 0 "$@" > /dev/null 2>&1 || true; e=$(date +%s.%N)
    b=$(python3 -c "t=$e-$s; b='$b'; print(t if b=='' or t<float(b) else b)")
  done
  echo "$b"
}
bytes=$(stat -c %s "$tmp/gen/oplog.bson")
chunks=$(ls "$tmp"/scan/chunks/*.bson.gz | wc -l)
t_arch=$(best "$pitr" find-drop --json "$tmp/scan")
t_one=$(best "$pitr" find-drop --json "$tmp/one.bson.gz")
t_plain=$(best "$pitr" find-drop --json "$tmp/gen/oplog.bson")
same=$(for s in "$tmp/scan" "$tmp/one.bson.gz" "$tmp/gen/oplog.bson"; do "$pitr" find-drop --json "$s" 2>/dev/null | md5sum; done | sort -u | wc -l)
printf '%s MiB of oplog, %s chunks (%s MiB compressed); best of %s, one core\n' \
  $((bytes / 1048576)) "$chunks" $(( $(stat -c %s "$tmp/one.bson.gz") / 1048576 )) "$runs"
printf '%-40s %8.3f s %8s MB/s\n' "find-drop on the archive" "$t_arch" "$(python3 -c "print(f'{$bytes/1e6/$t_arch:.0f}')")"
printf '%-40s %8.3f s %8s MB/s\n' "find-drop on the same bytes as one file" "$t_one" "$(python3 -c "print(f'{$bytes/1e6/$t_one:.0f}')")"
printf '%-40s %8.3f s %8s MB/s\n' "find-drop on the plain file" "$t_plain" "$(python3 -c "print(f'{$bytes/1e6/$t_plain:.0f}')")"
echo "same findings from all three: $([ "$same" = 1 ] && echo yes || echo NO)"
