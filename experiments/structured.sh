#!/usr/bin/env bash
# The five structured variants (Manginas et al. 2020) on HWV with the embedded model on CPU: the README's table.
#   experiments/structured.sh [OUT]     (default runs/hierarchical; run it again to continue a stopped study)
#   DATASET=20newsgroups experiments/structured.sh      another collection
# Same budget for every variant (about 9 minutes of one CPU core each on HWV): 3 epochs, lr 5e-5 (classifiers
# 1e-3, biases started at the label priors), batch 32, 64 pieces (head+tail), seeds from $SEEDS (default 1).
# Each variant writes OUT/<dataset>/<variant>/summary.json, and per seed rprecision.md, result.json and
# analysis.json (notebooks/structured_layers.ipynb draws them); experiments/structured_table.py prints the tables.
set -euo pipefail
OUT=${1:-runs/hierarchical}
PY=${PYTHON:-.venv/bin/python}
DATASET=${DATASET:-hwv}
read -r -a SEED_LIST <<< "${SEEDS:-1}"
for variant in flat last-six one-by-one in-pairs hybrid; do
    if [[ -f $OUT/$DATASET/$variant/summary.json ]]; then echo "done already: $DATASET $variant"; continue; fi
    echo "== $DATASET $variant"
    "$PY" -m tasks.hierarchical --dataset "$DATASET" --variant "$variant" --seeds "${SEED_LIST[@]}" --resume \
        --epochs 3 --max-length 64 \
        --out "$OUT/$DATASET/$variant"
done
