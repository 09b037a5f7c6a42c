#!/usr/bin/env bash
# Builds the scheduler, cpu-worker and gpu-worker (Debian CPU libtorch) images with podman on a
# machine without a Docker engine (`podman build --isolation=chroot`, DESIGN.md §10), from a
# Debian base made locally with debootstrap, then smoke-tests each image's binaries inside its
# root (`podman image mount` + chroot): --version, and a short study with the scheduler and a
# worker from the images. Needs root. Takes tens of minutes on two cores (the build compiles
# everything once, in the shared builder stage).
#
#   scripts/check-images.sh            # all three
#   DHPT_IMAGES="scheduler cpu-worker" scripts/check-images.sh
set -euo pipefail
cd "$(dirname "$0")/.."
[[ $(id -u) -eq 0 ]] || { echo "check-images: needs root (podman image mount, chroot)" >&2; exit 1; }
images=${DHPT_IMAGES:-scheduler cpu-worker gpu-worker}
base=docker.io/library/debian:bookworm-slim
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

for p in podman debootstrap; do
  command -v $p >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends podman debootstrap uidmap
done

if ! podman image exists "$base"; then
  root=$(mktemp -d)
  echo "check-images: debootstrap bookworm (minbase) into $root"
  debootstrap --variant=minbase bookworm "$root" "$mirror" >/dev/null
  tar -C "$root" -c . | podman import - "$base" >/dev/null
  rm -rf "$root"
fi

for image in $images; do
  echo "check-images: building dhpt/$image"
  podman build --isolation=chroot --pull=never --target "$image" -t "dhpt/$image:check" \
    -f docker/Dockerfile . >"/tmp/dhpt-image-$image.log" 2>&1 \
    || { tail -30 "/tmp/dhpt-image-$image.log"; exit 1; }
  podman image inspect "dhpt/$image:check" --format "  {{.Size}} bytes, user {{.Config.User}}, labels {{len .Labels}}"
done

declare -A roots
# A container gets /proc, /sys and /dev from its runtime; a chroot needs them mounted (libtorch
# reads /proc/cpuinfo, for one).
unmount_all() {
  for root in "${roots[@]}"; do umount "$root/dev" "$root/sys" "$root/proc" 2>/dev/null || true; done
}
trap unmount_all EXIT
for image in $images; do
  roots[$image]=$(podman image mount "dhpt/$image:check")
  mount -t proc proc "${roots[$image]}/proc"
  mount --rbind /sys "${roots[$image]}/sys"
  mount --rbind /dev "${roots[$image]}/dev"
  binary=dhpt-$image
  echo -n "check-images: $image: "
  chroot "${roots[$image]}" /usr/local/bin/$binary --version
  # No compilers in a runtime image.
  if chroot "${roots[$image]}" sh -c 'command -v gcc || command -v g++ || command -v cc' >/dev/null; then
    echo "check-images: $image contains a compiler" >&2
    exit 1
  fi
done

if [[ " $images " == *" scheduler "* && " $images " == *" cpu-worker "* ]]; then
  log=$(mktemp)
  chroot "${roots[scheduler]}" /usr/local/bin/dhpt-scheduler --listen=127.0.0.1:0 >"$log" 2>&1 &
  scheduler=$!
  for _ in $(seq 50); do grep -q "listening on" "$log" && break; sleep 0.2; done
  address=$(sed -n 's/^listening on //p' "$log")
  chroot "${roots[cpu-worker]}" /usr/local/bin/dhpt-cpu-worker --scheduler="$address" --worker_id=image-cpu 2>>"$log" &
  worker=$!
  pids=("$scheduler" "$worker")
  if [[ " $images " == *" gpu-worker "* ]]; then
    chroot "${roots[gpu-worker]}" /usr/local/bin/dhpt-gpu-worker --scheduler="$address" --worker_id=image-gpu --device=auto 2>>"$log" &
    pids+=("$!")
  fi
  trap 'kill "${pids[@]}" 2>/dev/null || true; unmount_all' EXIT
  study=$(mktemp --suffix=.yaml)
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
  chroot "${roots[cpu-worker]}" /usr/local/bin/dhpt --version
  # The CLI of the host build submits (the images' own CLI needs the file inside its root).
  build/bin/dhpt submit "$study" --watch --scheduler="$address" | tail -4 | tee "$log.study"
  grep -q "12 completed, 0 failed" "$log.study" || { echo "check-images: the XGBoost study did not complete" >&2; exit 1; }
  if [[ " $images " == *" gpu-worker "* ]]; then
    cat >"$study" <<'YAML'
name: image-check-ae
model: {kind: AUTOENCODER, fixed: {epochs: 3}}
dataset: {sensors: {samples: 1000, seed: 1}}
parameters:
  - {name: bottleneck, int_range: {min: 3, max: 6}}
max_trials: 3
allow_cpu_fallback: true
YAML
    build/bin/dhpt submit "$study" --watch --scheduler="$address" | tail -4 | tee "$log.study"
    grep -q "3 completed, 0 failed" "$log.study" || {
      build/bin/dhpt trials image-check-ae --json --scheduler="$address" | grep '"error"' >&2
      echo "check-images: the AutoEncoder study did not complete" >&2; exit 1; }
  fi
  kill "${pids[@]}" 2>/dev/null || true
  wait "${pids[@]}" 2>/dev/null || true
fi
unmount_all
for image in $images; do podman image unmount "dhpt/$image:check" >/dev/null; done
echo "check-images: all images built and smoke-tested"
