#!/usr/bin/env bash
# Times the README's first command as a new user meets it: a fresh clone of this repository's
# HEAD, run with `scripts/demo.sh` inside a bare Debian 12 root (debootstrap's minbase: no
# compiler, no libraries, an empty apt cache), on this machine's CPUs, disk and network.
# demo.sh prints each step's time; this prints the total.
#   bench/first_study.sh [ARGS for scripts/demo.sh]
# Needs root (debootstrap, chroot and bind mounts). The pristine root is kept in
# $DHPT_FIRST_STUDY_CACHE (default /var/tmp/dhpt-first-study) so that a rerun does not download
# it again; each run works in a copy.
set -euo pipefail
cd "$(dirname "$0")/.."
[[ $(id -u) -eq 0 ]] || { echo "first_study: needs root (chroot, mounts)" >&2; exit 1; }
command -v debootstrap >/dev/null || { echo "first_study: needs debootstrap (apt-get install debootstrap)" >&2; exit 1; }

cache=${DHPT_FIRST_STUDY_CACHE:-/var/tmp/dhpt-first-study}
pristine=$cache/bookworm-minbase
if [[ ! -f $pristine/etc/debian_version ]]; then
  echo "first_study: making a bare Debian 12 root in $pristine (once)"
  rm -rf "$pristine"
  debootstrap --variant=minbase bookworm "$pristine" http://deb.debian.org/debian >/dev/null
  rm -rf "$pristine"/var/cache/apt/archives/*.deb "$pristine"/var/lib/apt/lists/*
fi

root=$(mktemp -d /var/tmp/dhpt-first-study-run.XXXXXX)
mounted=()
cleanup() {
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[i]}" || true; done
  # Never remove a tree that still has the host's /dev, /proc or /sys mounted inside it.
  if grep -q " $root/" /proc/mounts; then
    echo "first_study: $root still has mounts; left in place" >&2
  else
    rm -rf "$root"
  fi
}
trap cleanup EXIT
cp -a "$pristine/." "$root/"
cp /etc/resolv.conf "$root/etc/resolv.conf"
for dir in proc sys dev; do
  mount --bind "/$dir" "$root/$dir"
  mounted+=("$root/$dir")
done
mount -t tmpfs tmpfs "$root/tmp"
mounted+=("$root/tmp")
git clone -q "$PWD" "$root/src"

echo "first_study: $(chroot "$root" dpkg-query -W | wc -l) packages in the root; running scripts/demo.sh $*"
start=$SECONDS
chroot "$root" /bin/bash -c 'cd /src && exec bash scripts/demo.sh "$@"' demo "$@"
elapsed=$((SECONDS - start))
printf 'first_study: scripts/demo.sh from a fresh clone on a bare Debian 12 took %dm%02ds\n' \
  $((elapsed / 60)) $((elapsed % 60))
