"""Single-sentence sentiment classification on SST (5 classes) or CFIMDB (2 classes).

The course's `classifier.py`, on the shared training loop:

    python -m tasks.sentiment --task sst --option finetune --epochs 3
    python -m tasks.sentiment --task cfimdb --option pretrain --lr 1e-3

It writes into its run directory: config.json, metrics.jsonl, loss_and_dev.png, best/ (the encoder in
Hugging Face format plus the head), and predictions/{task}-{dev,test}-output.csv in the course's format.
The task is one row of tasks/models/course_task.py, as the main job's SST is.

Read next: multitask.py.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Sequence

import torch

from minbert.pooling import POOLINGS
from tasks.data.course import read_splits, task_files, write_predictions
from tasks.data.sources import resolve_data_dir
from tasks.models.course_task import (Accuracy, Classifier, CourseTask, MultitaskBERT, TaskData, argmax,
                                      cross_entropy)
from tasks.training.best_model import train_and_reload_best
from tasks.training.config import JobSettings, TrainConfig, check_job, resolve, resolve_job
from tasks.training.job import check_max_length, default_run_dir, load_encoder, user_errors
from tasks.training.optimizer import freeze
from tasks.training.run_dir import claim_run
from tasks.training.settings import SettingsParser, flag

NUM_CLASSES = {"sst": 5, "cfimdb": 2}


def sentiment_task(name: str, pooling: str) -> CourseTask:
    """The row of `name` ("sst", "cfimdb"): the course's BertSentimentClassifier, plain cross-entropy."""
    return CourseTask(name, name, "sentiment", Classifier(NUM_CLASSES[name], pooling), cross_entropy, argmax,
                      Accuracy(), "Predicted_Sentiment")


def read_task_data(data_dir, task: str, strict: bool, limit: int):
    """Where the data is, and the train, dev and (when present) test examples of one course task."""
    source = resolve_data_dir(data_dir, task_files([task], ("train", "dev")))
    print(f"data: {source.description}", file=sys.stderr)
    return source, read_splits(source, task, strict, limit)


@dataclass(frozen=True)
class SentimentSettings:
    """The dataset and the classifier."""

    task: str = flag("sst", "which dataset", choices=sorted(NUM_CLASSES))
    pooling: str = flag("mean", "the classifier's sentence vector: [CLS], the tokens' mean or max, the "
                        "pooler", choices=POOLINGS)


DEFAULTS = (SentimentSettings(), JobSettings(), TrainConfig())


def build_parser() -> SettingsParser:
    return SettingsParser("python -m tasks.sentiment", __doc__, *DEFAULTS,
                          check=lambda settings, job, train: check_job(job, train))


def main(argv: Sequence[str] | None = None) -> int:
    with user_errors():
        settings, job, train = build_parser().parse(argv)
        train = resolve(train)
        job = resolve_job(job, train)
        torch.manual_seed(train.seed)
        out = job.out or default_run_dir("sentiment")
        with claim_run(out, "sentiment", job.model, {"task": settings.task}, train.resume,
                       (settings, job, train)) as run:
            source, data = read_task_data(job.data_dir, settings.task, job.strict, job.limit)
            run.write_config(settings, job, train, data_path=str(source.path.resolve()),
                             data_kind=source.kind)
            bert, tokenizer, model_dir = load_encoder(job.model, job.attn_implementation)
            check_max_length(job.max_length, bert.config)
            row = sentiment_task(settings.task, settings.pooling)
            model = MultitaskBERT(bert, [row], job.hidden_dropout_prob)
            if job.freeze_encoder:
                freeze(model.bert)
            task = TaskData(row, tokenizer, data["train"], data["dev"], train.batch_size, train.seed,
                            job.max_length)
            heads = {"job": "sentiment", "task": settings.task, "pooling": settings.pooling,
                     "model": str(model_dir), "num_classes": NUM_CLASSES[settings.task],
                     "data": source.description}
            state = train_and_reload_best(model, [task], train, run,
                                          lambda dev: dev[settings.task]["accuracy"], tokenizer, heads,
                                          train.resume)
            if state is None:  # a torchrun process other than rank 0: done
                return 0
            with torch.no_grad():  # the course's format, dev and (when given) test
                for split in ("dev", "test"):
                    if data[split] is not None:
                        write_predictions(run.predictions / f"{task.name}-{split}-output.csv", task.header,
                                          [e.id for e in data[split]],
                                          task.predict_examples(model, data[split]))
            print(f"best dev accuracy {state.best_score:.4f} (epoch {state.best_epoch}); outputs in "
                  f"{run.path}", file=sys.stderr)
            return 0


if __name__ == "__main__":
    sys.exit(main())
