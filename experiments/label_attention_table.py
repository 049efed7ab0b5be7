"""docs/results.md's label-embedding tables from a finished (or partly finished)
experiments/label_attention.sh.

    .venv/bin/python experiments/label_attention_table.py [runs/label_attention]

Reads every <cell>/<arm>/summary.json and prints two Markdown tables: the five small sets (dev metric, last
epoch, mean ± std over seeds, with the best-epoch mean beside it and Wang et al.'s bert-base numbers for
context) and the SST-2 low-resource curve. Cells not run yet are listed as such.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

# Wang et al. (2020) with bert-base: vanilla -> label embedding, for context only (their setup, not ours).
PAPER = {"wnli": (55.1, 57.8), "rte": (63.9, 66.4), "mrpc": (87.3, 89.5), "cola": (54.5, 56.3),
         "trec-coarse": (97.0, 97.4)}
SETS = {"wnli": ("WNLI (accuracy)", "accuracy"), "rte": ("RTE (accuracy)", "accuracy"),
        "mrpc": ("MRPC (accuracy)", "accuracy"), "cola": ("CoLA (Matthews)", "matthews"),
        "trec-coarse": ("TREC coarse (accuracy)", "accuracy")}
FRACTIONS = ("0.01", "0.05", "0.2", "1.0")


def load(root: Path, cell: str, arm: str) -> dict | None:
    path = root / cell / arm / "summary.json"
    return json.loads(path.read_text()) if path.is_file() else None


def cell_text(summary: dict | None, metric: str) -> tuple[str, float | None]:
    if summary is None:
        return "not run", None
    final, best = summary["final"][metric], summary["best"][metric]
    return (f"{100 * final['mean']:.1f} ± {100 * final['std']:.1f} (best epoch {100 * best['mean']:.1f})",
            final["mean"])


def compare(vanilla: dict | None, label: dict | None, metric: str) -> str:
    """"seeds | vanilla | label embedding | difference" of one cell."""
    (v_text, v), (l_text, lab) = cell_text(vanilla, metric), cell_text(label, metric)
    diff = f"{100 * (lab - v):+.1f}" if v is not None and lab is not None else ""
    return f"{len((vanilla or label or {'seeds': []})['seeds'])} | {v_text} | {l_text} | {diff}"


def small_sets(root: Path) -> str:
    lines = ["| set (dev metric) | seeds | vanilla | label embedding | difference | Wang et al. bert-base |",
             "|---|---|---|---|---|---|"]
    for task, (name, metric) in SETS.items():
        vanilla, label = load(root, task, "vanilla"), load(root, task, "label")
        lines.append(f"| {name} | {compare(vanilla, label, metric)} | {PAPER[task][0]} -> {PAPER[task][1]} |")
        if task == "mrpc" and vanilla and label:
            lines.append(f"| MRPC (F1) | {compare(vanilla, label, 'f1')} | |")
    return "\n".join(lines)


def curve(root: Path) -> str:
    lines = ["| SST-2 training data | examples | seeds | vanilla accuracy | label embedding accuracy | "
             "difference |",
             "|---|---|---|---|---|---|"]
    for fraction in FRACTIONS:
        vanilla, label = load(root, f"sst2-{fraction}", "vanilla"), load(root, f"sst2-{fraction}", "label")
        examples = ""
        for summary, arm in ((vanilla, "vanilla"), (label, "label")):
            if summary:
                result = json.loads((root / f"sst2-{fraction}" / arm / f"seed-{summary['seeds'][0]}" /
                                     "result.json").read_text())
                examples = f"{result['train_examples']:,}"
                break
        lines.append(f"| {float(fraction):.0%} | {examples} | {compare(vanilla, label, 'accuracy')} |")
    return "\n".join(lines)


def main() -> int:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "runs/label_attention")
    if not root.is_dir():
        raise SystemExit(f"error: {root}: no study here (run experiments/label_attention.sh first)")
    print(small_sets(root))
    print()
    print(curve(root))
    return 0


if __name__ == "__main__":
    sys.exit(main())
