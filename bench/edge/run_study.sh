#!/bin/sh
# Runs a study file on the emulated edge cluster and reports its makespan, each node's idle time
# and the best r2; run by bench/edge_cluster.sh in the scheduler's namespace:
#   bench/edge_cluster.sh --nodes=orin,orin,pi4:cpu=80,pi4:cpu=80,pi4:cpu=80,pi4:cpu=80 -- \
#     bench/edge/run_study.sh bench/edge/xgboost-tpe.yaml
# Per-board CPU use is in the cluster's nodes.tsv once it exits; the summary line is also
# written to $EDGE_OUT/summary.txt.
set -eu
dhpt=build/bin/dhpt
start=$(date +%s.%N)
$dhpt submit "$1" --watch >"$EDGE_OUT/watch.log"
end=$(date +%s.%N)
name=$(sed -n 's/^name: *//p' "$1")
$dhpt trials "$name" --json >"$EDGE_OUT/trials.json"
$dhpt workers >"$EDGE_OUT/workers.txt"
/usr/bin/python3 - "$EDGE_OUT/trials.json" "$start" "$end" <<'PY' | tee "$EDGE_OUT/summary.txt"
import collections, datetime, json, re, sys
trials = json.load(open(sys.argv[1]))["trials"]
makespan = float(sys.argv[3]) - float(sys.argv[2])

def seconds(stamp):  # RFC 3339 with up to 9 fractional digits; Python reads 6.
    stamp = re.sub(r"(\.\d{6})\d*", r"\1", stamp).replace("Z", "+00:00")
    return datetime.datetime.fromisoformat(stamp).timestamp()

states = collections.Counter(t["state"] for t in trials)
completed = [t for t in trials if t["state"] == "COMPLETED"]
best = max((t["objective_value"] for t in completed), default=float("nan"))
per_node = collections.Counter(t.get("node_name", "?") for t in completed)
# Idle: the makespan less the time the node spent on trials that counted (a cancelled duplicate
# or a lost attempt counts as idle: it bought nothing).
busy = collections.defaultdict(float)
for t in completed:
    busy[t.get("node_name", "?")] += seconds(t["end_time"]) - seconds(t["start_time"])
duplicated = sum(1 for t in trials if len(t.get("attempts", [])) > 1)
idle = ", ".join(f"{node} {max(0.0, makespan - busy[node]):.1f}" for node in sorted(per_node))
print(f"makespan {makespan:.1f} s; trials {dict(states)}; best r2 {best:.4f}; "
      f"completed per node {dict(sorted(per_node.items()))}; idle s per node: {idle}; "
      f"trials with more than one attempt {duplicated}")
PY
