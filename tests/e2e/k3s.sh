#!/usr/bin/env bash
# End-to-end check on a real K3s (or any Kubernetes) cluster; not run in CI (there is no
# cluster there). Installs the chart, waits for the rollout, submits a study with grpcurl,
# checks that every gpu-worker pod sits on a node labelled gpu in (orin, nano), and waits for the
# study to complete.
#
#   KUBECONFIG=~/.kube/config tests/e2e/k3s.sh [--label orin-1=orin --label nano-1=nano]
#       [--namespace dhpt] [--release dhpt] [--set image.tag=0.1.0 ...]
#
# Needs kubectl, helm and grpcurl on PATH.
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
for tool in kubectl helm grpcurl; do
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

kubectl -n "$namespace" port-forward "svc/$fullname-scheduler" 50051:50051 >/dev/null &
forward=$!
trap 'kill $forward 2>/dev/null || true' EXIT
sleep 2
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
grpcurl "${grpc[@]}" localhost:50051 list
study='{"name": "e2e-xgboost", "model": {"kind": "XGBOOST"},
        "dataset": {"friedman1": {"samples": 5000, "features": 10, "seed": 1}},
        "algorithm": {"name": "TPE", "seed": 1},
        "parameters": [{"name": "max_depth", "intRange": {"min": 2, "max": 8}},
                       {"name": "eta", "doubleRange": {"min": 0.01, "max": 0.3, "log": true}}],
        "maxTrials": 20}'
grpcurl "${grpc[@]}" -d "$study" localhost:50051 dhpt.v1.StudyService/CreateStudy
for _ in $(seq 600); do
  state=$(grpcurl "${grpc[@]}" -d '{"name": "e2e-xgboost"}' localhost:50051 dhpt.v1.StudyService/GetStudy |
          sed -n 's/.*"state": "\([A-Z]*\)".*/\1/p' | head -1)
  [[ $state == COMPLETED ]] && break
  [[ $state == FAILED || $state == STOPPED ]] && { echo "k3s.sh: study ended $state" >&2; exit 1; }
  sleep 2
done
[[ $state == COMPLETED ]] || { echo "k3s.sh: study did not complete" >&2; exit 1; }
grpcurl "${grpc[@]}" -d '{"study": "e2e-xgboost"}' localhost:50051 dhpt.v1.StudyService/GetBestTrial
echo "k3s.sh: chart installed, GPU placement correct, study completed"
