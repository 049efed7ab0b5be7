#!/usr/bin/env bash
# The five structured variants (Manginas et al. 2020) on HWV with the embedded model on CPU: docs/results.md's table.
#   experiments/structured.sh [OUT]     (default runs/hierarchical; run it again to continue a stopped study)
#   DATASET=20newsgroups experiments/structured.sh      another collection
# Same budget for every variant (about 8 minutes of one CPU core each on HWV): 3 epochs, lr 5e-5 (classifiers
# 1e-3, biases started at the label priors), batch 32, 64 pieces (head+tail), seeds from $SEEDS (default 1).
# Each variant writes OUT/<dataset>/<variant>/summary.json, and per seed rprecision.md, result.json and
# analysis.json (notebooks/structured_layers.ipynb draws them); python -m experiments.tables structured
# prints the tables.
#
# At the embedded model's 6 layers and HWV's 6 levels, LAST-SIX, ONE-BY-ONE and IN-PAIRS derive the same map
# (level n <- layer n; tasks/models/structured.py states the rule), and runs are deterministic, so a variant whose map
# an earlier variant already had is skipped. For HWV at 6 layers one more map runs: upper-half (levels 1-2 <-
# layer 4, 3-4 <- 5, 5-6 <- 6), the 6-layer analogue of the paper's LAST-SIX, whose levels read the upper half
# of bert-base's 12 layers.
set -euo pipefail
OUT=${1:-runs/hierarchical}
PY=${PYTHON:-.venv/bin/python}
DATASET=${DATASET:-hwv}
LAYERS=${LAYERS:-6}  # the model's depth (the embedded model: 6)
declare -A LEVELS=([hwv]=6 [20newsgroups]=5 [enron]=2 [trec]=2)
read -r -a SEED_LIST <<< "${SEEDS:-1}"
run() {  # run NAME FLAGS...
    local name=$1; shift
    if [[ -f $OUT/$DATASET/$name/summary.json ]]; then echo "done already: $DATASET $name"; return; fi
    echo "== $DATASET $name"
    "$PY" -m tasks.hierarchical --dataset "$DATASET" "$@" --seeds "${SEED_LIST[@]}" --resume \
        --epochs 3 --max-length 64 --out "$OUT/$DATASET/$name"
}
declare -A SEEN=()
for variant in flat last-six one-by-one in-pairs hybrid; do
    map=$("$PY" -c "import sys; from tasks.models.structured import layer_map, describe_layer_map as d
print(d(layer_map(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))))" "$variant" "$LAYERS" "${LEVELS[$DATASET]}")
    if [[ -n ${SEEN[$map]:-} ]]; then echo "skipped: $variant has ${SEEN[$map]}'s map ($map)"; continue; fi
    SEEN[$map]=$variant
    run "$variant" --variant "$variant"
done
if [[ $DATASET == hwv && $LAYERS == 6 ]]; then
    run upper-half --layer-map "1:4;2:4;3:5;4:5;5:6;6:6"
fi
