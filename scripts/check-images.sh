#!/usr/bin/env bash
# Builds the scheduler, cpu-worker and gpu-worker (Debian CPU libtorch) images with podman on a
# machine without a Docker engine (`podman build --isolation=chroot`, DESIGN.md §10), from a
# Debian base made locally with debootstrap, for amd64 and arm64, then smoke-tests each image's
# binaries inside its root (`podman image mount` + chroot; arm64 ones run under qemu-user through
# binfmt_misc): --version, no compiler, and short studies with the scheduler and a worker from
# the images. Needs root. Takes tens of minutes on two cores (each architecture's builder stage
# compiles everything once; arm64 cross-compiles natively, only its runtime stages' apt-get runs
# under emulation). docs/images.md has the timings and sizes measured here.
#
#   scripts/check-images.sh                         # amd64 and arm64, every image
#   DHPT_ARCHES=arm64 DHPT_IMAGES="scheduler cpu-worker" scripts/check-images.sh
#
# amd64 images are tagged dhpt/IMAGE:check, the others dhpt/IMAGE:check-ARCH. The gpu-worker is
# built for the build machine's architecture only (Debian's libtorch-dev is not cross-built;
# arm64 GPU workers come from gpu-worker-jetson.Dockerfile). The arm64 smoke test runs the arm64
# cpu-worker against an amd64 scheduler: the amd64 image's when it is checked in the same run,
# else $DHPT_SCHEDULER (default build/bin/dhpt-scheduler). Studies are submitted with the host's
# CLI, $DHPT_CLI (default build/bin/dhpt).
set -euo pipefail
cd "$(dirname "$0")/.."
[[ $(id -u) -eq 0 ]] || { echo "check-images: needs root (podman image mount, chroot)" >&2; exit 1; }
images=${DHPT_IMAGES:-scheduler cpu-worker gpu-worker}
arches=${DHPT_ARCHES:-amd64 arm64}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
cli=${DHPT_CLI:-build/bin/dhpt}
host_scheduler=${DHPT_SCHEDULER:-build/bin/dhpt-scheduler}
build_arch=$(dpkg --print-architecture)
# The base of the builder stage (and of the build machine's images); other architectures get
# their own import, named by architecture, since there is no registry to hold a manifest list.
builder_base=docker.io/library/debian:bookworm-slim

step_start=0
step() { step_start=$SECONDS; echo "check-images: $*"; }
took() { echo "check-images:   ($((SECONDS - step_start)) s)"; }

base_of() { [[ $1 == "$build_arch" ]] && echo "$builder_base" || echo "localhost/debian:bookworm-slim-$1"; }
tag_of() { [[ $2 == "$build_arch" ]] && echo "dhpt/$1:check" || echo "dhpt/$1:check-$2"; }
qemu_of() { case $1 in arm64) echo aarch64 ;; armhf) echo arm ;; *) echo "$1" ;; esac; }
has() { [[ " $1 " == *" $2 "* ]]; }

need=(podman debootstrap uidmap file)
for arch in $arches; do
  [[ $arch == "$build_arch" ]] || need+=(qemu-user-static binfmt-support)
done
for p in "${need[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || {
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"
    break
  }
done

for arch in $arches; do
  if [[ $arch != "$build_arch" ]]; then
    # qemu-user-static registers its interpreters with the F flag (opened once, at registration),
    # so they work inside chroots and podman's RUN steps without being copied in.
    [[ -e /proc/sys/fs/binfmt_misc/status ]] || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
    update-binfmts --enable "qemu-$(qemu_of "$arch")" 2>/dev/null || true
    [[ -e /proc/sys/fs/binfmt_misc/qemu-$(qemu_of "$arch") ]] \
      || { echo "check-images: no binfmt_misc handler for $arch (qemu-user-static)" >&2; exit 1; }
  fi
  for base in "$(base_of "$arch")" "$builder_base"; do
    podman image exists "$base" && continue
    base_arch=$arch
    [[ $base == "$builder_base" ]] && base_arch=$build_arch
    root=$(mktemp -d)
    # A foreign architecture's second stage runs under qemu-user (debootstrap does it itself
    # when binfmt_misc can run the target's binaries).
    step "debootstrap bookworm (minbase, $base_arch) into $root"
    debootstrap --variant=minbase --arch="$base_arch" bookworm "$root" "$mirror" >"$root.log" 2>&1 \
      || { tail -20 "$root.log"; exit 1; }
    tar -C "$root" -c . | podman import --arch "$base_arch" - "$base" >/dev/null
    rm -rf "$root" "$root.log"
    took
  done
done

for arch in $arches; do
  for image in $images; do
    if [[ $image == gpu-worker && $arch != "$build_arch" ]]; then
      echo "check-images: skipping gpu-worker for $arch (libtorch is not cross-built; see docs/images.md)"
      continue
    fi
    tag=$(tag_of "$image" "$arch")
    step "building $tag (linux/$arch)"
    podman build --isolation=chroot --pull=never --platform "linux/$arch" --target "$image" \
      --build-arg BUILDPLATFORM="linux/$build_arch" --build-arg BASE_IMAGE="$(base_of "$arch")" \
      --build-arg BUILDER_IMAGE="$builder_base" \
      -t "$tag" -f docker/Dockerfile . >"/tmp/dhpt-image-$image-$arch.log" 2>&1 \
      || { tail -30 "/tmp/dhpt-image-$image-$arch.log"; exit 1; }
    took
    podman image inspect "$tag" \
      --format "  {{.Size}} bytes, {{.Os}}/{{.Architecture}}, user {{.Config.User}}, labels {{len .Labels}}"
  done
done

declare -A roots
pids=()
# A container gets /proc, /sys and /dev from its runtime; a chroot needs them mounted (libtorch
# reads /proc/cpuinfo, for one).
cleanup() {
  ((${#pids[@]})) && kill "${pids[@]}" 2>/dev/null || true
  for root in "${roots[@]}"; do umount -R "$root/dev" "$root/sys" "$root/proc" 2>/dev/null || true; done
}
trap cleanup EXIT
for arch in $arches; do
  for image in $images; do
    tag=$(tag_of "$image" "$arch")
    podman image exists "$tag" || continue
    root=$(podman image mount "$tag")
    roots[$image-$arch]=$root
    mount -t proc proc "$root/proc"
    mount --rbind /sys "$root/sys"
    mount --rbind /dev "$root/dev"
    binary=dhpt-$image
    echo -n "check-images: $image ($arch): "
    chroot "$root" /usr/local/bin/$binary --version
    [[ $(file -bL "$root/usr/local/bin/$binary") == *"$(case $arch in amd64) echo x86-64 ;; arm64) echo aarch64 ;; *) echo "" ;; esac)"* ]] \
      || { echo "check-images: $tag holds a binary for another architecture" >&2; exit 1; }
    # No compilers in a runtime image.
    if chroot "$root" sh -c 'command -v gcc || command -v g++ || command -v cc' >/dev/null; then
      echo "check-images: $tag contains a compiler" >&2
      exit 1
    fi
  done
done

# start_scheduler LOG COMMAND...: starts a scheduler on a free port and sets $address (not in a
# subshell, so that its pid stays in $pids).
start_scheduler() {
  local log=$1
  shift
  "$@" --listen=127.0.0.1:0 --db=:memory: >"$log" 2>&1 &
  pids+=("$!")
  # Under qemu-user start-up takes a few seconds.
  for _ in $(seq 300); do grep -q "listening on" "$log" && break; sleep 0.1; done
  address=$(sed -n 's/^listening on //p' "$log")
  [[ -n $address ]] || { cat "$log" >&2; echo "check-images: the scheduler did not start" >&2; exit 1; }
}
# run_study ADDRESS FILE TRIALS: submits the study with the host's CLI and checks that all
# TRIALS completed; if not, prints the failed trials' errors and fails.
run_study() {
  local out name
  out=$(mktemp)
  name=$(sed -n 's/^name: //p' "$2")
  "$cli" submit "$2" --watch --scheduler="$1" | tail -4 | tee "$out"
  grep -q "$3 completed, 0 failed" "$out" || {
    "$cli" trials "$name" --json --scheduler="$1" | grep '"error": "[^"]' >&2 || true
    echo "check-images: study $name did not complete ($3 trials)" >&2
    return 1
  }
}
stop_all() {
  kill "${pids[@]}" 2>/dev/null || true
  wait "${pids[@]}" 2>/dev/null || true
  pids=()
}
study=$(mktemp --suffix=.yaml)
log=$(mktemp)

if has "$arches" "$build_arch" && [[ -n ${roots[scheduler-$build_arch]:-} && -n ${roots[cpu-worker-$build_arch]:-} ]]; then
  step "$build_arch study: scheduler and cpu-worker images"
  start_scheduler "$log" chroot "${roots[scheduler-$build_arch]}" /usr/local/bin/dhpt-scheduler
  chroot "${roots[cpu-worker-$build_arch]}" /usr/local/bin/dhpt-cpu-worker --scheduler="$address" --worker_id=image-cpu 2>>"$log" &
  pids+=("$!")
  if [[ -n ${roots[gpu-worker-$build_arch]:-} ]]; then
    chroot "${roots[gpu-worker-$build_arch]}" /usr/local/bin/dhpt-gpu-worker --scheduler="$address" --worker_id=image-gpu --device=auto 2>>"$log" &
    pids+=("$!")
  fi
  cat >"$study" <<'YAML'
name: image-check
model: {kind: XGBOOST}
dataset: {friedman1: {samples: 2000, features: 8, seed: 1}}
algorithm: {name: TPE, seed: 1}
parameters:
  - {name: max_depth, int_range: {min: 2, max: 6}}
  - {name: num_boost_round, int_range: {min: 20, max: 60}}
max_trials: 12
YAML
  chroot "${roots[cpu-worker-$build_arch]}" /usr/local/bin/dhpt --version
  # The CLI of the host build submits (the images' own CLI needs the file inside its root).
  run_study "$address" "$study" 12 || exit 1
  if [[ -n ${roots[gpu-worker-$build_arch]:-} ]]; then
    cat >"$study" <<'YAML'
name: image-check-ae
model: {kind: AUTOENCODER, fixed: {epochs: 3}}
dataset: {sensors: {samples: 1000, seed: 1}}
parameters:
  - {name: bottleneck, int_range: {min: 3, max: 6}}
max_trials: 3
allow_cpu_fallback: true
YAML
    run_study "$address" "$study" 3 || exit 1
  fi
  stop_all
  took
fi

for arch in $arches; do
  [[ $arch != "$build_arch" && -n ${roots[cpu-worker-$arch]:-} ]] || continue
  worker_root=${roots[cpu-worker-$arch]}
  # The foreign worker against a scheduler of the build machine's architecture: the mixed
  # cluster an edge deployment runs (an amd64 scheduler, arm64 boards).
  if [[ -n ${roots[scheduler-$build_arch]:-} ]]; then
    scheduler=(chroot "${roots[scheduler-$build_arch]}" /usr/local/bin/dhpt-scheduler)
    what="the $build_arch scheduler image"
  else
    [[ -x $host_scheduler ]] || { echo "check-images: no $build_arch scheduler: build $host_scheduler or set DHPT_SCHEDULER" >&2; exit 1; }
    scheduler=("$host_scheduler")
    what=$host_scheduler
  fi
  step "$arch study: the $arch cpu-worker image against $what"
  start_scheduler "$log" "${scheduler[@]}"
  chroot "$worker_root" /usr/local/bin/dhpt-cpu-worker --scheduler="$address" --worker_id="image-cpu-$arch" 2>>"$log" &
  pids+=("$!")
  cat >"$study" <<YAML
name: image-check-$arch-branin
model: {kind: FUNCTION, function: branin}
objective: {metric: value, goal: MINIMIZE}
algorithm: {name: RANDOM, seed: 1}
parameters:
  - {name: x1, double_range: {min: -5, max: 10}}
  - {name: x2, double_range: {min: 0, max: 15}}
max_trials: 8
YAML
  run_study "$address" "$study" 8 || exit 1
  cat >"$study" <<YAML
name: image-check-$arch-forest
model: {kind: RANDOM_FOREST, fixed: {tree_method: hist}}
dataset: {friedman1: {samples: 1000, features: 8, seed: 1}}
objective: {metric: r2, goal: MAXIMIZE}
algorithm: {name: RANDOM, seed: 1}
parameters:
  - {name: n_estimators, int_range: {min: 10, max: 40}}
  - {name: max_depth, int_range: {min: 3, max: 6}}
max_trials: 4
YAML
  run_study "$address" "$study" 4 || exit 1
  # The image's own CLI (under emulation) reads the cluster too.
  chroot "$worker_root" /usr/local/bin/dhpt workers --scheduler="$address" | tee "$log.workers"
  grep -q "image-cpu-$arch" "$log.workers" || { echo "check-images: the $arch CLI did not list the worker" >&2; exit 1; }
  stop_all
  took
  if [[ -n ${roots[scheduler-$arch]:-} ]]; then
    step "$arch study: the $arch scheduler and cpu-worker images (both emulated)"
    start_scheduler "$log" chroot "${roots[scheduler-$arch]}" /usr/local/bin/dhpt-scheduler
    chroot "$worker_root" /usr/local/bin/dhpt-cpu-worker --scheduler="$address" --worker_id="image-cpu-$arch" 2>>"$log" &
    pids+=("$!")
    cat >"$study" <<YAML
name: image-check-$arch-only
model: {kind: FUNCTION, function: branin}
objective: {metric: value, goal: MINIMIZE}
algorithm: {name: TPE, seed: 1}
parameters:
  - {name: x1, double_range: {min: -5, max: 10}}
  - {name: x2, double_range: {min: 0, max: 15}}
max_trials: 6
YAML
    run_study "$address" "$study" 6 || exit 1
    stop_all
    took
  fi
done

cleanup
trap - EXIT
for key in "${!roots[@]}"; do
  arch=${key##*-}
  podman image unmount "$(tag_of "${key%-*}" "$arch")" >/dev/null
done
echo "check-images: all images built and smoke-tested ($arches)"
