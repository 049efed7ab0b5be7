"""The main job: one encoder fine-tuned on sentiment (SST), paraphrase (Quora) and similarity (STS).

    python -m tasks.multitask                      # the embedded all-MiniLM-L6-v2, default settings
    python -m tasks.multitask --model bert-base-uncased --epochs 3 --lr 2e-5
    python -m tasks.multitask --paraphrase-head cross --similarity-head cross

Heads (Reimers & Gurevych 2019, "Sentence-BERT", for the pairs):
- sentiment: the [CLS] vector (--sentiment-pooling) -> dropout -> linear over 5 classes, cross-entropy;
- paraphrase: "cosine" (default): mean-pooled u, v -> s cos(u, v) + b -> binary cross-entropy, duplicate
  where the logit is above 0 (or, --paraphrase-threshold train, above the threshold fitted on training pairs);
  "softmax": SBERT's classifier over (u, v, |u - v|); "cross": one [CLS] A [SEP] B [SEP] input;
- similarity: "cosine" (default): cos(u, v) trained against score / 5 with --similarity-loss
  (cosine-mse = SBERT's CosineSimilarityLoss, cosine-embedding, cosent, or angle = AnglE); "cross": a
  cross-encoder trained with binary cross-entropy on score / 5 (SBERT's CrossEncoder recipe). Predictions
  on 0..5.
Options for SST's small training set: --label-smoothing, --dropout-samples (multi-sample dropout), --r-drop,
--smart.

Each step trains one task's batch (proportional sampling); STS's loss counts 4 times (--task-weights); SST
trains with R-Drop (--r-drop 1: each sentence twice, with two dropout masks, and the symmetric KL between
the two predictions added to the cross-entropy).
The best epoch is chosen by the course's overall score (SST acc + Quora acc + (STS r + 1) / 2) / 3. The
run directory holds config.json, metrics.jsonl, loss_and_dev.png, best/ (Hugging Face-format encoder,
heads.safetensors, heads.json) and predictions/{sst,para,sts}-{dev,test}-output.csv in the course format.

Read next: ../pretrain/ (further pre-training before this job).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from minbert.model import BertModel
from minbert.pooling import pool
from minbert.tokenizer import BertTokenizer
from tasks.data.batching import TokenBatch, device_of
from tasks.evaluation.metrics import course_metrics
from tasks.models.heads import (EMBEDDING_SIMILARITY_LOSSES, PARAPHRASE_LOSSES, SENTENCE_POOLINGS,
                                SIMILARITY_LOSSES, CosinePairHead, SentenceClassifier, SoftmaxPairHead,
                                symmetric_kl)
from tasks.models.pair_task import PairTask
from tasks.models.smoothness import adversarial_smoothness
from tasks.sentiment import SentimentTask
from tasks.training.arguments import existing_dir, name_weights, non_negative, positive, positive_int, real
from tasks.training.config import (ATTENTION_CHOICES, TrainConfig, add_train_arguments,
                                   attn_implementation_for, device_from_args, train_config_from_args)
from tasks.training.course_files import (COURSE_TASKS, OUTPUT_SPLITS, SPLITS, add_course_file_arguments,
                                         course_files, find_data, output_path, read_prediction_inputs,
                                         read_run_settings)
from tasks.training.job import (HEADS_SETTINGS, add_job_arguments, check_max_length, default_run_dir,
                                load_checkpoint, load_encoder, read_splits, train_and_reload_best,
                                user_errors, write_predictions)
from tasks.training.optimizer import freeze
from tasks.training.run_dir import claim_run

PARAPHRASE_HEADS = ("cosine", "softmax", "cross")
# How the cosine paraphrase head decides: at its learned logit 0, or at the logit threshold that classifies
# the training pairs best (refitted before every evaluation; see PairTask.fit_threshold).
PARAPHRASE_THRESHOLDS = ("learned", "train")
SIMILARITY_HEADS = ("cosine", "cross")
# STS has the fewest batches (189 an epoch against Quora's 508 and SST's 267) and is pulled hardest by the
# others (STS alone reaches 0.879 Pearson, with them 0.861). Weighing its loss 4x raised STS Pearson by
# 0.011 on each of three seeds and left SST and Quora within their noise (README, "The main job").
DEFAULT_TASK_WEIGHTS = (("sts", 4.0),)
# R-Drop on SST at alpha 1 raised SST accuracy on each of three seeds (+0.015, +0.015, +0.001; mean 0.488
# against 0.478) and the overall score by 0.003 on average (+0.008, +0.004, -0.002), STS and Quora unchanged,
# for about 10% more training time (README, "The main job").
DEFAULT_R_DROP = 1.0
# On top of R-Drop, SST's head reading the [CLS] vector instead of the mean of the tokens raised SST accuracy
# on each of three seeds (+0.009, +0.010, +0.011; 0.498 against 0.488) and the overall score on each (+0.0037,
# +0.0030, +0.0028), Quora and STS unchanged, at no cost (README, "The main job"). The pair heads keep SBERT's
# mean pooling: their sentence vectors are the embeddings all-MiniLM-L6-v2 was trained to make.
DEFAULT_SENTIMENT_POOLING = "cls"


class MultitaskBERT(nn.Module):
    """One encoder, three heads; `predict_*` mirror the course's MultitaskBERT methods."""

    def __init__(self, bert: BertModel, dropout: float = 0.1,
                 sentiment_pooling: str = DEFAULT_SENTIMENT_POOLING, pair_pooling: str = "mean",
                 paraphrase_head: str = "cosine", similarity_head: str = "cosine",
                 num_sentiment_classes: int = 5, paraphrase_threshold: str = "learned") -> None:
        super().__init__()
        hidden = bert.config.hidden_size
        self.bert = bert
        self.pair_pooling = pair_pooling
        self.paraphrase_kind, self.similarity_kind = paraphrase_head, similarity_head
        self.sentiment = SentenceClassifier(hidden, num_sentiment_classes, dropout, sentiment_pooling)
        self.paraphrase = {"cosine": lambda: CosinePairHead(learn_scale=True),
                           "softmax": lambda: SoftmaxPairHead(hidden, 2),
                           "cross": lambda: SentenceClassifier(hidden, 1, dropout, "cls")}[paraphrase_head]()
        self.similarity = {"cosine": lambda: CosinePairHead(learn_scale=False),
                           "cross": lambda: SentenceClassifier(hidden, 1, dropout, "cls")}[similarity_head]()
        if paraphrase_threshold == "train":
            # Not trained: set by PairTask.fit_threshold, saved with the heads, used by every prediction.
            self.register_buffer("paraphrase_threshold", torch.zeros(()))

    def encode(self, tokens: TokenBatch, inputs_embeds: torch.Tensor | None = None):
        """inputs_embeds: word vectors (B, T, C) used instead of tokens.input_ids' (SMART perturbs them)."""
        input_ids = tokens.input_ids if inputs_embeds is None else None
        return self.bert(input_ids, tokens.attention_mask, tokens.token_type_ids, inputs_embeds)

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
        """Logit of "duplicate" (B,), or logits (B, 2) for the softmax head."""
        if self.paraphrase_kind == "cross":
            return self.paraphrase(self.encode(pair), pair.attention_mask).squeeze(-1)
        return self.paraphrase(*self.embed_pair(pair))

    def paraphrase_decision(self, logits: torch.Tensor) -> torch.Tensor:
        """Duplicate (1) or not (0) from predict_paraphrase's logits: above the fitted threshold if there is
        one, else above 0 (the head's learned one), or the argmax of the softmax head's two logits."""
        if self.paraphrase_kind == "softmax":
            return logits.argmax(-1)
        return (logits > getattr(self, "paraphrase_threshold", 0.0)).long()

    def predict_similarity(self, pair: TokenBatch) -> torch.Tensor:
        """cos(u, v) (B,) for the cosine head, a logit (B,) for the cross-encoder."""
        if self.similarity_kind == "cross":
            return self.similarity(self.encode(pair), pair.attention_mask).squeeze(-1)
        return self.similarity(*self.embed_pair(pair))


class RegularisedSentimentTask(SentimentTask):
    """SST with four regularisers for a small training set (the job's default: R-Drop at alpha 1):

    - label smoothing (Szegedy et al. 2016): the target puts eps / K on every class, 1 - eps more on the gold;
    - multi-sample dropout (Inoue 2019): the head's dropout and linear layer applied K times to one encoder
      output, the K losses averaged (K masks for the price of one encoder pass);
    - R-Drop (Liang et al. 2021): every sentence twice through the whole network, so two dropout masks,
      and alpha times the symmetric KL divergence between the two predictions added to the loss;
    - SMART (Jiang et al. 2020): lambda times the largest symmetric KL that a small perturbation of the word
      vectors causes (models/smoothness.py), found by one ascent step: two more passes through the network.

    With all four off, the loss is SentimentTask's own cross-entropy.
    """

    def __init__(self, *args, label_smoothing: float = 0.0, dropout_samples: int = 1, r_drop: float = 0.0,
                 smart: float = 0.0, smart_radius: float = 1.0, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.label_smoothing, self.dropout_samples, self.r_drop = label_smoothing, dropout_samples, r_drop
        self.smart, self.smart_radius = smart, smart_radius

    def loss(self, model: nn.Module, batch: Any) -> torch.Tensor:
        if not self.label_smoothing and self.dropout_samples == 1 and not self.r_drop and not self.smart:
            return super().loss(model, batch)
        tokens, labels = batch
        device = device_of(model)
        tokens, labels = tokens.to(device), labels.to(device)
        copies = 2 if self.r_drop else 1
        tokens = TokenBatch(*(t.repeat(copies, 1) for t in tokens))  # (copies B, T): a dropout mask each
        # SMART compares the prediction for word vectors x (copies B, T, C) with that for x + d: one lookup.
        embeds = model.bert.embeddings.word_embeddings(tokens.input_ids) if self.smart else None
        output = model.encode(tokens, embeds)
        logits = [model.sentiment(output, tokens.attention_mask).float()  # (copies B, K), a new head mask
                  for _ in range(self.dropout_samples)]
        loss = sum(F.cross_entropy(z, labels.repeat(copies), label_smoothing=self.label_smoothing)
                   for z in logits) / self.dropout_samples
        prediction = torch.stack(logits).mean(0)  # (copies B, K)
        if self.r_drop:
            first, second = prediction.chunk(2)  # (B, K) each: the two passes
            loss = loss + self.r_drop * symmetric_kl(first, second)
        if self.smart:
            def logits_of(embeds: torch.Tensor) -> torch.Tensor:  # (copies B, T, C) -> (copies B, K)
                return model.sentiment(model.encode(tokens, embeds), tokens.attention_mask).float()
            loss = loss + self.smart * adversarial_smoothness(logits_of, embeds, prediction,
                                                              radius=self.smart_radius)
        return loss


def overall_score(dev: dict[str, dict[str, float]]) -> float:
    """The course's leaderboard score: (SST acc + Quora acc + (STS Pearson + 1) / 2) / 3."""
    return (dev["sst"]["accuracy"] + dev["para"]["accuracy"] + (dev["sts"]["pearson"] + 1) / 2) / 3


# What best/heads.json keeps so that --predict can rebuild the heads.
HEAD_SETTINGS = ("sentiment_pooling", "pair_pooling", "paraphrase_head", "similarity_head",
                 "hidden_dropout_prob", "paraphrase_loss", "similarity_loss")
# Added since: older runs lack them, and --predict reads them with the behaviour those runs had.
LATER_HEAD_SETTINGS = ("paraphrase_threshold",)


def course_task(name: str, splits: dict, tokenizer: BertTokenizer, config, max_length: int,
                paraphrase_head: str = "cosine", similarity_head: str = "cosine",
                similarity_loss: str = "cosine-mse", paraphrase_loss: str = "bce", sst_regularisers=None):
    """The training task of one course prefix ("sst", "para", "sts") from its train and dev examples.

    sst_regularisers: RegularisedSentimentTask's keyword arguments (label_smoothing, dropout_samples,
    r_drop, smart); none given, SST trains on the plain cross-entropy."""
    common = dict(train=splits["train"], dev=splits["dev"], tokenizer=tokenizer, batch_size=config.batch_size,
                  seed=config.seed, max_length=max_length)
    if name == "sst":
        return RegularisedSentimentTask("sst", **common, **(sst_regularisers or {}))
    if name == "para":
        return PairTask("para", "paraphrase", cross=paraphrase_head == "cross",
                        softmax=paraphrase_head == "softmax", paraphrase_loss=paraphrase_loss, **common)
    return PairTask("sts", "similarity", cross=similarity_head == "cross", similarity_loss=similarity_loss,
                    **common)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tasks.multitask", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    h = parser.add_argument_group("heads")
    h.add_argument("--sentiment-pooling", choices=SENTENCE_POOLINGS, default=DEFAULT_SENTIMENT_POOLING,
                   help="sentence vector for SST's classifier (default cls: the [CLS] token's vector; "
                        "attention: weights over the tokens that the head learns)")
    h.add_argument("--pair-pooling", choices=("cls", "mean", "max"), default="mean",
                   help="sentence vectors u, v for the bi-encoder pair heads (SBERT: mean)")
    h.add_argument("--paraphrase-head", choices=PARAPHRASE_HEADS, default="cosine", help="see above")
    h.add_argument("--paraphrase-loss", choices=PARAPHRASE_LOSSES, default="bce",
                   help="loss of the cosine paraphrase head: bce, or bce+mnrl (plus in-batch negatives on "
                        "the duplicate pairs, SBERT's MultipleNegativesRankingLoss)")
    h.add_argument("--paraphrase-threshold", choices=PARAPHRASE_THRESHOLDS, default="learned",
                   help="decision of the cosine paraphrase head: learned (its logit s cos + b above 0), or "
                        "train (the logit threshold that classifies the training pairs best, refitted "
                        "before every evaluation and saved with the heads)")
    h.add_argument("--similarity-head", choices=SIMILARITY_HEADS, default="cosine", help="see above")
    h.add_argument("--similarity-loss", choices=sorted({**SIMILARITY_LOSSES, **EMBEDDING_SIMILARITY_LOSSES}),
                   default="cosine-mse",
                   help="loss of the cosine similarity head (angle: AnglE, CoSENT's ranking on the cosine "
                        "and on the angle between u and v)")
    r = parser.add_argument_group("regularising the sentiment task (SST's 8,544 sentences)")
    r.add_argument("--label-smoothing", type=real(0.0, 1.0, high_open=True, meaning="0: off"), default=0.0,
                   metavar="EPS",
                   help="smooth SST's cross-entropy targets by EPS (Szegedy et al. 2016; default 0: off)")
    r.add_argument("--dropout-samples", type=positive_int, default=1, metavar="K",
                   help="multi-sample dropout (Inoue 2019): the sentiment head's dropout and linear layer "
                        "applied K times per encoder pass, losses averaged (default 1: off)")
    r.add_argument("--r-drop", type=non_negative, default=DEFAULT_R_DROP, metavar="ALPHA",
                   help="R-Drop (Liang et al. 2021): each SST batch twice through the network, plus ALPHA "
                        "times the symmetric KL between the two predictions (default 1; 0: off, SST's plain "
                        "cross-entropy)")
    r.add_argument("--smart", type=non_negative, default=0.0, metavar="LAMBDA",
                   help="SMART (Jiang et al. 2020): plus LAMBDA times the largest symmetric KL a small "
                        "perturbation of the word vectors causes, found by one ascent step (two more passes "
                        "per SST batch; default 0: off)")
    r.add_argument("--smart-radius", type=positive, default=1.0, metavar="R",
                   help="largest coordinate of SMART's perturbation of a word vector (default 1, MT-DNN's; "
                        "all-MiniLM-L6-v2's word vectors have largest coordinates of about 0.17)")
    add_job_arguments(parser, "multitask")
    add_course_file_arguments(parser)
    parser.add_argument("--predict", type=existing_dir, default=None, metavar="RUN_DIR",
                        help="predict only, no training: load RUN_DIR's best/ (or RUN_DIR itself, if it is a "
                             "best/ folder) and write course-format predictions for the dev and test files "
                             "named by --sst_dev ... --sts_test (all six from --data-dir when none is named) "
                             "into --out (default runs/multitask-predict/<date-time>) or the --*_out files; "
                             "dev files also get their metrics")
    add_train_arguments(parser)
    parser.add_argument_group("balance of the tasks").add_argument(
        "--task-weights", type=name_weights(tuple(COURSE_TASKS)), default=DEFAULT_TASK_WEIGHTS,
        metavar="TASK=FACTOR,...",
        help="scale a task's loss in the gradient; tasks not named stay 1 and the logged losses are "
             "unweighted (default sts=4; sts=1 weighs the three tasks alike)")
    # Measured on the shared data (README): proportional sampling spreads STS's few batches over the
    # epoch instead of finishing them early and then training on Quora alone, which cost STS 0.03
    # Pearson; a third epoch adds about a point to SST and fits in the 30-minute budget.
    parser.set_defaults(sampling="proportional", epochs=3)
    return parser


def check_flags(args) -> None:
    """Contradictory flags are errors, never silently ignored."""
    if args.similarity_head == "cross" and args.similarity_loss != "cosine-mse":
        raise SystemExit("error: --similarity-loss applies to the cosine similarity head only; "
                         "drop it or use --similarity-head cosine")
    if args.paraphrase_head != "cosine" and args.paraphrase_loss != "bce":
        raise SystemExit("error: --paraphrase-loss applies to the cosine paraphrase head only; "
                         "drop it or use --paraphrase-head cosine")
    if args.paraphrase_head == "softmax" and args.paraphrase_threshold != "learned":
        raise SystemExit("error: --paraphrase-threshold applies to a paraphrase head with one logit (cosine "
                         "or cross); the softmax head takes the larger of its two")
    if args.smart_radius != 1.0 and not args.smart:
        raise SystemExit("error: --smart-radius sets SMART's perturbation, but SMART is off; "
                         "add --smart LAMBDA")
    if args.option == "pretrain" and args.layerwise_decay != 1.0:
        raise SystemExit("error: --layerwise-decay needs a trainable encoder, but --option pretrain "
                         "freezes it")
    if args.predict:
        training_only = [f"--{p}_train" for p in COURSE_TASKS if getattr(args, f"{p}_train")]
        training_only += ["--resume"] if args.resume else []
        if training_only:
            raise SystemExit(f"error: {', '.join(training_only)} belong(s) to training; "
                             f"--predict {args.predict} trains nothing")


def write_course_outputs(model: nn.Module, tasks: Sequence, examples: dict, args, folder: Path) -> dict:
    """Predictions for every dev and test file read, each where its --*_out flag or `folder` says.

    Returns them: {(task, split): predictions}."""
    written = {}
    with torch.no_grad():
        for task in tasks:
            for split in OUTPUT_SPLITS:
                rows = examples[task.name].get(split)
                if rows is None:
                    continue
                path = output_path(args, task.name, split, folder)
                path.parent.mkdir(parents=True, exist_ok=True)
                written[task.name, split] = task.predict_examples(model, rows)
                write_predictions(path, task.header, [e.id for e in rows], written[task.name, split])
                print(f"wrote {path}", file=sys.stderr)
    return written


def train_main(args, config) -> int:
    out = args.out or default_run_dir("multitask")
    with claim_run(out, "multitask", args.model, resume=args.resume) as run:
        files = course_files(args, SPLITS)
        source = find_data(args, files, ("train", "dev"))
        run.write_config({**vars(args), "data_path": str(source.path.resolve()), "data_kind": source.kind})
        data = {prefix: read_splits(source, dataset, args.strict, args.limit, files=files[prefix])
                for prefix, dataset in COURSE_TASKS.items()}

        bert, tokenizer, model_dir = load_encoder(args.model, args.attn_implementation)
        check_max_length(args.max_length, bert.config, pairs=True)
        model = MultitaskBERT(bert, args.hidden_dropout_prob, args.sentiment_pooling, args.pair_pooling,
                              args.paraphrase_head, args.similarity_head,
                              paraphrase_threshold=args.paraphrase_threshold)
        if config.freeze_encoder:
            freeze(model.bert)
        tasks = [course_task(name, data[name], tokenizer, config, args.max_length, args.paraphrase_head,
                             args.similarity_head, args.similarity_loss, args.paraphrase_loss,
                             dict(label_smoothing=args.label_smoothing, dropout_samples=args.dropout_samples,
                                  r_drop=args.r_drop, smart=args.smart, smart_radius=args.smart_radius))
                 for name in COURSE_TASKS]
        settings = {"job": "multitask", "model": str(model_dir), "data": source.description,
                    "max_length": args.max_length, "attn_implementation": args.attn_implementation,
                    **{k: getattr(args, k) for k in HEAD_SETTINGS + LATER_HEAD_SETTINGS}}
        state = train_and_reload_best(model, tasks, config, run, overall_score, tokenizer, settings,
                                      args.resume)
        if state is None:  # a torchrun process other than rank 0: done
            return 0
        write_course_outputs(model, tasks, data, args, run.predictions)
        best = next((r for r in reversed(state.history) if r["best"]), None)
        print(f"best overall {state.best_score:.4f} at epoch {state.best_epoch}: "
              f"{best['dev'] if best else ''}\n"
              f"outputs in {run.path}", file=sys.stderr)
        if source.is_sample:
            print("REMINDER: these numbers come from the synthetic demo sample and mean nothing.",
                  file=sys.stderr)
        return 0


def predict_main(args) -> int:
    """--predict: a finished run's best weights -> course-format predictions, no training."""
    best, settings = read_run_settings(args.predict, "multitask", HEAD_SETTINGS)
    data = read_prediction_inputs(args)  # before the model: a bad file costs no loading
    device = device_from_args(args)
    # Predictions are computed in fp32, as the training job's own evaluation and outputs are, and with
    # the kernel the run evaluated with, so that its own dev files get its own predictions back.
    requested = args.attn_implementation
    if requested == "auto" and device == "cpu" and settings.get("attn_implementation") in ATTENTION_CHOICES:
        requested = settings["attn_implementation"]
    kernel = attn_implementation_for(requested, device, "fp32")
    bert, tokenizer, _ = load_encoder(str(best), kernel)
    threshold = settings.get("paraphrase_threshold", "learned")  # runs from before the option: learned
    if threshold not in PARAPHRASE_THRESHOLDS:
        raise SystemExit(f"error: {best / HEADS_SETTINGS}: paraphrase_threshold is {threshold!r}, not one of "
                         f"{', '.join(PARAPHRASE_THRESHOLDS)}")
    model = MultitaskBERT(bert, settings["hidden_dropout_prob"], settings["sentiment_pooling"],
                          settings["pair_pooling"], settings["paraphrase_head"], settings["similarity_head"],
                          paraphrase_threshold=threshold)
    load_checkpoint(model, best)
    model.to(device).eval()
    max_length = settings.get("max_length", args.max_length)
    tasks = [course_task(name, {"train": [], "dev": []}, tokenizer, TrainConfig(), max_length,
                         settings["paraphrase_head"], settings["similarity_head"]) for name in COURSE_TASKS]
    out = Path(args.out or default_run_dir("multitask-predict"))
    predictions = write_course_outputs(model, tasks, data, args, out)
    for name in COURSE_TASKS:
        if (name, "dev") in predictions:
            scores = course_metrics(name, predictions[name, "dev"], [e.label for e in data[name]["dev"]])
            print(f"{name} dev: " + " ".join(f"{k}={v:.4f}" for k, v in scores.items()), file=sys.stderr)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    with user_errors():
        args = build_parser().parse_args(argv)
        check_flags(args)
        if args.predict:
            return predict_main(args)
        config = train_config_from_args(args, freeze_encoder=args.option == "pretrain")
        torch.manual_seed(config.seed)
        return train_main(args, config)


if __name__ == "__main__":
    sys.exit(main())
