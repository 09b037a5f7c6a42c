#!/usr/bin/env bash
# Runs a browser script from tests/browser with puppeteer-core installed from the pinned
# package-lock.json (cached in tests/browser/node_modules) and Debian's Chromium.
#   bash tests/browser/run.sh check_page.mjs --url=file:///tmp/x.html --count=svg
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [[ ! -d $here/node_modules || $here/package-lock.json -nt $here/node_modules ]]; then
  (cd "$here" && npm ci --no-audit --no-fund --silent)
fi
[[ -x ${CHROMIUM:-/usr/bin/chromium} ]] || { echo "browser tests need Debian's chromium package" >&2; exit 1; }
script=$1; shift
if [[ $script == --test ]]; then exec node --test "$here/${1:?a test file}"; fi
exec node "$here/$script" "$@"
