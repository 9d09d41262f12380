#!/usr/bin/env bash
# Object storage on loopback: reading a 1 GiB object from s3s-fs through pitr's storage
# layer against reading the same bytes from a local file, and writing it (multipart).
# Prints one line per step (bytes, seconds, MB/s, the client's peak RSS and CPU), and
# for each read the CPU the server spent serving it.
#
#   scripts/bench-storage.sh [SIZE_MIB]      (default 1024)
#   PROFILE=release    release builds of the client and the server (default: debug,
#                      as the tests use, deps at opt-level 1)
#   RANGES="1 4"       the reads to time: ranged GETs in flight per read (1: one
#                      streamed GET), each as PITR_STORAGE_READ_RANGES
#   GETS=3             reads of each
#
# Needs 2 x SIZE of free disk in $TMPDIR (the file and the server's copy); both are
# deleted at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
size_mib="${1:-1024}"

work="$(mktemp -d "${TMPDIR:-/tmp}/pitr-bench-storage.XXXXXX")"
server_pid=""
cleanup() {
    if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; fi
    exec 3>&- 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

avail_kib="$(df -Pk "$work" | awk 'NR==2 {print $4}')"
need_kib=$((size_mib * 1024 * 2 + 512 * 1024))
if [ "$avail_kib" -lt "$need_kib" ]; then
    echo "error: $((need_kib / 1024)) MiB of free disk needed in $work, $((avail_kib / 1024)) MiB free" >&2
    exit 2
fi

profile="${PROFILE:-debug}"
ranges="${RANGES:-1 4}"
gets="${GETS:-3}"
if [ "$profile" = release ]; then
    cargo build -q --release --example storage_bench
else
    cargo build -q --example storage_bench
fi
bin=target/$profile/examples/storage_bench

echo "generating ${size_mib} MiB of random bytes" >&2
head -c "$((size_mib * 1024 * 1024))" /dev/urandom > "$work/object.bin"

# The server: its own process, so the client's peak RSS is the client's alone. It
# serves until its stdin (fd 3 here) closes.
mkfifo "$work/server.in"
"$bin" serve "$work/root" bench < "$work/server.in" > "$work/server.out" &
server_pid=$!
exec 3> "$work/server.in"
for _ in $(seq 100); do
    grep -q '^endpoint ' "$work/server.out" 2>/dev/null && break
    sleep 0.1
done
endpoint="$(awk '/^endpoint / {print $2}' "$work/server.out")"
[ -n "$endpoint" ] || { echo "error: the s3s-fs server did not start" >&2; exit 2; }

url="s3://bench/object.bin"
"$bin" put "$endpoint" "$work/object.bin" "$url"
# Each read twice, the first warming the page cache for both (s3s-fs reads its copy
# from disk too); the second of each is the figure to compare.
"$bin" local "$work/object.bin" > /dev/null
"$bin" local "$work/root/bench/object.bin" > /dev/null
"$bin" local "$work/object.bin"
# The server's CPU (user+sys, seconds) from /proc/PID/stat.
server_cpu() {
    awk -v hz="$(getconf CLK_TCK)" '{printf "%.2f", ($14 + $15) / hz}' "/proc/$server_pid/stat"
}
"$bin" get "$endpoint" "$url" > /dev/null
for n in $ranges; do
    for _ in $(seq "$gets"); do
        before=$(server_cpu)
        line=$(PITR_STORAGE_READ_RANGES=$n "$bin" get "$endpoint" "$url")
        after=$(server_cpu)
        echo "$line ranges $n server_cpu $(echo "$after - $before" | bc) s load $(cut -d' ' -f1 /proc/loadavg)"
    done
done
