#!/bin/sh
# Idle memory of the three binaries: a scheduler (SQLite file in a temporary directory), a CPU
# worker and a GPU worker connected to it, measured WAIT seconds (default 5) after start from
# /proc/PID/smaps_rollup. RSS counts the shared libraries' pages too; PSS counts each shared page
# split among the processes that map it (here the three share gRPC, protobuf and Abseil);
# "anonymous" is the memory the process itself owns (heap, stacks, relocated library data).
# BIN=DIR measures the binaries of another build (a before/after comparison).
#
#   bench/idle_rss.sh            # from the repository root, after scripts/build.sh
set -eu
bin=${BIN:-build/bin}
dir=$(mktemp -d)
s= c= g=
trap 'kill $g $c $s 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$dir"' EXIT
"$bin/dhpt-scheduler" --listen=127.0.0.1:0 --db="$dir/db.sqlite" >"$dir/s.log" 2>&1 &
s=$!
for _ in $(seq 100); do grep -q "listening on" "$dir/s.log" && break; sleep 0.1; done
addr=$(sed -n 's/.*listening on \([^ ]*\).*/\1/p' "$dir/s.log" | head -1)
"$bin/dhpt-cpu-worker" --scheduler="$addr" >"$dir/c.log" 2>&1 &
c=$!
"$bin/dhpt-gpu-worker" --scheduler="$addr" >"$dir/g.log" 2>&1 &
g=$!
sleep "${WAIT:-5}"
printf '%-16s %10s %10s %14s %8s %9s\n' binary "RSS MiB" "PSS MiB" "anonymous MiB" threads libraries
for p in $s $c $g; do
  libs=$(awk '$6 ~ /\.so/ {print $6}' /proc/$p/maps | sort -u | wc -l)
  # The name it was started as: a worker re-executes itself (openmp_spin.h), so its comm is "exe".
  name=$(tr '\0' '\n' </proc/$p/cmdline | head -1)
  awk -v name="${name##*/}" -v libs="$libs" '
    /^Rss:/ {rss = $2} /^Pss:/ {pss = $2} /^Anonymous:/ {anon = $2} /^Threads:/ {threads = $2}
    END {printf "%-16s %10.1f %10.1f %14.1f %8d %9d\n", name, rss / 1024, pss / 1024, anon / 1024,
                threads, libs}' \
    /proc/$p/smaps_rollup /proc/$p/status
done
