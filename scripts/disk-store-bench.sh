#!/usr/bin/env bash
# Measures the embedded engine's on-disk document store (the path past --memory)
# with the engine's access pattern: redb (pitr's store) against LMDB (heed, the
# candidate measured and not chosen), examples/disk_store_bench/. Each round runs every store once, one
# after the other (paired: other tenants' load hits both); the table shows the
# median per store and phase of wall and CPU seconds, the phase's peak RSS, the
# bytes written and the store's file size at the end of the phase.
#
# Usage: scripts/disk-store-bench.sh [SCALE]   (1.0: the 1 GiB bench's documents,
#                                               about 3 GB of disk per run)
# Env:   RUNS=3  STORES="lmdb redb lmdb-keep sortmerge"  (lmdb-keep: LMDB without giving the
#        map's pages back; sortmerge: no B-tree, writes sorted into runs and merged)
set -euo pipefail
cd "$(dirname "$0")/.."
scale=${1:-1.0}
runs=${RUNS:-3}
stores=${STORES:-lmdb redb lmdb-keep}
cargo build --release --quiet --example disk_store_bench
mkdir -p bench-data
work=$(mktemp -d "$PWD/bench-data/run-disk-store.XXXXXX")
trap 'rm -rf "$work"' EXIT
for round in $(seq "$runs"); do
  for s in $stores; do
    rm -rf "$work/db"
    l=$(cut -d' ' -f1 /proc/loadavg)
    target/release/examples/disk_store_bench "$s" "$work/db" "$scale" |
      sed "s/^/$round\t$l\t/" | tee -a "$work/results" >&2
  done
done
echo "machine: $(nproc) cores; load now: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$work/results" <<'PY'
import statistics as st, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
by = {}
loads = [float(r[1]) for r in rows]
for rnd, load, store, phase, wall, cpu, rss, wr, size in rows:
    by.setdefault((store, phase), []).append((float(wall), float(cpu), int(rss), int(wr), int(size)))
print(f"rounds: {len({r[0] for r in rows})}, load average at the runs' starts: {min(loads):.1f}-{max(loads):.1f}")
print("| store | phase | wall s | CPU s | peak RSS MB | written MB | file MB |")
print("|---|---|---|---|---|---|---|")
for (store, phase), v in by.items():
    m = [st.median(x[i] for x in v) for i in range(5)]
    print(f"| {store} | {phase} | {m[0]:.2f} | {m[1]:.2f} | {m[2]:.0f} | {m[3]:.0f} | {m[4]:.0f} |")
PY
