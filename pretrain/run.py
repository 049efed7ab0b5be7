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

Heads a checkpoint lacks (the embedded all-MiniLM-L6-v2 has none) start fresh, the decoder tied to the word
embeddings, and the run says so; a fresh head learns at --head-lr 1e-3, a loaded one at --lr. Training uses
the shared loop (tasks.training.loop). Masks and NSP pairs are redrawn every epoch from the seed. Held-out
documents (`--heldout`, 5%) are measured before training and after every epoch; the best epoch by held-out
masked-LM loss (NSP accuracy with --no-mlm) is saved to best/, which the task jobs load with --model.

Read next: ../tasks/multitask.py (fine-tuning the result).
"""

from __future__ import annotations

import math
import random
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NamedTuple, Sequence

import torch
from torch import nn

from minbert.loading.checkpoint import save_model
from minbert.heads import BertForPreTraining, masked_lm_loss, next_sentence_loss
from minbert.loading.hub import resolve_model
from minbert.text.tokenizer import BertTokenizer
from pretrain.corpus import (NO_NSP_LABEL, NSP_MIN_DOCUMENTS, TEXT_FORMATS, Document, PretrainingExample,
                             create_examples, newsgroups_documents, read_text_documents, split_heldout,
                             task_documents, tokenize_documents)
from minbert.masking import IGNORE_INDEX, MASKING_STRATEGIES, MaskingVocab, mask_sequence
from pretrain.span_boundary import SpanBoundaryHead, span_boundary_loss, span_targets
from tasks.data.batching import TokenBatch, bucketed_batches, device_of, pad_batch
from tasks.data.hierarchy import NEWSGROUPS_ARCHIVE
from tasks.data.sources import data_env, resolve_data_dir
from tasks.training.flags import (choice_list, existing_dir, existing_file, integer, model_name_or_path,
                                  output_dir, positive_int, real)
from tasks.training.job import JobRun, check_max_length, parse_settings, user_errors
from tasks.training.settings import (DEFAULT_MODEL, RunSettings, SettingsParser, TrainingSettings, flag,
                                     resolve_training)
from tasks.data.course import read_splits, task_files

COURSE_TASKS = ("sst", "cfimdb", "quora", "sts")
SOURCES = COURSE_TASKS + ("20newsgroups",)
# "multitask": the main job's training text. Domains group related tasks (Sun et al.'s in-domain).
WITHIN = {**{task: [task] for task in SOURCES}, "multitask": ["sst", "quora", "sts"]}
DOMAINS = {"sentiment": ["sst", "cfimdb"], "sentence-pairs": ["quora", "sts"], "news": ["20newsgroups"]}
EVAL_SEED_OFFSET = 1_000_003  # held-out examples use their own seed, fixed for the whole run
MLM_HEAD, NSP_HEAD = "masked-LM head (transform and bias)", "next-sentence classifier"  # BERT §3.1
HEADS = {MLM_HEAD: "cls.predictions.", NSP_HEAD: "cls.seq_relationship."}  # their keys in a checkpoint


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

    The loss decodes only the masked positions (N, V), not all T as BertForPreTraining.forward does: with
    15% masked that skips ~85% of a decoder as wide as the vocabulary, for the same losses
    (tests/test_pretrain.py checks them against transformers').
    """

    def __init__(self, pretraining: BertForPreTraining, span_boundary: SpanBoundaryHead | None = None,
                 mlm: bool = True, nsp: bool = True) -> None:
        super().__init__()
        self.config = pretraining.config
        self.bert, self.cls = pretraining.bert, pretraining.cls
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
        return [collate([examples[i] for i in g], [masked[i] for i in g], self.tokenizer.pad_token_id)
                for g in groups]

    def train_batches(self, epoch: int) -> list[Any]:
        batches = self.make_batches(self.train_documents, self.seed, epoch,
                                    report=f"epoch {epoch + 1} training")
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


def corpus_sources(settings: PretrainSettings) -> list[str]:
    if settings.within:
        return WITHIN[settings.within]
    if settings.in_domain:
        return DOMAINS[settings.in_domain]
    if settings.cross_domain:
        return list(SOURCES)
    return []


def read_corpus(settings: PretrainSettings) -> tuple[list[Document], str]:
    """The documents the flags ask for, and a one-line description of them."""
    documents: list[Document] = []
    parts = []
    sources = corpus_sources(settings)
    course = [s for s in sources if s in COURSE_TASKS]
    if course:
        source = resolve_data_dir(settings.data_dir, task_files(course, settings.splits))
        if source.is_sample:
            print("REMINDER: pre-training on the synthetic demo sample teaches nothing.", file=sys.stderr)
        for task in course:  # resolve_data_dir made sure every asked-for split is there
            for split, examples in read_splits(source, task, settings.strict, settings.limit,
                                                  settings.splits).items():
                documents += task_documents(task, examples)
                parts.append(f"{task} {split} ({len(examples)} rows)")
    if "20newsgroups" in sources:
        root = Path(settings.data_root) if settings.data_root else data_env() or Path("data")
        for split in settings.splits:
            if split == "dev":
                continue  # 20 Newsgroups has train and test only
            posts = newsgroups_documents(root / NEWSGROUPS_ARCHIVE, split)
            posts = posts[:settings.limit] if settings.limit else posts
            documents += posts
            parts.append(f"20newsgroups {split} ({len(posts)} posts)")
    for path in settings.text or []:
        texts = read_text_documents(path, settings.text_format)
        documents += texts
        parts.append(f"{path} ({len(texts)} documents)")
    if not documents:
        raise SystemExit("error: the corpus is empty: give --within, --in-domain, --cross-domain or --text "
                         "(and check that the files hold text)")
    return documents, "; ".join(parts)


def check_enough_documents(total: int, train_documents: Sequence, heldout_documents: Sequence,
                           need: int) -> None:
    """Training and held-out examples are made from separate documents, `need` of them (with text) at least
    in each: one, or two for next-sentence prediction. Too few is a one-line error, before the model loads."""
    usable = [sum(1 for d in documents if any(d)) for documents in (train_documents, heldout_documents)]
    if min(usable) >= need:
        return
    why = ("next-sentence prediction draws its random second segment from another document, so the "
           f"documents to train on and the held-out ones (--heldout) need {need} each" if need > 1 else
           "the documents to train on and the held-out ones (--heldout) need one each")
    fix = f"give at least {2 * need} documents" if sum(usable) < 2 * need else "lower --heldout"
    raise SystemExit(f"error: the corpus has {total} document(s) with {usable[0]} to train on and "
                     f"{usable[1]} held out, too few: {why}; {fix}"
                     + (", or train masked-LM alone with --no-nsp" if need > 1 else ""))


# ----- the command ------------------------------------------------------------------------------


@dataclass(frozen=True)
class PretrainSettings:
    """Corpus and objectives."""

    within: str | None = flag(None, "within-task: one task's text (multitask: SST + Quora + STS)",
                              choices=sorted(WITHIN))
    in_domain: str | None = flag(None, "in-domain: the text of related tasks (" + "; ".join(
        f"{k} = {'+'.join(v)}" for k, v in DOMAINS.items()) + ")", choices=sorted(DOMAINS))
    cross_domain: bool = flag(False, "cross-domain: every source's text")
    text: tuple[str, ...] | None = flag(None, "plain-text files (a blank line between documents)",
                                        type=existing_file, nargs="+")
    text_format: str = flag("plain", "wikitext: a document per ' = Title = ' article",
                            choices=TEXT_FORMATS)
    splits: tuple[str, ...] = flag(("train",), "the task data's splits to read (test text only if named)",
                                   type=choice_list(("train", "dev", "test")))
    heldout: float = flag(0.05, "fraction of the documents held out to choose the best epoch",
                          type=real(0.0, 1.0, low_open=True, high_open=True,
                                    meaning="the best epoch is chosen on held-out documents"))
    data_dir: str | None = flag(None, "the course's CSV files (as tasks.multitask's)", type=existing_dir,
                                same_on_resume=False)
    data_root: str | None = flag(None, "the folder holding 20newsgroups/ (default $MINBERT_DATA)",
                                 type=existing_dir, same_on_resume=False)
    strict: bool = flag(False, "a malformed data row is an error, not a warning", same_on_resume=False)
    limit: int = flag(0, "only the first N rows or posts of each source (0: all)",
                      type=integer(0, "0: every row"))
    model: str = flag(DEFAULT_MODEL, "the checkpoint to start from (name or folder)", type=model_name_or_path)
    max_length: int = flag(128, "window in word pieces, specials included",
                           type=integer(8, "room for text and 3 special tokens"))
    masking: str = flag("token", "token (BERT), whole-word or span (SpanBERT)",
                        choices=MASKING_STRATEGIES)
    mask_prob: float = flag(0.15, "share of positions predicted",
                            type=real(0.0, 1.0, low_open=True, high_open=True))
    max_predictions: int = flag(20, "at most this many per sequence", type=positive_int)
    short_seq_prob: float = flag(0.1, "probability of a shorter target length (BERT: 0.1)",
                                 type=real(0.0, 1.0))
    mlm: bool = flag(True, "the masked-LM objective")
    nsp: bool = flag(True, "the next-sentence objective (as RoBERTa)")
    span_boundary: bool = flag(False, "SpanBERT's span-boundary objective too (needs --masking span)")
    out: str | None = flag(None, "the run's folder (default runs/pretrain/<date-time>)", type=output_dir,
                           same_on_resume=False)


@dataclass(frozen=True)
class PretrainRunSettings(RunSettings):
    """The job's settings (settings.py's RunSettings): no JobSettings, since it trains no task's head."""

    pretrain: PretrainSettings = PretrainSettings()
    # --head-lr's default (None) is decided once the model is loaded: 1e-3 for fresh heads, --lr for loaded
    # ones.
    training: TrainingSettings = TrainingSettings(head_lr=None, eval_first=True)

    def check(self) -> None:
        """Contradictory or missing flags are errors, never silently ignored."""
        settings = self.pretrain
        if not settings.mlm and not settings.nsp:
            raise ValueError("--no-mlm and --no-nsp together leave nothing to train")
        if settings.span_boundary and settings.masking != "span":
            raise ValueError("--span-boundary needs --masking span (it predicts masked spans)")
        if settings.span_boundary and not settings.mlm:
            raise ValueError("--span-boundary predicts masked tokens; it needs the masked-LM (drop --no-mlm)")
        if not settings.mlm and settings.masking != "token":
            raise ValueError("--masking has no effect with --no-mlm")
        if sum(map(bool, (settings.within, settings.in_domain, settings.cross_domain))) > 1:
            raise ValueError("give one of --within, --in-domain and --cross-domain")
        if not (settings.within or settings.in_domain or settings.cross_domain or settings.text):
            raise ValueError("no corpus: give --within, --in-domain, --cross-domain or --text")


def build_parser() -> SettingsParser:
    return SettingsParser("python -m pretrain.run", __doc__, PretrainRunSettings())


def main(argv: Sequence[str] | None = None) -> int:
    with user_errors():
        run_settings = parse_settings(build_parser(), argv, resolve=False)
        settings, training = run_settings.pretrain, run_settings.training
        torch.manual_seed(training.seed)  # before loading: fresh heads are drawn from it
        model_dir = resolve_model(settings.model)
        # The corpus first: reading it is cheaper than loading the model, and an empty one ends the job.
        documents, description = read_corpus(settings)
        print(f"corpus: {description}: {len(documents)} documents", file=sys.stderr)
        tokenizer = BertTokenizer.from_pretrained(model_dir)
        need = NSP_MIN_DOCUMENTS if settings.nsp else 1  # documents in each of the two sets
        train_documents, heldout_documents = split_heldout(tokenize_documents(documents, tokenizer),
                                                           settings.heldout, training.seed, at_least=need)
        check_enough_documents(len(documents), train_documents, heldout_documents, need)
        pretraining, report = BertForPreTraining.from_pretrained(model_dir, return_report=True)
        fresh = {head: any(k.startswith(keys) for k in report.initialised) for head, keys in HEADS.items()}
        if all(fresh.values()):
            print(f"note: {model_dir} has no pre-training heads: the masked-LM transform and the NSP "
                  "classifier start fresh, and the masked-LM decoder is tied to the word embeddings",
                  file=sys.stderr)
        elif any(fresh.values()):  # a BertForMaskedLM's: its trained masked-LM head is kept
            missing, kept = sorted(HEADS, key=lambda head: not fresh[head])
            print(f"note: {model_dir} has no {missing}: it starts fresh; the checkpoint's {kept} is kept",
                  file=sys.stderr)
        if training.head_lr is None:  # a fresh head learns fast; a trained one (a BertForMaskedLM's) is kept
            trained = MLM_HEAD if settings.mlm else NSP_HEAD
            training = replace(training, head_lr=1e-3 if fresh[trained] else training.lr)
        check_max_length(settings.max_length, pretraining.config)
        training = resolve_training(training)
        with JobRun("pretrain", replace(run_settings, training=training), model=settings.model,
                    out=settings.out, seed=False) as run:  # seeded above, before the fresh heads were drawn
            run.write_config(model_dir=str(model_dir), corpus=description)
            task = PretrainingTask(train_documents, heldout_documents, tokenizer,
                                   training.batch_size, training.seed, settings.max_length, settings.masking,
                                   settings.mask_prob, settings.max_predictions, settings.short_seq_prob,
                                   settings.nsp)
            span_boundary = (SpanBoundaryHead(pretraining.config, settings.max_predictions)
                             if settings.span_boundary else None)
            model = PretrainingModel(pretraining, span_boundary, mlm=settings.mlm, nsp=settings.nsp)
            state = run.train(model, [task], pretraining_score,
                              save_best=lambda m, d: save_model(pretraining, d, tokenizer=tokenizer))
            if state is None:  # the other processes of a torchrun launch are done
                return 0
            best = next((r for r in reversed(state.history) if r["best"]), None)
            print(f"best held-out {best['dev']['pretrain'] if best else '(none)'} at epoch "
                  f"{state.best_epoch}\ncheckpoint for the task jobs: --model {run.folder.best}",
                  file=sys.stderr)
            return 0


if __name__ == "__main__":
    sys.exit(main())
