"""The main job: one encoder fine-tuned on sentiment (SST), paraphrase (Quora) and similarity (STS).

    python -m tasks.multitask                      # the embedded all-MiniLM-L6-v2, default settings
    python -m tasks.multitask --model bert-base-uncased --epochs 3 --lr 2e-5

Heads (Reimers & Gurevych 2019, "Sentence-BERT", for the pairs):
- sentiment: the [CLS] vector (--sentiment-pooling) -> dropout -> linear over 5 classes, cross-entropy;
- paraphrase: mean-pooled u, v -> s cos(u, v) + b -> binary cross-entropy (--paraphrase-loss bce+mnrl adds
  in-batch negatives), duplicate where the logit is above 0;
- similarity: cos(u, v) trained against score / 5 with --similarity-loss (cosine-mse = SBERT's
  CosineSimilarityLoss, or cosine-embedding). Predictions on 0..5.

Each step trains one task's batch (proportional sampling); STS's loss counts 4 times (--task-weights); SST
trains with R-Drop (--r-drop 1: each sentence twice, with two dropout masks, and the symmetric KL between
the two predictions added to the cross-entropy).
The best epoch is chosen by the course's overall score (SST acc + Quora acc + (STS r + 1) / 2) / 3. The
run directory holds config.json, metrics.jsonl, loss_and_dev.png, best/ (Hugging Face-format encoder,
heads.safetensors, heads.json) and predictions/{sst,para,sts}-{dev,test}-output.csv in the course format.
`--predict RUN_DIR` trains nothing: the run's best weights predict the files --sst_dev ... --sts_test name
(all six from --data-dir when none is) into --out or the --*_out files, and score the dev files.

Read next: ../pretrain/ (further pre-training before this job).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Sequence

import torch
from torch import nn

from minbert.model import BertModel
from minbert.pooling import POOLINGS, pool
from minbert.loading.sentence_files import SentenceSettings
from minbert.text.tokenizer import BertTokenizer
from tasks.data.batching import TokenBatch
from tasks.data.course import read_splits, write_predictions
from tasks.data.course_files import (COURSE_TASKS, OUTPUT_SPLITS, SPLITS, course_files, find_data,
                                     output_path, read_prediction_inputs)
from tasks.evaluation.metrics import course_metrics
from tasks.models.heads import PARAPHRASE_LOSSES, SIMILARITY_LOSSES, CosinePairHead, SentenceClassifier
from tasks.models.pair_task import PairTask
from tasks.models.sentiment_task import SentimentTask
from tasks.training.flags import (SettingsParser, as_dict, existing_dir, flag, from_dict, name_weights,
                                  non_negative)
from tasks.training.job import (CourseFiles, JobRun, check_max_length, default_run_dir, load_encoder,
                                parse_settings, resolve_settings, user_errors)
from tasks.training.run_folder import load_checkpoint, read_run_settings
from tasks.training.settings import JobSettings, TrainingSettings, check_job, resolve_job, resolve_training

# STS has the fewest batches (189 an epoch against Quora's 930 and SST's 267) and is pulled hardest by the
# others (STS alone reaches 0.879 Pearson, with them 0.861). Weighing its loss 4x raised STS Pearson by
# 0.011 on each of three seeds and left SST and Quora within their noise (docs/results.md). A weight acts
# only below the clipping norm (--max-grad-norm 1): each step holds one task's batch, and SST's and Quora's
# gradients are nearly always above it (norms 1.5-3.9 and 0.9-4.5 in the first 200 steps, STS's 0.2-0.5),
# so a weight on them barely changes the run (sts=4,sst=2 gave the default's figures to the fourth decimal).
DEFAULT_TASK_WEIGHTS = (("sts", 4.0),)
# R-Drop on SST at alpha 1 raised SST accuracy on each of three seeds (+0.015, +0.015, +0.001; mean 0.488
# against 0.478) and the overall score by 0.003 on average (+0.008, +0.004, -0.002), STS and Quora unchanged,
# for about 10% more training time (docs/results.md).
DEFAULT_R_DROP = 1.0
# On top of R-Drop, SST's head reading the [CLS] vector instead of the mean of the tokens raised SST accuracy
# on each of three seeds (+0.009, +0.010, +0.011; 0.498 against 0.488) and the overall score on each (+0.0037,
# +0.0030, +0.0028), Quora and STS unchanged, at no cost (docs/results.md). The pair heads keep SBERT's
# mean pooling: their sentence vectors are the embeddings all-MiniLM-L6-v2 was trained to make.
DEFAULT_SENTIMENT_POOLING = "cls"


class MultitaskBERT(nn.Module):
    """One encoder, three heads; `predict_*` mirror the course's MultitaskBERT methods."""

    def __init__(self, bert: BertModel, dropout: float = 0.1,
                 sentiment_pooling: str = DEFAULT_SENTIMENT_POOLING, pair_pooling: str = "mean",
                 num_sentiment_classes: int = 5) -> None:
        super().__init__()
        self.bert = bert
        self.pair_pooling = pair_pooling
        self.sentiment = SentenceClassifier(bert.config.hidden_size, num_sentiment_classes, dropout,
                                            sentiment_pooling)
        self.paraphrase = CosinePairHead(learn_scale=True)  # a logit s cos(u, v) + b
        self.similarity = CosinePairHead(learn_scale=False)  # the bare cos(u, v)

    def encode(self, tokens: TokenBatch):
        return self.bert(tokens.input_ids, tokens.attention_mask, tokens.token_type_ids)

    def embed_pair(self, pair: TokenBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """pair: the first sentences stacked over the second ones, (2B, T). Returns u, v: (B, C) each.

        One encoder call for both sides: twice the batch, half the calls.
        """
        embeddings = pool(self.encode(pair), pair.attention_mask, self.pair_pooling)  # (2B, C)
        return embeddings.chunk(2)

    def predict_sentiment(self, tokens: TokenBatch) -> torch.Tensor:
        """Logits (B, 5)."""
        return self.sentiment(self.encode(tokens), tokens.attention_mask)

    def predict_paraphrase(self, pair: TokenBatch) -> torch.Tensor:
        """Logit of "duplicate" (B,): duplicate where it is above 0."""
        return self.paraphrase(*self.embed_pair(pair))

    def predict_similarity(self, pair: TokenBatch) -> torch.Tensor:
        """cos(u, v) (B,)."""
        return self.similarity(*self.embed_pair(pair))


def overall_score(dev: dict[str, dict[str, float]]) -> float:
    """The course's leaderboard score: (SST acc + Quora acc + (STS Pearson + 1) / 2) / 3."""
    return (dev["sst"]["accuracy"] + dev["para"]["accuracy"] + (dev["sts"]["pearson"] + 1) / 2) / 3


# What best/heads.json keeps so that --predict can rebuild the heads.
HEAD_SETTINGS = ("sentiment_pooling", "pair_pooling", "hidden_dropout_prob", "paraphrase_loss",
                 "similarity_loss")


def course_task(name: str, splits: dict, tokenizer: BertTokenizer, config, max_length: int,
                similarity_loss: str = "cosine-mse", paraphrase_loss: str = "bce",
                r_drop: float = 0.0) -> SentimentTask | PairTask:
    """The training task of one course prefix ("sst", "para", "sts") from its train and dev examples.

    r_drop: R-Drop's alpha for SST (0: SST trains on the plain cross-entropy)."""
    common = dict(train=splits["train"], dev=splits["dev"], tokenizer=tokenizer, batch_size=config.batch_size,
                  seed=config.seed, max_length=max_length)
    if name == "sst":
        return SentimentTask("sst", **common, r_drop=r_drop)
    if name == "para":
        return PairTask("para", "paraphrase", paraphrase_loss=paraphrase_loss, **common)
    return PairTask("sts", "similarity", similarity_loss=similarity_loss, **common)


@dataclass(frozen=True)
class MultitaskSettings:
    """The heads and their losses (see above), and --predict."""

    sentiment_pooling: str = flag(DEFAULT_SENTIMENT_POOLING, "SST's sentence vector", choices=POOLINGS)
    pair_pooling: str = flag("mean", "the pair heads' sentence vectors u, v (SBERT: mean)",
                             choices=("cls", "mean", "max"))
    paraphrase_loss: str = flag("bce", "bce+mnrl: in-batch negatives too (SBERT's MNRL loss)",
                                choices=PARAPHRASE_LOSSES)
    similarity_loss: str = flag("cosine-mse", "cosine-mse: SBERT's CosineSimilarityLoss",
                                choices=sorted(SIMILARITY_LOSSES))
    r_drop: float = flag(DEFAULT_R_DROP, "R-Drop's alpha on SST (Liang et al. 2021; 0: off)",
                         type=non_negative)
    task_weights: tuple[tuple[str, float], ...] = flag(
        DEFAULT_TASK_WEIGHTS, "a task's loss counts this many times (the others once); under proportional "
        "sampling each step is one task's, and clipping (--max-grad-norm) undoes the weight where it clips",
        type=name_weights(tuple(COURSE_TASKS)))
    predict: str | None = flag(None, "no training: RUN_DIR's best weights predict the dev and test files",
                               type=existing_dir, metavar="RUN_DIR", same_on_resume=False)


# Measured on the shared data (docs/results.md): proportional sampling spreads STS's few batches over the
# epoch instead of finishing them early and then training on Quora alone, which cost STS 0.02-0.03 Pearson
# (on both Quora files); a third epoch adds about a point to SST.
DEFAULTS = (MultitaskSettings(), JobSettings(), TrainingSettings(epochs=3, sampling="proportional"),
            CourseFiles())


def check_flags(settings: MultitaskSettings, job: JobSettings, training: TrainingSettings,
                files: CourseFiles) -> None:
    """Contradictory flags are errors, never silently ignored."""
    check_job(job, training)
    if settings.predict:
        training_only = [f"--{p}_train" for p in COURSE_TASKS if getattr(files, f"{p}_train")]
        training_only += ["--resume"] if training.resume else []
        if training_only:
            raise ValueError(f"{', '.join(training_only)} belong(s) to training; "
                             f"--predict {settings.predict} trains nothing")


def build_parser() -> SettingsParser:
    return SettingsParser("python -m tasks.multitask", __doc__, *DEFAULTS, check=check_flags)


def write_course_outputs(model: nn.Module, tasks: Sequence, examples: dict, files: CourseFiles,
                         folder: Path) -> dict:
    """Predictions for every dev and test file read, each where its --*_out flag or `folder` says.

    Returns them: {(task, split): predictions}."""
    written = {}
    with torch.no_grad():
        for task in tasks:
            for split in OUTPUT_SPLITS:
                rows = examples[task.name].get(split)
                if rows is None:
                    continue
                path = output_path(files, task.name, split, folder)
                path.parent.mkdir(parents=True, exist_ok=True)
                written[task.name, split] = task.predict_examples(model, rows)
                write_predictions(path, task.header, [e.id for e in rows], written[task.name, split])
                print(f"wrote {path}", file=sys.stderr)
    return written


def build_model(settings: MultitaskSettings, job: JobSettings, training: TrainingSettings,
                data: dict) -> tuple[MultitaskBERT, list, BertTokenizer, Path]:
    """The run's model (the loaded encoder and three fresh heads), its training tasks from `data` (prefix ->
    split -> examples), the tokenizer and the encoder's folder."""
    bert, tokenizer, model_dir = load_encoder(job.model, job.attn_implementation)
    check_max_length(job.max_length, bert.config, pairs=True)
    model = MultitaskBERT(bert, job.hidden_dropout_prob, settings.sentiment_pooling, settings.pair_pooling)
    tasks = [course_task(name, data[name], tokenizer, training, job.max_length, settings.similarity_loss,
                         settings.paraphrase_loss, settings.r_drop) for name in COURSE_TASKS]
    return model, tasks, tokenizer, model_dir


def train_main(settings: MultitaskSettings, job: JobSettings, training: TrainingSettings,
               files: CourseFiles) -> int:
    with JobRun("multitask", (settings, job, training, files)) as run:
        paths = course_files(files, SPLITS)
        source = find_data(job.data_dir, paths, ("train", "dev"))
        run.write_config(data_path=str(source.path.resolve()), data_kind=source.kind)
        data = {prefix: read_splits(source, dataset, job.strict, job.limit, files=paths[prefix])
                for prefix, dataset in COURSE_TASKS.items()}

        model, tasks, tokenizer, model_dir = build_model(settings, job, training, data)
        # --predict rebuilds the heads from these, and reads the run's inputs as the run did
        heads = {"job": "multitask", "model": str(model_dir), "data": source.description,
                 **{k: v for k, v in as_dict(settings, job).items()
                    if k in HEAD_SETTINGS + ("max_length", "attn_implementation")}}
        # The pair heads compare mean-pooled (--pair-pooling) vectors by cosine: best/ says so to
        # SentenceEncoder.
        sentence = SentenceSettings(settings.pair_pooling, normalize=True, max_seq_length=job.max_length)
        state = run.train(model, tasks, overall_score, tokenizer=tokenizer, head_settings=heads,
                          sentence=sentence)
        if state is None:  # a torchrun process other than rank 0: done
            return 0
        write_course_outputs(model, tasks, data, files, run.folder.predictions)
        best = next((r for r in reversed(state.history) if r["best"]), None)
        print(f"best overall {state.best_score:.4f} at epoch {state.best_epoch}: "
              f"{best['dev'] if best else ''}\n"
              f"outputs in {run.folder.path}", file=sys.stderr)
        if source.is_sample:
            print("REMINDER: these numbers come from the synthetic demo sample and mean nothing.",
                  file=sys.stderr)
        return 0


def predict_main(settings: MultitaskSettings, job: JobSettings, training: TrainingSettings,
                 files: CourseFiles) -> int:
    """--predict: a finished run's best weights -> course-format predictions, no training."""
    best, saved = read_run_settings(settings.predict, "multitask", HEAD_SETTINGS)
    heads, trained = from_dict(MultitaskSettings, saved), from_dict(JobSettings, saved)  # the run's settings
    data = read_prediction_inputs(files, job.data_dir, job.strict, job.limit)  # a bad file costs no loading
    # Predictions are computed in fp32, as the training job's own evaluation and outputs are, and with
    # the kernel the run evaluated with, so that its own dev files get its own predictions back.
    training = resolve_training(replace(training, precision="fp32"))
    if job.attn_implementation == "auto" and training.device == "cpu" and trained.attn_implementation in (
            "unpadded", "sdpa", "eager"):
        job = replace(job, attn_implementation=trained.attn_implementation)
    job = resolve_job(job, training)
    bert, tokenizer, _ = load_encoder(str(best), job.attn_implementation)
    model = MultitaskBERT(bert, trained.hidden_dropout_prob, heads.sentiment_pooling, heads.pair_pooling)
    load_checkpoint(model, best)
    model.to(training.device).eval()
    tasks = [course_task(name, {"train": [], "dev": []}, tokenizer, TrainingSettings(), trained.max_length)
             for name in COURSE_TASKS]
    out = Path(job.out or default_run_dir("multitask-predict"))
    predictions = write_course_outputs(model, tasks, data, files, out)
    for name in COURSE_TASKS:
        if (name, "dev") in predictions:
            scores = course_metrics(name, predictions[name, "dev"], [e.label for e in data[name]["dev"]])
            print(f"{name} dev: " + " ".join(f"{k}={v:.4f}" for k, v in scores.items()), file=sys.stderr)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    with user_errors():
        settings, job, training, files = parse_settings(build_parser(), argv, resolve=False)
        if settings.predict:
            return predict_main(settings, job, training, files)
        # the loop weighs the losses; the flag is the main job's
        training = replace(training, task_weights=settings.task_weights)
        return train_main(*resolve_settings(settings, job, training, files))


if __name__ == "__main__":
    sys.exit(main())
