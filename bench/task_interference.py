"""Which tasks pull against which: train the main job's model on a subset of its tasks and read STS.

The multitask job trains SST, Quora and STS on one encoder. STS alone reaches a higher Pearson than STS
trained together with the others; this script measures that gap, one subset of tasks at a time, with the
multitask job's model, heads and loop, with proportional sampling, equal task weights and SST's plain
cross-entropy: the main job's defaults when docs/results.md's interference table was measured (the job's
defaults since weigh STS 4x and train SST with R-Drop and [CLS] pooling). Each run evaluates the tasks it
trains, before training and after each epoch.

    python -m bench.task_interference --tasks sts --epochs 2            # about 3.5 minutes on 2 cores
    python -m bench.task_interference --tasks sts,para --epochs 1       # about 8 minutes
    python -m bench.task_interference --tasks sts,sst --sst-pooling cls

Quality figures, not timings: the numbers are dev metrics on the shared data ($MINBERT_DATA/cs224n).

Read next: tasks/multitask.py.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from dataclasses import replace

import torch

from minbert.pooling import POOLINGS
from tasks.data.course import read_splits, task_files
from tasks.data.sources import resolve_data_dir
from tasks.models.course_task import MultitaskBERT, RDrop, TaskData
from tasks.multitask import TASKS
from tasks.training.fast_paths import use_fast_paths
from tasks.training.flags import choice_list, existing_dir, nonempty, positive, positive_int
from tasks.training.job import load_encoder
from tasks.training.loop import train
from tasks.training.run_folder import RunDir
from tasks.training.settings import DEFAULT_MODEL, SAMPLINGS, TrainingSettings


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.task_interference", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    # The default is a string, so argparse parses it too: args.tasks is always a list.
    parser.add_argument("--tasks", type=choice_list(tuple(t.name for t in TASKS)), default="sts",
                        help="comma-separated subset of sst, para, sts")
    parser.add_argument("--epochs", type=positive_int, default=1)
    parser.add_argument("--lr", type=positive, default=TrainingSettings.lr)
    parser.add_argument("--sampling", choices=SAMPLINGS, default="proportional")
    parser.add_argument("--sst-pooling", choices=POOLINGS, default="mean")
    parser.add_argument("--model", type=nonempty, default=DEFAULT_MODEL, help="a model name or folder")
    parser.add_argument("--data-dir", type=existing_dir, default=None)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    names = args.tasks
    config = TrainingSettings(epochs=args.epochs, lr=args.lr, sampling=args.sampling, eval_first=True)
    torch.manual_seed(config.seed)
    rows = [replace(t, weight=1.0) for t in TASKS if t.name in names]  # equal weights
    sst = dict(head=replace(TASKS[0].head, pooling=args.sst_pooling), loss=RDrop(0.0))  # plain cross-entropy
    rows = [replace(t, **sst) if t.name == "sst" else t for t in rows]
    source = resolve_data_dir(args.data_dir, task_files([t.dataset for t in rows], ("train", "dev")))
    data = {t.name: read_splits(source, t.dataset, strict=False, limit=0) for t in rows}
    bert, tokenizer, _ = load_encoder(args.model)
    model = use_fast_paths(MultitaskBERT(bert, rows))  # as a job does before its loop
    tasks = [TaskData(t, tokenizer, data[t.name]["train"], data[t.name]["dev"], config.batch_size,
                      config.seed, 128) for t in rows]

    def score(dev):  # only picks the "best" epoch, and nothing is saved here
        return sum(next(iter(metrics.values())) for metrics in dev.values())

    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        state = train(model, tasks, config, RunDir(tmp), score, save_best=lambda m, d: None)
    print(f"tasks {names}, {vars(args)}")
    for record in state.history:
        print(json.dumps({"epoch": record["epoch"], "elapsed_s": record["elapsed_s"], "dev": record["dev"]}))
    print(f"wall time {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
