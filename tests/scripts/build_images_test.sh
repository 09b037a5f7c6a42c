#!/usr/bin/env bash
# BuildImagesTest: scripts/build-images.sh's arguments and its --archive files, with a fake
# docker and podman on PATH that record their arguments (no image is built here; building them
# is scripts/check-images.sh's job). Exits 1 with what was wrong.
set -euo pipefail
script=$(cd "$(dirname "$0")/../.." && pwd)/scripts/build-images.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/bin"
for tool in docker podman; do
  cat >"$work/bin/$tool" <<TOOL
#!/bin/sh
echo "$tool \$*" >>"$work/calls"
# save -o FILE IMAGE (docker) or save --format docker-archive -o FILE IMAGE (podman)
while [ \$# -gt 0 ]; do [ "\$1" = -o ] && echo archive >"\$2"; shift; done
TOOL
  chmod +x "$work/bin/$tool"
done
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
arch=$(dpkg --print-architecture 2>/dev/null || uname -m | sed 's/x86_64/amd64/; s/aarch64/arm64/')

# docker: every image for every platform, loaded and saved, nothing pushed.
PATH="$work/bin:$PATH" DHPT_TAG=t DHPT_PLATFORMS=linux/amd64,linux/arm64 DHPT_JETSON=1 \
  bash "$script" --archive="$work/out" >/dev/null
expected="cpu-worker-t-amd64.tar cpu-worker-t-arm64.tar gpu-worker-t-$arch.tar gpu-worker-t-jetson-arm64.tar scheduler-t-amd64.tar scheduler-t-arm64.tar"
actual=$(cd "$work/out" && ls | sort | tr '\n' ' ' | sed 's/ $//')
[[ $actual == "$expected" ]] || fail "archives: got \"$actual\", want \"$expected\""
grep -q -- "--push" "$work/calls" && fail "--archive pushed: $(grep -- --push "$work/calls")"
grep -qx "docker save -o $work/out/scheduler-t-arm64.tar ghcr.io/dhpt/scheduler:t" "$work/calls" ||
  fail "no docker save of ghcr.io/dhpt/scheduler:t (the chart's default name): $(cat "$work/calls")"
grep -q "docker buildx build --platform linux/arm64 .*--target scheduler .*-t ghcr.io/dhpt/scheduler:t --load" "$work/calls" ||
  fail "no single-platform --load build: $(cat "$work/calls")"

# podman, another registry, a relative folder.
rm -f "$work/calls"
(cd "$work" && PATH="$work/bin:$PATH" DHPT_BUILDER=podman DHPT_REGISTRY=localhost/dhpt DHPT_TAG=t \
  DHPT_IMAGES=scheduler DHPT_PLATFORMS=linux/arm64 bash "$script" --archive=rel >/dev/null)
[[ -f $work/rel/scheduler-t-arm64.tar ]] || fail "podman: no rel/scheduler-t-arm64.tar"
grep -qx "podman save --format docker-archive -o $work/rel/scheduler-t-arm64.tar localhost/dhpt/scheduler:t" "$work/calls" ||
  fail "podman save: $(cat "$work/calls")"

# Without --archive: pushed, as before.
rm -f "$work/calls"
PATH="$work/bin:$PATH" DHPT_TAG=t DHPT_IMAGES=scheduler bash "$script" >/dev/null
grep -q "docker buildx build --platform linux/amd64,linux/arm64 .* --push" "$work/calls" ||
  fail "no multi-arch push: $(cat "$work/calls")"

# A word that is not an option is refused, before anything runs.
rm -f "$work/calls"
status=0
PATH="$work/bin:$PATH" bash "$script" --archive "$work/x" 2>"$work/err" || status=$?
[[ $status == 2 && ! -e $work/calls ]] || fail "--archive DIR (no =): exit $status, calls: $(cat "$work/calls" 2>/dev/null)"
grep -q 'unknown argument "--archive"' "$work/err" || fail "message: $(cat "$work/err")"

[[ $failures == 0 ]] && echo "BuildImagesTest: ok"
exit $((failures > 0))
