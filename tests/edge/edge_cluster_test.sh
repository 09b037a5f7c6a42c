#!/usr/bin/env bash
# issue 32's "must show": a 60-trial study on 4 emulated boards (bench/edge_cluster.sh) while
# links drop and come back, one board freezes and trials meet a board's memory cap. The study
# must end with exactly 60 trials, none counted twice, every failed one with its reason, and
# the trials the OOM killer ended on the small board retried only on larger ones, where they
# complete.
# Exits 77 (skipped, with the reason) where namespaces, cgroups or root are missing.
#
# Leases are short here, so that the faults' lengths fall on both sides of them in a short
# test: the scheduler's lease is 8 s (1 s heartbeats, 8 missed; its keepalive stays at the
# default 10 s + 5 s, so the lease is what notices); a worker notices a dead link after 2 s (1 s
# keepalive pings, 1 s timeout) and reconnects within a second of the link's return (1 s
# --max_reconnect_backoff).
#   n1 link down 4 s   (longer than the worker's keepalive, shorter than the lease: the worker
#                       reconnects and keeps its trial; the scheduler never counts it lost)
#   n3 link down 12 s  (longer than the lease: its trial is requeued; its late result must not
#                       count twice)
#   n2 frozen 12 s     (the same, from a frozen process)
# The Pi 4 boards run at 8% of a host core (a fifth of an Orin's 40%, as when this test was
# written; pi4's profile is now 32.5%), so that its timings stay as they were checked.
#   n4 is a pi4 with 160 MiB (the others have 512 MiB): trials of --work above about 12
#                       (8 MiB a unit) meet its cap, and must go to another board
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$PWD
out=$(mktemp -d /tmp/dhpt-edge-test.XXXXXX)
cat >"$out/study.yaml" <<'YAML'
name: edge-must-show
model: {kind: COMMAND, command: edge}
objective: {metric: loss, goal: MINIMIZE}
algorithm: {name: RANDOM, seed: 32}
parameters:
  - {name: x, double_range: {min: -5, max: 5}}
  - {name: work, int_range: {min: 1, max: 30}}
max_trials: 60
parallel_trials: 4
max_failed_trials: 60
trial_timeout: 300s
YAML

cat >"$out/check.sh" <<'CHECK'
set -eu
dhpt=$REPO/build/bin/dhpt
$dhpt submit "$EDGE_OUT/study.yaml"
# The study's end, with a deadline (ended: COMPLETED or FAILED; anything else keeps waiting).
deadline=$((SECONDS + 600))
until $dhpt studies --json | grep -A3 '"name": "edge-must-show"' >/dev/null &&
      $dhpt studies --json | /usr/bin/python3 -c '
import json, sys
studies = json.load(sys.stdin).get("studies", [])
s = [s for s in studies if s["spec"]["name"] == "edge-must-show"][0]
sys.exit(0 if s["state"] in ("COMPLETED", "FAILED", "STOPPED") else 1)'; do
  [ $SECONDS -lt $deadline ] || { echo "FAIL: the study did not end in 600 s"; exit 1; }
  sleep 1
done
$dhpt studies --json >"$EDGE_OUT/studies.json"
$dhpt trials edge-must-show --json >"$EDGE_OUT/trials.json"
$dhpt workers >"$EDGE_OUT/workers.txt"
CHECK

status=0
bench/edge_cluster.sh --nodes=orin:mem=512M,orin:mem=512M,pi4:mem=512M:cpu=80,pi4:mem=160M:cpu=80 \
  --out="$out/cluster" \
  --scheduler-flag=--heartbeat_interval=1s --scheduler-flag=--missed_heartbeats=8 \
  --scheduler-flag=--keepalive_min_ping_interval=1s \
  --worker-flag=--keepalive_time=1s --worker-flag=--keepalive_timeout=1s \
  --worker-flag=--max_reconnect_backoff=1s \
  --worker-flag="--command=edge=$repo/bench/edge/trial.sh" \
  --fault=4,partition,n1,4 --fault=6,partition,n3,12 --fault=8,freeze,n2,12 \
  -- env REPO="$repo" EDGE_OUT="$out" bash "$out/check.sh" || status=$?
[[ $status -eq 77 ]] && exit 77
[[ $status -eq 0 ]] || { echo "FAIL: the cluster run failed ($status); logs in $out"; exit 1; }

# (edge_cluster.sh itself fails the run when a namespace, link or cgroup of it is left.)

/usr/bin/python3 - "$out" <<'PY'
import collections, json, sys
out = sys.argv[1]
study = [s for s in json.load(open(f"{out}/studies.json"))["studies"]
         if s["spec"]["name"] == "edge-must-show"][0]
trials = json.load(open(f"{out}/trials.json")).get("trials", [])
problems = []
numbers = collections.Counter(t["number"] for t in trials)
if len(trials) != 60 or len(numbers) != 60:
    problems.append(f"{len(trials)} trials ({len(numbers)} numbers), not 60")
if [n for n, c in numbers.items() if c > 1]:
    problems.append(f"numbers listed twice: {[n for n, c in numbers.items() if c > 1]}")
states = collections.Counter(t["state"] for t in trials)
if set(states) - {"COMPLETED", "FAILED"}:
    problems.append(f"trials neither completed nor failed: {dict(states)}")
if states["COMPLETED"] != study["trials_completed"] or states["FAILED"] != study["trials_failed"]:
    problems.append(f"the study counts {study['trials_completed']} completed and "
                    f"{study['trials_failed']} failed, its trials {dict(states)}")
failed = [t for t in trials if t["state"] == "FAILED"]
for t in failed:
    if not t.get("error"):
        problems.append(f"trial {t['number']} failed without a reason")
# A trial given to n4 and then to another board: n4 has no link fault, so its attempt ended
# out of memory. It must complete on the larger boards, never go back to n4, and be the
# only kind of failure (no board is short of memory for a trial but n4).
oom = []
for t in trials:
    workers = [a["worker_id"] for a in t.get("attempts", [])]
    if "n4" in workers[:-1]:
        oom.append(t["number"])
        if "n4" in workers[workers.index("n4") + 1:]:
            problems.append(f"trial {t['number']} went back to n4 after running out of memory: {workers}")
        if t["state"] != "COMPLETED":
            problems.append(f"trial {t['number']} did not complete on a larger board: {t.get('error')}")
if not oom:
    problems.append("no trial ran out of memory on n4 and moved to a larger board")
for t in failed:
    if "out of memory" in t.get("error", "") and "n4" in t.get("error", ""):
        problems.append(f"trial {t['number']} failed for n4's memory: {t['error'][:160]}")
lost = sum(t.get("lost_attempts", 0) for t in trials)
moved = [t["number"] for t in trials
         if any(w in ("n2", "n3") for w in [a["worker_id"] for a in t.get("attempts", [])][:-1])]
if not moved:
    problems.append("the long partition (n3) and the freeze (n2) requeued no trial")
log = open(f"{out}/cluster/scheduler.log").read()
if "worker n1 disconnected (missed heartbeats)" in log:
    problems.append("n1's 4 s partition, shorter than the lease, cost it its trials")
if "worker n1 disconnected (replaced by a newer connection)" not in log:
    problems.append("n1 did not reconnect after its 4 s partition")
print(f"edge_cluster_test: {dict(states)}; {len(oom)} out of memory on n4 and completed elsewhere; "
      f"{len(moved)} taken back from n2 and n3; {lost} lost attempts; study {study['state']}")
for p in problems:
    print("FAIL:", p)
sys.exit(1 if problems else 0)
PY
echo "edge_cluster_test: passed (logs in $out)"
