"""docs/results.md's WNUT-17 table from a finished (or partly finished) experiments/tagging.sh.

    .venv/bin/python experiments/tagging_table.py [runs/tag]

From every <method>/summary.json: dev entity-level micro F1, precision and recall at the last epoch (mean ±
std over seeds), token accuracy of the best checkpoint (the job measures it only there), and per-type F1
(mean over seeds). Methods not run yet are listed as such.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

METHODS = {"bio": "`bio` (all pieces labelled, first-piece decoding)",
           "bio-crf": "`bio-crf` (first-piece word scores)", "span": "`span` (width <= 8, mean pooling)"}
TYPES = ("person", "location", "group", "corporation", "product", "creative-work")


def mean_std(metric: dict) -> str:
    """A metric of summary.json (tasks/training/seeds.py summarise: mean and std over the seeds)."""
    return f"{metric['mean']:.3f} ± {metric['std']:.3f}"


def table(root: Path) -> str:
    lines = ["| method | seeds | micro F1 | precision | recall | token accuracy (best checkpoint) | "
             + " | ".join(f"F1 {t}" for t in TYPES) + " |", "|---|---|---|---|---|---|" + "---|" * len(TYPES)]
    for method, name in METHODS.items():
        path = root / method / "summary.json"
        if not path.is_file():
            lines.append(f"| {name} | 0 | not run |" + " |" * (3 + len(TYPES)))
            continue
        summary = json.loads(path.read_text())
        final = summary["final"]
        cells = [mean_std(final[k]) for k in ("f1", "precision", "recall")]
        cells.append(mean_std(summary["best"]["token_accuracy"]))
        cells += [f"{final[f'f1_{t}']['mean']:.3f}" for t in TYPES]
        lines.append(f"| {name} | {len(summary['seeds'])} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    root = Path(argv[0] if argv else "runs/tag")
    print(f"WNUT-17 dev, entity level, last epoch ({root}):\n")
    print(table(root))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
