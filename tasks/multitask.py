"""The main job: one encoder fine-tuned on sentiment (SST), paraphrase (Quora) and similarity (STS).

    python -m tasks.multitask                      # the embedded all-MiniLM-L6-v2, default settings
    python -m tasks.multitask --model bert-base-uncased --epochs 3 --lr 2e-5

The tasks are the rows of TASKS below (tasks.models.course_task says what a row holds); the heads
(Reimers & Gurevych 2019, "Sentence-BERT", for the pairs):
- sentiment: the [CLS] vector (--sentiment-pooling) -> dropout -> linear over 5 classes, cross-entropy with
  R-Drop (--r-drop 1: each sentence twice, with two dropout masks, and the symmetric KL between the two
  predictions added);
- paraphrase: mean-pooled u, v -> s cos(u, v) + b -> binary cross-entropy, duplicate where the logit is
  above 0;
- similarity: cos(u, v) trained against score / 5 (SBERT's CosineSimilarityLoss). Predictions on 0..5.

Each step trains one task's batch (proportional sampling), under a linear schedule; STS's loss counts 4
times (--task-weights). The best epoch is chosen by the course's overall score (SST acc + Quora acc +
(STS r + 1) / 2) / 3. The run directory holds config.json, metrics.jsonl, loss_and_dev.png, best/ (Hugging
Face-format encoder, heads.safetensors, heads.json) and predictions/{sst,para,sts}-{dev,test}-output.csv in
the course format. `--predict RUN_DIR` trains nothing: the run's best weights predict the files --sst-dev
... --sts-test name (all six from --data-dir when none is) into --out or the --*-out files, and score the
dev files.

Read next: ../pretrain/ (further pre-training before this job).
"""

# What each default and each lever measured: docs/results.md.

from __future__ import annotations

import argparse
import dataclasses
import shlex
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Sequence

import torch
from torch import nn

from minbert.loading.atomic import atomic_directory
from minbert.model import BertModel
from minbert.pooling import POOLINGS
from minbert.text.tokenizer import BertTokenizer
from tasks.data.course import (OUTPUT_SPLITS, SPLITS, CourseFiles, find_data, output_path,
                               read_prediction_inputs, read_splits, task_files, write_predictions)
from tasks.models.course_task import (Accuracy, Classifier, Correlation, Cosine, CourseTask, MultitaskBERT,
                                      RDrop, TaskData, above_zero, argmax, binary_cross_entropy, cosine_mse,
                                      on_0_to_5)
from tasks.training.flags import checked, existing_dir, existing_file, non_negative, output_file, positive
from tasks.training.checkpoints import load_checkpoint, read_run_settings
from tasks.training.job import JobRun, load_encoder, parse_settings, user_errors
from tasks.training.process import signals_deferred
from tasks.training.run_folder import default_run_dir
from tasks.training.settings import (JobSettings, RunSettings, SettingsParser, TrainingSettings, as_dict,
                                     flag, from_dict, resolve_settings)

# The main job's tasks, one row each. [CLS] pooling and R-Drop raised SST on every seed; STS's loss 4x
# raised STS on every seed (it has the fewest batches and the others pull it hardest): docs/results.md.
TASKS = (
    CourseTask("sst", "sst", "sentiment", Classifier(5, pooling="cls"), RDrop(1.0), argmax, Accuracy(),
               "Predicted_Sentiment"),
    CourseTask("para", "quora", "paraphrase", Cosine(learn_scale=True), binary_cross_entropy, above_zero,
               Accuracy(), "Predicted_Is_Paraphrase"),
    CourseTask("sts", "sts", "similarity", Cosine(learn_scale=False), cosine_mse, on_0_to_5, Correlation(),
               "Predicted_Similiary", weight=4.0),
)
SST = TASKS[0]  # the row --sentiment-pooling and --r-drop change


def overall_score(tasks: Sequence[CourseTask], dev: dict[str, dict[str, float]]) -> float:
    """The course's leaderboard score: the mean of the tasks' scores on 0..1, for the course's three
    (SST acc + Quora acc + (STS Pearson + 1) / 2) / 3."""
    return sum(t.metric.score(dev[t.name]) for t in tasks) / len(tasks)


# What best/heads.json keeps so that --predict can rebuild the heads.
HEAD_SETTINGS = ("sentiment_pooling", "hidden_dropout_prob")


def name_weights(allowed: tuple[str, ...]) -> Callable[[str], tuple[tuple[str, float], ...]]:
    """Comma-separated name=factor pairs, each name one of `allowed` and each factor > 0 ("sts=2,sst=1.5")."""
    @checked("NAME=X,...")
    def parse(text: str) -> tuple[tuple[str, float], ...]:
        pairs = []
        for item in text.split(","):
            name, equals, value = item.strip().partition("=")
            if not equals or name not in allowed:
                raise argparse.ArgumentTypeError(f"must be comma-separated name=factor pairs, the names from "
                                                 f"{', '.join(allowed)} (e.g. {allowed[-1]}=2), got {text!r}")
            try:
                pairs.append((name, positive(value)))
            except argparse.ArgumentTypeError as error:
                raise argparse.ArgumentTypeError(f"{name}'s factor {error}") from None
        if len({name for name, _ in pairs}) < len(pairs):
            raise argparse.ArgumentTypeError(f"names a task twice: {text!r}")
        return tuple(pairs)
    parse.__name__ = "name=factor list"
    return parse


@dataclass(frozen=True)
class MultitaskSettings:
    """The heads and their losses (see above), and --predict."""

    sentiment_pooling: str = flag(SST.head.pooling, "SST's sentence vector", choices=POOLINGS)
    r_drop: float = flag(SST.loss.alpha, "R-Drop's alpha on SST (Liang et al. 2021; 0: off)",
                         type=non_negative)
    task_weights: tuple[tuple[str, float], ...] = flag(
        tuple((t.name, t.weight) for t in TASKS if t.weight != 1),
        "a task's loss counts this many times (the others once); under proportional sampling each step is "
        "one task's, and clipping (--max-grad-norm) undoes the weight where it clips",
        type=name_weights(tuple(t.name for t in TASKS)))
    predict: str | None = flag(None, "no training: RUN_DIR's best weights predict the dev and test files",
                               type=existing_dir, metavar="RUN_DIR", same_on_resume=False)


def with_settings(tasks: Sequence[CourseTask], settings: MultitaskSettings) -> tuple[CourseTask, ...]:
    """The table as the command's flags change it: --task-weights (the tasks it leaves out count once), and
    SST's --sentiment-pooling and --r-drop."""
    weights = dict(settings.task_weights)
    rows = [replace(t, weight=weights.get(t.name, 1.0)) for t in tasks]
    return tuple(replace(t, head=replace(t.head, pooling=settings.sentiment_pooling),
                         loss=RDrop(settings.r_drop)) if t.name == SST.name else t for t in rows)


# The linear schedule is BERT's; a third epoch adds about a point to SST (docs/results.md).
TRAIN_DEFAULTS = TrainingSettings(epochs=3, schedule="linear")
FIXED = ("schedule",)  # not offered: no other schedule was measured here


def course_files(tasks: Sequence[CourseTask]) -> CourseFiles:
    """The course starter's file flags of the table's rows, a group of the job's settings: --sst-train ...
    --sts-test-out (the course's --sst_train ... too), each None unless given; tasks/data/course.py
    reads and writes what they name. The training and dev files shape the run; --resume may name others."""
    fields = [(f"{t.name}_{split}", str | None, flag(
        None, f"instead of <data-dir>/{task_files([t.dataset], [split])[0]}", type=existing_file,
        same_on_resume=split != "test")) for t in tasks for split in SPLITS]
    fields += [(f"{t.name}_{split}_out", str | None, flag(
        None, f"instead of <out>/predictions/{t.name}-{split}-output.csv", type=output_file,
        same_on_resume=False)) for t in tasks for split in OUTPUT_SPLITS]
    group = dataclasses.make_dataclass("CourseFiles", fields, bases=(CourseFiles,), frozen=True,
                                       namespace={"__doc__": CourseFiles.__doc__,
                                                  "prefixes": tuple(t.name for t in tasks)})
    return group()


@dataclass(frozen=True)
class MultitaskRunSettings(RunSettings):
    """The job's settings (settings.py's RunSettings); its course file flags are made from its table."""

    multitask: MultitaskSettings = MultitaskSettings()
    job: JobSettings = JobSettings()
    training: TrainingSettings = TRAIN_DEFAULTS
    files: CourseFiles = course_files(TASKS)

    def check(self) -> None:
        """Contradictory flags are errors, never silently ignored."""
        super().check()
        if self.multitask.predict:
            training_only = [f"--{p}-train" for p, given in self.files.inputs(["train"]).items()
                             if given["train"]]
            training_only += ["--resume"] if self.training.resume else []
            training_only += [f"--lora {self.job.lora}"] if self.job.lora is not None else []  # best/ says
            if training_only:
                raise ValueError(f"{', '.join(training_only)} belong(s) to training; "
                                 f"--predict {self.multitask.predict} trains nothing")


def build_parser(tasks: Sequence[CourseTask] = TASKS) -> SettingsParser:
    """The job's flags; the course's file flags and the task weights' default come from `tasks`."""
    weights = tuple((t.name, t.weight) for t in tasks if t.weight != 1)
    defaults = MultitaskRunSettings(MultitaskSettings(task_weights=weights),
                                    files=course_files(tasks))
    return SettingsParser("python -m tasks.multitask", __doc__, defaults, fixed=FIXED)


def write_course_outputs(model: nn.Module, tasks: Sequence[TaskData], examples: dict, files: CourseFiles,
                         folder: Path) -> dict:
    """Predictions for every dev and test file read, each where its --*_out flag or `folder` says; those in
    `folder` written whole, together (atomic.py), those elsewhere each whole. All are computed first, then
    written with a Ctrl-C or SIGTERM held until the last is (milliseconds): a stop leaves the set as it was,
    or all of it new, never some files of this run beside files of another.

    Returns them: {(task, split): predictions}."""
    written, files_of = {}, {}
    with torch.no_grad():
        for task in tasks:
            for split in OUTPUT_SPLITS:
                if (rows := examples[task.name].get(split)) is not None:
                    written[task.name, split] = task.predict_examples(model, rows)
                    files_of[output_path(files, task.name, split, folder)] = task.header, rows
    with signals_deferred(), atomic_directory(folder) as new:
        for path, (header, rows), predictions in zip(files_of, files_of.values(), written.values()):
            write_predictions(new / path.relative_to(folder) if path.is_relative_to(folder) else path,
                              header, [e.id for e in rows], predictions)
    print("".join(f"wrote {path}\n" for path in files_of), end="", file=sys.stderr)
    return written


def build_model(tasks: Sequence[CourseTask], settings: MultitaskRunSettings, data: dict, bert: BertModel,
                tokenizer: BertTokenizer) -> tuple[MultitaskBERT, list[TaskData]]:
    """The run's model (the loaded encoder and a fresh head per task) and its training tasks from `data`
    (prefix -> split -> examples). (--option pretrain's freeze is JobRun.train's, before the loop.)"""
    job, training = settings.job, settings.training
    model = MultitaskBERT(bert, tasks, job.hidden_dropout_prob)
    loaded = [TaskData(t, tokenizer, data[t.name]["train"], data[t.name]["dev"], training.batch_size,
                       training.seed, job.max_length) for t in tasks]
    return model, loaded


def train_main(tasks: Sequence[CourseTask], settings: MultitaskRunSettings) -> int:
    job, files = settings.job, settings.files
    with JobRun("multitask", settings) as run:
        paths = files.inputs(SPLITS)
        source = find_data(tasks, job.data_dir, paths, ("train", "dev"))
        data = {t.name: read_splits(source, t.dataset, job.strict, job.limit, files=paths[t.name])
                for t in tasks}
        run.write_config(data_path=str(source.path.resolve()), data_kind=source.kind)

        bert, tokenizer, model_dir = run.load_encoder(pairs=True)
        model, loaded = build_model(with_settings(tasks, settings.multitask), settings, data, bert, tokenizer)
        # --predict rebuilds the heads from these, and reads the run's inputs as the run did
        heads = {"job": "multitask", "model": str(model_dir), "data": source.description,
                 **{k: v for k, v in as_dict(settings.multitask, job).items()
                    if k in HEAD_SETTINGS + ("max_length", "attn_implementation")}}
        # The pair heads compare mean-pooled vectors by cosine: best/ says so to SentenceEncoder, in
        # sentence-transformers' files (minbert/loading/sentence_files.py, loaded when best/ is written).
        sentence = {"pooling": "mean", "normalize": True, "max_seq_length": job.max_length}
        state = run.train(model, loaded, lambda dev: overall_score(tasks, dev), tokenizer=tokenizer,
                          head_settings=heads, sentence=sentence)
        if state is None:  # a torchrun process other than rank 0: done
            return 0
        write_course_outputs(model, loaded, data, files, run.folder.predictions)
        print(summary(state.history, run.folder.path, job), file=sys.stderr)
        if source.is_sample:
            print("REMINDER: these numbers come from the synthetic demo sample and mean nothing.",
                  file=sys.stderr)
        return 0


def summary(history: list[dict], folder: Path, job: JobSettings) -> str:
    """What a run found (each dev figure at the best epoch and at the last evaluation) and what to do next:
    where best/ and the predictions are, and the two commands that use them, with the run's data flags."""
    last = history[-1]
    best = next((r for r in reversed(history) if r["best"]), last)
    when = [f"{which} epoch {r['epoch']}" + ("" if r["epoch_complete"] else f" (step {r['global_step']})")
            for which, r in (("best:", best), ("last:", last))]
    rows = [("dev", *when)] + [(f"{task} {metric}", f"{value:.4f}", f"{last['dev'][task][metric]:.4f}")
                               for task, metrics in best["dev"].items() for metric, value in metrics.items()]
    rows += [("overall", f"{best['overall']:.4f}", f"{last['overall']:.4f}")]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    data = ["--data-dir", job.data_dir] * bool(job.data_dir) + ["--limit", str(job.limit)] * bool(job.limit)
    python = getattr(sys, "orig_argv", [sys.executable])[0]
    predict = shlex.join([python, "-m", "tasks.multitask", "--predict", str(folder), *data])
    return "\n".join(["  ".join(f"{cell:<{w}}" for cell, w in zip(row, widths)).rstrip() for row in rows] + [
        f"best model:  {folder / 'best'}", f"predictions: {folder / 'predictions'}",
        f"predict other files (--sst-test FILE ..., no training): {predict}",
        "encode sentences with the tuned encoder: from minbert import SentenceEncoder; "
        f"SentenceEncoder({str(folder / 'best')!r}).encode(['A sentence.'])"])


def predict_main(tasks: Sequence[CourseTask], settings: MultitaskRunSettings) -> int:
    """--predict: a finished run's best weights -> course-format predictions, no training."""
    run_dir, job, files = settings.multitask.predict, settings.job, settings.files
    best, saved = read_run_settings(run_dir, "multitask", HEAD_SETTINGS, (MultitaskSettings(), JobSettings()))
    if saved.get("pair_pooling", "mean") != "mean":  # a run from before the pair heads' pooling was fixed
        raise SystemExit(f"error: --predict {run_dir}: its pair heads pooled by "
                         f"{saved['pair_pooling']}, and this version's pool by mean")
    heads, trained = from_dict(MultitaskSettings, saved), from_dict(JobSettings, saved)  # the run's settings
    print("heads: " + ", ".join(f"--{k.replace('_', '-')} {saved[k]}" for k in (*HEAD_SETTINGS, "max_length")
                          if k in saved)
          + f" (the run's settings, from {best / 'heads.json'})", file=sys.stderr)
    data = read_prediction_inputs(tasks, files, job.data_dir, job.strict, job.limit)  # a bad file: no loading
    settings = resolve_settings(settings, trained)  # fp32 unless --precision says, unpadded on a CPU
    bert, tokenizer, _ = load_encoder(str(best), settings.job.attn_implementation)
    tasks = with_settings(tasks, heads)
    model = MultitaskBERT(bert, tasks, trained.hidden_dropout_prob)
    load_checkpoint(model, best)
    model.to(settings.training.device).eval()
    loaded = [TaskData(t, tokenizer, [], [], 1, 0, trained.max_length) for t in tasks]
    out = Path(job.out or default_run_dir("multitask-predict"))
    autocast = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(settings.training.precision)
    with torch.autocast(torch.device(settings.training.device).type, autocast, enabled=autocast is not None):
        predictions = write_course_outputs(model, loaded, data, files, out)
    for t in tasks:
        if (t.name, "dev") in predictions:
            scores = t.metric(predictions[t.name, "dev"], [e.label for e in data[t.name]["dev"]])
            print(f"{t.name} dev: " + " ".join(f"{k}={v:.4f}" for k, v in scores.items()), file=sys.stderr)
    return 0


def main(argv: Sequence[str] | None = None, tasks: Sequence[CourseTask] = TASKS) -> int:
    """The job; `tasks`: its table (a test adds a row)."""
    with user_errors():
        settings = parse_settings(build_parser(tasks), argv, resolve=False)
        if settings.multitask.predict:
            return predict_main(tasks, settings)
        return train_main(tasks, resolve_settings(settings))


if __name__ == "__main__":
    sys.exit(main())
