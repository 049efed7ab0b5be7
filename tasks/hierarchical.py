"""Hierarchical multi-label classification with structured (layer-wise guided) classifiers.

    python -m tasks.hierarchical --dataset hwv --variant last-six
    python -m tasks.hierarchical --dataset 20newsgroups --variant flat --seeds 1 2 3
    python -m tasks.hierarchical --dataset trec --layer-map "1:3;2:6"

Datasets and their splits: tasks.data.hierarchy. Variants and the rule that maps them onto any depth:
tasks.models.structured (the map used is printed at the start of a run and saved in config.json). Documents
are encoded `[CLS] text [SEP]`, long ones cut head+tail (Sun et al. 2019) to --max-length pieces.

The dev metric is R-Precision per level, micro (all labels ranked together) and macro (mean of the levels);
the best epoch is picked by micro. At the end the best checkpoint is scored on dev and test, and the run
directory gets, besides what every job writes (config.json, metrics.jsonl, loss_and_dev.png, checkpoints/,
best/):

    rprecision.md          the per-level R-Precision table (dev and test), with documents counted per level
    result.json            the same numbers, plus the layer map
    analysis.json          the layer analysis of the best checkpoint on dev (minbert.extras.analysis),
                           unless --no-analysis; the repository's structured-layers notebook draws it
    predictions/test-output.jsonl   per test document: gold labels and the top-R labels of each level

Read next: ../minbert/extras/analysis.py.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch
from torch import nn

from minbert.extras.analysis import LayerStatistics
from minbert.loading.atomic import atomic_directory, atomic_write_text
from minbert.model import BertModel
from minbert.text.tokenizer import BertTokenizer
from minbert.text.truncation import TRUNCATION_STRATEGIES
from tasks.data.batching import (TokenBatch, bucketed_batches, device_of, encode_texts, pad_batch,
                                 predict_in_order, sorted_batches)
from tasks.data.hierarchy import (DATASETS, SPLITS, HierarchicalData, Hierarchy, LabelledDocument,
                                  label_statistics, read_dataset)
from minbert.metrics import top_labels
from tasks.models.structured import (VARIANTS, LayerMap, StructuredClassifier, describe_layer_map, layer_map,
                                     level_targets, level_weighted_bce, parse_layer_map, r_precision_report)
from tasks.training.flags import nonempty
from tasks.training.job import JobRun, data_root, parse_settings, user_errors
from tasks.training.seeds import run_one_or_seeds, seeds_flag, write_result
from tasks.training.settings import JobSettings, RunSettings, SettingsParser, TrainingSettings, flag

# Documents run to 256 pieces (--max-length), about ten times an SST sentence: 32 of them per prediction
# batch, as many as a training batch holds, rather than batching.py's 128.
DOCUMENT_BATCH_SIZE = 32
SHOWN = ("micro", "macro")


class HierarchicalModel(nn.Module):
    """BERT encoder + one classifier per level over the [CLS] vectors of that level's layers."""

    def __init__(self, bert: BertModel, level_sizes: Sequence[int], layers: LayerMap, dropout: float) -> None:
        super().__init__()
        self.bert = bert
        self.structured = StructuredClassifier(bert.config.hidden_size, level_sizes, layers, dropout)

    def forward(self, tokens: TokenBatch) -> list[torch.Tensor]:
        """Logits per level, (B, K_n) each."""
        output = self.bert(tokens.input_ids, tokens.attention_mask, tokens.token_type_ids,
                           output_hidden_states=True)
        return self.structured(output.hidden_states)


class HierarchicalTask:
    """Level-weighted BCE training; R-Precision per level on dev."""

    def __init__(self, name: str, hierarchy: Hierarchy, tokenizer: BertTokenizer,
                 train: Sequence[LabelledDocument], dev: Sequence[LabelledDocument], batch_size: int,
                 seed: int, max_length: int, truncation: str) -> None:
        self.name, self.hierarchy = name, hierarchy
        self.pad_id = tokenizer.pad_token_id
        self.tokenizer, self.max_length, self.truncation = tokenizer, max_length, truncation
        self.batch_size, self.seed = batch_size, seed
        self.train_ids = self.encode(train)
        self.train_targets = level_targets([d.labels for d in train], hierarchy.levels)  # per level (N, K_n)
        self.dev = list(dev)
        self.dev_ids = self.encode(dev)

    def encode(self, documents: Sequence[LabelledDocument]) -> list[list[int]]:
        return encode_texts(self.tokenizer, [d.text for d in documents], self.max_length, self.truncation)

    def train_batches(self, epoch: int) -> list[Any]:
        groups = bucketed_batches([len(ids) for ids in self.train_ids], self.batch_size, self.seed, epoch)
        return [(pad_batch([self.train_ids[i] for i in g], pad_id=self.pad_id),
                 [t[g] for t in self.train_targets]) for g in groups]

    def loss(self, model: HierarchicalModel, batch: Any) -> torch.Tensor:
        tokens, targets = batch
        device = device_of(model)
        return level_weighted_bce(model(tokens.to(device)), [t.to(device) for t in targets])

    def scores(self, model: HierarchicalModel, ids: Sequence[Sequence[int]]) -> list[np.ndarray]:
        """Sigmoid scores per level, (N, K_n) each, in the input's order."""
        def batch_scores(group: list[int]):  # per document: its scores on every level
            tokens = pad_batch([ids[i] for i in group], pad_id=self.pad_id).to(device_of(model))
            return zip(*(torch.sigmoid(logits.float()).cpu().numpy() for logits in model(tokens)))
        rows = predict_in_order([len(x) for x in ids], batch_scores, DOCUMENT_BATCH_SIZE)
        return [np.array([row[n] for row in rows], dtype=np.float32).reshape(len(ids), len(level))
                for n, level in enumerate(self.hierarchy.levels)]

    def report(self, model: HierarchicalModel, documents: Sequence[LabelledDocument],
               ids: Sequence[Sequence[int]] | None = None) -> dict[str, float]:
        ids = self.encode(documents) if ids is None else ids
        targets = [t.numpy() for t in level_targets([d.labels for d in documents], self.hierarchy.levels)]
        return r_precision_report(self.scores(model, ids), targets)

    def evaluate(self, model: HierarchicalModel) -> dict[str, float]:
        report = self.report(model, self.dev, self.dev_ids)
        return {k: v for k, v in report.items() if not k.endswith("_documents")}  # only scores go in the plot


def rprecision_table(reports: dict[str, dict[str, float]], num_levels: int) -> str:
    """A Markdown table: one row per level, then micro and macro; one column per split."""
    splits = list(reports)
    lines = ["| | " + " | ".join(f"{s} R-Precision | {s} documents" for s in splits) + " |",
             "|---|" + "---:|---:|" * len(splits)]
    for n in range(1, num_levels + 1):
        cells = []
        for s in splits:
            count = reports[s][f"level{n}_documents"]
            # no gold: undefined
            cells.append(f"{100 * reports[s][f'level{n}']:.1f} | {count}" if count else "n/a | 0")
        lines.append(f"| level {n} | " + " | ".join(cells) + " |")
    for name in ("micro", "macro"):
        lines.append(f"| {name} | " + " | ".join(f"{100 * reports[s][name]:.1f} | " for s in splits) + " |")
    return "\n".join(lines) + "\n"


def write_test_predictions(task: HierarchicalTask, model: HierarchicalModel,
                           documents: Sequence[LabelledDocument], path: Path) -> None:
    """One JSON line per document: its gold labels and, per level, the top-R labels (R = gold on the level, 1
    if none)."""
    scores = task.scores(model, task.encode(documents))
    lines = []
    for row, document in enumerate(documents):
        gold_by_level = task.hierarchy.by_level(document.labels)
        ranked = []
        for n, level in enumerate(task.hierarchy.levels):
            r = max(1, len(gold_by_level[n]))
            top = top_labels(scores[n][row], r)
            ranked.append([[level[k], round(float(scores[n][row][k]), 4)] for k in top])
        lines.append(json.dumps({"id": document.id, "gold": sorted(document.labels), "top_r": ranked}))
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, "\n".join(lines) + "\n")


def analyse(model: HierarchicalModel, task: HierarchicalTask) -> dict:
    """minbert.extras.analysis's layer measures on the dev set (eager attention, to get the probabilities)."""
    statistics = LayerStatistics()
    for group in sorted_batches([len(x) for x in task.dev_ids], 8):
        tokens = pad_batch([task.dev_ids[i] for i in group], pad_id=task.pad_id).to(device_of(model))
        output = model.bert(tokens.input_ids, tokens.attention_mask, tokens.token_type_ids,
                            output_hidden_states=True, output_attentions=True)
        statistics.add(output.hidden_states, output.attentions, tokens.attention_mask)
    return statistics.result()


def run_one(run_settings: HierarchicalRunSettings, data: HierarchicalData, out: Path, resume: bool) -> dict:
    """Train one model with its --seed into `out`; returns (and writes) its result.json."""
    settings, job, training = run_settings.hierarchical, run_settings.job, run_settings.training
    seed = training.seed
    with JobRun("hierarchical", run_settings, {"dataset": settings.dataset}, out=out, resume=resume) as run:
        bert, tokenizer, model_dir = run.load_encoder()
        hierarchy = data.hierarchy
        depth, levels = bert.config.num_hidden_layers, hierarchy.num_levels
        try:
            layers = (parse_layer_map(settings.layer_map, depth, levels) if settings.layer_map
                      else layer_map(settings.variant or "flat", depth, levels))
        except ValueError as error:
            raise SystemExit(f"error: --layer-map: {error}") from None
        name = settings.variant_name
        print(f"layer map ({name}, {bert.config.num_hidden_layers} layers, {hierarchy.num_levels} levels): "
              f"{describe_layer_map(layers)}", file=sys.stderr)
        train_docs, dev_docs, test_docs = (data.splits[split][:job.limit or None] for split in SPLITS)
        run.write_config(layer_map_used=[list(g) for g in layers],
                         data=data.description, labels_per_level=[len(level) for level in hierarchy.levels])
        model = HierarchicalModel(bert, [len(level) for level in hierarchy.levels], layers,
                                  job.hidden_dropout_prob)
        task = HierarchicalTask(settings.dataset, hierarchy, tokenizer, train_docs, dev_docs,
                                training.batch_size, seed, job.max_length, settings.truncation)
        if settings.bias_init == "prior":  # (a resumed run then loads its trained biases over these)
            model.structured.init_biases_to_priors(task.train_targets)
        heads = {"job": "hierarchical", "dataset": settings.dataset, "variant": name,
                 "layer_map": [list(g) for g in layers], "levels": hierarchy.levels, "model": str(model_dir)}
        state = run.train(model, [task], lambda dev: dev[settings.dataset]["micro"], tokenizer=tokenizer,
                          head_settings=heads)
        if state is None:  # a torchrun process other than rank 0: done
            return None
        with torch.no_grad():
            reports = {"dev": task.report(model, dev_docs, task.dev_ids),
                       "test": task.report(model, test_docs)}
            with atomic_directory(run.folder.predictions) as folder:  # whole (atomic.py)
                write_test_predictions(task, model, test_docs, folder / "test-output.jsonl")
            if settings.analysis:
                atomic_write_text(run.folder.path / "analysis.json", json.dumps(
                    {"variant": name, "layer_map": [list(g) for g in layers], **analyse(model, task)},
                    indent=1) + "\n")
        table = rprecision_table(reports, hierarchy.num_levels)
        atomic_write_text(run.folder.path / "rprecision.md",
                          f"{settings.dataset}, {name} ({describe_layer_map(layers)}), best epoch "
                          f"{state.best_epoch} by dev micro R-Precision\n\n{table}")
        print(table, file=sys.stderr)
        result = {"dataset": settings.dataset, "variant": name, "seed": seed,
                  "layer_map": [list(g) for g in layers],
                  "final": state.history[-1]["dev"][settings.dataset], "best": reports["dev"],
                  "test_of_best": reports["test"], "best_epoch": state.best_epoch,
                  "train_seconds": state.history[-1]["elapsed_s"]}
        write_result(run.folder.path, result)
        return result


@dataclass(frozen=True)
class HierarchicalSettings:
    """The collection and the layer map."""

    dataset: str | None = flag(None, "which labelled collection", choices=DATASETS, required=True)
    variant: str | None = flag(None, "which layers feed which level (default flat)", choices=VARIANTS)
    layer_map: str | None = flag(None, "a map instead of --variant: 'level:layers;...', both 1-based, e.g. "
                                 "'1:4;2:5,6'", type=nonempty, metavar="MAP")
    truncation: str = flag("head+tail", "what a document longer than --max-length keeps",
                           choices=TRUNCATION_STRATEGIES)
    bias_init: str = flag("prior", "a label's bias starts at the log-odds of its training frequency, or at "
                          "nn.Linear's default", choices=("prior", "default"))
    seeds: tuple[int, ...] | None = seeds_flag()
    analysis: bool = flag(True, "the layer analysis of the best checkpoint on dev", same_on_resume=False)

    def __post_init__(self) -> None:
        if self.layer_map and self.variant:
            raise ValueError("give --variant or --layer-map, not both")

    @property
    def variant_name(self) -> str:
        return "custom" if self.layer_map else self.variant or "flat"


@dataclass(frozen=True)
class HierarchicalRunSettings(RunSettings):
    """The job's settings (settings.py's RunSettings)."""

    hierarchical: HierarchicalSettings = HierarchicalSettings()
    job: JobSettings = JobSettings(max_length=256)
    training: TrainingSettings = TrainingSettings(epochs=5)


def build_parser() -> SettingsParser:
    return SettingsParser("python -m tasks.hierarchical", __doc__, HierarchicalRunSettings())


def main(argv: Sequence[str] | None = None) -> int:
    with user_errors():
        settings = parse_settings(build_parser(), argv)
        own = settings.hierarchical
        root = data_root(settings.job.data_dir)
        data = read_dataset(root, own.dataset)  # file problems: one line, by user_errors
        print(label_statistics(data), file=sys.stderr)
        shown = own.layer_map or own.variant or "flat"
        run_one_or_seeds("hierarchical", settings,
                         lambda seeded, out, resume: run_one(seeded, data, out, resume),
                         title=f"{own.dataset} {shown}", metrics=SHOWN,
                         extra={"dataset": own.dataset, "variant": shown})
        return 0


if __name__ == "__main__":
    sys.exit(main())
