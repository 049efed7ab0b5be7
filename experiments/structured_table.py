"""docs/results.md's structured-classifier tables from a finished (or partly finished)
experiments/structured.sh.

    .venv/bin/python experiments/structured_table.py [runs/hierarchical/hwv]

Prints two Markdown tables from every <variant>/summary.json and its seeds' result.json and analysis.json:
dev R-Precision per level, micro and macro at the best epoch (mean ± std over seeds) beside test micro /
macro; and the layer analysis (Manginas et al., section 5) per variant. A variant skipped because an
earlier one has the same map at this depth says so; variants not run yet are listed.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from tasks.models.structured import VARIANTS as NAMED, layer_map

VARIANTS = (*NAMED, "upper-half")  # upper-half: the custom map experiments/structured.sh adds for HWV


def map_text(layers: list[list[int]]) -> str:
    return "; ".join(f"L{n}<-{','.join(map(str, g))}" for n, g in enumerate(layers, start=1))


def same_map_as(variant: str, results: dict[str, list[dict]]) -> str | None:
    """The run variant whose map `variant` derives at the runs' depth and number of levels, if any."""
    done = {v: rs[0]["layer_map"] for v, rs in results.items() if rs}
    if variant not in NAMED or not done:
        return None
    any_map = next(iter(done.values()))
    depth, levels = max(max(g) for m in done.values() for g in m), len(any_map)
    mine = [list(g) for g in layer_map(variant, depth, levels)]
    return next((v for v, m in done.items() if m == mine), None)


def seed_dirs(root: Path, variant: str) -> list[Path]:
    summary = root / variant / "summary.json"
    if not summary.is_file():
        return []
    return [root / variant / f"seed-{seed}" for seed in json.loads(summary.read_text())["seeds"]]


def mean_std(values: list[float]) -> str:
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{100 * statistics.fmean(values):.1f} ± {100 * std:.1f}"


def rprecision(root: Path) -> str:
    results = {v: [json.loads((d / "result.json").read_text()) for d in seed_dirs(root, v)]
               for v in VARIANTS}
    done = [r for rs in results.values() for r in rs]
    levels = sorted({k for r in done for k in r["best"]
                     if k.startswith("level") and not k.endswith("_documents")})
    lines = ["| variant | layer map (level <- layers) | seeds | " + " | ".join(f"L{k[5:]}" for k in levels)
             + " | micro | macro | test micro | test macro |",
             "|---|---|---|" + "---|" * (len(levels) + 4)]
    for variant, rs in results.items():
        if not rs:
            twin = same_map_as(variant, results)
            text = f"same map as {twin} at this depth: not run again" if twin else "not run"
            lines.append(f"| {variant} | | 0 | " + " | ".join(text for _ in levels[:1])
                         + " |" * (len(levels) + 4))
            continue
        # A level without a dev document that has a gold label there has no R-Precision ("n/a").
        cells = [mean_std([r["best"][k] for r in rs]) if rs[0]["best"][f"{k}_documents"] else "n/a"
                 for k in levels]
        cells += [mean_std([r["best"][k] for r in rs]) for k in ("micro", "macro")]
        cells += [mean_std([r["test_of_best"][k] for r in rs]) for k in ("micro", "macro")]
        lines.append(f"| {variant} | {map_text(rs[0]['layer_map'])} | {len(rs)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def analysis(root: Path) -> str:
    lines = ["| variant | [CLS] angle, consecutive layers (mean) | [CLS] angle, layer 0 to last | "
             "entropy first / last layer (nats) | head KL first / last layer | "
             "KL consecutive layers (mean) |",
             "|---|---|---|---|---|---|"]
    for variant in VARIANTS:
        dirs = [d for d in seed_dirs(root, variant) if (d / "analysis.json").is_file()]
        if not dirs:
            lines.append(f"| {variant} | not run | | | | |")
            continue
        # the first seed; the notebook draws it in full
        a = json.loads((dirs[0] / "analysis.json").read_text())
        angle = a["cls_angular_distance"]
        consecutive = statistics.fmean(angle[i][i + 1] for i in range(len(angle) - 1))
        kl = a["layer_kl"]
        kl_next = statistics.fmean(kl[i][i + 1] for i in range(len(kl) - 1))
        entropy, heads = a["attention_entropy"], a["head_kl"]
        lines.append(f"| {variant} | {consecutive:.3f} | {angle[0][-1]:.3f} | "
                     f"{entropy[0]:.2f} / {entropy[-1]:.2f} | {heads[0]:.2f} / {heads[-1]:.2f} | "
                     f"{kl_next:.2f} |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    root = Path(argv[0] if argv else "runs/hierarchical/hwv")
    print(f"Dev R-Precision (%) at the best epoch by dev micro, mean ± std over seeds ({root}):\n")
    print(rprecision(root))
    print("\nLayer analysis on dev (first seed; notebooks/structured_layers.ipynb draws the full "
          "matrices):\n")
    print(analysis(root))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
