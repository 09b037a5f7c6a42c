#!/bin/sh
# The small pruning matrix (docs/early-stopping.md#benchmark-four-data-sets-xgboost-and-random-forest):
# XGBoost and Random Forest studies (bench/pruning/*-small.yaml, 60 TPE trials) on four data sets, five seeds,
# DHPT's rules (none, median, asha, hyperband, with their defaults) beside Optuna 3.1's Median,
# SuccessiveHalving and Hyperband pruners on the same rows; the two sides run at once, one
# process each, niced. Appends to OUT-dhpt.jsonl and OUT-optuna.jsonl (default OUT:
# bench/results/pruning-matrix). MODELS, DATASETS and RULES (DHPT's; pruning_bench --rules) pick
# cells, OPTUNA=0 leaves the peer out; cells can run at once, each with its own OUT. DHPT's runs
# are deterministic (one thread per trial), so a cell rerun gives the same lines.
# EQUAL_COMPUTE=1 runs the pruned studies at the unpruned study's compute (pruning_bench
# --equal_compute; default RULES median,asha,hyperband, OUT bench/results/pruning-equal): the
# unpruned lines, which the report's targets come from, are the fixed-trial matrix's.
# FIRST_SEED=K runs seeds K..SEEDS only and PRUNERS picks Optuna's (optuna_pruning_peer.py
# --pruners): they complete a cell that was stopped part way.
#
#   scripts/install-deps.sh --bench && cmake --build build --target pruning_bench
#   bench/pruning_matrix.sh
#   /usr/bin/python3 bench/pruning_report.py bench/results/pruning-matrix-*.jsonl
#   EQUAL_COMPUTE=1 bench/pruning_matrix.sh
set -eu
EQUAL_COMPUTE=${EQUAL_COMPUTE:-0}
equal=""
if [ "$EQUAL_COMPUTE" = 1 ]; then
  equal=--equal_compute
  OUT=${OUT:-bench/results/pruning-equal}
  RULES=${RULES:-median,asha,hyperband}
fi
OUT=${OUT:-bench/results/pruning-matrix}
DATA=${DATA:-/tmp/dhpt-pruning-data}
SEEDS=${SEEDS:-5}
MODELS=${MODELS:-xgboost-small forest-small}
DATASETS=${DATASETS:-friedman1 friedman3 diabetes cancer}
RULES=${RULES:-none,median,asha,hyperband}
OPTUNA=${OPTUNA:-1}
FIRST_SEED=${FIRST_SEED:-1}
PRUNERS=${PRUNERS:-median,sha,hyperband}
/usr/bin/python3 bench/pruning/make_datasets.py "$DATA"
for model in $MODELS; do
  for data in $DATASETS; do
    name=$(sed -n 's/^name: //p' "bench/pruning/$model.yaml")
    csv=""
    if [ "$data" != friedman1 ]; then csv="--csv=$DATA/$data.csv"; name="$name-$data"; fi
    export_dir="$DATA/split-$model-$data"
    # The rows first (no study), so that the peer reads the same split.
    # shellcheck disable=SC2086  # $csv is one flag or none.
    build/bin/pruning_bench --study="bench/pruning/$model.yaml" $csv --seeds=0 \
        --export_dir="$export_dir"
    # shellcheck disable=SC2086
    nice build/bin/pruning_bench --study="bench/pruning/$model.yaml" $csv --seeds="$SEEDS" \
        --first_seed="$FIRST_SEED" --rules="$RULES" $equal --out="$OUT-dhpt.jsonl" &
    dhpt=$!
    [ "$OPTUNA" = 0 ] || nice /usr/bin/python3 bench/optuna_pruning_peer.py --study="bench/pruning/$model.yaml" \
        --name="$name" --data="$export_dir" --seeds="$SEEDS" --first_seed="$FIRST_SEED" \
        --pruners="$PRUNERS" $equal --out="$OUT-optuna.jsonl"
    wait "$dhpt"
  done
done
