#!/usr/bin/env bash
# LoRA against full fine-tuning on the main job: docs/results.md's table ("LoRA against full fine-tuning").
#   experiments/lora.sh [OUT] [ARM ...]     (default runs/lora and the arms below; a finished arm is skipped)
# An arm is `full` (every weight trains, the job's --lr 5e-5) or r<R>-lr<LR> (--lora R --lr LR: the adapters'
# learning rate; the heads keep the job's 1e-3). The learning rate of r = 8 was chosen on dev among 2e-4, 5e-4
# and 1e-3, and r = 16 run at it.
# One short protocol for every arm, so that the arms compare with each other (not with the 3-epoch default):
# 1 epoch on the first 1,000 examples of each training file (--limit also cuts the dev files to their first
# 1,000 rows: of 1,101 SST, 1,999 Quora and 863 STS dev rows), fp32, 1 thread, seed 11711, the job's
# other defaults. Each arm runs under /usr/bin/time -v (its peak RSS) and keeps its resume checkpoint (the
# optimizer state measured); python -m experiments.tables lora prints the table.
set -euo pipefail
OUT=${1:-runs/lora}
shift || true
PY=${PYTHON:-.venv/bin/python}
ARMS=("${@:-full r8-lr2e-4 r8-lr5e-4 r8-lr1e-3 r16-lr5e-4}")
read -r -a ARMS <<< "${ARMS[*]}"
mkdir -p "$OUT"
for arm in "${ARMS[@]}"; do
    if [[ $arm == full ]]; then
        flags=(--lr 5e-5)
    elif [[ $arm =~ ^r([0-9]+)-lr([0-9.e-]+)$ ]]; then
        flags=(--lora "${BASH_REMATCH[1]}" --lr "${BASH_REMATCH[2]}")
    else
        echo "error: an arm is full or r<R>-lr<LR>, got $arm" >&2; exit 2
    fi
    if [[ -f $OUT/$arm/run.json ]] && grep -q finished "$OUT/$arm/run.json"; then echo "done already: $arm"; continue; fi
    echo "== $arm: ${flags[*]}"
    /usr/bin/time -v -o "$OUT/$arm.time" "$PY" -m tasks.multitask "${flags[@]}" --epochs 1 --limit 1000 \
        --precision fp32 --threads 1 --seed 11711 --keep-checkpoints --out "$OUT/$arm" 2> "$OUT/$arm.log"
done
