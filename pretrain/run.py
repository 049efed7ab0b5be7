"""Further pre-training with BERT's own objectives: `python -m pretrain.run`.

Sun et al. 2019 ("How to Fine-Tune BERT for Text Classification?" §4.2, §5.4) continue BERT's masked-LM
and next-sentence training on the target task's text (within-task), on text of related tasks
(in-domain) or on all of it (cross-domain), before fine-tuning. Each corpus is one flag:

    python -m pretrain.run --within multitask --epochs 1        # SST + Quora + STS training text
    python -m pretrain.run --within cfimdb --masking whole-word
    python -m pretrain.run --in-domain sentiment                # SST + CFIMDB
    python -m pretrain.run --cross-domain --max-steps 2000      # every task's text and 20 Newsgroups
    python -m pretrain.run --text notes.txt --masking span --span-boundary
    python -m tasks.multitask --model runs/pretrain/<run>/best  # then fine-tune from the result

The model starts from any checkpoint (`--model`); an encoder-only checkpoint, like the embedded
all-MiniLM-L6-v2, gets a freshly initialised masked-LM transform and NSP classifier, the decoder tied to
its word embeddings, and the run says so. Training uses the shared loop (tasks/training/loop.py): our AdamW,
warm-up and decay, progress bars, metrics.jsonl, loss_and_dev.png, atomic checkpoints and --resume.
Examples (NSP pairs and masks) are rebuilt every epoch from the seed, so epochs see different masks.
Held-out documents (`--heldout`, 5% by default) measure masked-LM accuracy and perplexity and NSP
accuracy, before training and after every epoch; the best epoch by held-out masked-LM loss (NSP
accuracy with --no-mlm) is saved in Hugging Face format to best/, which the task jobs load with --model.

Read next: ../tasks/multitask.py (fine-tuning the result).
"""

from __future__ import annotations

import argparse
import math
import os
import random
import sys
from pathlib import Path
from typing import Any, NamedTuple, Sequence

import torch
from torch import nn

from minbert.checkpoint import load_model, save_model
from minbert.heads import BertForPreTraining, masked_lm_loss, next_sentence_loss
from minbert.hub import resolve_model
from minbert.tokenizer import BertTokenizer
from pretrain.corpus import (NO_NSP_LABEL, TEXT_FORMATS, Document, PretrainingExample, create_examples,
                             newsgroups_documents, read_text_documents, split_heldout, task_documents,
                             tokenize_documents)
from pretrain.masking import IGNORE_INDEX, MASKING_STRATEGIES, MaskingVocab, mask_sequence
from pretrain.span_boundary import SpanBoundaryHead, span_boundary_loss, span_targets
from tasks.data.batching import TokenBatch, bucketed_batches, device_of, pad_batch
from tasks.data.course import task_files
from tasks.data.hierarchy import NEWSGROUPS_ARCHIVE
from tasks.data.sources import resolve_data_dir
from tasks.training import distributed
from tasks.training.arguments import (choice_list, existing_dir, existing_file, integer, nonempty, output_dir,
                                     positive_int, real)
from tasks.training.config import add_train_arguments, train_config_from_args
from tasks.training.job import DEFAULT_MODEL, default_run_dir, read_splits, user_errors
from tasks.training.loop import train
from tasks.training.run_dir import claim_run

COURSE_TASKS = ("sst", "cfimdb", "quora", "sts")
SOURCES = COURSE_TASKS + ("20newsgroups",)
# "multitask": the main job's training text. Domains group related tasks (Sun et al.'s in-domain).
WITHIN = {**{task: [task] for task in SOURCES}, "multitask": ["sst", "quora", "sts"]}
DOMAINS = {"sentiment": ["sst", "cfimdb"], "sentence-pairs": ["quora", "sts"], "news": ["20newsgroups"]}
EVAL_SEED_OFFSET = 1_000_003  # held-out examples use their own seed, fixed for the whole run


# ----- the model ----------------------------------------------------------------------------------


class PretrainingLosses(NamedTuple):
    loss: torch.Tensor
    mlm_loss: torch.Tensor | None
    nsp_loss: torch.Tensor | None
    sbo_loss: torch.Tensor | None
    mlm_correct: int  # masked positions whose top prediction is the original token
    mlm_count: int
    nsp_correct: int
    nsp_count: int


class PretrainingModel(nn.Module):
    """BertForPreTraining's encoder and heads (shared, not copied), plus the optional span-boundary head.

    Unlike BertForPreTraining.forward, which decodes all T positions (B, T, V) as Hugging Face does, the
    loss here decodes only the masked positions (N, V): with 15% masked that skips ~85% of the decoder,
    a matrix as wide as the vocabulary. The losses are the same (tests/test_pretrain.py checks them
    against transformers' BertForPreTraining).
    """

    def __init__(self, pretraining: BertForPreTraining, span_boundary: SpanBoundaryHead | None = None,
                 mlm: bool = True, nsp: bool = True) -> None:
        super().__init__()
        self.config = pretraining.config
        self.bert, self.cls = pretraining.bert, pretraining.cls  # the loop finds the encoder at .bert
        self.span_boundary = span_boundary
        self.mlm, self.nsp = mlm, nsp

    def losses(self, batch: "PretrainingBatch") -> PretrainingLosses:
        tokens, labels, nsp_labels = batch.tokens, batch.labels, batch.next_sentence_labels
        encoded = self.bert(tokens.input_ids, tokens.attention_mask, tokens.token_type_ids)
        word_embeddings = self.bert.embeddings.word_embeddings.weight  # the tied decoder, (V, C)
        parts: list[torch.Tensor] = []
        mlm_loss = nsp_loss = sbo_loss = None
        mlm_correct = mlm_count = nsp_correct = nsp_count = 0
        if self.mlm:
            masked = labels != IGNORE_INDEX  # (B, T)
            logits = self.cls.predictions(encoded.last_hidden_state[masked], word_embeddings)  # (N, V)
            targets = labels[masked]  # (N,)
            mlm_loss = masked_lm_loss(logits.float(), targets)  # every one of the N positions is predicted
            mlm_correct, mlm_count = int((logits.argmax(-1) == targets).sum()), int(targets.numel())
            parts.append(mlm_loss)
        has_pair = nsp_labels != NO_NSP_LABEL  # (B,)
        if self.nsp and bool(has_pair.any()):  # a batch of single segments has nothing to classify
            nsp_logits = self.cls.seq_relationship(encoded.pooler_output[has_pair])  # (B', 2)
            nsp_loss = next_sentence_loss(nsp_logits.float(), nsp_labels[has_pair])
            nsp_correct = int((nsp_logits.argmax(-1) == nsp_labels[has_pair]).sum())
            nsp_count = int(has_pair.sum())
            parts.append(nsp_loss)
        if self.span_boundary is not None and batch.span_targets[0].numel():
            sbo_loss = span_boundary_loss(self.span_boundary, encoded.last_hidden_state, labels,
                                          batch.span_targets, word_embeddings)
            parts.append(sbo_loss)
        loss = sum(parts) if parts else encoded.last_hidden_state.sum() * 0.0
        return PretrainingLosses(loss, mlm_loss, nsp_loss, sbo_loss, mlm_correct, mlm_count, nsp_correct,
                                 nsp_count)


# ----- examples and batches -----------------------------------------------------------------------


class PretrainingBatch(NamedTuple):
    tokens: TokenBatch
    labels: torch.Tensor  # (B, T): original ids at masked positions, -100 elsewhere (and at padding)
    next_sentence_labels: torch.Tensor  # (B,): 0 is next, 1 random, -100 single segment
    span_targets: tuple[torch.Tensor, ...]  # span_boundary.span_targets of the masked spans

    def to(self, device) -> "PretrainingBatch":
        return PretrainingBatch(self.tokens.to(device), self.labels.to(device),
                                self.next_sentence_labels.to(device),
                                tuple(t.to(device) for t in self.span_targets))

    def rows(self) -> int:
        return self.labels.size(0)

    def slice_rows(self, start: int, stop: int) -> "PretrainingBatch":
        """Rows start..stop-1 (for data parallelism); the span targets keep theirs, renumbered."""
        rows = self.span_targets[0]
        keep = (rows >= start) & (rows < stop)
        targets = (rows[keep] - start, *(t[keep] for t in self.span_targets[1:]))
        return PretrainingBatch(TokenBatch(*(t[start:stop] for t in self.tokens)), self.labels[start:stop],
                                self.next_sentence_labels[start:stop], targets)


def collate(examples: Sequence[PretrainingExample], masked: Sequence, pad_id: int) -> PretrainingBatch:
    """Pad one batch: the corrupted ids, their labels (-100 at padding), NSP labels, span targets."""
    tokens = pad_batch([m.input_ids for m in masked], [e.token_type_ids for e in examples], pad_id)
    labels = torch.full(tokens.input_ids.shape, IGNORE_INDEX, dtype=torch.long)
    for row, m in enumerate(masked):
        labels[row, :len(m.labels)] = torch.tensor(m.labels, dtype=torch.long)
    nsp = torch.tensor([e.next_sentence_label for e in examples], dtype=torch.long)
    return PretrainingBatch(tokens, labels, nsp, span_targets([m.spans for m in masked]))


class PretrainingTask:
    """The loop's Task: masked-LM and NSP batches built each epoch from tokenised documents."""

    name = "pretrain"

    def __init__(self, train_documents, heldout_documents, tokenizer: BertTokenizer, batch_size: int,
                 seed: int, max_seq_length: int, masking: str, mask_prob: float, max_predictions: int,
                 short_seq_prob: float, nsp: bool) -> None:
        self.train_documents, self.heldout_documents = train_documents, heldout_documents
        self.tokenizer, self.vocab = tokenizer, MaskingVocab.from_tokenizer(tokenizer)
        self.batch_size, self.seed, self.max_seq_length = batch_size, seed, max_seq_length
        self.masking, self.mask_prob, self.max_predictions = masking, mask_prob, max_predictions
        self.short_seq_prob, self.nsp = short_seq_prob, nsp
        self.cls_id, self.sep_id = tokenizer.convert_tokens_to_ids(["[CLS]", "[SEP]"])
        self._cached: tuple[int, list] = (-1, [])
        self.heldout_batches = self.make_batches(heldout_documents, seed + EVAL_SEED_OFFSET, epoch=0,
                                                 report="held-out")

    def make_batches(self, documents, seed: int, epoch: int,
                     report: str | None = None) -> list[PretrainingBatch]:
        rng = random.Random(f"pretrain-{seed}-{epoch}")
        examples, stats = create_examples(documents, self.max_seq_length, rng, self.cls_id, self.sep_id,
                                          self.short_seq_prob, self.nsp)
        if report:
            print(f"{report}: {stats.report()}", file=sys.stderr)
        if not examples:
            raise ValueError(f"the {report or 'training'} documents gave no examples")
        rng.shuffle(examples)
        masked = [mask_sequence(e.input_ids, self.vocab, rng, self.masking, self.mask_prob,
                                self.max_predictions)
                  for e in examples]
        groups = bucketed_batches([len(e.input_ids) for e in examples], self.batch_size, seed, epoch)
        return [collate([examples[i] for i in g], [masked[i] for i in g], self.tokenizer.pad_id)
                for g in groups]

    def train_batches(self, epoch: int) -> list[Any]:
        if self._cached[0] == epoch:  # the loop asks for epoch 0 twice (once to count the steps)
            return self._cached[1]
        batches = self.make_batches(self.train_documents, self.seed, epoch,
                                    report=f"epoch {epoch + 1} training")
        self._cached = (epoch, batches)
        if len(batches) == 1 and batches[0].labels.shape[0] < self.batch_size:
            print(f"note: the corpus gives {batches[0].labels.shape[0]} examples, fewer than --batch-size "
                  f"{self.batch_size}: one smaller batch per epoch", file=sys.stderr)
        return batches

    def loss(self, model: PretrainingModel, batch: PretrainingBatch) -> torch.Tensor:
        return model.losses(batch.to(device_of(model))).loss

    def evaluate(self, model: PretrainingModel) -> dict[str, float]:
        """Held-out masked-LM accuracy and perplexity (per masked token), NSP accuracy."""
        mlm_nll = 0.0
        totals = dict(mlm_correct=0, mlm_count=0, nsp_correct=0, nsp_count=0)
        for batch in self.heldout_batches:
            out = model.losses(batch.to(device_of(model)))
            for key in totals:
                totals[key] += getattr(out, key)
            if out.mlm_loss is not None:
                mlm_nll += out.mlm_loss.item() * out.mlm_count
        metrics = {}
        if totals["mlm_count"]:
            metrics["mlm_loss"] = mlm_nll / totals["mlm_count"]
            metrics["mlm_accuracy"] = totals["mlm_correct"] / totals["mlm_count"]
            metrics["mlm_perplexity"] = math.exp(metrics["mlm_loss"])
        if totals["nsp_count"]:
            metrics["nsp_accuracy"] = totals["nsp_correct"] / totals["nsp_count"]
        return metrics


def pretraining_score(dev: dict[str, dict[str, float]]) -> float:
    """The best epoch: lowest held-out masked-LM loss (so the score is its negative; accuracy moves in
    coarse steps on a small held-out set), or highest NSP accuracy when masked-LM is off."""
    metrics = dev["pretrain"]
    return -metrics["mlm_loss"] if "mlm_loss" in metrics else metrics.get("nsp_accuracy", 0.0)


# ----- the corpus -------------------------------------------------------------------------------


def corpus_sources(args) -> list[str]:
    if args.within:
        return WITHIN[args.within]
    if args.in_domain:
        return DOMAINS[args.in_domain]
    if args.cross_domain:
        return list(SOURCES)
    return []


def read_corpus(args) -> tuple[list[Document], str]:
    """The documents the flags ask for, and a one-line description of them."""
    documents: list[Document] = []
    parts = []
    sources = corpus_sources(args)
    course = [s for s in sources if s in COURSE_TASKS]
    if course:
        source = resolve_data_dir(args.data_dir, task_files(course, args.splits))
        if source.is_sample:
            print("REMINDER: pre-training on the synthetic demo sample teaches nothing.", file=sys.stderr)
        for task in course:  # resolve_data_dir made sure every asked-for split is there
            for split, examples in read_splits(source, task, args.strict, args.limit, args.splits).items():
                documents += task_documents(task, examples)
                parts.append(f"{task} {split} ({len(examples)} rows)")
    if "20newsgroups" in sources:
        root = Path(args.data_root or os.environ.get("MINBERT_DATA", "data"))
        for split in args.splits:
            if split == "dev":
                continue  # 20 Newsgroups has train and test only
            posts = newsgroups_documents(root / NEWSGROUPS_ARCHIVE, split)
            posts = posts[:args.limit] if args.limit else posts
            documents += posts
            parts.append(f"20newsgroups {split} ({len(posts)} posts)")
    for path in args.text or []:
        texts = read_text_documents(path, args.text_format)
        documents += texts
        parts.append(f"{path} ({len(texts)} documents)")
    if not documents:
        raise SystemExit("error: the corpus is empty: give --within, --in-domain, --cross-domain or --text "
                         "(and check that the files hold text)")
    return documents, "; ".join(parts)


# ----- the command ------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m pretrain.run", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    c = parser.add_argument_group("corpus")
    which = c.add_mutually_exclusive_group()
    which.add_argument("--within", choices=sorted(WITHIN),
                       help="within-task: one task's text (multitask: SST + Quora + STS, the main job's)")
    which.add_argument("--in-domain", choices=sorted(DOMAINS), help="in-domain: the text of related tasks "
                       + "; ".join(f"{k} = {'+'.join(v)}" for k, v in DOMAINS.items()))
    which.add_argument("--cross-domain", action="store_true", help="cross-domain: every source's text")
    c.add_argument("--text", type=existing_file, nargs="+", metavar="FILE",
                   help="plain-text files (one sentence or paragraph per line, blank line between documents)")
    c.add_argument("--text-format", choices=TEXT_FORMATS, default="plain",
                   help="wikitext: WikiText's files, a document per ' = Title = ' article")
    c.add_argument("--splits", default="train", type=choice_list(("train", "dev", "test")),
                   help="comma-separated splits of the task data to read (default train; test text is "
                        "used only if you name it here)")
    c.add_argument("--heldout", default=0.05,
                   type=real(0.0, 1.0, low_open=True, high_open=True, meaning="the best epoch is chosen on "
                             "held-out documents"),
                   help="fraction of documents held out for evaluation (whole documents)")
    c.add_argument("--data-dir", type=existing_dir, default=None,
                   help="folder of the course's CSV files (as in tasks.multitask)")
    c.add_argument("--data-root", type=existing_dir, default=None,
                   help="folder holding 20newsgroups/ (default $MINBERT_DATA)")
    c.add_argument("--strict", action="store_true", help="a malformed data row is an error, not a warning")
    c.add_argument("--limit", type=integer(0, "0: every row"), default=0,
                   help="use only the first N rows or posts of each source")
    m = parser.add_argument_group("objectives")
    m.add_argument("--model", type=nonempty, default=DEFAULT_MODEL,
                   help="the checkpoint to start from (name or directory)")
    m.add_argument("--max-length", type=integer(8, "room for text and 3 special tokens"), default=128,
                   help="window in word pieces, specials included")
    m.add_argument("--masking", choices=MASKING_STRATEGIES, default="token",
                   help="token: BERT; whole-word: a word's pieces together; span: SpanBERT's spans")
    m.add_argument("--mask-prob", type=real(0.0, 1.0, low_open=True, high_open=True), default=0.15,
                   help="share of positions predicted")
    m.add_argument("--max-predictions", type=positive_int, default=20, help="at most this many per sequence")
    m.add_argument("--short-seq-prob", type=real(0.0, 1.0), default=0.1,
                   help="probability of a shorter target length for an example (BERT: 0.1)")
    m.add_argument("--no-mlm", dest="mlm", action="store_false", help="train next-sentence prediction only")
    m.add_argument("--no-nsp", dest="nsp", action="store_false", help="train masked-LM only (RoBERTa)")
    m.add_argument("--span-boundary", action="store_true",
                   help="add SpanBERT's span-boundary objective (needs --masking span)")
    m.add_argument("--out", type=output_dir, default=None,
                   help="run directory (default runs/pretrain/<date-time>)")
    add_train_arguments(parser, head_lr_help="learning rate of the heads (default: 1e-3 for freshly "
                        "initialised heads, --lr for heads loaded from the checkpoint)")
    parser.set_defaults(head_lr=None, eval_first=True)
    parser.add_argument("--no-eval-first", dest="eval_first", action="store_false",
                        help="skip the held-out evaluation before training (it runs by default)")
    return parser


def check_flags(args) -> None:
    """Contradictory flags are errors, never silently ignored."""
    if not args.mlm and not args.nsp:
        raise SystemExit("error: --no-mlm and --no-nsp together leave nothing to train")
    if args.span_boundary and args.masking != "span":
        raise SystemExit("error: --span-boundary needs --masking span (it predicts masked spans)")
    if args.span_boundary and not args.mlm:
        raise SystemExit("error: --span-boundary predicts masked tokens; it needs the masked-LM "
                         "(drop --no-mlm)")
    if not args.mlm and args.masking != "token":
        raise SystemExit("error: --masking has no effect with --no-mlm")
    if not (args.within or args.in_domain or args.cross_domain or args.text):
        raise SystemExit("error: no corpus: give --within, --in-domain, --cross-domain or --text")


def main(argv: Sequence[str] | None = None) -> int:
    with user_errors():
        args = build_parser().parse_args(argv)
        check_flags(args)
        torch.manual_seed(args.seed)  # before loading: fresh heads are drawn from it
        model_dir = resolve_model(args.model)
        # The corpus first: reading it is cheaper than loading the model, and an empty one ends the job.
        documents, description = read_corpus(args)
        print(f"corpus: {description}: {len(documents)} documents", file=sys.stderr)
        tokenizer = BertTokenizer.from_pretrained(model_dir)
        train_documents, heldout_documents = split_heldout(tokenize_documents(documents, tokenizer),
                                                           args.heldout, args.seed)
        if not train_documents:
            raise SystemExit(f"error: {len(documents)} document(s) leave nothing to train on after "
                             f"holding out {len(heldout_documents)}; add text or lower --heldout")
        pretraining, report = load_model(model_dir, BertForPreTraining)
        fresh_heads = any(k.startswith("cls.") for k in report.initialised)
        if fresh_heads:
            print(f"note: {model_dir} has no pre-training heads: the masked-LM transform and the NSP "
                  "classifier start fresh, and the masked-LM decoder is tied to the word embeddings",
                  file=sys.stderr)
        if args.head_lr is None:
            args.head_lr = 1e-3 if fresh_heads else args.lr
        if args.max_length > pretraining.config.max_position_embeddings:
            raise SystemExit(f"error: --max-length {args.max_length} exceeds the model's "
                             f"{pretraining.config.max_position_embeddings} positions")
        config = train_config_from_args(args, freeze_encoder=False)
        out = args.out or default_run_dir("pretrain")
        with claim_run(out, "pretrain", args.model, resume=args.resume) as run:
            run.write_config({**vars(args), "model_dir": str(model_dir), "corpus": description})
            task = PretrainingTask(train_documents, heldout_documents, tokenizer,
                                   config.batch_size, config.seed, args.max_length, args.masking,
                                   args.mask_prob, args.max_predictions, args.short_seq_prob, args.nsp)
            span_boundary = (SpanBoundaryHead(pretraining.config, args.max_predictions) if args.span_boundary
                             else None)
            model = PretrainingModel(pretraining, span_boundary, mlm=args.mlm, nsp=args.nsp)
            state = train(model, [task], config, run, pretraining_score,
                          save_best=lambda m, d: save_model(pretraining, d, tokenizer=tokenizer),
                          resume=args.resume)
            if distributed.process_rank() != 0:  # the other processes of a torchrun launch are done
                return 0
            if not config.keep_checkpoints:
                run.drop_checkpoints(state, config.epochs)
            best = next((r for r in reversed(state.history) if r["best"]), None)
            print(f"best held-out {best['dev']['pretrain'] if best else '(none)'} at epoch "
                  f"{state.best_epoch}\ncheckpoint for the task jobs: --model {run.best}", file=sys.stderr)
            return 0


if __name__ == "__main__":
    sys.exit(main())
