#!/usr/bin/env bash
# Builds the DHPT images with docker buildx (multi-arch, pushed) or podman (local).
#
#   scripts/build-images.sh                      # docker buildx: linux/amd64,linux/arm64, --push
#   DHPT_BUILDER=podman scripts/build-images.sh  # podman, this machine's architecture, local
#   DHPT_IMAGES="scheduler cpu-worker" DHPT_REGISTRY=registry.local:5000/dhpt DHPT_TAG=dev ...
#   DHPT_CUDA=1 / DHPT_JETSON=1                  # also the CUDA (amd64) / Jetson (arm64) GPU worker
set -euo pipefail
cd "$(dirname "$0")/.."
registry=${DHPT_REGISTRY:-ghcr.io/dhpt}
tag=${DHPT_TAG:-$(sed -n 's/^project(dhpt VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)}
images=${DHPT_IMAGES:-scheduler cpu-worker gpu-worker}
platforms=${DHPT_PLATFORMS:-linux/amd64,linux/arm64}
builder=${DHPT_BUILDER:-docker}

build() {  # FILE TARGET IMAGE PLATFORMS [BUILD ARGS...]
  local file=$1 target=$2 image=$3 platforms=$4
  shift 4
  echo "build-images: $image ($platforms)"
  if [[ $builder == docker ]]; then
    docker buildx build --platform "$platforms" -f "$file" ${target:+--target "$target"} \
      --build-arg VERSION="$tag" "$@" -t "$image" --push .
  else
    podman build --isolation=chroot -f "$file" ${target:+--target "$target"} \
      --build-arg VERSION="$tag" "$@" -t "$image" .
  fi
}

for component in $images; do
  build docker/Dockerfile "$component" "$registry/$component:$tag" "$platforms"
done
if [[ ${DHPT_CUDA:-0} == 1 ]]; then
  build docker/gpu-worker-cuda.Dockerfile "" "$registry/gpu-worker:$tag-cuda" linux/amd64
fi
if [[ ${DHPT_JETSON:-0} == 1 ]]; then
  build docker/gpu-worker-jetson.Dockerfile "" "$registry/gpu-worker:$tag-jetson" linux/arm64
fi
