#!/bin/sh
# A trial for the emulated edge cluster (bench/edge_cluster.sh), run as a COMMAND. Like training
# on --work thousand rows, it costs CPU in proportion to --work (units of 20,000 shell loop
# turns, about 16 ms of one host core at full speed, so a board's CPU cap shows in its trial
# times) and memory in proportion too (8 MiB a unit, or --mem_mb, held for a moment, so a
# board's memory cap can meet it); then it prints its objective, loss = (x - 1)^2.
set -eu
x=0 work=1 mem=""
for arg in "$@"; do
  case $arg in
    --x=*) x=${arg#*=} ;;
    --work=*) work=${arg#*=} ;;
    --mem_mb=*) mem=${arg#*=} ;;
    *) echo "ignoring $arg" >&2 ;;
  esac
done
mem=${mem:-$((work * 8))}
# mem MiB really written, so that the pages count against the node's memory cgroup.
python3 -c 'import sys; b = b"x" * (int(sys.argv[1]) << 20); print("held", len(b), "bytes")' "$mem" >&2
i=0
n=$((work * 20000))
while [ "$i" -lt "$n" ]; do i=$((i + 1)); done
awk -v x="$x" 'BEGIN { printf "loss=%.9f\n", (x - 1) ^ 2 }'
