"""The fine-tuning study of Sun et al. (2019, "How to Fine-Tune BERT for Text Classification?") on our data.

    python -m experiments.study --list
    python -m experiments.study long-text                 # runs what is missing, then writes the table
    python -m experiments.study forgetting --seeds 1 2 3 --out runs/study
    python -m experiments.study layer-decay --dry-run     # the commands, without running them
    python -m experiments.study few-shot --table-only     # the table and plot of the runs done so far

Each study is a list of runs of our jobs (python -m tasks.classify, python -m pretrain.run). A run is done
when its summary.json covers the requested seeds (a pre-training run: when its run.json says it
finished); the others continue with --resume, so a half-finished study resumes where it stopped and more
seeds run only the new ones. --only RUN... runs a part of a study. At the end it writes
<out>/<study>/table.md (dev error, mean ± std over seeds) and plot.png, and states whether our best
configuration is the paper's (whose numbers, bert-base on GPUs, are context, not targets).

The studies (error = 1 - dev accuracy). Their CPU budgets are part of their definitions, so that the command
reproduces docs/results.md's table: every SST-2 run but few-shot's trains on a fixed 2% of SST-2 (1,347
sentences, a stratified draw per seed) for 3 epochs at 64 pieces; long-text trains 2 epochs on all of CFIMDB.

    long-text       cfimdb at 128 pieces per window: head, tail, head+tail, and chunked encoding (at most
                    4 windows, the paper's 512) with mean / max / self-attention pooling
    layer-features  sst2: the [CLS] of single layers 0..L, first-4, last-4, all (concat, mean, max)
    layer-decay     sst2: xi in 1.0, 0.95, 0.90, 0.85 at lr 2e-5 and 5e-5
    forgetting      sst2: lr 2e-5, 5e-5, 1e-4, 4e-4, dev error after every epoch of 4 (the curves)
    few-shot        sst2 with 0.4% .. 100% of its training set, from the embedded model and from it after
                    1 epoch of masked-LM on the SST training sentences (within-task)

Read next: ../docs/results.md (the tables).
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from minbert.loading.atomic import atomic_write, atomic_write_text
from tasks.training.flags import non_negative_int, nonempty, output_dir, positive_int
from tasks.training.job import user_errors
from tasks.training.run_folder import is_finished

SST2_FRACTIONS = (0.004, 0.01, 0.02, 0.04, 0.1, 0.2, 1.0)
SST2_BUDGET = ("--epochs", "3", "--max-length", "64")
SST2_SUBSET = ("--train-fraction", "0.02")  # the CPU budget of the SST-2 studies other than few-shot
# the embedded all-MiniLM-L6-v2; a study on another --model passes its own depth (--num-layers)
NUM_LAYERS = 6


@dataclass(frozen=True)
class Run:
    name: str
    module: str  # "tasks.classify" or "pretrain.run"
    argv: tuple[str, ...]
    seeded: bool = True  # takes --seeds (pre-training runs take one --seed)
    needs: str | None = None  # a run whose best/ checkpoint this one starts from ({needs} in argv)


@dataclass(frozen=True)
class Study:
    name: str
    description: str
    paper: str  # the paper's finding, in words
    runs: tuple[Run, ...]
    paper_best: str  # the run name the paper's finding says should be best ("" when not a single run)
    curves: bool = False  # plot dev error per epoch (forgetting) instead of one bar per run
    x_axis: Callable[[str], float] | None = None  # plot error against a number read from the run name


def classify_run(name: str, task: str, *flags: str) -> Run:
    return Run(name, "tasks.classify", ("--task", task, *flags))


def build_studies(num_layers: int = NUM_LAYERS) -> dict[str, Study]:
    long_text = ("--epochs", "2", "--max-length", "128")
    sst2 = (*SST2_BUDGET, *SST2_SUBSET)
    studies = [
        Study("long-text",
              "cfimdb reviews at 128 pieces per window: what to keep, or encode every window",
              "head+tail (first 128 + last 382 pieces) gave the lowest IMDb error; hierarchical (chunked) "
              "encoding did not beat it", (
                  classify_run("head", "cfimdb", *long_text, "--truncation", "head"),
                  classify_run("tail", "cfimdb", *long_text, "--truncation", "tail"),
                  classify_run("head+tail", "cfimdb", *long_text, "--truncation", "head+tail"),
                  *(classify_run(f"chunks-{how}", "cfimdb", *long_text, "--chunks", how, "--max-chunks", "4")
                    for how in ("mean", "max", "attention")),
              ), paper_best="head+tail"),
        Study("layer-features", "sst2: which layers' [CLS] vectors the classifier reads",
              "the last layer is the best single layer; concatenating the last four layers is about as good",
              tuple(classify_run(f"layer-{k}", "sst2", *sst2, "--layer-features", f"layer:{k}")
                    for k in range(num_layers + 1)) + tuple(
                  classify_run(f"{group}-{how}", "sst2", *sst2, "--layer-features", group,
                               "--layer-combine", how)
                  for group in ("first-4", "last-4", "all") for how in ("concat", "mean", "max")),
              paper_best=f"layer-{num_layers}"),
        Study("layer-decay", "sst2: layer-wise learning-rate decay xi at two learning rates",
              "a decay factor of 0.95 at lr 2e-5 was best; strong decay (0.85) hurt",
              tuple(classify_run(f"lr{lr}-xi{xi}", "sst2", *sst2, "--lr", lr, "--layerwise-decay", xi)
                    for lr in ("2e-5", "5e-5") for xi in ("1.0", "0.95", "0.90", "0.85")),
              paper_best="lr2e-5-xi0.95"),
        Study("forgetting", "sst2: dev error after every epoch at four learning rates",
              "small rates (2e-5) converge; 4e-4 fails to converge (catastrophic forgetting)",
              tuple(classify_run(f"lr{lr}", "sst2", "--epochs", "4", "--max-length", "64", *SST2_SUBSET,
                                 "--lr", lr)
                    for lr in ("2e-5", "5e-5", "1e-4", "4e-4")),
              paper_best="lr2e-5", curves=True),
        Study("few-shot",
              "sst2 with a fraction of its training set, with and without within-task further pre-training",
              "further pre-training helps most when the labelled set is small", (
                  Run("pretrain-sst", "pretrain.run", ("--within", "sst", "--epochs", "1"), seeded=False),
                  *(classify_run(f"plain-{f}", "sst2", *SST2_BUDGET, "--train-fraction", str(f))
                    for f in SST2_FRACTIONS),
                  *(Run(f"pretrained-{f}", "tasks.classify",
                        ("--task", "sst2", *SST2_BUDGET, "--train-fraction", str(f), "--model", "{needs}"),
                        needs="pretrain-sst")
                    for f in SST2_FRACTIONS),
              ), paper_best="", x_axis=lambda name: float(name.split("-")[-1])),
    ]
    return {s.name: s for s in studies}


# ----- running -------------------------------------------------------------------------------------


def run_argv(run: Run, directory: Path, study_dir: Path, seeds: Sequence[int],
             extra: Sequence[str]) -> list[str]:
    # The study-wide flags first, so that a run's own flags (e.g. its --model) win.
    argv = [*extra, *(a.replace("{needs}", str(study_dir / run.needs / "best")) if run.needs else a
                      for a in run.argv), "--out", str(directory)]
    if run.seeded:
        argv += ["--seeds", *map(str, seeds)]
    if ((directory / "checkpoints").exists() or any(directory.glob("seed-*/checkpoints"))
            or any(directory.glob("seed-*/result.json"))):
        # A run stopped half-way continues; with more seeds than before, the finished seeds are reused.
        argv.append("--resume")
    return argv


def run_study(study: Study, out: Path, seeds: Sequence[int], extra: Sequence[str] = (),
              runner: Callable[[str, list[str]], int] | None = None, dry_run: bool = False,
              only: Sequence[str] = (), keep_checkpoints: bool = False) -> list[dict]:
    """Run every run of `study` not yet done (in order; with `only`, those runs and the runs they start from),
    then collect the results of all (a run not done yet gives a row with error None)."""
    runner = runner or run_module
    study_dir = out / study.name
    if keep_checkpoints:  # the jobs drop a finished run's resume checkpoints unless told not to
        extra = [*extra, "--keep-checkpoints"]
    names = [r.name for r in study.runs]
    unknown = sorted(set(only) - set(names))
    if unknown:
        raise ValueError(f"study {study.name} has no run(s) {unknown}; its runs: {names}")
    chosen = set(only) | {r.needs for r in study.runs if r.name in only and r.needs} if only else set(names)
    for run in study.runs:
        if run.name not in chosen:
            continue
        directory = study_dir / run.name
        argv = run_argv(run, directory, study_dir, seeds, extra)
        done = is_done(run, directory, seeds)
        print(f"{'done  ' if done else 'run   '} {study.name}/{run.name}: "
              f"python -m {run.module} {' '.join(argv)}",
              file=sys.stderr)
        if done or dry_run:
            continue
        try:
            code = runner(run.module, argv)
        except SystemExit as stop:
            if stop.code not in (130, 143):  # Ctrl-C or SIGTERM (process.py) aside: the job's error
                raise
            # The job saved itself and said "... --resume": in a study, the study's command adds that.
            print(f"the study stopped in {study.name}/{run.name}; run the same study command again to "
                  "continue it (it resumes the stopped run)", file=sys.stderr)
            raise
        if code:
            raise SystemExit(f"error: {study.name}/{run.name} failed (exit {code}); "
                             "rerun the study to continue")
    return [] if dry_run else collect(study, study_dir)


def is_done(run: Run, directory: Path, seeds: Sequence[int] = ()) -> bool:
    """Pre-training: the run finished (run.json says so; a best/ alone may come from an interrupted run).
    Classification: its summary.json exists and covers `seeds` (so that asking for more seeds than an
    earlier call runs the new ones)."""
    if run.module == "pretrain.run":
        return is_finished(directory)
    summary = directory / "summary.json"
    return summary.is_file() and set(seeds) <= set(json.loads(summary.read_text())["seeds"])


def run_module(module: str, argv: list[str]) -> int:
    if module not in ("tasks.classify", "pretrain.run"):
        raise ValueError(f"unknown job module {module!r}")
    return importlib.import_module(module).main(argv)


def collect(study: Study, study_dir: Path) -> list[dict]:
    """Per classification run: dev error (1 - accuracy) mean and std over seeds, last epoch; per-epoch curves.
    A run without summary.json (not run yet) gives error None."""
    rows = []
    for run in study.runs:
        if run.module != "tasks.classify":
            continue
        if not is_done(run, study_dir / run.name):
            rows.append({"run": run.name, "error": None, "std": None, "seeds": [], "curves": []})
            continue
        summary = json.loads((study_dir / run.name / "summary.json").read_text())
        accuracy = summary["final"]["accuracy"]
        curves = []
        for seed in summary["seeds"]:
            lines = (study_dir / run.name / f"seed-{seed}" / "metrics.jsonl").read_text().splitlines()
            records = [json.loads(line)["dev"] for line in lines]  # {task: {"accuracy": ...}} per epoch
            curves.append([1 - next(iter(dev.values()))["accuracy"] for dev in records])
        rows.append({"run": run.name, "error": 1 - accuracy["mean"], "std": accuracy["std"],
                     "seeds": summary["seeds"], "curves": curves})
    return rows


def verdict(study: Study, rows: Sequence[dict]) -> str:
    """Whether our lowest-error run is the one the paper found best (or, for few-shot, where pre-training
    helps). Only runs that are done count; the verdict says which are missing."""
    done = [r for r in rows if r["error"] is not None]
    missing = [r["run"] for r in rows if r["error"] is None]
    note = f" (not run yet: {', '.join(missing)})" if missing else ""
    if not done:
        return "no run done yet" + note
    if study.name == "few-shot":
        return few_shot_verdict(done) + note
    best = min(done, key=lambda r: r["error"])
    if not study.paper_best:
        return f"our best: {best['run']}" + note
    paper = next(r for r in rows if r["run"] == study.paper_best)
    if paper["error"] is None:
        return (f"our best so far: {best['run']}; the paper's best here, {study.paper_best}, "
                "is not run yet" + note)
    tied = paper["error"] - best["error"] <= max(best["std"], paper["std"])
    word = "agrees" if best["run"] == study.paper_best else ("agrees within one std" if tied else "disagrees")
    return (f"our best: {best['run']} (error {100 * best['error']:.2f}%); the paper's best here, "
            f"{study.paper_best}: {100 * paper['error']:.2f}%: {word}" + note)


def few_shot_verdict(done: Sequence[dict]) -> str:
    """Where further pre-training changed the error by more than one std (the larger of the two runs'), and
    whether it helped at every small fraction (<= 4%), as the paper found."""
    by_name = {r["run"]: r for r in done}
    pairs = [f for f in SST2_FRACTIONS if f"pretrained-{f}" in by_name and f"plain-{f}" in by_name]
    small = [f for f in pairs if f <= 0.04]
    if not small:
        return "no small fraction has both runs yet"
    helped, hurt, single = [], [], []
    for f in pairs:
        plain, pretrained = by_name[f"plain-{f}"], by_name[f"pretrained-{f}"]
        if min(len(plain["seeds"]), len(pretrained["seeds"])) < 2:
            single.append(f)  # one seed: no spread to compare the difference with
            continue
        margin = max(plain["std"], pretrained["std"])
        if pretrained["error"] < plain["error"] - margin:
            helped.append(f)
        elif pretrained["error"] > plain["error"] + margin:
            hurt.append(f)
    if set(small) <= set(helped):
        word = "agrees"
    elif not helped and not hurt:
        word = "disagrees: no difference beyond one std at this budget"
    else:
        word = "disagrees"
    unjudged = f" (one seed, not judged: {single})" if single else ""
    return (f"further pre-training lowered the error by more than one std at fractions {helped or 'none'}, "
            f"raised it at {hurt or 'none'}, of {[f for f in pairs if f not in single]}{unjudged}; {word} "
            "(the paper: it helps most on small sets)")


def table(study: Study, rows: Sequence[dict]) -> str:
    lines = [f"### {study.name}: {study.description}", "",
             "| run | dev error % (last epoch), mean ± std | seeds |", "|---|---|---|"]
    for r in rows:
        ours = "not run" if r["error"] is None else f"{100 * r['error']:.2f} ± {100 * r['std']:.2f}"
        lines.append(f"| {r['run']} | {ours} | {len(r['seeds'])} |")
    lines += ["", f"Paper (Sun et al. 2019, bert-base): {study.paper}.", f"Ours: {verdict(study, rows)}.", ""]
    return "\n".join(lines)


def plot(study: Study, rows: Sequence[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in rows if r["error"] is not None]
    fig, ax = plt.subplots(figsize=(8, 4))
    if study.curves:
        for r in rows:
            mean = [sum(c[i] for c in r["curves"]) / len(r["curves"]) for i in range(len(r["curves"][0]))]
            ax.plot(range(1, len(mean) + 1), [100 * e for e in mean], marker="o", label=r["run"])
        ax.set(xlabel="epoch", ylabel="dev error %")
    elif study.x_axis:
        for prefix in ("plain", "pretrained"):
            chosen = [r for r in rows if r["run"].startswith(prefix + "-")]
            ax.errorbar([study.x_axis(r["run"]) for r in chosen], [100 * r["error"] for r in chosen],
                        yerr=[100 * r["std"] for r in chosen], marker="o", label=prefix, capsize=3)
        ax.set(xscale="log", xlabel="fraction of the training set", ylabel="dev error %")
    else:
        ax.bar([r["run"] for r in rows], [100 * r["error"] for r in rows],
               yerr=[100 * r["std"] for r in rows])
        ax.set(ylabel="dev error %")
        plt.setp(ax.get_xticklabels(), rotation=45, ha="right")
    ax.set_title(f"{study.name}: {study.description}", fontsize=9)
    if study.curves or study.x_axis:
        ax.legend()
    fig.tight_layout()
    atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=100))
    plt.close(fig)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m experiments.study", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     allow_abbrev=False)
    # The studies' names do not depend on --num-layers (only their layer runs do).
    parser.add_argument("study", nargs="?", choices=sorted(build_studies()), metavar="STUDY",
                        help="which study (see --list)")
    parser.add_argument("--list", action="store_true", help="list the studies and their runs")
    # The default is a string, so argparse checks it too: it must be creatable from here.
    parser.add_argument("--out", type=output_dir, default="runs/study",
                        help="where the studies' runs go (default %(default)s)")
    parser.add_argument("--seeds", type=non_negative_int, nargs="+", default=[1, 2, 3],
                        help="seeds of every run")
    parser.add_argument("--num-layers", type=positive_int, default=NUM_LAYERS,
                        help="the model's depth (layer studies)")
    parser.add_argument("--dry-run", action="store_true", help="print the commands; run nothing")
    parser.add_argument("--keep-checkpoints", action="store_true",
                        help="keep each finished seed's resume checkpoints "
                             "(deleted by default: about 0.5 GB each)")
    parser.add_argument("--table-only", action="store_true",
                        help="write the table and plot from the runs done so far; run nothing")
    # Which runs a study has is known only once the study is chosen: run_study checks the names.
    parser.add_argument("--only", type=nonempty, nargs="+", default=(), metavar="RUN",
                        help="run only these runs of the study (and the runs they start from)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    with user_errors():
        parser = build_parser()
        args, extra = parser.parse_known_args(argv)  # anything else goes to every job (e.g. --model, --limit)
        studies = build_studies(args.num_layers)
        if args.list or not args.study:
            for study in studies.values():
                print(f"{study.name}: {study.description} ({len(study.runs)} runs)")
            return 0
        study = studies[args.study]
        try:
            rows = (collect(study, Path(args.out) / study.name) if args.table_only else
                    run_study(study, Path(args.out), args.seeds, extra, dry_run=args.dry_run, only=args.only,
                              keep_checkpoints=args.keep_checkpoints))
        except ValueError as error:
            parser.error(str(error))
        if args.dry_run:
            return 0
        text = table(study, rows)
        study_dir = Path(args.out) / study.name
        atomic_write_text(study_dir / "table.md", text)
        plot(study, rows, study_dir / "plot.png")
        print(text)
        return 0


if __name__ == "__main__":
    sys.exit(main())
