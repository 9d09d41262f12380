#!/usr/bin/env bash
# The commands an on-call engineer runs, with their inputs in a bucket against the
# same inputs read locally (issue 20's targets): `pitr find-drop` over a ~1 GiB oplog
# object (target: within 1.3x of the local file), and the embedded restore
# `pitr replay --backup --oplog ... --out` with both in the bucket (target: within
# 1.5x of the local one), with each run's peak RSS; and, with the inputs local, the
# dump streamed to the bucket (`--out s3://...`) against a local `--out`.
#
#   scripts/bench-s3-commands.sh [SIZE_BYTES]      RUNS=3 (paired: local then bucket)
#   GET_CHUNK=N   the read size of the second server's GetObject (default 1 MiB)
#   OLD_READS=1   as before the ranged reads and the oplog copy: one streamed GET per
#                 object (PITR_STORAGE_READ_RANGES=1) and `replay --no-space-check`
#                 (which turns the copy of an oplog object in the work dir off)
#
# Release builds of pitr, pitr-gen and the storage_bench example (whose `serve` runs
# s3s-fs in its own process on loopback, with its files on the same disk). The bench
# scenario is generated once into bench-data/engine-SIZE (shared with
# bench-engine.sh). Needs about 3 x SIZE of free disk. Prints one line per run and the
# medians with their ratios.
set -euo pipefail
cd "$(dirname "$0")/.."
size=${1:-1073741824}
runs=${RUNS:-3}
seed=${SEED:-1}

cargo build --release --quiet --bin pitr --example storage_bench
cargo build --release --quiet -p pitr-fixturegen --bin pitr-gen
PITR=$PWD/target/release/pitr
BENCH=$PWD/target/release/examples/storage_bench

dir=bench-data/engine-$size
if [ ! -f "$dir/oplog.bson" ]; then
  echo "generating a ~$size bench scenario in $dir (once)..." >&2
  rm -rf "$dir"
  target/release/pitr-gen --scenario bench --target-bytes "$size" --out "$dir" --seed "$seed" >&2
fi
mkdir -p bench-data
work=$(mktemp -d "$PWD/bench-data/run-s3.XXXXXX")
server_pid=""
server2_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; fi
  if [ -n "$server2_pid" ]; then kill "$server2_pid" 2>/dev/null || true; fi
  exec 3>&- 4>&- 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# Two servers on the same files: s3s-fs as it is, whose GetObject reads the file 4 KiB
# at a time (each read a round trip to tokio's blocking pool: 6-12 CPU-seconds per GiB
# served), and the same s3s-fs with GetObject's body read in GET_CHUNK-byte reads
# (default 1 MiB; examples/storage_bench.rs, `ChunkedGet`), nearer to what a real store
# costs its client. Each serves until its stdin (fd 3, fd 4) closes.
get_chunk=${GET_CHUNK:-1048576}
mkfifo "$work/server.in" "$work/server2.in"
"$BENCH" serve "$work/root" bench < "$work/server.in" > "$work/server.out" &
server_pid=$!
exec 3> "$work/server.in"
"$BENCH" serve "$work/root" bench "$get_chunk" < "$work/server2.in" > "$work/server2.out" &
server2_pid=$!
exec 4> "$work/server2.in"
for _ in $(seq 100); do
  grep -q '^endpoint ' "$work/server.out" 2>/dev/null && grep -q '^endpoint ' "$work/server2.out" 2>/dev/null && break
  sleep 0.1
done
endpoint=$(awk '/^endpoint / {print $2}' "$work/server.out")
endpoint2=$(awk '/^endpoint / {print $2}' "$work/server2.out")
[ -n "$endpoint" ] && [ -n "$endpoint2" ] || { echo "error: the s3s-fs servers did not start" >&2; exit 2; }

echo "uploading $dir to s3://bench/ ($endpoint)" >&2
"$BENCH" put "$endpoint" "$dir/oplog.bson" s3://bench/oplog.bson >&2
while IFS= read -r f; do
  rel=${f#"$dir/"}
  "$BENCH" put "$endpoint" "$f" "s3://bench/$rel" > /dev/null
done < <(find "$dir/backup" -type f | sort)

export AWS_ACCESS_KEY_ID=AKIAPITRBENCH AWS_SECRET_ACCESS_KEY=pitr-bench-secret \
  AWS_REGION=us-east-1 AWS_ENDPOINT_URL="$endpoint" AWS_ALLOW_HTTP=true
replay_flags=()
if [ "${OLD_READS:-0}" = 1 ]; then
  export PITR_STORAGE_READ_RANGES=1
  replay_flags=(--no-space-check)
  echo "OLD_READS=1: one streamed GET per object, no copy of the oplog" >&2
fi
load() { cut -d' ' -f1 /proc/loadavg; }
# timed NAME CMD...: "name wall_s peak_rss_kib load cpu_s" appended to $work/results
timed() {
  local name=$1 l
  shift
  l=$(load)
  /usr/bin/time -f '%e %M %U %S' -o "$work/time" "$@" > "$work/stdout" 2> "$work/stderr" || {
    local rc=$?
    # find-drop exits 1 when it finds nothing: not a failure of the run.
    if [ "$rc" -ne 1 ]; then echo "FAILED ($rc): $*" >&2; tail -20 "$work/stderr" >&2; exit 1; fi; }
  read -r e m u sy < "$work/time"
  echo "$name $e $m $l $(echo "$u + $sy" | bc)" | tee -a "$work/results"
}

cat "$dir/oplog.bson" "$work"/root/bench/oplog.bson > /dev/null  # warm the page cache
bytes=$(stat -c %s "$dir/oplog.bson")
echo "== find-drop and the embedded replay: $bytes bytes of oplog, local vs s3s-fs on loopback, $runs paired runs" >&2
echo "name wall_s peak_rss_kib load cpu_s"
s3chunk=(env AWS_ENDPOINT_URL="$endpoint2")
for r in $(seq "$runs"); do
  timed find-drop-local "$PITR" find-drop "$dir/oplog.bson" --json
  timed find-drop-s3 "$PITR" find-drop s3://bench/oplog.bson --json
  timed find-drop-s3chunk "${s3chunk[@]}" "$PITR" find-drop s3://bench/oplog.bson --json
  for where in local s3 s3chunk outs3; do
    rm -rf "$work/out" "$work/w"
    case $where in
      local) timed replay-local "$PITR" replay --backup "$dir/backup" --oplog "$dir/oplog.bson" \
        --until end --accept-incidents --out "$work/out" --workdir "$work/w" --json "${replay_flags[@]}" ;;
      s3) timed replay-s3 "$PITR" replay --backup s3://bench/backup --oplog s3://bench/oplog.bson \
        --until end --accept-incidents --out "$work/out" --workdir "$work/w" --json "${replay_flags[@]}" ;;
      s3chunk) timed replay-s3chunk "${s3chunk[@]}" "$PITR" replay --backup s3://bench/backup --oplog s3://bench/oplog.bson \
        --until end --accept-incidents --out "$work/out" --workdir "$work/w" --json "${replay_flags[@]}" ;;
      # Local inputs, the dump streamed to the bucket (no target: what it costs).
      outs3) timed replay-outs3 "$PITR" replay --backup "$dir/backup" --oplog "$dir/oplog.bson" \
        --until end --accept-incidents --out "s3://bench/out-$r" --workdir "$work/w" --json "${replay_flags[@]}"
        rm -rf "$work/root/bench/out-$r" "$work/root/bench/out-$r-destroyed" ;;
    esac
  done
  rm -rf "$work/out" "$work/w"
done
echo "== medians (ratio bucket/local; targets: find-drop <= 1.3, replay <= 1.5); s3: s3s-fs as it is, s3chunk: its GetObject in $get_chunk-byte reads"
python3 - "$work/results" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
by = {}
for name, wall, rss, load, cpu in rows:
    by.setdefault(name, []).append((float(wall), int(rss), float(load), float(cpu)))
def med(n, i): return statistics.median(x[i] for x in by[n])
for cmd, target in (("find-drop", 1.3), ("replay", 1.5)):
  for server in ("s3", "s3chunk"):
    b = f"{cmd}-{server}"
    l, s = med(f"{cmd}-local", 0), med(b, 0)
    print(f"{cmd} ({server}): local {l:.2f} s (cpu {med(f'{cmd}-local', 3):.2f} s, {med(f'{cmd}-local', 1)//1024} MiB), "
          f"bucket {s:.2f} s (cpu {med(b, 3):.2f} s, {med(b, 1)//1024} MiB): "
          f"ratio {s / l:.2f} (target {target}) "
          f"{'met' if s / l <= target else 'NOT met'}; load {min(x[2] for x in by[b]):.1f}-"
          f"{max(x[2] for x in by[b]):.1f}")
b = "replay-outs3"
if b in by:
    l, s = med("replay-local", 0), med(b, 0)
    print(f"replay, --out streamed to the bucket (inputs local): {s:.2f} s (cpu {med(b, 3):.2f} s, "
          f"{med(b, 1)//1024} MiB) against --out local {l:.2f} s: ratio {s / l:.2f} (no target)")
PY
