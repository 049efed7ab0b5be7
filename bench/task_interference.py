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

import torch

from minbert.pooling import POOLINGS
from tasks.data.course import read_splits, task_files
from tasks.data.sources import resolve_data_dir
from tasks.models.heads import SIMILARITY_LOSSES
from tasks.multitask import COURSE_TASKS, MultitaskBERT, course_task
from tasks.training.flags import choice_list, existing_dir, nonempty, positive, positive_int
from tasks.training.job import load_encoder
from tasks.training.loop import train
from tasks.training.run_folder import RunDir
from tasks.training.settings import DEFAULT_MODEL, SAMPLINGS, TrainingSettings


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.task_interference", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    # The default is a string, so argparse parses it too: args.tasks is always a list.
    parser.add_argument("--tasks", type=choice_list(tuple(COURSE_TASKS)), default="sts",
                        help="comma-separated subset of sst, para, sts")
    parser.add_argument("--epochs", type=positive_int, default=1)
    parser.add_argument("--lr", type=positive, default=TrainingSettings.lr)
    parser.add_argument("--sampling", choices=SAMPLINGS, default="proportional")
    parser.add_argument("--sst-pooling", choices=POOLINGS, default="mean")
    parser.add_argument("--similarity-loss", choices=sorted(SIMILARITY_LOSSES), default="cosine-mse")
    parser.add_argument("--model", type=nonempty, default=DEFAULT_MODEL, help="a model name or folder")
    parser.add_argument("--data-dir", type=existing_dir, default=None)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    names = args.tasks
    config = TrainingSettings(epochs=args.epochs, lr=args.lr, sampling=args.sampling, eval_first=True)
    torch.manual_seed(config.seed)
    source = resolve_data_dir(args.data_dir, task_files([COURSE_TASKS[n] for n in names], ("train", "dev")))
    data = {n: read_splits(source, COURSE_TASKS[n], strict=False, limit=0) for n in names}
    bert, tokenizer, _ = load_encoder(args.model)
    model = MultitaskBERT(bert, sentiment_pooling=args.sst_pooling)
    tasks = [course_task(n, data[n], tokenizer, config, 128, similarity_loss=args.similarity_loss)
             for n in names]

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
