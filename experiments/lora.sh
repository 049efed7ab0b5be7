#!/usr/bin/env bash
# LoRA against full fine-tuning on the main job: docs/results.md's table ("LoRA against full fine-tuning").
#   experiments/lora.sh [OUT] [ARM ...]     (default runs/lora, every arm; a finished arm is skipped)
# One short protocol for every arm, so that the arms compare with each other (not with the 3-epoch default):
# 1 epoch on the first 1,000 examples of each training file (--limit also cuts the dev files to their first
# 1,000 rows: of 1,101 SST, 1,999 Quora and 863 STS dev rows), fp32, 1 thread, seed 11711, the job's
# other defaults (heads at 1e-3). Each arm runs under /usr/bin/time -v (its peak RSS) and keeps its resume
# checkpoint (the optimizer state measured); experiments/lora_table.py prints the table.
set -euo pipefail
OUT=${1:-runs/lora}
shift || true
PY=${PYTHON:-.venv/bin/python}
declare -A ARMS=(
    [full]="--lr 5e-5"
    [r8-lr2e-4]="--lora 8 --lr 2e-4"
    [r8-lr5e-4]="--lora 8 --lr 5e-4"
    [r8-lr1e-3]="--lora 8 --lr 1e-3"
    [r16-lr1e-3]="--lora 16 --lr 1e-3"
)
ORDER=("${@:-full r8-lr2e-4 r8-lr5e-4 r8-lr1e-3 r16-lr1e-3}")
read -r -a ORDER <<< "${ORDER[*]}"
mkdir -p "$OUT"
for arm in "${ORDER[@]}"; do
    if [[ -f $OUT/$arm/run.json ]] && grep -q finished "$OUT/$arm/run.json"; then echo "done already: $arm"; continue; fi
    echo "== $arm: ${ARMS[$arm]}"
    # shellcheck disable=SC2086
    /usr/bin/time -v -o "$OUT/$arm.time" "$PY" -m tasks.multitask ${ARMS[$arm]} --epochs 1 --limit 1000 \
        --precision fp32 --threads 1 --seed 11711 --keep-checkpoints --out "$OUT/$arm" 2> "$OUT/$arm.log"
done
