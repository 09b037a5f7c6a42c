#!/usr/bin/env bash
# `dhpt compare` on the emulated edge cluster (issue 32, item 5): the seed experiment, each study
# run sequentially on ONE board and through the framework on a mixed cluster of boards, with a
# row per board (CPU, memory, time busy and idle) in the report. Needs what bench/edge_cluster.sh
# needs (root, iproute2, cgroup v1); exits 77 with the reason where those are missing.
#
#   bench/edge/compare.sh [--nodes=PROFILE,...] [--sequential-board=PROFILE] [--cpu-scale=PERCENT]
#                         [--out=DIR] [STUDY.yaml...]
#
# Defaults: boards orin,orin,pi4,pi4,nano,nano at half their profile's CPU share (--cpu-scale=
# 50: the six then ask for one host core, which a shared 2-core host can give); the sequential
# run on an orin (the fastest board: the framework must beat the best single board), at the
# same scale; the studies bench/edge/compare-{random-forest,xgboost,autoencoder}.yaml (small:
# seconds a trial); DIR /tmp/dhpt-edge-compare. The boards with a GPU label (orin, nano) also
# run a dhpt-gpu-worker, which trains AutoEncoders on the CPU here (their trials say device
# cpu). Writes DIR/NAME/ per study (dhpt compare's report.md, report.json and plots; samples.tsv,
# each board's cgroup CPU counter every 0.5 s; memory.tsv, each board's peak memory), and
# DIR/edge-compare.md and .json (every study's times and a row per board; bench/edge/
# compare_report.py). The cluster's own logs are in DIR/cluster.
set -euo pipefail
cd "$(dirname "$0")/../.."

if [[ -z ${EDGE_RUN:-} ]]; then
  # --- Outside the cluster: start it, with this script as its command.
  nodes=orin,orin,pi4,pi4,nano,nano
  sequential_board=orin
  cpu_scale=50
  out=/tmp/dhpt-edge-compare
  studies=()
  for arg in "$@"; do
    case $arg in
      --nodes=*) nodes=${arg#*=} ;;
      --sequential-board=*) sequential_board=${arg#*=} ;;
      --cpu-scale=*) cpu_scale=${arg#*=} ;;
      --out=*) out=${arg#*=} ;;
      -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
      --*) echo "compare.sh: unknown argument $arg (see --help)" >&2; exit 2 ;;
      *) studies+=("$(realpath "$arg")") ;;
    esac
  done
  ((${#studies[@]})) || studies=("$PWD"/bench/edge/compare-{random-forest,xgboost,autoencoder}.yaml)
  mkdir -p "$out"
  out=$(realpath "$out")
  exec bench/edge_cluster.sh --nodes="$nodes" --cpu-scale="$cpu_scale" --gpu-workers \
    --command-board="$sequential_board" \
    --out="$out/cluster" -- env COMPARE_OUT="$out" SEQUENTIAL_BOARD="$sequential_board" bash "$0" "${studies[@]}"
fi

# --- Inside the cluster (bench/edge_cluster.sh set EDGE_RUN, EDGE_NODES, DHPT_SCHEDULER), in
# the sequential board's cgroups: `dhpt compare`'s sequential run is that board's.
out=$COMPARE_OUT
IFS=, read -r -a nodes <<<"$EDGE_NODES"
groups=()
for node in "${nodes[@]}"; do groups+=("${node%%:*}"); done
groups+=(cmd)
# Each group's board and CPU cap in cores (cfs quota / period), for the report.
printf 'group\tprofile\tcap_cores\n' >"$out/caps.tsv"
for node in "${nodes[@]}" "cmd:$SEQUENTIAL_BOARD"; do
  read -r quota <"/sys/fs/cgroup/cpu/dhpt-$EDGE_RUN/${node%%:*}/cpu.cfs_quota_us"
  read -r period <"/sys/fs/cgroup/cpu/dhpt-$EDGE_RUN/${node%%:*}/cpu.cfs_period_us"
  printf '%s\t%s\t%s\n' "${node%%:*}" "${node#*:}" "$(awk -v q="$quota" -v p="$period" 'BEGIN { printf "%.3f", q / p }')" >>"$out/caps.tsv"
done

# Every group's CPU counter (cpuacct.usage, ns) with the time, every 0.5 s while a comparison
# runs and once more after it: the report takes each board's CPU over the samples that enclose
# a run. Shell built-ins only, no process per sample: the host is shared.
sample_once() {
  local group value line=$EPOCHREALTIME
  for group in "${groups[@]}"; do
    read -r value <"/sys/fs/cgroup/cpuacct/dhpt-$EDGE_RUN/$group/cpuacct.usage" || value=0
    line+=$'\t'$value
  done
  echo "$line" >>"$1"
}
sample() {
  local pause
  exec {pause}<> <(:)  # A pipe nobody writes to: `read -t` on it sleeps without a process.
  while :; do
    sample_once "$1"
    read -r -t 0.5 -u "$pause" || true
  done
}

uptime >"$out/load.txt"
status=0
for study in "$@"; do
  name=$(basename "$study" .yaml)
  mkdir -p "$out/$name"
  # Peak memory from here on: each group's high-water mark reset.
  for group in "${groups[@]}"; do
    echo 0 >"/sys/fs/cgroup/memory/dhpt-$EDGE_RUN/$group/memory.max_usage_in_bytes"
  done
  printf 'time\t%s\n' "$(IFS=$'\t'; echo "${groups[*]}")" >"$out/$name/samples.tsv"
  sample "$out/$name/samples.tsv" &
  sampler=$!
  build/bin/dhpt compare --study="$study" --scheduler="$DHPT_SCHEDULER" --threads-per-trial=1 \
    --out="$out/$name" || status=$?
  kill "$sampler"
  wait "$sampler" 2>/dev/null || true
  sample_once "$out/$name/samples.tsv"  # After the last run's end, whenever the sampler last woke.
  printf 'group\tpeak_memory_bytes\n' >"$out/$name/memory.tsv"
  for group in "${groups[@]}"; do
    printf '%s\t%s\n' "$group" \
      "$(cat "/sys/fs/cgroup/memory/dhpt-$EDGE_RUN/$group/memory.max_usage_in_bytes")" \
      >>"$out/$name/memory.tsv"
  done
  ((status == 0)) || break
done
uptime >>"$out/load.txt"
((status == 0)) || { echo "compare.sh: dhpt compare failed ($status); logs in $out" >&2; exit "$status"; }
/usr/bin/python3 bench/edge/compare_report.py "$out" "$EDGE_NODES" "$@"
