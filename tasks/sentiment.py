"""Single-sentence sentiment classification on SST (5 classes) or CFIMDB (2 classes).

The course's `classifier.py`, on the shared training loop:

    python -m tasks.sentiment --task sst --option finetune --epochs 3
    python -m tasks.sentiment --task cfimdb --option pretrain --lr 1e-3

It writes into its run directory: config.json, metrics.jsonl, loss_and_dev.png, best/ (the encoder in
Hugging Face format plus the head), and predictions/{task}-{dev,test}-output.csv in the course's format.
The task is one row of tasks.models.course_task, as the main job's SST is.

Read next: multitask.py.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Sequence

import torch

from minbert.loading.atomic import atomic_directory
from minbert.pooling import POOLINGS
from tasks.data.course import read_splits, task_files, write_predictions
from tasks.data.sources import resolve_data_dir
from tasks.models.course_task import (Accuracy, Classifier, CourseTask, MultitaskBERT, TaskData, argmax,
                                      cross_entropy)
from tasks.training.job import JobRun, parse_settings, user_errors
from tasks.training.settings import JobSettings, RunSettings, SettingsParser, TrainingSettings, flag

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


@dataclass(frozen=True)
class SentimentRunSettings(RunSettings):
    """The job's settings (settings.py's RunSettings)."""

    sentiment: SentimentSettings = SentimentSettings()
    job: JobSettings = JobSettings()
    training: TrainingSettings = TrainingSettings()


def build_parser() -> SettingsParser:
    return SettingsParser("python -m tasks.sentiment", __doc__, SentimentRunSettings())


def main(argv: Sequence[str] | None = None) -> int:
    with user_errors():
        settings = parse_settings(build_parser(), argv)
        own, job, training = settings.sentiment, settings.job, settings.training
        with JobRun("sentiment", settings, {"task": own.task}) as run:
            source, data = read_task_data(job.data_dir, own.task, job.strict, job.limit)
            run.write_config(data_path=str(source.path.resolve()), data_kind=source.kind)
            bert, tokenizer, model_dir = run.load_encoder()
            row = sentiment_task(own.task, own.pooling)
            model = MultitaskBERT(bert, [row], job.hidden_dropout_prob)
            task = TaskData(row, tokenizer, data["train"], data["dev"], training.batch_size, training.seed,
                            job.max_length)
            heads = {"job": "sentiment", "task": own.task, "pooling": own.pooling,
                     "model": str(model_dir), "num_classes": NUM_CLASSES[own.task],
                     "data": source.description}
            state = run.train(model, [task], lambda dev: dev[own.task]["accuracy"], tokenizer=tokenizer,
                              head_settings=heads)
            if state is None:  # a torchrun process other than rank 0: done
                return 0
            # the course's format, dev and (when given) test, written whole together (atomic.py)
            with torch.no_grad(), atomic_directory(run.folder.predictions) as predictions:
                for split in ("dev", "test"):
                    if data[split] is not None:
                        write_predictions(predictions / f"{task.name}-{split}-output.csv",
                                          task.header, [e.id for e in data[split]],
                                          task.predict_examples(model, data[split]))
            print(f"best dev accuracy {state.best_score:.4f} (epoch {state.best_epoch}); outputs in "
                  f"{run.folder.path}", file=sys.stderr)
            return 0


if __name__ == "__main__":
    sys.exit(main())
