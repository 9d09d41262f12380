#!/usr/bin/env bash
# Measures the embedded replay engine (`pitr replay --engine embedded`) next to
# find-drop's scan of the same oplog, in the same run:
#
#   find-drop     pitr find-drop --json OPLOG > /dev/null (one scan)
#   in budget     pitr replay --engine embedded --until end --memory 16GiB
#                 (every document stays in memory)
#   past budget   the same with --memory $SMALL (default 64MiB: documents move to the
#                 on-disk store, redb, in the work dir)
#
# Prints, for each: seconds, entries/s and MB/s of the oplog, the ratio to
# find-drop's time (targets: <= 5x within the budget, <= 20x past it), and the peak
# RSS (target: --memory + 100 MB). The engine's run includes everything `pitr replay`
# does: reading the backup, planning (coverage, the limit, the slice written
# sorted, the lint), applying the backup's oplog and the slice, the dump to --out.
# Numbers, not pass/fail: the machine is shared and noisy; the best of RUNS is kept.
#
# Usage: scripts/bench-engine.sh [SIZE]   (default 1GiB of oplog; data in bench-data/engine-SIZE,
#                                          kept for the next run; about 2.5x SIZE on disk)
# Env:   RUNS=1  SMALL=64MiB  SEED=1
set -euo pipefail
cd "$(dirname "$0")/.."

size=${1:-1GiB}
runs=${RUNS:-1}
small=${SMALL:-64MiB}
seed=${SEED:-1}

cargo build --release --quiet --bin pitr
cargo build --release --quiet -p pitr-fixturegen --bin pitr-gen
PITR=target/release/pitr

dir=bench-data/engine-$size
if [ ! -f "$dir/oplog.bson" ]; then
  echo "generating a ~$size bench scenario in $dir (once)..." >&2
  rm -rf "$dir"
  target/release/pitr-gen --scenario bench --target-bytes "$size" --out "$dir" --seed "$seed" >&2
fi
oplog=$dir/oplog.bson
backup=$dir/backup
# The generator's backups are small; a real one is of the order of the oplog. A
# collection the oplog never touches (bench.filler, ~1 KiB documents) brings the
# backup to the oplog's size, so that the budget runs are about a big backup.
if [ ! -f "$backup/bench/filler.bson" ]; then
  mkdir -p "$backup/bench"
  python3 - "$backup/bench" "$(stat -c %s "$oplog")" <<'PY'
import struct, sys
d, target = sys.argv[1], int(sys.argv[2])
pad = b"x" * 1000
with open(f"{d}/filler.bson", "wb") as f:
    i, written = 0, 0
    while written < target:
        body = (b"\x10_id\x00" + struct.pack("<i", i)
                + b"\x02pad\x00" + struct.pack("<i", len(pad) + 1) + pad + b"\x00"
                + b"\x10n\x00" + struct.pack("<i", i * 7) + b"\x00")
        doc = struct.pack("<i", len(body) + 4) + body
        f.write(doc)
        written += len(doc)
        i += 1
open(f"{d}/filler.metadata.json", "w").write(
    '{"indexes":[{"v":{"$numberInt":"2"},"key":{"_id":{"$numberInt":"1"}},"name":"_id_"}],'
    '"collectionName":"filler","type":"collection"}')
PY
fi
bytes=$(stat -c %s "$oplog")
backup_bytes=$(du -sb "$backup" | cut -f1)
entries=$(python3 -c "import json,sys; print(json.load(open('$dir/truth.json'))['oplog']['entries'])")
work=$(mktemp -d "${TMPDIR:-/tmp}/pitr-bench-engine.XXXXXX")
trap 'rm -rf "$work"' EXIT

cat "$oplog" "$backup"/*/*.bson > /dev/null  # warm the page cache

# best of $runs: prints "seconds peak_rss_kb"
measure() {
  local best="" rss=""
  for _ in $(seq "$runs"); do
    rm -rf "$work/run"
    mkdir -p "$work/run"
    /usr/bin/time -f '%e %M' -o "$work/time" "$@" > /dev/null 2> "$work/stderr" || {
      echo "FAILED: $*" >&2; cat "$work/stderr" >&2; exit 1; }
    read -r s m < "$work/time"
    if [ -z "$best" ] || python3 -c "import sys; sys.exit(0 if $s < $best else 1)"; then best=$s; rss=$m; fi
  done
  echo "$best $rss"
}

read -r t_scan r_scan < <(measure "$PITR" find-drop --json "$oplog")
replay() {  # $1 memory
  measure "$PITR" replay --engine embedded --backup "$backup" --oplog "$oplog" --until end \
    --memory "$1" --workdir "$work/run/w" --out "$work/run/out" --json
}
read -r t_in r_in < <(replay 16GiB)
read -r t_out r_out < <(replay "$small")

echo "oplog: $oplog: $bytes bytes, $entries entries; backup: $backup_bytes bytes"
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)  cores: $(nproc)"
printf '%-34s %9s %12s %9s %8s %12s\n' "run" "seconds" "entries/s" "MB/s" "x scan" "peak RSS MB"
row() {  # name seconds rss_kb
  python3 - "$@" "$bytes" "$entries" "$t_scan" <<'EOF'
import sys
name, s, rss, b, n, scan = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6])
s = max(s, 0.001)
print(f"{name:<34} {s:9.2f} {n/s:12,.0f} {b/s/1e6:9.1f} {s/scan:8.2f} {rss/1024:12.0f}")
EOF
}
row "find-drop (scan)" "$t_scan" "$r_scan"
row "embedded, within budget (16GiB)" "$t_in" "$r_in"
row "embedded, past budget ($small)" "$t_out" "$r_out"
