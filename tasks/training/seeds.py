"""Several seeds of one run (--seeds): each trained into its own folder, then their mean ± std summarised.

A job's `run_one(settings, out, resume)` trains one model and returns its result, a dict with (at least)
"final" and "best", each {metric: value} (the dev metrics of the last epoch and of the best epoch), or None
in a torchrun process other than rank 0. `run_seeds` calls it once per seed into <out>/seed-<n>/, skips seeds
whose result.json exists when resuming (and resumes the others from their checkpoints), and writes
<out>/summary.json with every dev metric's mean and sample standard deviation (n - 1 in the denominator; 0.0
for a single seed). A job without --seeds (the main job) never loads this file.

Read next: ../classify.py (a job with --seeds).
"""

from __future__ import annotations

import json
import statistics
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Sequence

from minbert.loading.atomic import atomic_write_text
from minbert.loading.schema import Field, Schema, read_document
from tasks.training.flags import seed_int
from tasks.training.run_folder import default_run_dir
from tasks.training.settings import RunSettings, flag


RESULT_FILE = "result.json"
# result.json: one seed's dev metrics, of the last epoch and of the best (`run_seeds` reads it back).
RESULT = Schema({"seed": Field("integer"), "final": Field("object"), "best": Field("object")},
                ("seed", "final", "best"), unknown="keep")


def seeds_flag() -> Any:
    """The --seeds field of a job's settings (None: one run, with --seed)."""
    # a resumed study may add seeds: the finished ones are skipped
    return flag(None, "train once per seed into <out>/seed-<n>/, report mean ± std", type=seed_int,
                nargs="+", same_on_resume=False)


def write_result(directory: Path, result: dict) -> None:
    atomic_write_text(directory / RESULT_FILE, json.dumps(result, indent=2, sort_keys=True) + "\n")


def summarise(results: Sequence[dict]) -> dict:
    """mean and std (n - 1) of every numeric dev metric over seeds, for the last and for the best epoch."""
    summary: dict[str, Any] = {"seeds": [r["seed"] for r in results], "runs": len(results)}
    for which in ("final", "best"):
        summary[which] = {}
        for metric, value in results[0][which].items():
            if not isinstance(value, (int, float)):
                continue
            values = [r[which][metric] for r in results]
            summary[which][metric] = {"mean": statistics.fmean(values),
                                      "std": statistics.stdev(values) if len(values) > 1 else 0.0,
                                      "values": values}
    return summary


def format_summary(title: str, summary: dict, metrics: Sequence[str] | None = None) -> str:
    """Two lines (last epoch, best epoch), each metric as percent mean ± std."""
    lines = [f"{title}: {summary['runs']} seed(s) {summary['seeds']}"]
    for which, name in (("final", "last epoch"), ("best", "best epoch on dev")):
        shown = metrics or list(summary[which])
        cells = [f"{m} {100 * summary[which][m]['mean']:.1f} ± {100 * summary[which][m]['std']:.1f}"
                 for m in shown]
        lines.append(f"  {name}: " + ", ".join(cells))
    return "\n".join(lines)


def run_seeds(seeds: Sequence[int], out: Path, resume: bool, run_one: Callable[[int, Path, bool], dict],
              title: str, extra: dict, metrics: Sequence[str] | None = None) -> dict:
    """Run every seed (see the module docstring); returns and writes the summary (with `extra` merged in)."""
    results = []
    for seed in seeds:
        seed_dir = out / f"seed-{seed}"
        if resume and (seed_dir / RESULT_FILE).is_file():
            print(f"seed {seed}: finished earlier, reusing {seed_dir / RESULT_FILE}", file=sys.stderr)
            results.append(read_document(seed_dir / RESULT_FILE, RESULT))
            continue
        results.append(run_one(seed, seed_dir, resume and (seed_dir / "checkpoints" / "last.pt").is_file()))
    if None in results:  # under torchrun, the processes other than rank 0 train but do not report
        return {}
    summary = {**extra, **summarise(results)}
    atomic_write_text(out / "summary.json", json.dumps(summary, indent=2, sort_keys=True) + "\n")
    print(format_summary(title, summary, metrics) + f"\nsummary in {out / 'summary.json'}", file=sys.stderr)
    return summary


def run_one_or_seeds(name: str, settings: RunSettings,
                     run_one: Callable[[RunSettings, Path, bool], dict | None],
                     title: str, extra: dict, metrics: Sequence[str] | None = None) -> None:
    """`run_one(settings, out, resume)` once per seed of --seeds (`run_seeds`), each with its seed as --seed,
    or, without --seeds, once with --seed straight into --out (default runs/<name>/<date-time>), its summary
    printed."""
    out = Path(settings.job.out or default_run_dir(name))
    training = settings.training

    def one_seed(seed: int, directory: Path, resume: bool) -> dict | None:
        return run_one(replace(settings, training=replace(training, seed=seed)), directory, resume)

    if settings.seeds is not None:
        run_seeds(settings.seeds, out, training.resume, one_seed, title, extra, metrics)
        return
    result = one_seed(training.seed, out, training.resume)
    if result is not None:  # None: a torchrun process other than rank 0
        print(format_summary(title, summarise([result]), metrics) + f"\noutputs in {out}", file=sys.stderr)
