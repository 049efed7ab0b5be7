#!/usr/bin/env bash
# BIO, BIO + CRF and span-based NER on WNUT-17 with the embedded model on CPU: docs/results.md's table.
#   experiments/tagging.sh [OUT]     (default runs/tag; run it again to continue a stopped study)
# Same budget for the three methods: 2 epochs, lr 5e-5 (heads 1e-3), batch 32, 128 pieces, seeds from $SEEDS
# (default "11711 1 2"; 11711 is the jobs' default seed). Each writes OUT/<method>/summary.json and per seed
# report.txt, predictions/dev.conll; python -m experiments.tables tagging prints docs/results.md's table.
set -euo pipefail
OUT=${1:-runs/tag}
PY=${PYTHON:-.venv/bin/python}
read -r -a SEED_LIST <<< "${SEEDS:-11711 1 2}"
for method in bio bio-crf span; do
    if [[ -f $OUT/$method/summary.json ]]; then echo "done already: $method"; continue; fi
    echo "== $method"
    "$PY" -m tasks.tag --method "$method" --epochs 2 --seeds "${SEED_LIST[@]}" --resume --out "$OUT/$method"
done
