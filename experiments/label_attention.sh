#!/usr/bin/env bash
# Vanilla vs label-embedding attention (Wang et al. 2020) with the embedded model on CPU: docs/results.md's table.
#   experiments/label_attention.sh [OUT]     (default runs/label_attention; run it again to continue a stopped study)
#   ONLY="rte cola" experiments/label_attention.sh     only those cells (two such runs side by side, each with
#                                                      OMP_NUM_THREADS=1, finish sooner on a 2-core machine)
# Same budget for both arms: 3 epochs, lr 5e-5 (classifier and label embeddings 1e-3), batch 32, max length 128,
# head+tail truncation. Each cell writes OUT/<name>/<arm>/summary.json (dev metrics, mean ± std over seeds).
set -euo pipefail
OUT=${1:-runs/label_attention}
PY=${PYTHON:-.venv/bin/python}

cell() {  # name, arm (vanilla|label), then tasks.classify flags
    local name=$1 arm=$2; shift 2
    local flags=(--epochs 3 --resume)  # a later --epochs wins
    [[ $arm == label ]] && flags+=(--label-embedding)
    if [[ -n ${ONLY:-} && " $ONLY " != *" $name "* ]]; then return; fi
    if [[ -f $OUT/$name/$arm/summary.json ]]; then echo "done already: $name $arm"; return; fi
    echo "== $name $arm"
    "$PY" -m tasks.classify "${flags[@]}" "$@" --out "$OUT/$name/$arm"
}

for task in wnli rte mrpc cola trec-coarse; do
    for arm in vanilla label; do
        cell "$task" "$arm" --task "$task" --seeds 1 2 3
    done
done
# Low-resource curve on SST-2 (67,349 training phrases): 1% and 5% with three seeds (the sample changes with the
# seed), 20% with one; the full set with one seed and one epoch (2,105 steps: the 3-epoch budget of the full set
# would take longer than the rest of this study together).
for fraction in 0.01 0.05 0.2 1.0; do
    seeds=(1 2 3)
    epochs=3
    [[ $fraction == 0.2 || $fraction == 1.0 ]] && seeds=(1)
    [[ $fraction == 1.0 ]] && epochs=1
    for arm in vanilla label; do
        cell "sst2-$fraction" "$arm" --task sst2 --train-fraction "$fraction" --seeds "${seeds[@]}" --epochs "$epochs"
    done
done
