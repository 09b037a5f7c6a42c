#!/usr/bin/env bash
# Where a dashboard's first open of a 100,000-trial study goes (docs/benchmarks.md, "Web
# dashboard", fifth round): each API call a study page makes, alone (curl, no browser), with
# the CPU seconds the scheduler and the dashboard used for it, on two imported copies of a study
# of worker-like trials; then `dhpt importance` asked twice of each (seventh round). --ask: a
# client asks for a trial of another study every 0.3 s meanwhile (a store commit each, as a
# cluster's results make). --importances_first: each study's importances are asked (`dhpt
# importance`, timed) before the page's calls, so that the plots' call is the sample's pages alone
# (eighth round); the scheduler then keeps no ended study in memory but the one used last.
#   bash bench/dashboard_first_open.sh build/bin [--ask] [--importances_first] [--trials=100000]
set -euo pipefail
bin=${1:?the directory of dhpt, dhpt-scheduler and dhpt-dashboard}; shift
ask=false; importances_first=false; trials=100000
for arg in "$@"; do
  case $arg in
    --ask) ask=true ;;
    --importances_first) importances_first=true ;;
    --trials=*) trials=${arg#--trials=} ;;
    *) echo "unknown $arg" >&2; exit 2 ;;
  esac
done
dir=$(mktemp -d); pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$dir"' EXIT
wait_for() { for _ in $(seq 100); do grep -q "$2" "$1" && return 0; sleep 0.2; done; echo "no '$2' in $1" >&2; exit 1; }
cpu() { awk '{print ($14 + $15) / 100}' "/proc/$1/stat"; }  # utime + stime, USER_HZ 100.
for copy in 1 2; do
  node - "first-open-$copy" "$trials" "$dir/first-open-$copy.json" <<'JS'
const fs = require('fs');
const [name, n, file] = [process.argv[2], Number(process.argv[3]), process.argv[4]];
const t0 = Date.parse('2026-01-01T00:00:00Z'), time = (ms) => new Date(t0 + ms).toISOString();
const trials = [];
for (let i = 0; i < n; ++i) {
  const x = Math.sin(i * 12.9898) * 5, y = Math.cos(i * 78.233) * 5, loss = x * x + y * y + (i % 7) * 0.01;
  trials.push({study: name, number: String(i), state: 'COMPLETED', attempt: 1, attempts: [{clientId: 'bench'}],
    clientId: 'bench', device: 'client',
    params: {x: {doubleValue: x}, y: {doubleValue: y}, kind: {stringValue: ['a', 'b', 'c'][i % 3]}},
    metrics: {loss, mse: loss * 1.1, r2: 1 - loss / 50, wall_seconds: 0.89, cpu_seconds: 1.71,
              cpu_utilization: 1.92, peak_rss_bytes: 2.1e8 + i, threads: 2},
    workerId: `cpu-worker-${i % 4}`, nodeName: 'pi4-node-1', objectiveValue: loss,
    createTime: time(i * 1000), startTime: time(i * 1000 + 10), endTime: time(i * 1000 + 900)});
}
fs.writeFileSync(file, JSON.stringify({study: {spec: {name, model: {kind: 'EXTERNAL'},
  objective: {metric: 'loss', goal: 'MINIMIZE'}, algorithm: {name: 'RANDOM', seed: 1}, maxTrials: n,
  parameters: [{name: 'x', doubleRange: {min: -5, max: 5}}, {name: 'y', doubleRange: {min: -5, max: 5}},
               {name: 'kind', categorical: {values: ['a', 'b', 'c']}}]}, state: 'COMPLETED'}, trials}));
JS
done
cache=(); if $importances_first; then cache=(--ended_study_cache_bytes=1); fi
"$bin/dhpt-scheduler" --listen=127.0.0.1:0 --db="$dir/dhpt.db" --max_message_bytes=536870912 "${cache[@]}" > "$dir/scheduler.log" 2>&1 &
scheduler_pid=$!; pids+=("$scheduler_pid")
wait_for "$dir/scheduler.log" "listening on 127.0.0.1:"
scheduler=127.0.0.1:$(grep -o "listening on 127.0.0.1:[0-9]*" "$dir/scheduler.log" | head -1 | cut -d: -f2)
"$bin/dhpt-dashboard" --scheduler="$scheduler" --listen=127.0.0.1:0 > "$dir/dashboard.log" 2>&1 &
dashboard_pid=$!; pids+=("$dashboard_pid")
wait_for "$dir/dashboard.log" "dashboard at"
dashboard=$(grep -o "http://127.0.0.1:[0-9]*" "$dir/dashboard.log" | head -1)
for copy in 1 2; do "$bin/dhpt" import "$dir/first-open-$copy.json" --scheduler="$scheduler" > /dev/null; done
if $ask; then
  echo '{"study": {"spec": {"name": "asked", "model": {"kind": "EXTERNAL"}, "objective": {"metric": "loss", "goal": "MINIMIZE"}, "algorithm": {"name": "RANDOM", "seed": 1}, "maxTrials": 100000, "parallelTrials": 100000, "parameters": [{"name": "x", "doubleRange": {"min": -5, "max": 5}}]}, "state": "RUNNING"}, "trials": []}' > "$dir/asked.json"
  "$bin/dhpt" import "$dir/asked.json" --scheduler="$scheduler" > /dev/null
  (i=0; while :; do i=$((i + 1)); "$bin/dhpt" ask asked --client="c$i" --scheduler="$scheduler" > /dev/null 2>&1 || true; sleep 0.3; done) &
  pids+=("$!")
fi
echo "| study | call | wall (s) | CPU: scheduler, dashboard (s) | answer (bytes) | load (1 min) |"
echo "|---|---|---:|---:|---:|---:|"
for copy in 1 2; do
  name=first-open-$copy
  if $importances_first; then
    s0=$(cpu "$scheduler_pid"); t0=$(date +%s.%N)
    "$bin/dhpt" importance "$name" --scheduler="$scheduler" > /dev/null
    t1=$(date +%s.%N)
    printf '| %s | dhpt importance | %.2f | %.2f, - | - | %s |\n' "$name" "$(echo "$t1 - $t0" | bc)" \
      "$(echo "$(cpu "$scheduler_pid") - $s0" | bc)" "$(cut -d' ' -f1 /proc/loadavg)"
  fi
  for call in "study?name=$name" "history?study=$name" "trials?study=$name&size=50" "plots?study=$name"; do
    s0=$(cpu "$scheduler_pid"); d0=$(cpu "$dashboard_pid"); t0=$(date +%s.%N)
    curl -s -m 120 -o "$dir/answer" "$dashboard/api/$call" || true
    t1=$(date +%s.%N)
    printf '| %s | /api/%s | %.2f | %.2f, %.2f | %s | %s |\n' "$name" "${call%%\?*}" "$(echo "$t1 - $t0" | bc)" \
      "$(echo "$(cpu "$scheduler_pid") - $s0" | bc)" "$(echo "$(cpu "$dashboard_pid") - $d0" | bc)" \
      "$(stat -c%s "$dir/answer")" "$(cut -d' ' -f1 /proc/loadavg)"
  done
done
# An ended study's importances asked again (`dhpt importance`, after the dashboard's plots asked
# the same question): read from the rows each time, or kept with the study.
echo
echo "| study | dhpt importance | wall (s) | CPU: scheduler (s) | load (1 min) |"
echo "|---|---|---:|---:|---:|"
for copy in 1 2; do
  for ask in first second; do
    s0=$(cpu "$scheduler_pid"); t0=$(date +%s.%N)
    "$bin/dhpt" importance "first-open-$copy" --scheduler="$scheduler" > /dev/null
    t1=$(date +%s.%N)
    printf '| first-open-%s | %s | %.2f | %.2f | %s |\n' "$copy" "$ask" "$(echo "$t1 - $t0" | bc)" \
      "$(echo "$(cpu "$scheduler_pid") - $s0" | bc)" "$(cut -d' ' -f1 /proc/loadavg)"
  done
done
