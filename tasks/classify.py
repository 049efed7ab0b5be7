"""Sequence and sentence-pair classification on small sets, vanilla or with label-embedding attention.

    python -m tasks.classify --task rte
    python -m tasks.classify --task rte --label-embedding --seeds 1 2 3
    python -m tasks.classify --task sst2 --train-fraction 0.01 --label-embedding --label-init keywords

Tasks (read from $MINBERT_DATA or --data-dir, the shared datasets folder; see tasks.data.glue for the GLUE
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
cut (--truncation head, tail or head+tail) or encoded window by window (--chunks; tasks.models.features).
`--label-embedding` adds one learned embedding per class, read by the [CLS] row of the chosen layers'
attention, and the label loss L_final = L_c + lambda L_label (Wang et al. 2020; the method and how the
authors' code differs are in minbert.label_attention).

`--seeds 1 2 3` trains once per seed, each into <out>/seed-<n>/, and reports every dev metric as mean
± standard deviation (tasks.training.job) in <out>/summary.json, both for the last epoch (the fixed
budget: what minbert's results page reports) and for the best epoch on dev (optimistic: the same dev set
picks the epoch and scores it). `--resume` skips finished seeds and continues the others.

Every run directory holds what the other jobs write (config.json, metrics.jsonl, loss_and_dev.png,
checkpoints/, best/, predictions/<task>-dev-output.csv with label names) plus result.json.

Read next: ../minbert/label_attention.py.
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import torch

from minbert.label_attention import (LABEL_LOSS_PATHS, LABEL_LOSS_REDUCTIONS, LABEL_LOSS_WEIGHT,
                                     init_from_class_means, init_from_keywords, label_loss)
from minbert.pooling import POOLINGS
from minbert.text.tokenizer import BertTokenizer
from minbert.text.truncation import TRUNCATION_STRATEGIES
from minbert.loading.atomic import atomic_directory
from tasks.data.batching import (EVAL_BATCH_SIZE, TokenBatch, bucketed_batches, device_of, encode_pairs,
                                 encode_texts, pad_batch, predict_in_order, sorted_batches)
from tasks.data.classify_sets import PAIR_TASKS, SPECS, ClassifyTaskSpec, read_task_data, subsample
from tasks.data.course import write_predictions
from tasks.data.examples import PairExample
from minbert import metrics
from tasks.models.classifier import ChunkBatch, ClassifyModel
from tasks.models.features import CHUNK_POOLINGS, LAYER_COMBINES, chunk_pieces
from minbert.task_heads import classification_loss
from tasks.training.flags import integer, non_negative, nonempty, real
from tasks.training.job import JobRun, data_root, parse_settings, user_errors
from tasks.training.seeds import run_one_or_seeds, seeds_flag, write_result
from tasks.training.settings import JobSettings, RunSettings, SettingsParser, TrainingSettings, flag

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
        self.tokenizer, self.pad_id = tokenizer, tokenizer.pad_token_id
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
        return [[[self.tokenizer.cls_token_id, *chunk, self.tokenizer.sep_token_id]
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
        """Predicted class per example, in the input's order."""
        def batch_classes(group: list[int]) -> list[int]:
            return model(self.collate([inputs[i] for i in group]).to(device_of(model))).argmax(-1).tolist()
        # a chunked text is several inputs
        batch_size = EVAL_BATCH_SIZE // 8 if self.chunks else EVAL_BATCH_SIZE
        return predict_in_order([self.length(x) for x in inputs], batch_classes, batch_size)

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


def run_one(run_settings: ClassifyRunSettings, out: Path, resume: bool) -> dict:
    """Train one model with its --seed into `out`; returns (and writes) its result.json."""
    settings, label, job, training = (run_settings.classify, run_settings.label, run_settings.job,
                                      run_settings.training)
    seed = training.seed
    with JobRun("classify", run_settings, {"task": settings.task}, out=out, resume=resume) as run:
        root = data_root(job.data_dir)
        spec, data = read_task_data(root, settings.task, job.strict)
        train_examples = subsample(data["train"], settings.train_fraction, seed)
        if job.limit:
            train_examples, data["dev"] = train_examples[:job.limit], data["dev"][:job.limit]
        print(f"{settings.task}: {len(train_examples)} training examples ({settings.train_fraction:g} of "
              f"{len(data['train'])}), {len(data['dev'])} dev; seed {seed}", file=sys.stderr)
        run.write_config(data_root=str(root.resolve()),
                         train_examples=len(train_examples))
        bert, tokenizer, model_dir = run.load_encoder(pairs=settings.task in PAIR_TASKS)
        try:
            model = ClassifyModel(bert, len(spec.labels), job.hidden_dropout_prob, settings.pooling,
                                  label.layers, settings.layer_features, settings.layer_combine,
                                  settings.chunks)
        except ValueError as error:  # --label-layers 7 or --layer-features layer:9 on a 6-layer model
            raise SystemExit(f"error: {error}") from None
        if label.label_embedding and label.label_loss_path == "pooler" and bert.pooler is None:
            raise SystemExit(f"error: --label-loss-path pooler, but {model_dir} has no pooler")
        if label.label_embedding:
            print(f"label embeddings: {len(spec.labels)} x {bert.config.hidden_size}, in layers "
                  f"{list(model.label_layers)} of {bert.config.num_hidden_layers} (0-based), "
                  f"init {label.label_init}, lambda {label.label_lambda}", file=sys.stderr)
        task = ClassifyTask(settings.task, spec, tokenizer, train_examples, data["dev"], training.batch_size,
                            seed, job.max_length, settings.truncation,
                            LabelLossSettings(label.label_lambda, label.label_loss_path,
                                              label.label_loss_reduction),
                            chunks=settings.chunks is not None, max_chunks=settings.max_chunks)
        # A resumed run loads its label embeddings from the checkpoint.
        if label.label_embedding and not resume:
            try:
                initialise_label_embeddings(model, label.label_init, task, tokenizer,
                                            parse_keywords(label.label_keywords, spec))
            except ValueError as error:  # keywords without word pieces, a class with no training example
                raise SystemExit(f"error: --label-init {label.label_init}: {error}") from None
        heads = {"job": "classify", "task": settings.task, "labels": list(spec.labels),
                 "pooling": settings.pooling,
                 "label_layers": list(model.label_layers) if label.label_embedding else None,
                 "model": str(model_dir)}
        state = run.train(model, [task], lambda dev: main_score(spec.metric, dev[settings.task]),
                          tokenizer=tokenizer, head_settings=heads)
        if state is None:  # a torchrun process other than rank 0: done
            return None
        with torch.no_grad(), atomic_directory(run.folder.predictions) as folder:  # whole (atomic.py)
            predictions = task.write_outputs(model, folder)
        finished = [r for r in state.history if r["epoch_complete"] and r["epoch"] > 0]
        result = {"task": settings.task, "seed": seed, "label_embedding": label.label_embedding,
                  "train_fraction": settings.train_fraction, "train_examples": len(train_examples),
                  "final": state.history[-1]["dev"][settings.task], "final_epoch": state.history[-1]["epoch"],
                  "best": next(r["dev"][settings.task] for r in state.history
                               if r["epoch"] == state.best_epoch),
                  "best_epoch": state.best_epoch, "train_seconds": state.history[-1]["elapsed_s"],
                  "epochs_complete": len(finished),
                  "dev_confusion_best": metrics.confusion_matrix(predictions, [e.label for e in data["dev"]],
                                                                 len(spec.labels)).tolist()}
        write_result(run.folder.path, result)
        return result


# ----- command line -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClassifySettings:
    """The task and the classifier."""

    task: str | None = flag(None, "which dataset", choices=sorted(SPECS), required=True)
    pooling: str = flag("cls", "the classifier's input: the final [CLS] vector, the tokens' mean or max, "
                        "the pooler", choices=POOLINGS)
    truncation: str = flag("head+tail", "what a text longer than --max-length keeps (Sun et al. 2019)",
                           choices=TRUNCATION_STRATEGIES)
    layer_features: str = flag("last", "the last layer (by --pooling), or the [CLS] vectors of layer:K "
                               "(0: embeddings), first-4, last-4 or all", type=nonempty, metavar="LAYERS")
    layer_combine: str = flag("concat", "how several layers' [CLS] vectors combine", choices=LAYER_COMBINES)
    chunks: str | None = flag(None, "encode a long text window by window, the windows' vectors pooled so "
                              "(instead of --truncation)", choices=CHUNK_POOLINGS)
    max_chunks: int = flag(0, "with --chunks: at most N windows, the first ones and the last (0: all)",
                           type=integer(0, "0: all"))
    train_fraction: float = flag(1.0, "train on a stratified fraction of the training set, drawn by the seed",
                                 type=real(0.0, 1.0, low_open=True))
    seeds: tuple[int, ...] | None = seeds_flag()

    def __post_init__(self) -> None:
        if self.layer_features != "last" and self.pooling != "cls":
            raise ValueError("--layer-features reads [CLS] vectors; --pooling applies to "
                             "--layer-features last")
        if self.layer_features == "last" and self.layer_combine != "concat":
            raise ValueError("--layer-combine applies to several layers (first-4, last-4, all)")
        if self.chunks and self.task in PAIR_TASKS:
            raise ValueError("--chunks splits single texts; sentence pairs use --truncation")
        if self.max_chunks and not self.chunks:
            raise ValueError("--max-chunks needs --chunks")
        if self.max_chunks == 1:
            raise ValueError("--max-chunks is 0 (all) or at least 2 (the first chunks and the last)")


@dataclass(frozen=True)
class LabelSettings:
    """Label-embedding attention (Wang et al. 2020; minbert.label_attention)."""

    label_embedding: bool = flag(False, "label-embedding attention and the label loss")
    label_lambda: float = flag(LABEL_LOSS_WEIGHT, "weight of the label loss, lambda (0: off)",
                               type=non_negative)
    label_layers: str = flag("all", "the layers that use it: all (the paper), last:k, or 0-based indices 4,5",
                             type=nonempty, metavar="LAYERS")
    label_init: str = flag("random", "label embeddings start random, at keywords' mean word embedding, or at "
                           "the class-averaged final [CLS] vector", choices=LABEL_INITS)
    label_keywords: str | None = flag(None, "for --label-init keywords: a ';'-separated group per class, in "
                                      "class order (default: SPECS' in tasks.data.classify_sets)",
                                      type=nonempty, metavar="WORDS")
    label_loss_path: str = flag("direct", "direct: the classifier reads the label embeddings (the paper); "
                                "pooler: through the pooler first (the authors' code)",
                                choices=LABEL_LOSS_PATHS)
    label_loss_reduction: str = flag("sum", "sum over classes (the paper) or mean (the authors' code)",
                                     choices=LABEL_LOSS_REDUCTIONS)

    def __post_init__(self) -> None:
        changed = [f.name for f in dataclasses.fields(self)
                   if f.name != "label_embedding" and getattr(self, f.name) != f.default]
        if changed and not self.label_embedding:
            raise ValueError(f"--{changed[0].replace('_', '-')} needs --label-embedding")
        if self.label_keywords is not None and self.label_init != "keywords":
            raise ValueError("--label-keywords needs --label-init keywords")
        if self.label_layers != "all" and not self.label_layers.startswith("last:") and not all(
                x.strip().isdigit() for x in self.label_layers.split(",")):
            raise ValueError(f"--label-layers must be 'all', 'last:k' or comma-separated indices, "
                             f"got {self.label_layers!r}")

    @property
    def layers(self) -> str | tuple[int, ...] | None:
        """The layers for ClassifyModel: None without --label-embedding, else "all", "last:k" or indices."""
        if not self.label_embedding:
            return None
        if self.label_layers == "all" or self.label_layers.startswith("last:"):
            return self.label_layers
        return tuple(int(x) for x in self.label_layers.split(","))


@dataclass(frozen=True)
class ClassifyRunSettings(RunSettings):
    """The job's settings (settings.py's RunSettings)."""

    classify: ClassifySettings = ClassifySettings()
    label: LabelSettings = LabelSettings()
    job: JobSettings = JobSettings()
    training: TrainingSettings = TrainingSettings()

    def check(self) -> None:
        """What the groups contradict (a ValueError naming the flags)."""
        super().check()
        settings, label = self.classify, self.label
        if (label.label_embedding and settings.layer_combine == "concat"
                and settings.layer_features in ("first-4", "last-4", "all")):
            raise ValueError("--label-embedding's label loss feeds hidden-size vectors to the classifier: "
                             "combine several layers with --layer-combine mean or max")
        if settings.chunks and label.label_embedding and label.label_init == "class-mean":
            raise ValueError("--label-init class-mean averages single windows; use random or keywords with "
                             "--chunks")

    @property
    def padded(self) -> bool:
        # label attention reads the [CLS] row of every padded sequence: it runs on the padded path
        return self.label.label_embedding


def build_parser() -> SettingsParser:
    return SettingsParser("python -m tasks.classify", __doc__, ClassifyRunSettings())


def main(argv: Sequence[str] | None = None) -> int:
    with user_errors():
        settings = parse_settings(build_parser(), argv)
        own, label = settings.classify, settings.label
        run_one_or_seeds("classify", settings, run_one, title=own.task,
                         extra={"task": own.task, "label_embedding": label.label_embedding,
                                "train_fraction": own.train_fraction})
        return 0


if __name__ == "__main__":
    sys.exit(main())
