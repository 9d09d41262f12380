#!/usr/bin/env bash
# Measures how fast `pitr find-drop` scans a large oplog, next to two references
# measured the same way on the same (page-cached) file:
#   cat FILE > /dev/null          the cost of just reading the bytes
#   length_walk FILE              a loop that only walks BSON length prefixes
# Prints MB/s for each, find-drop's share of the length-walk rate (target >= 50%),
# and find-drop's peak RSS (target < 100 MB on a 1 GiB file). Everything runs
# pinned to one core. Numbers, not pass/fail: these machines are noisy.
#
# Usage: scripts/bench-scan.sh [SIZE_BYTES]   (default 1 GiB; data in bench-data/)
set -euo pipefail
cd "$(dirname "$0")/.."

size=${1:-1073741824}
runs=${RUNS:-3}
dir=bench-data/bench-$size
file=$dir/oplog.bson

cargo build --release --quiet --bin pitr --example length_walk
cargo build --release --quiet -p pitr-fixturegen --bin pitr-gen
pitr=target/release/pitr
walk=target/release/examples/length_walk

if [ ! -f "$file" ]; then
  echo "generating a ~$((size / 1048576)) MiB oplog in $dir (once; reused afterwards)..." >&2
  target/release/pitr-gen --scenario bench --target-bytes "$size" --out "$dir" --seed 1
fi
bytes=$(stat -c %s "$file")
cat "$file" > /dev/null  # warm the page cache so every contender reads from memory

pin() { taskset -c 0 "$@"; }
best() {  # best wall time in seconds over $runs runs of the command
  local b=""
  for _ in $(seq "$runs"); do
    local s e
    s=$(date +%s.%N); "$@" > /dev/null; e=$(date +%s.%N)
    b=$(python3 -c "t=$e-$s; b='$b'; print(t if b=='' or t<float(b) else b)")
  done
  echo "$b"
}
mbps() { python3 -c "print(f'{$bytes/1e6/$1:.0f}')"; }

t_cat=$(best pin sh -c "cat '$file' > /dev/null")
t_walk=$(best pin "$walk" "$file")
set +e
t_find=$(best pin "$pitr" find-drop --json "$file")
set -e
rss_kb=$( { /usr/bin/time -f '%M' taskset -c 0 "$pitr" find-drop --json "$file" > /dev/null; } 2>&1 | tail -1 )
findings=$("$pitr" find-drop --json "$file" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))') || true

echo
echo "file: $file ($((bytes / 1048576)) MiB, $("$pitr" oplog stats --json "$file" | python3 -c 'import json,sys; print(json.load(sys.stdin)["entries"])') entries); best of $runs runs, one core, page cache warm"
printf '%-28s %8s %10s\n' "reader" "seconds" "MB/s"
printf '%-28s %8.3f %10s\n' "cat > /dev/null" "$t_cat" "$(mbps "$t_cat")"
printf '%-28s %8.3f %10s\n' "length-prefix walk" "$t_walk" "$(mbps "$t_walk")"
printf '%-28s %8.3f %10s\n' "pitr find-drop --json" "$t_find" "$(mbps "$t_find")"
python3 -c "print(f'find-drop / length walk: {$t_walk/$t_find*100:.0f}% (target >= 50%)')"
echo "find-drop peak RSS: $((rss_kb / 1024)) MB (target < 100 MB); findings: $findings"
