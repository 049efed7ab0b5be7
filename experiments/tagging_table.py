"""The README's WNUT-17 table from a finished (or partly finished) experiments/tagging.sh.

    .venv/bin/python experiments/tagging_table.py [runs/tag]

Reads every <method>/summary.json (and each seed's result.json) and prints a Markdown table: dev entity-level
micro F1, precision and recall at the last epoch, mean ± std over seeds; token accuracy of the best checkpoint
(the job measures it only there); and per-type F1 at the last epoch (mean over seeds). Methods not run yet are
listed as such.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

METHODS = {"bio": "`bio` (all pieces labelled, first-piece decoding)",
           "bio-crf": "`bio-crf` (first-piece word scores)", "span": "`span` (width <= 8, mean pooling)"}
TYPES = ("person", "location", "group", "corporation", "product", "creative-work")


def mean_std(values: list[float]) -> str:
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.fmean(values):.3f} ± {std:.3f}"


def table(root: Path) -> str:
    lines = ["| method | seeds | micro F1 | precision | recall | token accuracy (best checkpoint) | "
             + " | ".join(f"F1 {t}" for t in TYPES) + " |", "|---|---|---|---|---|---|" + "---|" * len(TYPES)]
    for method, name in METHODS.items():
        summary = root / method / "summary.json"
        if not summary.is_file():
            lines.append(f"| {name} | 0 | not run |" + " |" * (3 + len(TYPES)))
            continue
        seeds = json.loads(summary.read_text())["seeds"]
        results = [json.loads((root / method / f"seed-{s}" / "result.json").read_text()) for s in seeds]
        finals = [r["final"] for r in results]
        cells = [mean_std([f[k] for f in finals]) for k in ("f1", "precision", "recall")]
        cells.append(mean_std([r["best"]["token_accuracy"] for r in results]))
        cells += [f"{statistics.fmean(f[f'f1_{t}'] for f in finals):.3f}" for t in TYPES]
        lines.append(f"| {name} | {len(seeds)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    root = Path(argv[0] if argv else "runs/tag")
    print(f"WNUT-17 dev, entity level, last epoch ({root}):\n")
    print(table(root))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
