"""Single-sentence sentiment classification on SST (5 classes) or CFIMDB (2 classes).

The course's `classifier.py`, on the shared training loop:

    python -m tasks.sentiment --task sst --option finetune --epochs 3
    python -m tasks.sentiment --task cfimdb --option pretrain --lr 1e-3

It writes into its run directory: config.json, metrics.jsonl, loss_and_dev.png, best/ (the encoder in
Hugging Face format plus the head), and predictions/{task}-{dev,test}-output.csv in the course's format.
`SentimentTask` is reused by the multitask job.

Read next: multitask.py.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Sequence

import torch
from torch import nn

from minbert.model import BertModel
from minbert.tokenizer import BertTokenizer
from tasks.data.batching import TokenBatch, bucketed_batches, device_of, pad_batch, sorted_batches
from tasks.data.course import task_files
from tasks.data.sources import resolve_data_dir
from tasks.evaluation import metrics
from tasks.models.heads import SENTENCE_POOLINGS, SentenceClassifier, classification_loss
from tasks.training.config import add_train_arguments, train_config_from_args
from tasks.data.encoding import encode_texts
from tasks.training.job import (add_job_arguments, check_max_length, default_run_dir, load_encoder,
                                read_splits, train_and_reload_best, user_errors, write_predictions)
from tasks.training.optimizer import freeze
from tasks.training.run_dir import claim_run

NUM_CLASSES = {"sst": 5, "cfimdb": 2}
EVAL_BATCH_SIZE = 128


class SentimentModel(nn.Module):
    """BERT encoder + a sentence classifier head (the course's BertSentimentClassifier)."""

    def __init__(self, bert: BertModel, num_classes: int, dropout: float, pooling: str) -> None:
        super().__init__()
        self.bert = bert
        self.sentiment = SentenceClassifier(bert.config.hidden_size, num_classes, dropout, pooling)

    def predict_sentiment(self, tokens: TokenBatch) -> torch.Tensor:
        """tokens: (B, T) batch. Returns logits (B, K)."""
        output = self.bert(tokens.input_ids, tokens.attention_mask, tokens.token_type_ids)
        return self.sentiment(output, tokens.attention_mask)


class SentimentTask:
    """Sentence classification: cross-entropy training, accuracy on dev."""

    def __init__(self, name: str, tokenizer: BertTokenizer, train: Sequence, dev: Sequence, batch_size: int,
                 seed: int, max_length: int) -> None:
        self.name = name
        self.pad_id = tokenizer.pad_id
        self.batch_size, self.seed = batch_size, seed
        self.train_ids = encode_texts(tokenizer, [e.sentence for e in train], max_length)
        self.train_labels = [e.label for e in train]
        self.dev = dev
        self.dev_ids = encode_texts(tokenizer, [e.sentence for e in dev], max_length)
        self.max_length = max_length
        self.tokenizer = tokenizer

    def train_batches(self, epoch: int) -> list[Any]:
        groups = bucketed_batches([len(ids) for ids in self.train_ids], self.batch_size, self.seed, epoch)
        return [(pad_batch([self.train_ids[i] for i in g], pad_id=self.pad_id),
                 torch.tensor([self.train_labels[i] for i in g])) for g in groups]

    def loss(self, model: nn.Module, batch: Any) -> torch.Tensor:
        """The mean cross-entropy of the model's logits on one batch: (tokens (B, T), labels (B,))."""
        tokens, labels = batch
        device = device_of(model)
        logits = model.predict_sentiment(tokens.to(device))  # (B, K), raw scores
        return classification_loss(logits, labels.to(device))

    def predict(self, model: nn.Module, encoded: Sequence[Sequence[int]]) -> list[int]:
        """Predicted class per sentence, in the input's order (batches sorted by length for speed)."""
        predictions = [0] * len(encoded)
        for group in sorted_batches([len(ids) for ids in encoded], EVAL_BATCH_SIZE):
            tokens = pad_batch([encoded[i] for i in group], pad_id=self.pad_id).to(device_of(model))
            for i, label in zip(group, model.predict_sentiment(tokens).argmax(-1).tolist()):
                predictions[i] = label
        return predictions

    def evaluate(self, model: nn.Module) -> dict[str, float]:
        predictions = self.predict(model, self.dev_ids)
        return {"accuracy": metrics.accuracy(predictions, [e.label for e in self.dev])}

    header = "Predicted_Sentiment"  # the prediction column's name in the course's output files

    def predict_examples(self, model: nn.Module, examples: Sequence) -> list[int]:
        encoded = encode_texts(self.tokenizer, [e.sentence for e in examples], self.max_length)
        return self.predict(model, encoded)

    def write_outputs(self, model: nn.Module, test: Sequence, directory: Path) -> None:
        """Dev and test predictions in the course's format."""
        write_predictions(directory / f"{self.name}-dev-output.csv", self.header,
                          [e.id for e in self.dev], self.predict(model, self.dev_ids))
        if test is not None:
            write_predictions(directory / f"{self.name}-test-output.csv", self.header,
                              [e.id for e in test], self.predict_examples(model, test))


def read_task_data(data_dir, task: str, strict: bool, limit: int):
    """Where the data is, and the train, dev and (when present) test examples of one course task."""
    source = resolve_data_dir(data_dir, task_files([task], ("train", "dev")))
    print(f"data: {source.description}", file=sys.stderr)
    return source, read_splits(source, task, strict, limit)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tasks.sentiment", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    parser.add_argument("--task", choices=sorted(NUM_CLASSES), default="sst", help="which dataset")
    parser.add_argument("--pooling", choices=SENTENCE_POOLINGS, default="mean",
                        help="sentence vector for the classifier: [CLS], mean or max of the tokens, the "
                             "pooler's tanh layer, or attention (weights over the tokens the head learns)")
    add_job_arguments(parser, "sentiment")
    add_train_arguments(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    with user_errors():
        args = build_parser().parse_args(argv)
        config = train_config_from_args(args, freeze_encoder=args.option == "pretrain")
        torch.manual_seed(config.seed)
        out = args.out or default_run_dir("sentiment")
        with claim_run(out, "sentiment", args.model, {"task": args.task}, args.resume) as run:
            source, data = read_task_data(args.data_dir, args.task, args.strict, args.limit)
            run.write_config({**vars(args), "data_path": str(source.path.resolve()),
                              "data_kind": source.kind})
            bert, tokenizer, model_dir = load_encoder(args.model, args.attn_implementation)
            check_max_length(args.max_length, bert.config)
            model = SentimentModel(bert, NUM_CLASSES[args.task], args.hidden_dropout_prob, args.pooling)
            if config.freeze_encoder:
                freeze(model.bert)
            task = SentimentTask(args.task, tokenizer, data["train"], data["dev"], config.batch_size,
                                 config.seed, args.max_length)
            settings = {"job": "sentiment", "task": args.task, "pooling": args.pooling,
                        "model": str(model_dir), "num_classes": NUM_CLASSES[args.task],
                        "data": source.description}
            state = train_and_reload_best(model, [task], config, run, lambda dev: dev[args.task]["accuracy"],
                                          tokenizer, settings, args.resume)
            if state is None:  # a torchrun process other than rank 0: done
                return 0
            with torch.no_grad():
                task.write_outputs(model, data["test"], run.predictions)
            print(f"best dev accuracy {state.best_score:.4f} (epoch {state.best_epoch}); outputs in "
                  f"{run.path}", file=sys.stderr)
            return 0


if __name__ == "__main__":
    sys.exit(main())
