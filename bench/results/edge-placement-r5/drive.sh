#!/bin/bash
# Issue 32, fifth round: alternating first-come / placement runs of the rounds 20-1000 study
# (the one whose tail trial #9 placement lost before), niced, load recorded per run.
#   bench/results/edge-placement-r5/drive.sh [PAIRS] [OUT]
cd "$(dirname "$0")/../../.."  # The repository root.
pairs=${1:-2}
base=${2:-/tmp/edge-placement-r5}
mkdir -p "$base"
nodes=orin,orin,pi4:cpu=80,pi4:cpu=80,pi4:cpu=80,pi4:cpu=80
study=xgboost-tpe-rounds
for ((round = 1; round <= pairs; round++)); do
  for mode in fc sp; do
    out=$base/$study-$mode-$round
    rm -rf "$out"
    flag=(); [ $mode = fc ] && flag=(--scheduler-flag=--speed_placement=false)
    echo "$(date -u +%T) start $study $mode $round load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$base/runs.log"
    nice -n 5 bench/edge_cluster.sh --nodes=$nodes --cpu-scale=25 "${flag[@]}" --out="$out" -- \
      bench/edge/run_study.sh bench/edge/$study.yaml > "$base/$study-$mode-$round.log" 2>&1 </dev/null
    echo "$(date -u +%T) end $study $mode $round rc $? load $(cut -d' ' -f1-3 /proc/loadavg): $(cat "$out/summary.txt" 2>/dev/null)" >> "$base/runs.log"
  done
done
