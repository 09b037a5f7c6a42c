#!/usr/bin/env bash
# Builds the DHPT images with docker buildx (multi-arch, pushed) or podman (local).
#
#   scripts/build-images.sh                      # docker buildx: linux/amd64,linux/arm64, --push
#   DHPT_BUILDER=podman scripts/build-images.sh  # podman, a local manifest list per image
#   DHPT_IMAGES="scheduler cpu-worker" DHPT_REGISTRY=registry.local:5000/dhpt DHPT_TAG=dev ...
#   DHPT_CUDA=1 / DHPT_JETSON=1                  # also the CUDA (amd64) / Jetson (arm64) GPU worker
#   scripts/build-images.sh --archive=DIR        # no registry: one image archive per image and
#                                                # architecture, for `sudo k3s ctr images import`
# --archive builds each platform into the local image store (docker buildx --load, podman
# build) instead of pushing, then saves it as DIR/COMPONENT-TAG-ARCH.tar (docker save, podman
# save --format docker-archive), named as the chart names it (ghcr.io/dhpt/scheduler:TAG by
# default), so the chart finds it with image.pullPolicy IfNotPresent or Never. See
# docs/deployment.md#k3s-without-a-registry.
set -euo pipefail
archive=""
for arg; do
  case $arg in
    --archive=?*) archive=${arg#--archive=} ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "build-images: unknown argument \"$arg\" (--archive=DIR, --help; the rest is DHPT_* variables)" >&2; exit 2 ;;
  esac
done
[[ -n $archive ]] && archive=$(mkdir -p "$archive" && cd "$archive" && pwd)
cd "$(dirname "$0")/.."
registry=${DHPT_REGISTRY:-ghcr.io/dhpt}
tag=${DHPT_TAG:-$(sed -n 's/^project(dhpt VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)}
images=${DHPT_IMAGES:-scheduler cpu-worker gpu-worker}
platforms=${DHPT_PLATFORMS:-linux/amd64,linux/arm64}
builder=${DHPT_BUILDER:-docker}
# The builder stage always runs on the build machine and cross-compiles for arm64 (Debian
# multiarch, docker/toolchain-arm64.cmake); only the runtime stages' apt-get runs under
# emulation (qemu-user through binfmt_misc). Debian's libtorch is not cross-built, so the
# gpu-worker of docker/Dockerfile is built for the build machine's architecture only; arm64 GPU
# workers are the Jetson image (DHPT_JETSON=1). See docs/images.md.
build_platform=linux/$(dpkg --print-architecture 2>/dev/null || uname -m | sed 's/x86_64/amd64/; s/aarch64/arm64/')

build() {  # FILE TARGET IMAGE PLATFORMS [BUILD ARGS...]
  local file=$1 target=$2 image=$3 platforms=$4
  shift 4
  if [[ -n $archive ]]; then
    local platform
    for platform in ${platforms//,/ }; do save "$file" "$target" "$image" "$platform" "$@"; done
    return
  fi
  echo "build-images: $image ($platforms)"
  if [[ $builder == docker ]]; then
    docker buildx build --platform "$platforms" -f "$file" ${target:+--target "$target"} \
      --build-arg VERSION="$tag" "$@" -t "$image" --push .
  else
    # podman 4 does not set BUILDPLATFORM itself; --manifest collects the platforms' images.
    podman build --isolation=chroot -f "$file" ${target:+--target "$target"} \
      --platform "$platforms" --build-arg BUILDPLATFORM="$build_platform" \
      --build-arg VERSION="$tag" "$@" --manifest "$image" .
  fi
}

save() {  # FILE TARGET IMAGE PLATFORM [BUILD ARGS...]: one platform, into $archive
  local file=$1 target=$2 image=$3 platform=$4
  shift 4
  local name=${image##*/}
  local out="$archive/${name%%:*}-${name#*:}-${platform#linux/}.tar"
  echo "build-images: $image ($platform) -> $out"
  if [[ $builder == docker ]]; then
    docker buildx build --platform "$platform" -f "$file" ${target:+--target "$target"} \
      --build-arg VERSION="$tag" "$@" -t "$image" --load .
    docker save -o "$out" "$image"
  else
    podman build --isolation=chroot -f "$file" ${target:+--target "$target"} \
      --platform "$platform" --build-arg BUILDPLATFORM="$build_platform" \
      --build-arg VERSION="$tag" "$@" -t "$image" .
    podman save --format docker-archive -o "$out" "$image"
  fi
}

for component in $images; do
  component_platforms=$platforms
  [[ $component == gpu-worker ]] && component_platforms=$build_platform
  build docker/Dockerfile "$component" "$registry/$component:$tag" "$component_platforms"
done
if [[ ${DHPT_CUDA:-0} == 1 ]]; then
  build docker/gpu-worker-cuda.Dockerfile "" "$registry/gpu-worker:$tag-cuda" linux/amd64
fi
if [[ ${DHPT_JETSON:-0} == 1 ]]; then
  build docker/gpu-worker-jetson.Dockerfile "" "$registry/gpu-worker:$tag-jetson" linux/arm64
fi
