"""docs/results.md's tables, in Markdown, from a finished (or partly finished) study of experiments/*.sh.

    .venv/bin/python -m experiments.tables label-attention [runs/label_attention]
    .venv/bin/python -m experiments.tables lora [runs/lora]
    .venv/bin/python -m experiments.tables structured [runs/hierarchical/hwv]
    .venv/bin/python -m experiments.tables tagging [runs/tag]

- label-attention (experiments/label_attention.sh): from every <cell>/<arm>/summary.json, the five small
  sets (dev metric, last epoch, mean ± std over seeds, with the best-epoch mean beside it and Wang et al.'s
  bert-base numbers for context) and the SST-2 low-resource curve.
- lora (experiments/lora.sh): per arm, the dev figures of its best epoch, the parameters AdamW trains and
  the bytes of its state (from the kept checkpoints/last.pt), the mean training step (`train_s` over the
  steps), and the peak RSS and wall time of the whole command (/usr/bin/time -v's <arm>.time).
- structured (experiments/structured.sh): from every <variant>/summary.json and its seeds' result.json and
  analysis.json, dev R-Precision per level, micro and macro at the best epoch (mean ± std over seeds)
  beside test micro / macro; and the layer analysis (Manginas et al., section 5) per variant. A variant
  skipped because an earlier one has the same map at this depth says so.
- tagging (experiments/tagging.sh): from every <method>/summary.json, WNUT-17 dev entity-level micro F1,
  precision and recall at the last epoch (mean ± std over seeds), token accuracy of the best checkpoint
  (the job measures it only there), and per-type F1 (mean over seeds).

A cell, arm, variant or method not run (or not finished) yet is listed as such.
"""

from __future__ import annotations

import json
import re
import statistics
import sys
from pathlib import Path

import torch

from minbert.loading.checkpoint import read_torch
from tasks.models.structured import VARIANTS as NAMED, layer_map


def read_json(path: Path) -> dict | None:
    """A run's summary.json (or other record); None when it is not written yet."""
    return json.loads(path.read_text()) if path.is_file() else None


def row(*cells: str) -> str:
    """A Markdown table row; an empty cell is written "| |"."""
    return "|" + "|".join(f" {cell} " if cell else " " for cell in cells) + "|"


def rule(columns: int) -> str:
    return "|" + "---|" * columns


# ----- label-attention ------------------------------------------------------------------------------

# Wang et al. (2020) with bert-base: vanilla -> label embedding, for context only (their setup, not ours).
PAPER = {"wnli": (55.1, 57.8), "rte": (63.9, 66.4), "mrpc": (87.3, 89.5), "cola": (54.5, 56.3),
         "trec-coarse": (97.0, 97.4)}
SETS = {"wnli": ("WNLI (accuracy)", "accuracy"), "rte": ("RTE (accuracy)", "accuracy"),
        "mrpc": ("MRPC (accuracy)", "accuracy"), "cola": ("CoLA (Matthews)", "matthews"),
        "trec-coarse": ("TREC coarse (accuracy)", "accuracy")}
FRACTIONS = ("0.01", "0.05", "0.2", "1.0")


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


def label_attention(root: Path) -> str:
    def arms(cell: str) -> tuple[dict | None, ...]:  # (vanilla, label)
        return tuple(read_json(root / cell / arm / "summary.json") for arm in ("vanilla", "label"))

    lines = ["| set (dev metric) | seeds | vanilla | label embedding | difference | Wang et al. bert-base |",
             rule(6)]
    for task, (name, metric) in SETS.items():
        vanilla, label = arms(task)
        lines.append(f"| {name} | {compare(vanilla, label, metric)} | {PAPER[task][0]} -> {PAPER[task][1]} |")
        if task == "mrpc" and vanilla and label:
            lines.append(f"| MRPC (F1) | {compare(vanilla, label, 'f1')} | |")
    lines += ["", "| SST-2 training data | examples | seeds | vanilla accuracy | label embedding accuracy | "
              "difference |", rule(6)]
    for fraction in FRACTIONS:
        cell = f"sst2-{fraction}"
        vanilla, label = arms(cell)
        examples = ""
        if vanilla or label:
            arm, summary = ("vanilla", vanilla) if vanilla else ("label", label)
            result = read_json(root / cell / arm / f"seed-{summary['seeds'][0]}" / "result.json")
            examples = f"{result['train_examples']:,}"
        lines.append(f"| {float(fraction):.0%} | {examples} | {compare(vanilla, label, 'accuracy')} |")
    return "\n".join(lines)


# ----- lora -----------------------------------------------------------------------------------------

ARM = re.compile(r"r(\d+)-lr(.+)")  # experiments/lora.sh's arms besides "full": r<R>-lr<LR>


def optimizer_state(checkpoint: Path) -> tuple[int, int]:
    """(parameters with AdamW state, bytes of that state) in a run's resume checkpoint."""
    state = read_torch(checkpoint)["optimizer"]["state"]
    params = sum(s["exp_avg"].numel() for s in state.values())
    size = sum(t.numel() * t.element_size() for s in state.values() for t in s.values()
               if isinstance(t, torch.Tensor))
    return params, size


def time_report(path: Path) -> tuple[float, str]:
    """(peak RSS in GiB, wall clock) from /usr/bin/time -v's report."""
    text = path.read_text()
    rss_kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", text).group(1))
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)", text).group(1)
    return rss_kb / 2**20, wall


def lora(root: Path) -> str:
    arms = {p.name: ARM.fullmatch(p.name) for p in root.iterdir() if p.is_dir()}
    arms = {arm: found for arm, found in arms.items() if arm == "full" or found}  # full first, then by rank, lr
    lines = [row("arm", "SST acc", "Quora acc", "STS Pearson", "overall", "parameters trained", "AdamW state",
                 "step (mean)", "peak RSS", "wall (whole command)"), rule(10)]
    for arm, found in sorted(arms.items(), key=lambda a: (1, int(a[1][1]), float(a[1][2])) if a[1] else (0,)):
        name = f"LoRA r = {found[1]}, lr {found[2]}" if found else "full fine-tuning, lr 5e-5"
        run = read_json(root / arm / "run.json")
        if run is None or "finished" not in json.dumps(run):
            lines.append(row(name, "not finished", *[""] * 8))
            continue
        history = [json.loads(line) for line in (root / arm / "metrics.jsonl").read_text().splitlines()]
        best = max(history, key=lambda r: r["overall"])
        dev = best["dev"]
        step_s = sum(r["train_s"] for r in history) / history[-1]["global_step"]
        params, size = optimizer_state(root / arm / "checkpoints" / "last.pt")
        rss, wall = time_report(root / f"{arm}.time")
        lines.append(row(name, f"{dev['sst']['accuracy']:.3f}", f"{dev['para']['accuracy']:.3f}",
                         f"{dev['sts']['pearson']:.3f}", f"{best['overall']:.4f}", f"{params:,}",
                         f"{size / 2**20:.1f} MiB", f"{step_s:.2f} s", f"{rss:.2f} GiB", wall))
    return "\n".join(lines)


# ----- structured -----------------------------------------------------------------------------------

VARIANTS = (*NAMED, "upper-half")  # upper-half: the custom map experiments/structured.sh adds for HWV


def same_map_as(variant: str, results: dict[str, list[dict]]) -> str | None:
    """The run variant whose map `variant` derives at the runs' depth and number of levels, if any."""
    done = {v: rs[0]["layer_map"] for v, rs in results.items() if rs}
    if variant not in NAMED or not done:
        return None
    any_map = next(iter(done.values()))
    depth, levels = max(max(g) for m in done.values() for g in m), len(any_map)
    mine = [list(g) for g in layer_map(variant, depth, levels)]
    return next((v for v, m in done.items() if m == mine), None)


def mean_std(values: list[float]) -> str:
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{100 * statistics.fmean(values):.1f} ± {100 * std:.1f}"


def structured(root: Path) -> str:
    seeds = {v: [root / v / f"seed-{seed}" for seed in (read_json(root / v / "summary.json") or {"seeds": []})
                 ["seeds"]] for v in VARIANTS}
    results = {v: [read_json(d / "result.json") for d in dirs] for v, dirs in seeds.items()}
    done = [r for rs in results.values() for r in rs]
    levels = sorted({k for r in done for k in r["best"]
                     if k.startswith("level") and not k.endswith("_documents")})
    lines = [f"Dev R-Precision (%) at the best epoch by dev micro, mean ± std over seeds ({root}):", "",
             row("variant", "layer map (level <- layers)", "seeds", *(f"L{k[5:]}" for k in levels), "micro",
                 "macro", "test micro", "test macro"), rule(len(levels) + 7)]
    for variant, rs in results.items():
        if not rs:
            twin = same_map_as(variant, results)
            text = f"same map as {twin} at this depth: not run again" if twin else "not run"
            lines.append(row(variant, "", "0", text, *[""] * (len(levels) + 3)))
            continue
        # A level without a dev document that has a gold label there has no R-Precision ("n/a").
        cells = [mean_std([r["best"][k] for r in rs]) if rs[0]["best"][f"{k}_documents"] else "n/a"
                 for k in levels]
        cells += [mean_std([r["best"][k] for r in rs]) for k in ("micro", "macro")]
        cells += [mean_std([r["test_of_best"][k] for r in rs]) for k in ("micro", "macro")]
        lines.append(row(variant, "; ".join(f"L{n}<-{','.join(map(str, g))}" for n, g in
                                            enumerate(rs[0]["layer_map"], start=1)), str(len(rs)), *cells))
    lines += ["", "Layer analysis on dev (first seed; notebooks/structured_layers.ipynb draws the full "
              "matrices):", "", row("variant", "[CLS] angle, consecutive layers (mean)",
                                    "[CLS] angle, layer 0 to last", "entropy first / last layer (nats)",
                                    "head KL first / last layer", "KL consecutive layers (mean)"), rule(6)]
    for variant in VARIANTS:
        dirs = [d for d in seeds[variant] if (d / "analysis.json").is_file()]
        if not dirs:
            lines.append(row(variant, "not run", *[""] * 4))
            continue
        a = read_json(dirs[0] / "analysis.json")  # the first seed; the notebook draws it in full
        angle, kl, entropy, heads = (a["cls_angular_distance"], a["layer_kl"], a["attention_entropy"],
                                     a["head_kl"])
        consecutive = statistics.fmean(angle[i][i + 1] for i in range(len(angle) - 1))
        kl_next = statistics.fmean(kl[i][i + 1] for i in range(len(kl) - 1))
        lines.append(row(variant, f"{consecutive:.3f}", f"{angle[0][-1]:.3f}",
                         f"{entropy[0]:.2f} / {entropy[-1]:.2f}", f"{heads[0]:.2f} / {heads[-1]:.2f}",
                         f"{kl_next:.2f}"))
    return "\n".join(lines)


# ----- tagging --------------------------------------------------------------------------------------

METHODS = {"bio": "`bio` (all pieces labelled, first-piece decoding)",
           "bio-crf": "`bio-crf` (first-piece word scores)", "span": "`span` (width <= 8, mean pooling)"}
TYPES = ("person", "location", "group", "corporation", "product", "creative-work")


def tagging(root: Path) -> str:
    def spread(metric: dict) -> str:  # tasks/training/seeds.py's summarise: mean and std over the seeds
        return f"{metric['mean']:.3f} ± {metric['std']:.3f}"

    lines = [f"WNUT-17 dev, entity level, last epoch ({root}):", "",
             row("method", "seeds", "micro F1", "precision", "recall", "token accuracy (best checkpoint)",
                 *(f"F1 {t}" for t in TYPES)), rule(6 + len(TYPES))]
    for method, name in METHODS.items():
        summary = read_json(root / method / "summary.json")
        if summary is None:
            lines.append(row(name, "0", "not run", *[""] * (3 + len(TYPES))))
            continue
        final = summary["final"]
        lines.append(row(name, str(len(summary["seeds"])), *(spread(final[k]) for k in ("f1", "precision",
                                                                                          "recall")),
                         spread(summary["best"]["token_accuracy"]), *(f"{final[f'f1_{t}']['mean']:.3f}"
                                                                        for t in TYPES)))
    return "\n".join(lines)


TABLES = {"label-attention": (label_attention, "runs/label_attention"), "lora": (lora, "runs/lora"),
          "structured": (structured, "runs/hierarchical/hwv"), "tagging": (tagging, "runs/tag")}


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in TABLES or len(argv) > 2:
        raise SystemExit(f"usage: python -m experiments.tables {{{','.join(TABLES)}}} [RUNS_FOLDER]")
    table, default = TABLES[argv[0]]
    root = Path(argv[1] if len(argv) > 1 else default)
    if not root.is_dir():
        script = f"experiments/{argv[0].replace('-', '_')}.sh"
        raise SystemExit(f"error: {root}: no study here (run {script} first)")
    print(table(root))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
