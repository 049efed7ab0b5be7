"""Token and span classification: named entities on WNUT-17 by BIO tagging (with or without a CRF) or
by spans.

    python -m tasks.tag --method bio
    python -m tasks.tag --method bio-crf --word-decoding mean
    python -m tasks.tag --method span --max-span-width 8 --span-pooling attention
    python -m tasks.tag --method bio --predict my_tweets.conll          # predictions for any CoNLL file

Data: $MINBERT_DATA/wnut17 (or --data-dir): wnut17train.conll for training, emerging.dev.conll for dev (the
test file is not distributed; see its SOURCE.txt). Methods:

- bio: a linear tag classifier over the final hidden state of every piece; training labels per piece
  (--label-pieces all: every piece carries its word's tag; first: only the first, the rest ignored), a word's
  tag from its first piece or the mean of its pieces' distributions (--word-decoding);
  tasks.data.wordpieces.
- bio-crf: the same scores pooled per word (first piece or mean), then a linear-chain CRF
  (tasks.models.crf) trained by maximum likelihood and decoded by Viterbi, with IOB2's invalid transitions
  forbidden.
- span: every span of up to --max-span-width words classified over the types plus NULL
  (tasks.models.spans), decoded greedily without overlaps (--nested allows spans inside spans).

Dev metric: entity-level micro F1 (exact span and type; tasks.evaluation.entities, conlleval's
conventions), which picks the best epoch. The run directory holds, besides what every job writes,
predictions/dev.conll (token, gold, predicted), report.txt (precision / recall / F1 per type and the confusion
between types) and result.json; every --predict file gets predictions/<name>.conll.

Read next: data/wordpieces.py.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, Sequence

import torch
from torch import nn

from minbert.heads import masked_lm_loss
from minbert.loading.atomic import atomic_directory, atomic_write_text
from minbert.model import BertModel
from minbert.text.tokenizer import BertTokenizer
from tasks.data.batching import TokenBatch, bucketed_batches, device_of, pad_batch, predict_in_order
from tasks.data.conll import WNUT17_TYPES, Sentence, bio_tags, read_conll, write_conll
from tasks.data.inputs import not_recorded
from tasks.data.examples import DataFileError
from tasks.data.wordpieces import IGNORE, encode_words, piece_labels, word_index, word_vectors
from tasks.evaluation.entities import (bio_entities, format_report, score_spans, spans_to_bio, token_accuracy,
                                       type_confusion)
from tasks.models.crf import CRF
from tasks.models.spans import POOLINGS, SpanClassifier, decode_spans, enumerate_spans, span_labels
from tasks.training.flags import existing_file, positive_int
from tasks.training.job import JobRun, data_root, parse_settings, user_errors
from tasks.training.seeds import run_one_or_seeds, seeds_flag, write_result
from tasks.training.settings import JobSettings, RunSettings, SettingsParser, TrainingSettings, flag

METHODS = ("bio", "bio-crf", "span")
TRAIN_FILE, DEV_FILE = "wnut17/wnut17train.conll", "wnut17/emerging.dev.conll"


class TagBatch(NamedTuple):
    """Everything every method needs about B sentences; all row-aligned tensors (so torchrun can slice
    them)."""

    tokens: TokenBatch  # (B, T) pieces
    piece_labels: torch.Tensor  # (B, T) tag per piece, IGNORE on [CLS], [SEP], padding (and later pieces)
    word_index: torch.Tensor  # (B, T) the word of each piece, -1 for none
    word_tags: torch.Tensor  # (B, W) tag per word, 0 on padding
    word_mask: torch.Tensor  # (B, W) True for the words that have pieces
    spans: torch.Tensor  # (B, S, 2) (start, end) of every enumerated span, (0, 1) on padding
    span_labels: torch.Tensor  # (B, S) class per span, IGNORE on padding


class EncodedSentence(NamedTuple):
    ids: list[int]
    word_ids: list[int | None]
    words: int  # words with pieces (a prefix of the sentence)
    tags: list[int]  # per word (0 when untagged)
    spans: list[tuple[int, int]]
    span_classes: list[int]


class TaggingModel(nn.Module):
    """BERT encoder + the method's head: a tag classifier (and a CRF), or a span classifier."""

    def __init__(self, bert: BertModel, method: str, tags: Sequence[str], types: Sequence[str],
                 dropout: float, span_pooling: str = "mean") -> None:
        super().__init__()
        self.bert, self.method = bert, method
        hidden = bert.config.hidden_size
        self.dropout = nn.Dropout(dropout)
        if method in ("bio", "bio-crf"):
            self.classifier = nn.Linear(hidden, len(tags))
        if method == "bio-crf":
            self.crf = CRF(len(tags), list(tags))
        if method == "span":
            self.spans = SpanClassifier(hidden, len(types), span_pooling, dropout)

    def pieces(self, tokens: TokenBatch) -> torch.Tensor:
        """(B, T, C) final hidden states."""
        return self.dropout(self.bert(tokens.input_ids, tokens.attention_mask,
                                      tokens.token_type_ids).last_hidden_state)


class TaggingTask:
    """One CoNLL training set and its dev set, for one method."""

    def __init__(self, method: str, tokenizer: BertTokenizer, train: Sequence[Sentence],
                 dev: Sequence[Sentence], batch_size: int, seed: int, max_length: int,
                 label_pieces: str = "all", word_decoding: str = "first",
                 max_span_width: int = 8, nested: bool = False) -> None:
        self.name = "wnut17"
        self.method, self.label_pieces, self.word_decoding = method, label_pieces, word_decoding
        self.tags, self.types = bio_tags(WNUT17_TYPES), WNUT17_TYPES
        self.tokenizer, self.max_length = tokenizer, max_length
        self.max_span_width, self.nested = max_span_width, nested
        self.batch_size, self.seed = batch_size, seed
        self.train_encoded = [self.encode(s) for s in train]
        self.dev = list(dev)
        self.dev_encoded = [self.encode(s) for s in dev]
        cut = sum(len(s.tokens) - e.words
                  for s, e in zip(list(train) + self.dev, self.train_encoded + self.dev_encoded))
        if cut:
            print(f"note: {cut} word(s) beyond the {max_length}-piece window are left out (predicted O)",
                  file=sys.stderr)

    def encode(self, sentence: Sentence) -> EncodedSentence:
        ids, word_ids = encode_words(self.tokenizer, sentence.tokens, self.max_length)
        words = max((w for w in word_ids if w is not None), default=-1) + 1
        tags = [self.tags.index(t) for t in sentence.tags[:words]] if sentence.tags else [0] * words
        spans = enumerate_spans(words, self.max_span_width)
        gold = [s for s in bio_entities([self.tags[t] for t in tags]) if s[2] - s[1] <= self.max_span_width]
        return EncodedSentence(ids, word_ids, words, tags, spans, span_labels(spans, gold, self.types))

    def collate(self, items: Sequence[EncodedSentence]) -> TagBatch:
        tokens = pad_batch([e.ids for e in items], pad_id=self.tokenizer.pad_token_id)
        length = tokens.input_ids.size(1)
        words = max(1, max(e.words for e in items))
        spans = max(1, max(len(e.spans) for e in items))
        labels = [piece_labels(e.tags, e.word_ids, self.label_pieces == "all") for e in items]
        return TagBatch(
            tokens,
            torch.tensor([x + [IGNORE] * (length - len(x)) for x in labels]),
            torch.tensor([word_index(e.word_ids, length) for e in items]),
            torch.tensor([e.tags + [0] * (words - e.words) for e in items]),
            torch.tensor([[True] * e.words + [False] * (words - e.words) for e in items]),
            torch.tensor([e.spans + [(0, 1)] * (spans - len(e.spans))
                          for e in items]).reshape(len(items), spans, 2),
            torch.tensor([e.span_classes + [IGNORE] * (spans - len(e.spans)) for e in items]),
        )

    def train_batches(self, epoch: int) -> list[Any]:
        groups = bucketed_batches([len(e.ids) for e in self.train_encoded], self.batch_size, self.seed, epoch)
        return [self.collate([self.train_encoded[i] for i in g]) for g in groups]

    def word_scores(self, model: TaggingModel, batch: TagBatch) -> torch.Tensor:
        """(B, W, K) tag scores per word, pooled from the pieces (bio-crf)."""
        scores = model.classifier(model.pieces(batch.tokens))
        return word_vectors(scores, batch.word_index, batch.word_tags.size(1), self.word_decoding)[0]

    def loss(self, model: TaggingModel, batch: TagBatch) -> torch.Tensor:
        batch = to_device(batch, device_of(model))
        if self.method == "bio":
            scores = model.classifier(model.pieces(batch.tokens))  # (B, T, K)
            # The mean cross-entropy over the labelled pieces (IGNORE elsewhere): the masked-LM loss's rule.
            return masked_lm_loss(scores, batch.piece_labels)
        if self.method == "bio-crf":
            return model.crf(self.word_scores(model, batch), batch.word_tags, batch.word_mask)
        words = word_vectors(model.pieces(batch.tokens), batch.word_index, batch.word_tags.size(1),
                             "first")[0]
        logits = model.spans(words, batch.spans)  # (B, S, K+1)
        return masked_lm_loss(logits, batch.span_labels)  # over the real spans (IGNORE on padding)

    def predict(self, model: TaggingModel,
                encoded: Sequence[EncodedSentence]) -> list[list[tuple[str, int, int]]]:
        """Predicted entity spans per sentence, in the input's order (words beyond the window: none)."""
        def batch_spans(group: list[int]) -> list[list[tuple[str, int, int]]]:
            batch = to_device(self.collate([encoded[i] for i in group]), device_of(model))
            if self.method == "span":
                words = word_vectors(model.pieces(batch.tokens), batch.word_index, batch.word_tags.size(1),
                                     "first")[0]
                probabilities = model.spans(words, batch.spans).softmax(-1)
                return [decode_spans(probabilities[row, :len(encoded[i].spans)], encoded[i].spans, self.types,
                                     self.nested) for row, i in enumerate(group)]
            if self.method == "bio-crf":
                paths = model.crf.decode(self.word_scores(model, batch), batch.word_mask)
            else:
                scores = model.classifier(model.pieces(batch.tokens)).softmax(-1)
                words, _ = word_vectors(scores, batch.word_index, batch.word_tags.size(1), self.word_decoding)
                paths = [words[row, :encoded[i].words].argmax(-1).tolist() for row, i in enumerate(group)]
            return [bio_entities([self.tags[t] for t in path]) for path in paths]
        return predict_in_order([len(e.ids) for e in encoded], batch_spans)

    def evaluate(self, model: TaggingModel) -> dict[str, float]:
        predicted = self.predict(model, self.dev_encoded)
        gold = [bio_entities(s.tags) for s in self.dev]
        scores = score_spans(gold, predicted)
        report = {k: scores["micro"][k] for k in ("f1", "precision", "recall")}
        report.update({f"f1_{t}": scores["per_type"].get(t, {"f1": 0.0})["f1"] for t in self.types})
        return report

    def write_outputs(self, model: TaggingModel, sentences: Sequence[Sentence], path: Path) -> list:
        """CoNLL predictions for `sentences` (outermost spans when nested); returns the predicted spans."""
        encoded = [self.encode(s) for s in sentences]
        cut = sum(len(s.tokens) - e.words for s, e in zip(sentences, encoded))
        if cut:  # as for the dev set: a word the window cut has no prediction, and the file says O
            print(f"note: {path.name}: {cut} word(s) beyond the {self.max_length}-piece window are left out "
                  "(written as O)", file=sys.stderr)
        predicted = self.predict(model, encoded)
        tags = [spans_to_bio(outermost(spans), len(s.tokens)) for spans, s in zip(predicted, sentences)]
        write_conll(path, sentences, tags)
        return predicted


def to_device(batch: TagBatch, device: torch.device) -> TagBatch:
    return TagBatch(batch.tokens.to(device), *(t.to(device) for t in batch[1:]))


def outermost(spans: Sequence[tuple[str, int, int]]) -> list[tuple[str, int, int]]:
    """Spans not inside another (what a CoNLL file can hold when the span decoder allowed nesting)."""
    return [a for a in spans if not any(b != a and b[1] <= a[1] and a[2] <= b[2] for b in spans)]


# ----- one run ----------------------------------------------------------------------------------------


def run_one(run_settings: TagRunSettings, train_sentences, dev_sentences, out: Path, resume: bool,
            to_predict: Sequence[tuple[Path, list[Sentence]]] = ()) -> dict | None:
    """Train one model with its --seed into `out`; `to_predict`: --predict's files, read already (before
    training: a bad one stops the job before it trains), each with its sentences."""
    settings, job, training = run_settings.tag, run_settings.job, run_settings.training
    seed = training.seed
    with JobRun("tag", run_settings, {"method": settings.method}, out=out, resume=resume) as run:
        train_part = train_sentences[:job.limit] if job.limit else train_sentences
        dev_part = dev_sentences[:job.limit] if job.limit else dev_sentences
        run.write_config(train_sentences=len(train_part), dev_sentences=len(dev_part))
        bert, tokenizer, model_dir = run.load_encoder()
        task = TaggingTask(settings.method, tokenizer, train_part, dev_part, training.batch_size, seed,
                           job.max_length,
                           settings.label_pieces, settings.word_decoding, settings.max_span_width,
                           settings.nested)
        model = TaggingModel(bert, settings.method, task.tags, task.types, job.hidden_dropout_prob,
                             settings.span_pooling)
        heads = {"job": "tag", "method": settings.method, "tags": list(task.tags), "types": list(task.types),
                 "span_pooling": settings.span_pooling, "model": str(model_dir)}
        state = run.train(model, [task], lambda dev: dev["wnut17"]["f1"], tokenizer=tokenizer,
                          head_settings=heads)
        if state is None:  # a torchrun process other than rank 0: done
            return None
        with torch.no_grad(), atomic_directory(run.folder.predictions) as folder:  # whole (atomic.py)
            predicted = task.write_outputs(model, dev_part, folder / "dev.conll")
            for path, sentences in to_predict:
                task.write_outputs(model, sentences, folder / f"{path.stem}.conll")
        gold = [bio_entities(s.tags) for s in dev_part]
        scores, confusion = score_spans(gold, predicted), type_confusion(gold, predicted)
        flat_predicted = [spans_to_bio(outermost(p), len(s.tokens)) for p, s in zip(predicted, dev_part)]
        accuracy = token_accuracy([list(s.tags) for s in dev_part], flat_predicted)
        atomic_write_text(run.folder.path / "report.txt",
                          f"{settings.method} on {DEV_FILE}, best epoch {state.best_epoch}; token "
                          f"accuracy {accuracy:.4f}\n\n{format_report(scores, confusion)}\n")
        print(format_report(scores, confusion), file=sys.stderr)
        result = {"method": settings.method, "seed": seed, "final": state.history[-1]["dev"]["wnut17"],
                  "best": {**state.history[[r["epoch"] for r in state.history]
                                           .index(state.best_epoch)]["dev"]["wnut17"],
                           "token_accuracy": accuracy},
                  "best_epoch": state.best_epoch, "train_seconds": state.history[-1]["elapsed_s"],
                  "confusion": {f"{g} -> {p}": n for (g, p), n in sorted(confusion.items())}}
        write_result(run.folder.path, result)
        return result


def read_any_conll(path: Path, tags: Sequence[str]) -> list[Sentence]:
    """A file to predict: tagged (gold kept for the output) or tokens only."""
    try:
        return read_conll(path, tags, check_iob2=False)
    except DataFileError as error:
        if "no tag" not in str(error):
            raise
        return read_conll(path, tagged=False)


@dataclass(frozen=True)
class TagSettings:
    """The method."""

    method: str = flag("bio", "BIO tagging, BIO with a CRF, or spans", choices=METHODS)
    label_pieces: str = flag("all", "bio: every piece of a word carries its tag in training, or only the "
                             "first", choices=("all", "first"))
    word_decoding: str = flag("first", "bio, bio-crf: a word's scores are its first piece's, or its "
                              "pieces' mean", choices=("first", "mean"))
    max_span_width: int = flag(8, "span: the longest span classified, in words", type=positive_int)
    span_pooling: str = flag("mean", "span: a span's vector, its words' mean or self-attention pooling",
                             choices=POOLINGS)
    nested: bool = flag(False, "span: keep spans inside spans when decoding")
    predict: tuple[str, ...] | None = flag(None, "also predict these CoNLL files (tagged or tokens only)",
                                           type=existing_file, nargs="+", metavar="CONLL",
                                           same_on_resume=False)
    seeds: tuple[int, ...] | None = seeds_flag()

    def __post_init__(self) -> None:
        if self.method != "bio" and self.label_pieces != "all":
            raise ValueError("--label-pieces applies to --method bio (the CRF and the span model work on "
                             "words)")
        if self.method == "span" and self.word_decoding != "first":
            raise ValueError("--word-decoding applies to --method bio and bio-crf")
        if self.method != "span" and (self.nested or self.span_pooling != "mean"):
            raise ValueError("--nested and --span-pooling apply to --method span")


@dataclass(frozen=True)
class TagRunSettings(RunSettings):
    """The job's settings (settings.py's RunSettings)."""

    tag: TagSettings = TagSettings()
    job: JobSettings = JobSettings()
    training: TrainingSettings = TrainingSettings(epochs=3)


def build_parser() -> SettingsParser:
    return SettingsParser("python -m tasks.tag", __doc__, TagRunSettings())


def main(argv: Sequence[str] | None = None) -> int:
    with user_errors():
        settings = parse_settings(build_parser(), argv)
        own = settings.tag
        root = data_root(settings.job.data_dir)
        tags = bio_tags(WNUT17_TYPES)
        train_sentences = read_conll(root / TRAIN_FILE, tags)
        dev_sentences = read_conll(root / DEV_FILE, tags)
        with not_recorded():  # every input is checked before training; --predict's may change on --resume
            to_predict = [(Path(path), read_any_conll(Path(path), tags)) for path in own.predict or []]
        print(f"WNUT-17: {len(train_sentences)} training sentences, {len(dev_sentences)} dev",
              file=sys.stderr)
        run_one_or_seeds("tag", settings,
                         lambda seeded, out, resume: run_one(seeded, train_sentences, dev_sentences, out,
                                                             resume, to_predict),
                         title=f"wnut17 {own.method}", metrics=("f1", "precision", "recall"),
                         extra={"method": own.method})
        return 0


if __name__ == "__main__":
    sys.exit(main())
