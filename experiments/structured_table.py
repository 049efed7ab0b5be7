"""The README's structured-classifier tables from a finished (or partly finished) experiments/structured.sh.

    .venv/bin/python experiments/structured_table.py [runs/hierarchical/hwv]

Reads every <variant>/summary.json (and each seed's result.json and analysis.json) and prints two Markdown
tables: dev R-Precision per level, micro and macro at the best epoch (mean ± std over seeds), with test
micro / macro beside them; and a summary of the layer analysis (Manginas et al., section 5) per variant: the
mean angular distance between the [CLS] vectors of consecutive layers, the attention entropy and the
head-to-head KL of the first and last layer, and the mean KL between consecutive layers' attention. Variants
not run yet are listed.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

VARIANTS = ("flat", "last-six", "one-by-one", "in-pairs", "hybrid")


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
            lines.append(f"| {variant} | | 0 | " + " | ".join("not run" for _ in levels) + " | | | | |")
            continue
        layer_map = "; ".join(f"L{n}<-{','.join(map(str, g))}"
                              for n, g in enumerate(rs[0]["layer_map"], start=1))
        cells = [mean_std([r["best"][k] for r in rs]) for k in levels]
        cells += [mean_std([r["best"][k] for r in rs]) for k in ("micro", "macro")]
        cells += [mean_std([r["test_of_best"][k] for r in rs]) for k in ("micro", "macro")]
        lines.append(f"| {variant} | {layer_map} | {len(rs)} | " + " | ".join(cells) + " |")
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
