"""Sequence and sentence-pair classification on small sets, vanilla or with label-embedding attention.

    python -m tasks.classify --task rte
    python -m tasks.classify --task rte --label-embedding --seeds 1 2 3
    python -m tasks.classify --task sst2 --train-fraction 0.01 --label-embedding --label-init keywords

Tasks (read from $MINBERT_DATA or --data-dir, the shared datasets folder; see tasks/data/glue.py for the GLUE
and TREC files' quirks), each with its dev metric:

    cola         GLUE CoLA, acceptability        Matthews correlation (and accuracy)
    mrpc         GLUE MRPC, paraphrase (pairs)   accuracy and F1; the run's score is their mean, as GLUE's
    rte          GLUE RTE, entailment (pairs)    accuracy
    wnli         GLUE WNLI, entailment (pairs)   accuracy
    sst2         GLUE SST-2, sentiment           accuracy
    trec-coarse  TREC questions, 6 classes       accuracy (dev: a fixed, stratified 10% of the train file)
    trec-fine    TREC questions, 50 classes      accuracy (same split)
    cfimdb       the course's IMDb reviews, 2    accuracy (long texts: --truncation, --chunks)
    20newsgroups Usenet posts, 20 groups         accuracy (dev: 10% of bydate-train, as tasks.data.hierarchy)

A sentence is encoded `[CLS] A [SEP]`, a pair `[CLS] A [SEP] B [SEP]`; a classifier reads the final [CLS]
vector (--pooling), or other layers' (--layer-features, --layer-combine); a text longer than --max-length is
cut (--truncation head, tail or head+tail) or encoded window by window (--chunks; tasks/models/features.py).
`--label-embedding` adds one learned embedding per class, read by the [CLS] row of the chosen layers'
attention, and the label loss L_final = L_c + lambda L_label (Wang et al. 2020; the method and how the
authors' code differs are in minbert/label_attention.py).

`--seeds 1 2 3` trains once per seed, each into <out>/seed-<n>/, and reports every dev metric as mean
± standard deviation (tasks/training/seeds.py) in <out>/summary.json, both for the last epoch (the fixed
budget: what the README tables report) and for the best epoch on dev (optimistic: the same dev set picks the
epoch and scores it). `--resume` skips finished seeds and continues the others.

Every run directory holds what the other jobs write (config.json, metrics.jsonl, loss_and_dev.png,
checkpoints/, best/, predictions/<task>-dev-output.csv with label names) plus result.json.

Read next: ../minbert/label_attention.py.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import torch

from minbert.label_attention import (LABEL_LOSS_PATHS, LABEL_LOSS_REDUCTIONS, LABEL_LOSS_WEIGHT,
                                     init_from_class_means, init_from_keywords, label_loss)
from minbert.pooling import POOLINGS
from minbert.tokenizer import BertTokenizer
from minbert.truncation import TRUNCATION_STRATEGIES
from tasks.data.batching import TokenBatch, bucketed_batches, device_of, pad_batch, sorted_batches
from tasks.data.classify_sets import PAIR_TASKS, SPECS, ClassifyTaskSpec, read_task_data, subsample
from tasks.data.examples import PairExample
from tasks.evaluation import metrics
from tasks.models.classifier import ChunkBatch, ClassifyModel
from tasks.models.features import CHUNK_POOLINGS, LAYER_COMBINES, chunk_pieces
from tasks.models.heads import classification_loss
from tasks.training.arguments import integer, nonempty, non_negative, real
from tasks.training.config import add_train_arguments, train_config_from_args
from tasks.data.encoding import encode_pairs, encode_texts
from tasks.training.job import (SHARED_DATA_HELP, add_job_arguments, check_max_length, data_root,
                                default_run_dir, load_encoder, train_and_reload_best, user_errors,
                                write_predictions)
from tasks.training.optimizer import freeze
from tasks.training.run_dir import claim_run
from tasks.training.seeds import add_seeds_argument, parse_job_args, run_one_or_seeds, write_result

EVAL_BATCH_SIZE = 128
LABEL_INITS = ("random", "keywords", "class-mean")


@dataclass(frozen=True)
class LabelLossSettings:
    weight: float = LABEL_LOSS_WEIGHT  # lambda
    path: str = "direct"
    reduction: str = "sum"


# ----- task -----------------------------------------------------------------------------------------


class ClassifyTask:
    """One classification set: cross-entropy (+ lambda L_label) training, the task's metric on dev."""

    def __init__(self, name: str, spec: ClassifyTaskSpec, tokenizer: BertTokenizer, train: Sequence,
                 dev: Sequence, batch_size: int, seed: int, max_length: int, truncation: str = "head",
                 label_loss_settings: LabelLossSettings | None = None, chunks: bool = False,
                 max_chunks: int = 0) -> None:
        self.name, self.spec = name, spec
        self.tokenizer, self.pad_id = tokenizer, tokenizer.pad_id
        self.max_length, self.truncation = max_length, truncation
        self.chunks, self.max_chunks = chunks, max_chunks
        self.batch_size, self.seed = batch_size, seed
        self.label_loss = label_loss_settings or LabelLossSettings()
        self.train_inputs = self.encode(train)
        self.train_labels = [e.label for e in train]
        self.dev = list(dev)
        self.dev_inputs = self.encode(dev)

    def encode(self, examples: Sequence) -> list:
        """Per example: (ids, segments), truncated to the window; or, with chunks, the ids of each chunk."""
        if not self.chunks:
            return list(zip(*encode_examples(self.tokenizer, examples, self.max_length, self.truncation)))
        whole = encode_texts(self.tokenizer, [e.sentence for e in examples], max_length=10**9)  # nothing cut
        budget = self.max_length - 2
        return [[[self.tokenizer.cls_id, *chunk, self.tokenizer.sep_id]
                 for chunk in chunk_pieces(ids[1:-1], budget, self.max_chunks)] for ids in whole]

    def length(self, item) -> int:
        return sum(len(chunk) for chunk in item) if self.chunks else len(item[0])

    def collate(self, items: Sequence) -> TokenBatch | ChunkBatch:
        if not self.chunks:
            return pad_batch([ids for ids, _ in items], [segments for _, segments in items],
                             pad_id=self.pad_id)
        chunks = max(len(item) for item in items)
        flat = pad_batch([c for item in items for c in item + [[self.pad_id]] * (chunks - len(item))],
                         pad_id=self.pad_id)  # (B N, T); a padding chunk is one [PAD]
        chunk_mask = torch.tensor([[n < len(item) for n in range(chunks)] for item in items])
        length = flat.input_ids.size(1)
        return ChunkBatch(flat.input_ids.reshape(len(items), chunks, length),
                          flat.attention_mask.reshape(len(items), chunks, length), chunk_mask)

    def train_batches(self, epoch: int) -> list[Any]:
        groups = bucketed_batches([self.length(x) for x in self.train_inputs], self.batch_size, self.seed,
                                  epoch)
        return [(self.collate([self.train_inputs[i] for i in g]),
                 torch.tensor([self.train_labels[i] for i in g]))
                for g in groups]

    def loss(self, model: ClassifyModel, batch: Any) -> torch.Tensor:
        tokens, labels = batch
        device = device_of(model)
        loss = classification_loss(model(tokens.to(device)), labels.to(device))  # L_c
        if model.label_embeddings is not None and self.label_loss.weight > 0:
            loss = loss + self.label_loss.weight * label_loss(
                model.head.classifier, model.label_embeddings, self.label_loss.path,
                self.label_loss.reduction, pooler=model.bert.pooler)
        return loss

    def predict(self, model: ClassifyModel, inputs: Sequence) -> list[int]:
        """Predicted class per example, in the input's order (batches sorted by length for speed)."""
        predictions = [0] * len(inputs)
        # a chunked text is several inputs
        batch_size = EVAL_BATCH_SIZE // 8 if self.chunks else EVAL_BATCH_SIZE
        for group in sorted_batches([self.length(x) for x in inputs], batch_size):
            batch = self.collate([inputs[i] for i in group]).to(device_of(model))
            for i, label in zip(group, model(batch).argmax(-1).tolist()):
                predictions[i] = label
        return predictions

    def evaluate(self, model: ClassifyModel) -> dict[str, float]:
        return score(self.spec.metric, self.predict(model, self.dev_inputs), [e.label for e in self.dev])

    def write_outputs(self, model: ClassifyModel, directory: Path) -> list[int]:
        """Dev predictions (label names) in the course's format; returns them."""
        predictions = self.predict(model, self.dev_inputs)
        write_predictions(directory / f"{self.name}-dev-output.csv", "Predicted_Label",
                          [e.id for e in self.dev], [self.spec.labels[p] for p in predictions])
        return predictions


def encode_examples(tokenizer: BertTokenizer, examples: Sequence, max_length: int,
                    truncation: str) -> tuple[list[list[int]], list[list[int]]]:
    """Ids and segment ids: `[CLS] A [SEP]` for sentences, `[CLS] A [SEP] B [SEP]` for pairs."""
    if examples and isinstance(examples[0], PairExample):
        return encode_pairs(tokenizer, [e.sentence1 for e in examples], [e.sentence2 for e in examples],
                            max_length, truncation)
    ids = encode_texts(tokenizer, [e.sentence for e in examples], max_length, truncation)
    return ids, [[0] * len(x) for x in ids]


def score(metric: str, predictions: Sequence[int], gold: Sequence[int]) -> dict[str, float]:
    """The task's dev metrics."""
    scores = {"accuracy": metrics.accuracy(predictions, gold)}
    if metric == "matthews":
        scores["matthews"] = metrics.matthews_corrcoef(predictions, gold)
    if metric == "accuracy+f1":
        scores["f1"] = metrics.f1_binary(predictions, gold)
    return scores


def main_score(metric: str, scores: dict[str, float]) -> float:
    """The one number that picks the best epoch: Matthews, accuracy, or the mean of accuracy and F1."""
    if metric == "accuracy+f1":
        return (scores["accuracy"] + scores["f1"]) / 2
    return scores["matthews" if metric == "matthews" else "accuracy"]


# ----- one run, several seeds --------------------------------------------------------------------


def parse_keywords(text: str | None, spec: ClassifyTaskSpec) -> tuple[tuple[str, ...], ...]:
    """--label-keywords "bad awful;good great" (one ';'-separated group per class, in class order)."""
    if text is None:
        return spec.keywords
    groups = tuple(tuple(group.split()) for group in text.split(";"))
    if len(groups) != len(spec.labels) or not all(groups):
        raise SystemExit(f"error: --label-keywords needs {len(spec.labels)} non-empty ';'-separated "
                         f"groups, one per class in the order {list(spec.labels)}; got {len(groups)}")
    return groups


def initialise_label_embeddings(model: ClassifyModel, how: str, task: ClassifyTask, tokenizer: BertTokenizer,
                                keywords) -> None:
    if how == "keywords":
        init_from_keywords(model, tokenizer, keywords)
    elif how == "class-mean":
        device = device_of(model)
        groups = sorted_batches([task.length(x) for x in task.train_inputs], EVAL_BATCH_SIZE)
        batches = ((*task.collate([task.train_inputs[i] for i in g]).to(device),
                    torch.tensor([task.train_labels[i] for i in g], device=device)) for g in groups)
        init_from_class_means(model, batches, len(task.spec.labels))


def run_one(args: argparse.Namespace, seed: int, out: Path, resume: bool) -> dict:
    """Train one model with `seed` into `out`; returns (and writes) its result.json."""
    args = argparse.Namespace(**{**vars(args), "seed": seed})
    config = train_config_from_args(args, freeze_encoder=args.option == "pretrain")
    torch.manual_seed(seed)
    with claim_run(out, "classify", args.model, {"task": args.task}, resume) as run:
        root = data_root(args.data_dir)
        spec, data = read_task_data(root, args.task, args.strict)
        train_examples = subsample(data["train"], args.train_fraction, seed)
        if args.limit:
            train_examples, data["dev"] = train_examples[:args.limit], data["dev"][:args.limit]
        print(f"{args.task}: {len(train_examples)} training examples ({args.train_fraction:g} of "
              f"{len(data['train'])}), {len(data['dev'])} dev; seed {seed}", file=sys.stderr)
        run.write_config({**vars(args), "data_root": str(root.resolve()),
                          "train_examples": len(train_examples)})
        bert, tokenizer, model_dir = load_encoder(args.model, args.attn_implementation)
        check_max_length(args.max_length, bert.config, pairs=args.task in PAIR_TASKS)
        label_layers = args.label_layers if args.label_embedding else None
        try:
            model = ClassifyModel(bert, len(spec.labels), args.hidden_dropout_prob, args.pooling,
                                  label_layers, args.layer_features, args.layer_combine, args.chunks)
        except ValueError as error:  # --label-layers 7 or --layer-features layer:9 on a 6-layer model
            raise SystemExit(f"error: {error}") from None
        if args.label_embedding and args.label_loss_path == "pooler" and bert.pooler is None:
            raise SystemExit(f"error: --label-loss-path pooler, but {model_dir} has no pooler")
        if config.freeze_encoder:
            freeze(model.bert)
        if args.label_embedding:
            print(f"label embeddings: {len(spec.labels)} x {bert.config.hidden_size}, in layers "
                  f"{list(model.label_layers)} of {bert.config.num_hidden_layers} (0-based), "
                  f"init {args.label_init}, lambda {args.label_lambda}", file=sys.stderr)
        task = ClassifyTask(args.task, spec, tokenizer, train_examples, data["dev"], config.batch_size, seed,
                            args.max_length, args.truncation,
                            LabelLossSettings(args.label_lambda, args.label_loss_path,
                                              args.label_loss_reduction),
                            chunks=args.chunks is not None, max_chunks=args.max_chunks)
        # A resumed run loads its label embeddings from the checkpoint.
        if args.label_embedding and not resume:
            try:
                initialise_label_embeddings(model, args.label_init, task, tokenizer,
                                            parse_keywords(args.label_keywords, spec))
            except ValueError as error:  # keywords without word pieces, a class with no training example
                raise SystemExit(f"error: --label-init {args.label_init}: {error}") from None
        settings = {"job": "classify", "task": args.task, "labels": list(spec.labels),
                    "pooling": args.pooling,
                    "label_layers": list(model.label_layers) if args.label_embedding else None,
                    "model": str(model_dir)}
        state = train_and_reload_best(model, [task], config, run,
                                      lambda dev: main_score(spec.metric, dev[args.task]),
                                      tokenizer, settings, resume)
        if state is None:  # a torchrun process other than rank 0: done
            return None
        with torch.no_grad():
            predictions = task.write_outputs(model, run.predictions)
        finished = [r for r in state.history if r["epoch_complete"] and r["epoch"] > 0]
        result = {"task": args.task, "seed": seed, "label_embedding": args.label_embedding,
                  "train_fraction": args.train_fraction, "train_examples": len(train_examples),
                  "final": state.history[-1]["dev"][args.task], "final_epoch": state.history[-1]["epoch"],
                  "best": next(r["dev"][args.task] for r in state.history if r["epoch"] == state.best_epoch),
                  "best_epoch": state.best_epoch, "train_seconds": state.history[-1]["elapsed_s"],
                  "epochs_complete": len(finished),
                  "dev_confusion_best": metrics.confusion_matrix(predictions, [e.label for e in data["dev"]],
                                                                 len(spec.labels)).tolist()}
        write_result(run.path, result)
        return result


# ----- command line -------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tasks.classify", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    parser.add_argument("--task", choices=sorted(SPECS), required=True, help="which dataset")
    parser.add_argument("--pooling", choices=POOLINGS, default="cls",
                        help="the classifier's input: the final [CLS] vector (default; label attention acts "
                             "through [CLS]), the mean or max of the tokens, or the pooler's tanh layer")
    parser.add_argument("--truncation", choices=TRUNCATION_STRATEGIES, default="head+tail",
                        help="what a text longer than --max-length keeps: its head, its tail, or both ends "
                             "(Sun et al. 2019, scaled to the window: 31 + 95 pieces at 128)")
    parser.add_argument("--layer-features", type=nonempty, default="last",
                        help="the classifier reads the last layer (pooled by --pooling), or the [CLS] "
                             "vectors of layer:K (0 = embeddings), first-4, last-4 or all layers "
                             "(Sun et al. 2019)")
    parser.add_argument("--layer-combine", choices=LAYER_COMBINES, default="concat",
                        help="how several layers' [CLS] vectors are combined")
    parser.add_argument("--chunks", choices=CHUNK_POOLINGS, default=None,
                        help="long texts: encode every --max-length window of the text and combine the "
                             "chunks' vectors by mean, max or self-attention (instead of --truncation)")
    parser.add_argument("--max-chunks", type=integer(0, "0: all"), default=0,
                        help="with --chunks: at most this many chunks per text, the first ones and the "
                             "last (0: all)")
    parser.add_argument("--train-fraction", type=real(0.0, 1.0, low_open=True), default=1.0,
                        help="train on a stratified random fraction of the training set (low-resource runs); "
                             "the sample depends on the seed")
    add_seeds_argument(parser)
    g = parser.add_argument_group("label-embedding attention (Wang et al. 2020)")
    g.add_argument("--label-embedding", action="store_true",
                   help="use label-embedding attention and the label loss")
    g.add_argument("--label-lambda", type=non_negative, default=None,
                   help=f"weight of the label loss, lambda (default {LABEL_LOSS_WEIGHT:g}; 0 turns it off)")
    g.add_argument("--label-layers", type=nonempty, default=None,
                   help="which layers use it: 'all' (default, the paper), 'last:k', or 0-based indices '4,5'")
    g.add_argument("--label-init", choices=LABEL_INITS, default=None,
                   help="label embeddings start random (default), at the mean word embedding of keywords, "
                        "or at the class-averaged final [CLS] vector of the pretrained model")
    g.add_argument("--label-keywords", type=nonempty, default=None,
                   help="keywords for --label-init keywords: one ';'-separated group per class, in class "
                        "order (default: a few words per class, see SPECS in tasks/classify.py)")
    g.add_argument("--label-loss-path", choices=LABEL_LOSS_PATHS, default=None,
                   help="direct: the classifier reads the label embeddings (the paper, default); pooler: "
                        "through the pretrained pooler first (the authors' code)")
    g.add_argument("--label-loss-reduction", choices=LABEL_LOSS_REDUCTIONS, default=None,
                   help="sum over classes (the paper, default) or mean (the authors' code)")
    add_job_arguments(parser, "classify", SHARED_DATA_HELP)
    add_train_arguments(parser)
    return parser


LABEL_FLAGS = {"label_lambda": LABEL_LOSS_WEIGHT, "label_layers": "all", "label_init": "random",
               "label_keywords": None, "label_loss_path": "direct", "label_loss_reduction": "sum"}


def check_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Contradictions are errors; unset label flags get their defaults."""
    given = [flag for flag in LABEL_FLAGS if getattr(args, flag) is not None]
    if given and not args.label_embedding:
        parser.error(f"--{given[0].replace('_', '-')} needs --label-embedding")
    for flag, default in LABEL_FLAGS.items():
        if getattr(args, flag) is None:
            setattr(args, flag, default)
    if args.label_keywords is not None and args.label_init != "keywords":
        parser.error("--label-keywords needs --label-init keywords")
    if args.label_layers not in ("all", None) and not args.label_layers.startswith("last:"):
        try:
            args.label_layers = [int(x) for x in args.label_layers.split(",")]
        except ValueError:
            parser.error(f"--label-layers must be 'all', 'last:k' or comma-separated indices, "
                         f"got {args.label_layers!r}")
    if args.label_lambda < 0:
        parser.error("--label-lambda must be >= 0")
    if args.layer_features != "last" and args.pooling != "cls":
        parser.error("--layer-features reads [CLS] vectors; --pooling applies to --layer-features last")
    if args.layer_features in ("last",) and args.layer_combine != "concat":
        parser.error("--layer-combine applies to several layers (first-4, last-4, all)")
    if args.chunks and args.task in PAIR_TASKS:
        parser.error("--chunks splits single texts; sentence pairs use --truncation")
    if args.max_chunks and not args.chunks:
        parser.error("--max-chunks needs --chunks")
    if args.max_chunks < 0 or args.max_chunks == 1:
        parser.error("--max-chunks is 0 (all) or at least 2 (the first chunks and the last)")
    if (args.label_embedding and args.layer_combine == "concat"
            and args.layer_features in ("first-4", "last-4", "all")):
        parser.error("--label-embedding's label loss feeds hidden-size vectors to the classifier: combine "
                     "several layers with --layer-combine mean or max")
    if args.chunks and args.label_embedding and args.label_init == "class-mean":
        parser.error("--label-init class-mean averages single windows; use random or keywords with --chunks")


def main(argv: Sequence[str] | None = None) -> int:
    with user_errors():
        parser = build_parser()
        args = parse_job_args(parser, argv)
        check_args(parser, args)
        out = Path(args.out or default_run_dir("classify"))
        run_one_or_seeds(args.seeds, args.seed, out, args.resume,
                         lambda seed, directory, resume: run_one(args, seed, directory, resume),
                         title=args.task,
                         extra={"task": args.task, "label_embedding": args.label_embedding,
                                "train_fraction": args.train_fraction})
        return 0


if __name__ == "__main__":
    sys.exit(main())
