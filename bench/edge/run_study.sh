#!/bin/sh
# Runs a study file on the emulated edge cluster and reports its makespan and best r2; run by
# bench/edge_cluster.sh in the scheduler's namespace:
#   bench/edge_cluster.sh --nodes=orin,orin,pi4:cpu=80,pi4:cpu=80,pi4:cpu=80,pi4:cpu=80 -- \
#     bench/edge/run_study.sh bench/edge/xgboost-tpe.yaml
# Per-board CPU use is in the cluster's nodes.tsv once it exits.
set -eu
dhpt=build/bin/dhpt
start=$(date +%s.%N)
$dhpt submit "$1" --watch >"$EDGE_OUT/watch.log"
end=$(date +%s.%N)
name=$(sed -n 's/^name: *//p' "$1")
$dhpt trials "$name" --json >"$EDGE_OUT/trials.json"
/usr/bin/python3 - "$EDGE_OUT/trials.json" "$start" "$end" <<'PY'
import collections, json, sys
trials = json.load(open(sys.argv[1]))["trials"]
states = collections.Counter(t["state"] for t in trials)
best = max((t["objective_value"] for t in trials if t["state"] == "COMPLETED"), default=None)
per_node = collections.Counter(t.get("node_name", "?") for t in trials if t["state"] == "COMPLETED")
print(f"makespan {float(sys.argv[3]) - float(sys.argv[2]):.1f} s; trials {dict(states)}; "
      f"best r2 {best:.4f}; completed per node {dict(sorted(per_node.items()))}")
PY
