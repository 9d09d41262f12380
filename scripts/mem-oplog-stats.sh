#!/usr/bin/env bash
# Peak memory of `pitr oplog stats` on an oplog whose time span is huge and whose
# entries are few: mongo-tools' test dump `dump_local_oplog` (100 entries, one at ts
# 0:1, the others in 2015). The timeline's memory must follow the entries, not the
# span (issue 17 item 7: with `--bucket 1s` it grew to 24 GB until the kernel killed
# it; a memory bound is measured here, not in a timed test).
#
# Prints the peak RSS of each run (from /usr/bin/time -v, else /proc polling) and
# exits 1 when one is above MAX_RSS_MB. Every run is capped at CAP_MB of address
# space (ulimit -v), so a regression fails fast instead of eating the machine.
#
# Usage: scripts/mem-oplog-stats.sh [DUMP]
# Env:   PITR=path/to/pitr (default: target/debug/pitr, built first)
#        MAX_RSS_MB=100  CAP_MB=4096
set -euo pipefail
cd "$(dirname "$0")/.."

dump=${1:-../shared/peer-data/mongo-tools/mongorestore/testdata/dump_local_oplog}
max_mb=${MAX_RSS_MB:-100}
cap_mb=${CAP_MB:-4096}
if [ -z "${PITR:-}" ]; then
  cargo build --quiet --bin pitr
  PITR=target/debug/pitr
fi
[ -e "$dump" ] || { echo "no such oplog: $dump" >&2; exit 2; }

# Runs "$@" under the address-space cap; prints "<peak KiB> <exit code>".
peak_kib() {
  if [ -x /usr/bin/time ]; then
    local log
    log=$(mktemp)
    set +e
    ( ulimit -v $((cap_mb * 1024)); /usr/bin/time -v -o "$log" "$@" >/dev/null 2>&1 )
    local rc=$?
    set -e
    local kib
    kib=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$log")
    rm -f "$log"
    echo "${kib:-0} $rc"
  else
    # No GNU time: poll VmHWM (the kernel's own peak RSS) until the process ends.
    ( ulimit -v $((cap_mb * 1024)); exec "$@" >/dev/null 2>&1 ) &
    local pid=$! hwm=0 v
    while kill -0 "$pid" 2>/dev/null; do
      v=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status" 2>/dev/null || true)
      [ -n "$v" ] && hwm=$v
      sleep 0.01
    done
    set +e
    wait "$pid"
    local rc=$?
    set -e
    echo "$hwm $rc"
  fi
}

status=0
for args in "--bucket 1s" "" "--bucket 1s --json"; do
  # shellcheck disable=SC2086
  read -r kib rc < <(peak_kib "$PITR" oplog stats "$dump" $args)
  mb=$(( (kib + 1023) / 1024 ))
  verdict=ok
  if [ "$rc" != 0 ]; then
    verdict="FAILED (exit $rc; the cap is ${cap_mb} MB of address space)"
    status=1
  elif [ "$mb" -gt "$max_mb" ]; then
    verdict="ABOVE ${max_mb} MB"
    status=1
  fi
  printf 'pitr oplog stats %-22s peak RSS %6d KiB (%d MB)  %s\n' "${args:-(auto bucket)}" "$kib" "$mb" "$verdict"
done
exit $status
