#!/usr/bin/env bash
# End-to-end check on a real K3s (or any Kubernetes) cluster; not run in CI (there is no
# cluster there). Installs the chart, waits for the rollout, submits a study with grpcurl,
# checks that every gpu-worker pod sits on a node labelled gpu in (orin, nano), and waits for the
# study to complete. Then, with persistence on (the default), it deletes the scheduler pod in the
# middle of a second study and checks that the new pod carries on from the database: the study
# completes with exactly maxTrials completed trials, none failed, and no trial id or number twice.
#
#   KUBECONFIG=~/.kube/config tests/e2e/k3s.sh [--label orin-1=orin --label nano-1=nano]
#       [--namespace dhpt] [--release dhpt] [--set image.tag=0.1.0 ...]
#
# Needs kubectl, helm, grpcurl and jq on PATH.
set -euo pipefail
cd "$(dirname "$0")/../.."
namespace=dhpt
release=dhpt
labels=()
helm_args=()
while (($#)); do
  case $1 in
    --label) labels+=("$2"); shift 2 ;;
    --namespace) namespace=$2; shift 2 ;;
    --release) release=$2; shift 2 ;;
    --set) helm_args+=(--set "$2"); shift 2 ;;
    *) echo "k3s.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
for tool in kubectl helm grpcurl jq; do
  command -v $tool >/dev/null || { echo "k3s.sh: $tool is needed on PATH" >&2; exit 2; }
done

for label in "${labels[@]}"; do
  kubectl label node "${label%%=*}" "gpu=${label#*=}" --overwrite
done
echo "== nodes and their gpu label"
kubectl get nodes -L gpu

helm upgrade --install "$release" charts/dhpt --namespace "$namespace" --create-namespace --wait \
  --timeout 10m "${helm_args[@]}"
fullname=$(helm get manifest "$release" -n "$namespace" | sed -n 's/^  name: \(.*\)-scheduler$/\1/p' | head -1)
kubectl -n "$namespace" rollout status "deployment/$fullname-scheduler" --timeout=5m
kubectl -n "$namespace" rollout status "deployment/$fullname-cpu-worker" --timeout=5m
kubectl -n "$namespace" rollout status "deployment/$fullname-gpu-worker" --timeout=10m || true

echo "== every gpu-worker pod must sit on a node labelled gpu in (orin, nano)"
failures=0
while read -r pod node; do
  [[ -z $pod ]] && continue
  label=$(kubectl get node "$node" -o jsonpath='{.metadata.labels.gpu}')
  if [[ $label == orin || $label == nano ]]; then
    echo "ok   $pod on $node (gpu=$label)"
  else
    echo "FAIL $pod on $node (gpu=${label:-none})"; failures=$((failures + 1))
  fi
done < <(kubectl -n "$namespace" get pods -l app.kubernetes.io/instance="$release",app.kubernetes.io/component=gpu-worker \
           -o jsonpath='{range .items[*]}{.metadata.name} {.spec.nodeName}{"\n"}{end}')
# Pending GPU pods (no labelled node) are acceptable placement; Running ones elsewhere are not.
((failures == 0)) || { echo "k3s.sh: GPU pods on nodes without a GPU label" >&2; exit 1; }

# Plaintext, or the chart's TLS and token (security.* values): the CA from the TLS Secret, the
# token from its Secret, read off the scheduler's Deployment.
deployment="deployment/$fullname-scheduler"
args=$(kubectl -n "$namespace" get "$deployment" -o jsonpath='{.spec.template.spec.containers[0].args}')
grpc=(-plaintext)
if [[ $args == *--tls-cert* ]]; then
  [[ $args == *--tls-client-ca* ]] && { echo "k3s.sh: mutual TLS needs a client certificate; run without security.tls.mutual" >&2; exit 1; }
  secret_of() { kubectl -n "$namespace" get "$deployment" -o jsonpath="{.spec.template.spec.volumes[?(@.name==\"$1\")].secret.secretName}"; }
  tmp=$(mktemp -d)
  kubectl -n "$namespace" get secret "$(secret_of tls)" -o jsonpath='{.data.ca\.crt}' | base64 -d >"$tmp/ca.crt"
  # The name the workers check (security.tls.serverName), else the Service's.
  server_name=$(kubectl -n "$namespace" get "deployment/$fullname-cpu-worker" \
                  -o jsonpath='{.spec.template.spec.containers[0].args}' |
                grep -o -- '--tls-server-name=[^",]*' | cut -d= -f2 || true)
  grpc=(-cacert "$tmp/ca.crt" -servername "${server_name:-$fullname-scheduler}")
  if [[ $args == *--auth-token-file* ]]; then
    token=$(kubectl -n "$namespace" get secret "$(secret_of token)" -o jsonpath='{.data.token}' | base64 -d)
    grpc+=(-H "authorization: Bearer $token")
  fi
fi

# A port-forward to the scheduler's Service (it follows one pod: restarted after that pod goes),
# and a wait until the scheduler answers through it.
forward=""
trap '[[ -z $forward ]] || kill "$forward" 2>/dev/null || true' EXIT
forward_scheduler() {
  if [[ -n $forward ]]; then
    kill "$forward" 2>/dev/null || true
    wait "$forward" 2>/dev/null || true
  fi
  kubectl -n "$namespace" port-forward "svc/$fullname-scheduler" 50051:50051 >/dev/null &
  forward=$!
  for _ in $(seq 60); do
    grpcurl "${grpc[@]}" localhost:50051 list >/dev/null 2>&1 && return 0
    sleep 1
  done
  echo "k3s.sh: the scheduler does not answer through the port-forward" >&2
  return 1
}
get_study() { grpcurl "${grpc[@]}" -d "{\"name\": \"$1\"}" localhost:50051 dhpt.v1.StudyService/GetStudy; }
# Waits for study $1 to end; fails unless it COMPLETED.
wait_completed() {
  local state=""
  for _ in $(seq 600); do
    state=$(get_study "$1" | jq -r '.state // ""')
    [[ $state == COMPLETED ]] && return 0
    [[ $state == FAILED || $state == STOPPED ]] && { echo "k3s.sh: study $1 ended $state" >&2; exit 1; }
    sleep 2
  done
  echo "k3s.sh: study $1 did not complete" >&2
  exit 1
}

forward_scheduler
grpcurl "${grpc[@]}" localhost:50051 list
study='{"name": "e2e-xgboost", "model": {"kind": "XGBOOST"},
        "dataset": {"friedman1": {"samples": 5000, "features": 10, "seed": 1}},
        "algorithm": {"name": "TPE", "seed": 1},
        "parameters": [{"name": "max_depth", "intRange": {"min": 2, "max": 8}},
                       {"name": "eta", "doubleRange": {"min": 0.01, "max": 0.3, "log": true}}],
        "maxTrials": 20}'
grpcurl "${grpc[@]}" -d "$study" localhost:50051 dhpt.v1.StudyService/CreateStudy
wait_completed e2e-xgboost
grpcurl "${grpc[@]}" -d '{"study": "e2e-xgboost"}' localhost:50051 dhpt.v1.StudyService/GetBestTrial
echo "k3s.sh: chart installed, GPU placement correct, study completed"

echo "== the scheduler pod is deleted mid-study; the study must complete exactly"
if [[ $args != *--db=/* ]]; then
  echo "k3s.sh: no restart check: the scheduler keeps its studies in memory (scheduler.persistence.enabled=false)"
  exit 0
fi
claim=$(kubectl -n "$namespace" get "$deployment" \
          -o jsonpath='{.spec.template.spec.volumes[?(@.name=="db")].persistentVolumeClaim.claimName}')
phase=$(kubectl -n "$namespace" get pvc "$claim" -o jsonpath='{.status.phase}')
echo "database: $(grep -o -- '--db=[^",]*' <<<"$args") on PersistentVolumeClaim $claim ($phase)"
[[ $phase == Bound ]] || { echo "k3s.sh: the scheduler's claim $claim is $phase, not Bound" >&2; exit 1; }

# A fresh name on every run: with persistence a rerun finds the last run's studies still there.
restart_study="e2e-restart-$(date +%s)"
max_trials=40
# Slower trials than the first study's (more rows, 200 rounds) and two at a time, so that the
# pod is deleted with trials running and more to come.
restart_spec=$(cat <<JSON
{"name": "$restart_study", "model": {"kind": "XGBOOST", "fixed": {"n_estimators": 200}},
 "dataset": {"friedman1": {"samples": 20000, "features": 10, "seed": 2}},
 "algorithm": {"name": "TPE", "seed": 2},
 "parameters": [{"name": "max_depth", "intRange": {"min": 2, "max": 8}},
                {"name": "eta", "doubleRange": {"min": 0.01, "max": 0.3, "log": true}}],
 "maxTrials": $max_trials, "parallelTrials": 2}
JSON
)
grpcurl "${grpc[@]}" -d "$restart_spec" localhost:50051 dhpt.v1.StudyService/CreateStudy >/dev/null
# Under way: a few trials completed, the study still running.
before=0
state=""
for _ in $(seq 600); do
  reply=$(get_study "$restart_study")
  state=$(jq -r '.state // ""' <<<"$reply")
  before=$(jq -r '.trialsCompleted // 0' <<<"$reply")
  ((before >= 3)) && break
  [[ $state == COMPLETED || $state == FAILED || $state == STOPPED ]] && break
  sleep 1
done
if [[ $state != RUNNING ]] || ((before < 3 || before >= max_trials)); then
  echo "k3s.sh: $restart_study is $state with $before of $max_trials trials completed: not mid-study" >&2
  exit 1
fi

selector="app.kubernetes.io/instance=$release,app.kubernetes.io/component=scheduler"
read -r -a old_pods <<<"$(kubectl -n "$namespace" get pods -l "$selector" -o jsonpath='{.items[*].metadata.name}')"
((${#old_pods[@]} > 0)) || { echo "k3s.sh: no scheduler pod found with $selector" >&2; exit 1; }
echo "deleting ${old_pods[*]} with $before of $max_trials trials completed"
kubectl -n "$namespace" delete pod -l "$selector" --wait=false
# The ReplicaSet starts the new pod at once; it can open the database only after the old
# process has exited and released its lock on scheduler.db. Wait for the old pods to be gone, then for
# the new one to be Ready.
for _ in $(seq 180); do
  [[ -z $(kubectl -n "$namespace" get pod "${old_pods[@]}" --ignore-not-found -o name) ]] && break
  sleep 1
done
[[ -z $(kubectl -n "$namespace" get pod "${old_pods[@]}" --ignore-not-found -o name) ]] ||
  { echo "k3s.sh: the old scheduler pod ${old_pods[*]} is still there after 3 minutes" >&2; exit 1; }
kubectl -n "$namespace" wait --for=condition=Ready pod -l "$selector" --timeout=5m
kubectl -n "$namespace" rollout status "$deployment" --timeout=5m
kubectl -n "$namespace" get pods -l "$selector" -o wide
forward_scheduler

# The new scheduler knows the study and every trial that had completed before it was deleted.
reply=$(get_study "$restart_study") || { echo "k3s.sh: $restart_study is gone after the restart" >&2; exit 1; }
after=$(jq -r '.trialsCompleted // 0' <<<"$reply")
echo "after the restart: $(jq -r '.state' <<<"$reply"), $after of $max_trials trials completed"
((after >= before)) ||
  { echo "k3s.sh: $((before - after)) completed trials were lost in the restart ($before before, $after after)" >&2; exit 1; }

wait_completed "$restart_study"
reply=$(get_study "$restart_study")
trials=$(grpcurl "${grpc[@]}" -d "{\"study\": \"$restart_study\"}" localhost:50051 dhpt.v1.StudyService/ListTrials)
completed=$(jq -r '.trialsCompleted // 0' <<<"$reply")
failed=$(jq -r '.trialsFailed // 0' <<<"$reply")
# proto3 JSON leaves out zeros and writes 64-bit integers as strings: trial 0 has no "number".
listed=$(jq '[.trials[]? | select(.state == "COMPLETED")] | length' <<<"$trials")
ids=$(jq '[.trials[]? | .id // "0" | tostring]' <<<"$trials")
numbers=$(jq '[.trials[]? | .number // "0" | tostring]' <<<"$trials")
duplicate_ids=$(jq -c 'group_by(.) | map(select(length > 1) | .[0])' <<<"$ids")
duplicate_numbers=$(jq -c 'group_by(.) | map(select(length > 1) | .[0])' <<<"$numbers")
lost=$(jq '[.trials[]? | .lostAttempts // 0] | add // 0' <<<"$trials")
echo "$restart_study: $completed completed (ListTrials: $listed), $failed failed," \
     "$(jq length <<<"$ids") trials listed, $lost lost attempts"
status=0
((completed == max_trials)) || { echo "FAIL trialsCompleted is $completed, not $max_trials" >&2; status=1; }
((listed == max_trials)) || { echo "FAIL ListTrials lists $listed COMPLETED trials, not $max_trials" >&2; status=1; }
((failed == 0)) || { echo "FAIL $failed trials failed" >&2; status=1; }
[[ $duplicate_ids == "[]" ]] || { echo "FAIL trial ids listed twice: $duplicate_ids" >&2; status=1; }
[[ $duplicate_numbers == "[]" ]] || { echo "FAIL trial numbers listed twice: $duplicate_numbers" >&2; status=1; }
((status == 0)) || exit 1
echo "k3s.sh: scheduler pod deleted mid-study; $restart_study completed exactly ($max_trials trials, unique ids)"
