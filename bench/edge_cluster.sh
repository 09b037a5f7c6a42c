#!/usr/bin/env bash
# A mixed edge cluster in a box: a dhpt-scheduler and one dhpt-cpu-worker per emulated board
# ("node"), each node in its own network namespace joined to the scheduler's by a veth pair with
# a tbf bandwidth cap, and in cgroup v1 cpu/memory/freezer groups that cap it to a board
# profile. Faults can be injected on a schedule. Everything is named with a per-run prefix and
# removed on exit, also on Ctrl-C or SIGTERM. Needs root, `ip`, `tc` and cgroup v1.
#
#   bench/edge_cluster.sh [--nodes=PROFILE[:mem=SIZE][:cpu=THOUSANDTHS],...] [--cpu-scale=PERCENT]
#                         [--fault=AT,KIND,NODE[,ARG]]...
#                         [--scheduler-flag=FLAG]... [--worker-flag=FLAG]... [--out=DIR]
#                         [--rate=RATE] [--gpu-workers] [--command-board=PROFILE]
#                         [-- COMMAND [ARG...]]
#
# With a COMMAND, it runs in the scheduler's namespace once every worker is connected, with
# DHPT_SCHEDULER=127.0.0.1:50051 (what `dhpt` reads), EDGE_OUT=DIR, EDGE_RUN (the run's prefix:
# its cgroups are dhpt-RUN/NODE under /sys/fs/cgroup/CONTROLLER) and EDGE_NODES (n1:orin,...)
# set; the script then cleans up and exits with the command's status. Without one, it runs
# until interrupted. --command-board=PROFILE runs the COMMAND (and what it starts, such as
# `dhpt compare`'s sequential run) in a cgroup dhpt-RUN/cmd capped like that board.
# --gpu-workers also starts a dhpt-gpu-worker (worker NODE-gpu, on the CPU here: no CUDA) on
# each board with a gpu label (orin, nano), as the chart's GPU Deployment would, in the same
# namespace and cgroups as the board's CPU worker; without it no worker runs AutoEncoders.
#
# Nodes are n1, n2, ... in --nodes order (default orin,orin,pi4,pi4,pi4,pi4). Faults, AT seconds
# after the command starts (or the cluster is up):
#   AT,partition,NODE,SECS  the node's link down for SECS seconds, then up (processes keep running)
#   AT,freeze,NODE,SECS     the node's processes frozen (cgroup freezer) for SECS seconds
#   AT,memory,NODE,SIZE     the node's memory cap set to SIZE (e.g. 64M) from then on
#   AT,gone,NODE            the node's worker killed, its link down, never restarted
# A worker that exits (the OOM killer, a crash) is started again after a second, as a Kubernetes
# Deployment would, until its node is gone. Faults and restarts are logged to DIR/events.log;
# DIR/nodes.tsv gets each node's CPU seconds and utilisation of its cap at the end.
#
# Board profiles: the share of ONE host core each board gets (cfs quota, in thousandths), and
# its memory; NODE:cpu=THOUSANDTHS overrides a node's share, --cpu-scale=PERCENT scales every
# board's (ratios kept: six boards at full scale ask for 2 host cores). The ratios are
# single-thread 7-zip MIPS from sbc-bench's sorted results (github.com/ThomasKaiser/sbc-bench,
# Sorted-Results.md, "7-zip MIPS single-threaded"; stock clocks, arm64), relative to the Orin
# Nano, which gets 40% of a host core:
#   orin  Jetson Orin Nano 8GB, Cortex-A78AE 1.51 GHz  2153        1.00  400  (8 GiB)
#   pi5   Raspberry Pi 5,       Cortex-A76   2.4 GHz   3196-3305   1.51  600  (8 GiB)
#   pi4   Raspberry Pi 4 B,     Cortex-A72   1.8 GHz   1741-1769   0.81  325  (4 GiB)
#   nano  Jetson Nano,          Cortex-A57   1.48 GHz  1578        0.73  293  (4 GiB)
# (A Jetson AGX Orin at 2.2 GHz: 3187, 1.48x the Orin Nano; a Pi 4 at its older 1.5 GHz: 1606-
# 1661 under 32-bit Raspbian.) Cross-check: SysBench's single-thread CPU test puts the Pi 5 at
# 1.85x the Pi 4 (2737 and 1478 events/s, leoncode.co.uk "Raspberry Pi CPU Benchmarks"), as
# 7-zip does (1.86x). No Geekbench or Phoronix single-core figure for the Jetson boards was
# found; 7-zip is integer code, so the boards' floating-point gap (XGBoost, libtorch) may be
# wider than these ratios. So one core of these boards differs by at most about 2x (Pi 5 or AGX
# Orin against a Jetson Nano), not 5x: issue 32's "a fifth of the speed" benchmark sets its slow
# boards explicitly (pi4:cpu=80). One core per node: a trial runs single-threaded here
# (--threads_per_trial=1), so the ratio of single-core speeds is the ratio of trial times.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
die() { echo "edge_cluster: $*" >&2; exit 2; }

# --- Profiles: quota in percent of one host core, memory cap, labels as the chart sets them
# (cpuWorker.labels -> --labels; GPU boards also carry the chart's gpu=orin|nano node label).
declare -A quota=([orin]=400 [pi5]=600 [pi4]=325 [nano]=293)  # Thousandths of a host core.
declare -A memory=([orin]=8G [pi4]=4G [nano]=4G [pi5]=8G)
declare -A labels=([orin]="board=orin,gpu=orin" [pi4]="board=pi4" [nano]="board=nano,gpu=nano"
                   [pi5]="board=pi5")

nodes_arg=orin,orin,pi4,pi4,pi4,pi4
faults=()
scheduler_flags=()
worker_flags=()
out=""
gpu_workers=0
command_board=""
cpu_scale=100
rate=20mbit  # A good Wi-Fi link's throughput; tbf, since netem is not on every kernel.
command=()
while (($#)); do
  case $1 in
    --nodes=*) nodes_arg=${1#*=} ;;
    --fault=*) faults+=("${1#*=}") ;;
    --scheduler-flag=*) scheduler_flags+=("${1#*=}") ;;
    --worker-flag=*) worker_flags+=("${1#*=}") ;;
    --out=*) out=${1#*=} ;;
    --rate=*) rate=${1#*=} ;;
    --gpu-workers) gpu_workers=1 ;;
    --cpu-scale=*) cpu_scale=${1#*=} ;;
    --command-board=*) command_board=${1#*=} ;;
    --) shift; command=("$@"); break ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
  shift
done


# --- What the machine must have; exit 77 (ctest's skip code) with the reason if it lacks it.
skip() { echo "edge_cluster: SKIP: $*" >&2; exit 77; }
[[ $(id -u) -eq 0 ]] || skip "needs root (network namespaces, cgroups)"
command -v ip >/dev/null && command -v tc >/dev/null || skip "needs ip and tc (iproute2)"
command -v nsenter >/dev/null || skip "needs nsenter (util-linux)"
for controller in cpu cpuacct memory freezer; do
  [[ -w /sys/fs/cgroup/$controller/cgroup.procs ]] ||
    skip "needs the cgroup v1 $controller controller at /sys/fs/cgroup/$controller"
done
binaries=(dhpt-scheduler dhpt-cpu-worker dhpt)
((gpu_workers)) && binaries+=(dhpt-gpu-worker)
for binary in "${binaries[@]}"; do
  [[ -x build/bin/$binary ]] || die "build/bin/$binary is missing: cmake --build build --target $binary"
done

# One prefix for everything this run makes: e<pid in hex>, so runs never collide, and short
# enough for interface names (15 bytes at most).
run=$(printf 'e%x' $$)
hub=dhpt-$run-hub
[[ -n $out ]] || out=$(mktemp -d "/tmp/dhpt-edge-$run.XXXXXX")
mkdir -p "$out"
: >"$out/events.log"
log() { printf '%s %s\n' "$(date -u +%H:%M:%S.%N | cut -c1-12)" "$*" | tee -a "$out/events.log" >&2; }

IFS=, read -r -a specs <<<"$nodes_arg"
[[ $cpu_scale =~ ^[1-9][0-9]*$ ]] || die "--cpu-scale must be a whole percentage, not '$cpu_scale'"
names=() profiles=() caps=() cpus=()
for i in "${!specs[@]}"; do
  profile=${specs[i]%%:*}
  [[ -n ${quota[$profile]:-} ]] || die "unknown board profile '$profile' (orin, pi4, nano, pi5)"
  cap=${memory[$profile]} cpu=${quota[$profile]}
  for option in $(tr : ' ' <<<"${specs[i]#"$profile"}"); do
    case $option in
      mem=*) cap=${option#mem=} ;;
      cpu=*) cpu=${option#cpu=} ;;
      *) die "unknown node option '$option' in '${specs[i]}' (mem=SIZE, cpu=THOUSANDTHS)" ;;
    esac
  done
  [[ $cpu =~ ^[1-9][0-9]*$ ]] || die "cpu= must be thousandths of a host core, not '$cpu'"
  cpu=$((cpu * cpu_scale / 100))
  ((cpu >= 10)) || die "node ${specs[i]} would get ${cpu}/1000 of a core; the kernel's least is 10"
  names+=("n$((i + 1))") profiles+=("$profile") caps+=("$cap") cpus+=("$cpu")
done
[[ -z $command_board || -n ${quota[$command_board]:-} ]] ||
  die "unknown board profile '$command_board' for --command-board (orin, pi4, nano, pi5)"
command_cpu=$(( ${quota[${command_board:-orin}]} * cpu_scale / 100 ))

made_netns=() made_cgroups=() pids=() scheduler_pid="" command_pid=""
cleanup() {
  local status=$?
  trap - EXIT INT TERM
  set +e
  [[ -n $command_pid ]] && kill "$command_pid" 2>/dev/null && wait "$command_pid" 2>/dev/null
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
  for group in "${made_cgroups[@]}"; do
    echo THAWED >"/sys/fs/cgroup/freezer/$group/freezer.state" 2>/dev/null
    # Lift the board's CPU cap: a process on 8% of a core takes seconds to exit on a busy host
    # (it must be scheduled to die), and its cgroup cannot be removed until it has.
    echo -1 >"/sys/fs/cgroup/cpu/$group/cpu.cfs_quota_us" 2>/dev/null
  done
  # Every process of a node, the workers and their trials, wherever it forked to.
  for group in "${made_cgroups[@]}"; do
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      procs=$(cat "/sys/fs/cgroup/cpu/$group/cgroup.procs" 2>/dev/null)
      [[ -z $procs ]] && break
      kill -9 $procs 2>/dev/null
      sleep 0.2
    done
  done
  [[ -n $scheduler_pid ]] && kill "$scheduler_pid" 2>/dev/null && wait "$scheduler_pid" 2>/dev/null
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null; done
  write_usage
  # A killed process leaves its cgroup only once it has fully exited: try for up to 10 s.
  for ((i = ${#made_cgroups[@]} - 1; i >= 0; i--)); do
    for controller in cpu cpuacct memory freezer; do
      dir="/sys/fs/cgroup/$controller/${made_cgroups[i]}"
      for _ in $(seq 50); do
        [[ -d $dir ]] || break
        rmdir "$dir" 2>/dev/null && break
        kill -9 $(cat "$dir/cgroup.procs" 2>/dev/null) 2>/dev/null
        sleep 0.2
      done
    done
  done
  for ns in "${made_netns[@]}"; do ip netns del "$ns" 2>/dev/null; done  # Their veths go too.
  local left
  left=$( (ip netns list | grep -F "dhpt-$run-"; ls -d /sys/fs/cgroup/*/"dhpt-$run" 2>/dev/null) || true)
  if [[ -n $left ]]; then
    echo "edge_cluster: could not remove: $left" >&2
    status=1
  else
    echo "edge_cluster: removed run $run's namespaces, links and cgroups; logs in $out" >&2
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

started=$(date +%s%N)
write_usage() {
  [[ ${#made_cgroups[@]} -gt 1 ]] || return 0
  local wall
  wall=$(( ($(date +%s%N) - started) / 1000000 ))  # Milliseconds.
  printf 'node\tprofile\tcpu_seconds\tcap_cores\tutilisation_of_cap\tpeak_memory_mib\n' >"$out/nodes.tsv"
  local rows=("${names[@]}") kinds=("${profiles[@]}") shares=("${cpus[@]}")
  [[ -n $command_board ]] && rows+=(cmd) kinds+=("$command_board") shares+=("$command_cpu")
  for i in "${!rows[@]}"; do
    local usage peak
    usage=$(cat "/sys/fs/cgroup/cpuacct/dhpt-$run/${rows[i]}/cpuacct.usage" 2>/dev/null || echo 0)
    peak=$(cat "/sys/fs/cgroup/memory/dhpt-$run/${rows[i]}/memory.max_usage_in_bytes" 2>/dev/null || echo 0)
    awk -v n="${rows[i]}" -v p="${kinds[i]}" -v u="$usage" -v q="${shares[i]}" -v w="$wall" -v m="$peak" \
      'BEGIN { s = u / 1e9; printf "%s\t%s\t%.1f\t%.3f\t%.2f\t%.0f\n", n, p, s, q / 1000, s / (q / 1000 * w / 1000), m / 1048576 }' \
      >>"$out/nodes.tsv"
  done
}

# --- Namespaces, links and bandwidth caps. The scheduler's namespace is the hub; node i is
# 10.77.i.2, its end of the hub is 10.77.i.1. Nothing is made in the host's namespace, so no
# traffic can leave these namespaces.
ip netns add "$hub"; made_netns+=("$hub")
ip -n "$hub" link set lo up
for i in "${!names[@]}"; do
  node=${names[i]} ns=dhpt-$run-${names[i]}
  ip netns add "$ns"; made_netns+=("$ns")
  ip -n "$ns" link set lo up
  ip -n "$hub" link add "$run-$node" type veth peer name uplink netns "$ns"
  ip -n "$hub" addr add "10.77.$((i + 1)).1/24" dev "$run-$node"
  ip -n "$ns" addr add "10.77.$((i + 1)).2/24" dev uplink
  ip -n "$hub" link set "$run-$node" up
  ip -n "$ns" link set uplink up
  tc -n "$hub" qdisc add dev "$run-$node" root tbf rate "$rate" burst 32kb latency 100ms
  tc -n "$ns" qdisc add dev uplink root tbf rate "$rate" burst 32kb latency 100ms
done

# --- cgroups: dhpt-RUN/NODE under each controller.
made_cgroups+=("dhpt-$run")
for controller in cpu cpuacct memory freezer; do mkdir "/sys/fs/cgroup/$controller/dhpt-$run"; done
for i in "${!names[@]}"; do
  group=dhpt-$run/${names[i]}
  for controller in cpu cpuacct memory freezer; do mkdir "/sys/fs/cgroup/$controller/$group"; done
  made_cgroups+=("$group")
  echo 100000 >"/sys/fs/cgroup/cpu/$group/cpu.cfs_period_us"
  echo $((cpus[i] * 100)) >"/sys/fs/cgroup/cpu/$group/cpu.cfs_quota_us"
  echo "${caps[i]}" >"/sys/fs/cgroup/memory/$group/memory.limit_in_bytes"
done
if [[ -n $command_board ]]; then
  # The COMMAND's own board: `dhpt compare`'s sequential run then runs at that board's speed.
  group=dhpt-$run/cmd
  for controller in cpu cpuacct memory freezer; do mkdir "/sys/fs/cgroup/$controller/$group"; done
  made_cgroups+=("$group")
  echo 100000 >"/sys/fs/cgroup/cpu/$group/cpu.cfs_period_us"
  echo $((command_cpu * 100)) >"/sys/fs/cgroup/cpu/$group/cpu.cfs_quota_us"
  echo "${memory[$command_board]}" >"/sys/fs/cgroup/memory/$group/memory.limit_in_bytes"
fi

# --- The scheduler, in the hub.
ip netns exec "$hub" build/bin/dhpt-scheduler --listen=0.0.0.0:50051 --db="$out/scheduler.db" \
  "${scheduler_flags[@]}" >"$out/scheduler.log" 2>&1 &
scheduler_pid=$!

# Node i's worker (BINARY, worker id NODE[SUFFIX]), restarted when it exits until the node is
# gone ($out/gone-NODE).
supervise() {
  local i=$1 binary=$2 suffix=$3 node=${names[$1]} group=dhpt-$run/${names[$1]}
  while [[ ! -e $out/gone-$node ]]; do
    # The shell joins the node's cgroups and then becomes the worker, in the node's namespace.
    # nsenter, not `ip netns exec`, which mounts a fresh /sys and so hides /sys/fs/cgroup: the
    # worker reads its memory cgroup to tell an OOM kill (as in a Kubernetes pod).
    sh -c 'for c in cpu cpuacct memory freezer; do echo $$ >/sys/fs/cgroup/$c/$0/cgroup.procs; done
           exec "$@"' "$group" nsenter --net="/run/netns/dhpt-$run-$node" \
      "$repo/build/bin/$binary" --scheduler="10.77.$((i + 1)).1:50051" \
      --worker_id="$node$suffix" --node_name="$node" --labels="${labels[${profiles[i]}]}" \
      --slots=1 --threads_per_trial=1 "${worker_flags[@]}" >>"$out/$node$suffix.log" 2>&1 || true
    [[ -e $out/gone-$node ]] && break
    log "$node: worker $node$suffix exited; starting it again"
    sleep 1
  done
}
expected_workers=${#names[@]}
for i in "${!names[@]}"; do
  supervise "$i" dhpt-cpu-worker "" &
  pids+=($!)
  if ((gpu_workers)) && [[ ${labels[${profiles[i]}]} == *gpu=* ]]; then
    supervise "$i" dhpt-gpu-worker -gpu &
    pids+=($!)
    expected_workers=$((expected_workers + 1))
  fi
done

# Up when every worker is connected (ready or not, a worker lists itself once connected).
deadline=$((SECONDS + 120))
until [[ $(ip netns exec "$hub" build/bin/dhpt workers --json --scheduler=127.0.0.1:50051 2>/dev/null |
           grep -o '"worker_id"' | wc -l) -ge $expected_workers ]]; do
  kill -0 "$scheduler_pid" 2>/dev/null || die "the scheduler exited: $(tail -5 "$out/scheduler.log")"
  ((SECONDS < deadline)) || die "not every worker connected in 120 s (logs in $out)"
  sleep 0.5
done
for i in "${!names[@]}"; do
  log "${names[i]}: ${profiles[i]} ($((cpus[i] / 10)).$((cpus[i] % 10))% of a core, ${caps[i]} memory, ${labels[${profiles[i]}]})"
done
log "cluster $run up: scheduler 127.0.0.1:50051 in namespace $hub"

# --- Faults on their schedule.
node_index() {
  local i; for i in "${!names[@]}"; do [[ ${names[i]} == "$1" ]] && { echo "$i"; return; }; done
  die "fault names unknown node $1"
}
link_of() { echo "$run-$1"; }
inject() {
  local at=$1 kind=$2 node=$3 arg=${4:-}
  local group=dhpt-$run/$node
  sleep "$at"
  case $kind in
    partition)
      log "$node: link down for ${arg}s"
      ip -n "$hub" link set "$(link_of "$node")" down
      sleep "$arg"
      ip -n "$hub" link set "$(link_of "$node")" up
      log "$node: link up" ;;
    freeze)
      log "$node: frozen for ${arg}s"
      echo FROZEN >"/sys/fs/cgroup/freezer/$group/freezer.state"
      sleep "$arg"
      echo THAWED >"/sys/fs/cgroup/freezer/$group/freezer.state"
      log "$node: thawed" ;;
    memory)
      log "$node: memory cap now $arg"
      echo "$arg" >"/sys/fs/cgroup/memory/$group/memory.limit_in_bytes" ;;
    gone)
      log "$node: gone for good"
      : >"$out/gone-$node"
      ip -n "$hub" link set "$(link_of "$node")" down
      # shellcheck disable=SC2046  # One pid a line: split on purpose.
      kill -9 $(cat "/sys/fs/cgroup/cpu/$group/cgroup.procs") 2>/dev/null || true ;;
    *) log "unknown fault kind $kind" ;;
  esac
}
for fault in "${faults[@]}"; do
  IFS=, read -r at kind node arg <<<"$fault"
  node_index "$node" >/dev/null
  inject "$at" "$kind" "$node" "$arg" &
  pids+=($!)
done

if ((${#command[@]})); then
  # In the background and waited for: a signal to this script is then handled at once (bash
  # runs traps only between foreground commands), and cleanup stops the command.
  node_list=""
  for i in "${!names[@]}"; do node_list+="${node_list:+,}${names[i]}:${profiles[i]}"; done
  # nsenter, not `ip netns exec`, so that the command sees /sys/fs/cgroup (the boards' counters);
  # with --command-board the shell joins the board's cgroups first and then becomes the command.
  cmd_group=""
  [[ -n $command_board ]] && cmd_group=dhpt-$run/cmd
  sh -c '[ -z "$0" ] || for c in cpu cpuacct memory freezer; do echo $$ >/sys/fs/cgroup/$c/$0/cgroup.procs; done
         exec "$@"' "$cmd_group" nsenter --net="/run/netns/$hub" \
    env DHPT_SCHEDULER=127.0.0.1:50051 EDGE_OUT="$out" EDGE_RUN="$run" EDGE_NODES="$node_list" \
    "${command[@]}" <&0 &  # <&0: keep stdin (an & alone gives /dev/null).
  command_pid=$!
  set +e
  wait "$command_pid"
  status=$?
  command_pid=""
  exit "$status"
fi
echo "edge_cluster: running; Ctrl-C to stop. Try: ip netns exec $hub build/bin/dhpt workers --scheduler=127.0.0.1:50051" >&2
wait "$scheduler_pid"
