#!/usr/bin/env bash
# Peak memory of the embedded replay when the incident destroys a large collection
# (issue 17, item 8): the replay stops just before the drop of `shop.orders`, which
# holds most of what the oplog inserted (`pitr-gen --mix orders`: about 800,000
# documents in a 428 MiB oplog), so the destroyed-documents dump (`OUT-destroyed`)
# is as large as the state's biggest collection. Target: peak RSS within
# `--memory` + 100 MB (shown in MiB), for the default budget and for `--memory 64MiB`.
#
# Prints, per budget: seconds, peak RSS, the budget + 100 MB, and the documents
# destroyed. With PITR_BEFORE=/path/to/an/older/pitr the same runs are made with
# that binary too (before/after).
#
# Usage: scripts/mem-destroyed.sh [SIZE]   (default 428MiB of oplog; data in
#                                           bench-data/destroyed-SIZE, kept)
# Env:   SEED=1  SMALL=64MiB  PITR_BEFORE=
set -euo pipefail
cd "$(dirname "$0")/.."

size=${1:-428MiB}
seed=${SEED:-1}
small=${SMALL:-64MiB}

cargo build --release --quiet --bin pitr
cargo build --release --quiet -p pitr-fixturegen --bin pitr-gen

dir=bench-data/destroyed-$size
if [ ! -f "$dir/truth.json" ]; then
  echo "generating a ~$size scenario in $dir (once)..." >&2
  rm -rf "$dir"
  target/release/pitr-gen --scenario bench --mix orders --target-bytes "$size" --out "$dir" --seed "$seed" >&2
fi
limit=$(python3 -c "
import json
t = json.load(open('$dir/truth.json'))
print(next(i['oplog_limit'] for i in t['incidents'] if i['kind'] == 'drop'))")
work=$(mktemp -d "${TMPDIR:-/tmp}/pitr-mem-destroyed.XXXXXX")
trap 'rm -rf "$work"' EXIT
cat "$dir/oplog.bson" "$dir"/backup/*/*.bson > /dev/null  # warm the page cache

echo "oplog: $dir/oplog.bson: $(stat -c %s "$dir/oplog.bson") bytes; --until $limit (the drop of shop.orders)"
printf '%-8s %-10s %9s %14s %14s %11s\n' binary memory seconds "peak RSS MiB" "target MiB" destroyed
run() {  # label binary memory(or empty: default)
  local label=$1 bin=$2 mem=$3
  rm -rf "$work/run"
  mkdir -p "$work/run"
  local args=(replay --engine embedded --backup "$dir/backup" --oplog "$dir/oplog.bson" --until "$limit"
    --workdir "$work/run/w" --out "$work/run/out" --json)
  [ -n "$mem" ] && args+=(--memory "$mem")
  /usr/bin/time -f '%e %M' -o "$work/time" "$bin" "${args[@]}" > "$work/report.json" 2> "$work/stderr" || {
    echo "FAILED: $bin ${args[*]}" >&2; cat "$work/stderr" >&2; exit 1; }
  read -r s kb < "$work/time"
  python3 - "$label" "${mem:-default}" "$s" "$kb" "$work/report.json" <<'PY'
import json, sys
label, mem, s, kb, report = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
r = json.load(open(report))
budget = r["engine_stats"]["memory_budget"]
d = r["destroyed"] or {}
print(f"{label:<8} {mem:<10} {s:9.2f} {kb/1024:14.0f} {(budget + 100e6)/2**20:14.0f} {d.get('documents', 0):11,}")
PY
}
if [ -n "${PITR_BEFORE:-}" ]; then
  run before "$PITR_BEFORE" ""
  run before "$PITR_BEFORE" "$small"
fi
run after target/release/pitr ""
run after target/release/pitr "$small"
