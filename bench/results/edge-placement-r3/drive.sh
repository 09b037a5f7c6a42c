#!/bin/bash
# Alternating first-come / placement runs of the two edge studies; load recorded per run.
cd "$(dirname "$0")/../../.."  # The repository root.
mkdir -p /tmp/c32-bench
nodes=orin,orin,pi4:cpu=80,pi4:cpu=80,pi4:cpu=80,pi4:cpu=80
for round in 1 2 3; do
  for study in xgboost-tpe-rounds xgboost-tpe; do
    for mode in fc sp; do
      out=/tmp/c32-bench/$study-$mode-$round
      rm -rf "$out"
      flag=(); [ $mode = fc ] && flag=(--scheduler-flag=--speed_placement=false)
      echo "$(date -u +%T) start $study $mode $round load $(cut -d' ' -f1-3 /proc/loadavg)" >> /tmp/c32-bench/runs.log
      bench/edge_cluster.sh --nodes=$nodes --cpu-scale=25 "${flag[@]}" --out=$out -- \
        bench/edge/run_study.sh bench/edge/$study.yaml > /tmp/c32-bench/$study-$mode-$round.log 2>&1
      echo "$(date -u +%T) end $study $mode $round rc $? load $(cut -d' ' -f1-3 /proc/loadavg): $(cat $out/summary.txt 2>/dev/null)" >> /tmp/c32-bench/runs.log
    done
  done
done
