"""Training throughput of the multitask job against a plain PyTorch + transformers loop, same data.

In one process, the two loops fine-tune the embedded all-MiniLM-L6-v2 on the first --limit training
examples of SST, Quora and STS, and everything that decides what is learnt is the same: initial encoder
weights, initial head weights (copied), heads and losses (`tasks.multitask.MultitaskBERT`: mean-pooled
SST classifier with cross-entropy, cosine paraphrase head with binary cross-entropy, cosine similarity head
with SBERT's cosine MSE), batch size, round-robin task sampling (one batch of every task per step, losses
summed; `tasks.training.loop.interleave`), parameter groups and learning rates (the job's defaults from
`TrainingSettings`: encoder lr, heads head_lr, no decay on biases and LayerNorm), linear warm-up and decay over
the same number of steps, gradient clipping, and the seed. What differs is how the work is done:

- ours: the job's own code, run as users run it: our `BertModel` (SDPA attention), the job's task rows
  (`tasks/models/course_task.py`) with length-bucketed batches padded only to each batch's longest sequence
  (`tasks/data/batching.py`), our AdamW, inside `tasks.training.loop.train`;
- plain: the loop a student writes: `transformers.BertModel.from_pretrained` (its default attention,
  SDPA), the checkpoint's own tokenizer with every sequence padded to 128 tokens, a `DataLoader` with
  shuffle=True, and `torch.optim.AdamW` (default foreach implementation).

Where the speed-up comes from: sentences here are short (SST about 25 word pieces, Quora and STS questions
about 15), so padding to 128 makes the plain loop spend most of its compute on padding; bucketing puts
sentences of similar length together so that little padding remains. The two encoders compute the same
function at similar speed (`python -m bench.model_speed` compares them alone).

Timing. Only training is timed; evaluation, checkpoint writing and plotting are not. The plain loop's clock
runs from building the optimizer to its last step (batches are formed inside it, tokenising to 128 happens
before, as our tasks tokenise in their constructors). Ours is the training time the loop itself records
per epoch (`train_s` in metrics.jsonl: the steps, without evaluation, checkpoints or plots). Examples per
second count every training example once per epoch (a pair is one example). Ours runs first, then plain;
one run each, so on a busy machine the ratio is noisy: run it on a quiet one.

Dev metrics come from the FULL dev sets (unless --dev-limit), after the last epoch, computed by the same
code for both models (the tasks' `evaluate`: our tokenizer, length-sorted batches) so that only training
differs. Target: ours at least 2x the plain loop's examples per second, dev metrics no worse.

    python -m bench.multitask                      # 1,500 examples per task, 1 epoch: ~10 min on 2 idle cores
    python -m bench.multitask --quick              # a smoke run of both loops, under a minute
    python -m bench.multitask --limit 3000 --epochs 2 --threads 2

Data: --data-dir, else $MINBERT_DATA/cs224n, else ../shared/data/cs224n beside the checkout (as the
Makefile sets it), else the jobs' usual places (`tasks.data.sources.resolve_data_dir`); never the synthetic
sample.

Read next: tasks/data/batching.py (the bucketing), bench/model_speed.py (the encoders alone).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable
from unittest import mock

import torch
import torch.nn.functional as F
import transformers
from torch.utils.data import DataLoader, TensorDataset
from tqdm.auto import tqdm

import tasks.training.loop
from optim.schedules import linear_warmup_decay
from minbert.fast.dropout import use_fast_dropout
from tasks.data.batching import TokenBatch
from tasks.data.course import read_split, task_files
from tasks.data.sources import resolve_data_dir
from minbert.task_heads import cosine_mse_loss
from tasks.models.course_task import RDrop, TaskData
from tasks.multitask import TASKS, MultitaskBERT, overall_score
from tasks.training.flags import existing_dir, integer, non_negative_int, positive_int
from tasks.training.job import load_encoder
from tasks.training.loop import interleave
from tasks.training.optimizer import build_optimizer
from tasks.training.best import head_state
from tasks.training.run_folder import RunDir
from tasks.training.settings import DEFAULT_MODEL, TrainingSettings

PLAIN_LENGTH = 128  # the plain loop pads every sequence to this; also the truncation length of both loops
QUICK = dict(limit=32, batch_size=16, dev_limit=32)  # --quick's settings; flags given explicitly still win
DEFAULTS = dict(limit=1500, batch_size=32, dev_limit=0)


@dataclass
class Result:
    name: str
    train_s: float  # training only: no evaluation, checkpoints or plots
    examples: int  # training examples processed, every epoch counted
    steps: int  # optimizer steps
    dev: dict[str, dict[str, float]]
    eval_s: float  # one evaluation on the dev sets, same code for both models

    @property
    def throughput(self) -> float:
        return self.examples / self.train_s


class Stopwatch:
    """Adds up the time spent inside the functions it wraps."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def wrap(self, function: Callable) -> Callable:
        @functools.wraps(function)
        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - start
        return timed


# ----- data -----------------------------------------------------------------------------------------


# The job's rows with equal task weights and SST's plain cross-entropy, as when this benchmark was written.
ROWS = tuple(replace(t, weight=1.0, loss=RDrop(0.0) if t.name == "sst" else t.loss) for t in TASKS)


def load_data(data_dir: str | None, limit: int, dev_limit: int) -> tuple[dict, str]:
    """(prefix, split) -> examples: the first `limit` training and `dev_limit` dev examples (0: all)."""
    env = dict(os.environ)
    env.setdefault("MINBERT_DATA", str(Path(__file__).resolve().parents[2] / "shared" / "data"))
    source = resolve_data_dir(data_dir, task_files([t.dataset for t in ROWS], ("train", "dev")), env=env)
    if source.is_sample:
        raise SystemExit("error: only the synthetic demo sample was found; a benchmark on it means nothing. "
                         "Pass --data-dir or set MINBERT_DATA.")
    data = {}
    for prefix, dataset in ((t.name, t.dataset) for t in ROWS):
        for split, n in (("train", limit), ("dev", dev_limit)):
            examples = read_split(source.path, dataset, split).examples
            data[prefix, split] = list(examples[:n] if n else examples)
    return data, source.description


def build_tasks(data: dict, tokenizer, batch_size: int, seed: int) -> list:
    """The multitask job's three tasks with its default heads (as `tasks.multitask.main` builds them)."""
    return [TaskData(t, tokenizer, data[t.name, "train"], data[t.name, "dev"], batch_size, seed, PLAIN_LENGTH)
            for t in ROWS]


def evaluate(model: MultitaskBERT, task_list: list) -> tuple[dict, float]:
    """Dev metrics of every task and the seconds they took."""
    start = time.perf_counter()
    model.eval()
    with torch.no_grad():
        dev = {t.name: t.evaluate(model) for t in task_list}
    return dev, time.perf_counter() - start


# ----- ours: the job's own loop ---------------------------------------------------------------------


def run_ours(model: MultitaskBERT, task_list: list, config: TrainingSettings) -> Result:
    """`tasks.training.loop.train` in a throw-away run directory, timed by its own clock: the `train_s` it
    records per epoch (metrics.jsonl) covers the steps and leaves evaluation and saving out."""
    evaluation = Stopwatch()
    torch.manual_seed(config.seed)  # dropout starts from the same random state in both loops
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-multitask-"))
        for task in task_list:  # these task objects only, for this run only
            stack.enter_context(mock.patch.object(task, "evaluate", evaluation.wrap(task.evaluate)))
        state = tasks.training.loop.train(model, task_list, config, RunDir(tmp),
                                          lambda dev: overall_score(ROWS, dev),
                                          save_best=lambda m, d: None)
    examples = sum(len(t.train_labels) for t in task_list) * config.epochs
    train_s = sum(record["train_s"] for record in state.history)
    return Result("ours", train_s, examples, state.global_step,
                  state.history[-1]["dev"], evaluation.seconds / len(state.history))


# ----- plain: the loop a student writes -------------------------------------------------------------


def plain_datasets(data: dict, tokenizer) -> dict[str, TensorDataset]:
    """Every example tokenised once, padded to 128 tokens (the checkpoint's own tokenizer)."""
    def encode(texts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        encoded = tokenizer(texts, padding="max_length", truncation=True, max_length=PLAIN_LENGTH,
                            return_tensors="pt")
        return encoded["input_ids"], encoded["attention_mask"]

    sst = data["sst", "train"]
    datasets = {"sst": TensorDataset(*encode([e.sentence for e in sst]),
                                     torch.tensor([e.label for e in sst]))}
    for name in ("para", "sts"):
        pairs = data[name, "train"]
        datasets[name] = TensorDataset(*encode([e.sentence1 for e in pairs]),
                                       *encode([e.sentence2 for e in pairs]),
                                       torch.tensor([float(e.label) for e in pairs]))
    return datasets


def plain_loss(model: MultitaskBERT, name: str, batch: list[torch.Tensor]) -> torch.Tensor:
    """The same heads and losses as the job's tasks, on (B, 128) batches."""
    if name == "sst":
        ids, mask, labels = batch
        tokens = TokenBatch(ids, mask, torch.zeros_like(ids))
        return F.cross_entropy(model.predict("sst", tokens), labels)
    ids1, mask1, ids2, mask2, labels = batch
    ids, mask = torch.cat([ids1, ids2]), torch.cat([mask1, mask2])  # (2B, 128): u's sentences, then v's
    pair = TokenBatch(ids, mask, torch.zeros_like(ids))
    if name == "para":
        return F.binary_cross_entropy_with_logits(model.predict("para", pair), labels)
    return cosine_mse_loss(model.predict("sts", pair), labels)


def run_plain(model: MultitaskBERT, datasets: dict[str, TensorDataset], config: TrainingSettings,
              task_list: list) -> Result:
    torch.manual_seed(config.seed)
    generator = torch.Generator().manual_seed(config.seed)
    loaders = {name: DataLoader(ds, batch_size=config.batch_size, shuffle=True, generator=generator)
               for name, ds in datasets.items()}
    start = time.perf_counter()
    # The same parameter groups as our loop (encoder lr, head lr, no decay on biases and LayerNorm),
    # handed to torch's AdamW; our AdamW built here only to read its groups.
    groups = [{k: g[k] for k in ("params", "lr", "weight_decay")}
              for g in build_optimizer(model, config).param_groups]
    optimizer = torch.optim.AdamW(groups, lr=config.lr, weight_decay=config.weight_decay)
    steps_per_epoch = max(len(loader) for loader in loaders.values())  # round-robin: the longest task
    total = steps_per_epoch * config.epochs
    scheduler = linear_warmup_decay(optimizer, int(config.warmup * total), total)
    examples = steps = 0
    use_fast_dropout(model)  # as the job does before its loop
    model.train()
    for epoch in range(config.epochs):
        schedule = interleave({name: list(loader) for name, loader in loaders.items()}, "round-robin",
                              config.seed, epoch)
        for step in tqdm(schedule, desc=f"plain epoch {epoch + 1}/{config.epochs}", file=sys.stderr,
                         dynamic_ncols=True, disable=None):
            optimizer.zero_grad(set_to_none=True)
            for name, batch in step:
                plain_loss(model, name, batch).backward()
                examples += len(batch[-1])
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.max_grad_norm)
            optimizer.step()
            scheduler.step()
            steps += 1
    train_s = time.perf_counter() - start
    dev, eval_s = evaluate(model, task_list)
    return Result("plain", train_s, examples, steps, dev, eval_s)


# ----- report ---------------------------------------------------------------------------------------


def report(ours: Result, plain: Result) -> None:
    rows: list[tuple[str, Callable[[Result], float], str]] = [
        ("training examples", lambda r: r.examples, "{:.0f}"),
        ("optimizer steps", lambda r: r.steps, "{:.0f}"),
        ("training wall time (s)", lambda r: r.train_s, "{:.1f}"),
        ("training examples / s", lambda r: r.throughput, "{:.2f}"),
        ("dev evaluation (s)", lambda r: r.eval_s, "{:.1f}"),
        ("SST accuracy", lambda r: r.dev["sst"]["accuracy"], "{:.4f}"),
        ("Quora accuracy", lambda r: r.dev["para"]["accuracy"], "{:.4f}"),
        ("STS Pearson", lambda r: r.dev["sts"]["pearson"], "{:.4f}"),
        ("overall score", lambda r: overall_score(ROWS, r.dev), "{:.4f}"),
    ]
    print(f"\n{'':<24}{'ours':>10}{'plain':>10}{'ours/plain':>12}{'ours-plain':>12}")
    print("-" * 68)
    for label, value, fmt in rows:
        a, b = value(ours), value(plain)
        extra = f"{a / b:>11.2f}x" if "/ s" in label else (f"{a - b:>+12.4f}" if fmt == "{:.4f}" else "")
        print(f"{label:<24}{fmt.format(a):>10}{fmt.format(b):>10}{extra}")
    ratio = ours.throughput / plain.throughput
    gap = overall_score(ROWS, ours.dev) - overall_score(ROWS, plain.dev)
    verdict = "meets" if ratio >= 2 else "MISSES"
    print(f"\nthroughput: ours {ratio:.2f}x the plain loop ({verdict} the 2x target); "
          f"overall dev score ours - plain = {gap:+.4f} ({'no worse' if gap >= 0 else 'worse'}; one seed, so "
          "differences of a point or so are noise)")


# ----- main -----------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.multitask", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    parser.add_argument("--limit", type=integer(0, "0: all"), default=None,
                        help="training examples per task, the first N of each file "
                             f"(default {DEFAULTS['limit']}; 0: all)")
    parser.add_argument("--epochs", type=positive_int, default=1,
                        help="passes over those examples (default 1)")
    parser.add_argument("--batch-size", type=positive_int, default=None,
                        help=f"examples per batch, per task and step (default {DEFAULTS['batch_size']})")
    parser.add_argument("--seed", type=non_negative_int, default=TrainingSettings.seed,
                        help=f"seed of heads, dropout and batch order (default {TrainingSettings.seed})")
    parser.add_argument("--dev-limit", type=integer(0, "0: the full dev sets"), default=None,
                        help="evaluate on the first N dev examples per task (default 0: the full dev sets)")
    parser.add_argument("--threads", type=integer(0, "0: torch's default"), default=0,
                        help="torch CPU threads (default 0: torch's default, one per core)")
    parser.add_argument("--data-dir", type=existing_dir, default=None,
                        help="folder of the course CSV files (default: $MINBERT_DATA/cs224n, else "
                             "../shared/data/cs224n beside the checkout)")
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run of both loops in under a minute: "
                             f"{QUICK['limit']} examples per task, batch {QUICK['batch_size']}, "
                             f"{QUICK['dev_limit']} dev examples per task (flags given explicitly still win)")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    for name, default in DEFAULTS.items():
        if getattr(args, name) is None:
            setattr(args, name, QUICK[name] if args.quick else default)
    if args.threads:
        torch.set_num_threads(args.threads)
    config = TrainingSettings(epochs=args.epochs, batch_size=args.batch_size, seed=args.seed)

    data, description = load_data(args.data_dir, args.limit, args.dev_limit)
    torch.manual_seed(config.seed)
    bert, tokenizer, model_dir = load_encoder(DEFAULT_MODEL)
    ours_model = MultitaskBERT(bert, ROWS)
    hf_bert = transformers.BertModel.from_pretrained(model_dir)  # attention: transformers' default (SDPA)
    plain_model = MultitaskBERT(hf_bert, ROWS)
    plain_model.load_state_dict({**plain_model.state_dict(), **head_state(ours_model)})  # same initial heads
    same = all(torch.equal(p, dict(hf_bert.named_parameters())[n]) for n, p in bert.named_parameters())
    task_list = build_tasks(data, tokenizer, config.batch_size, config.seed)
    datasets = plain_datasets(data, transformers.AutoTokenizer.from_pretrained(model_dir))

    counts = {t.name: len(data[t.name, "train"]) for t in ROWS}
    dev_counts = {t.name: len(data[t.name, "dev"]) for t in ROWS}
    steps = len(interleave({t.name: t.train_batches(0) for t in task_list}, "round-robin", config.seed, 0))
    print(f"multitask training throughput: ours vs plain; torch {torch.__version__} "
          f"({torch.get_num_threads()} threads), transformers {transformers.__version__} "
          f"(attention {hf_bert.config._attn_implementation})\n"
          f"model {DEFAULT_MODEL} ({model_dir}); identical initial encoder weights: {same}\n"
          f"data {description}\n"
          f"train examples per task {counts}, {config.epochs} epoch(s), batch {config.batch_size} per task, "
          f"{steps} steps per epoch (round-robin, losses summed)\n"
          f"lr {config.lr} (heads {config.head_lr}), linear schedule with {config.warmup:.0%} warm-up, clip "
          f"{config.max_grad_norm}, seed {config.seed}; dev examples per task {dev_counts}", flush=True)

    ours = run_ours(ours_model, task_list, config)
    print(f"ours: {ours.train_s:.1f} s of training", file=sys.stderr, flush=True)
    plain = run_plain(plain_model, datasets, config, task_list)
    report(ours, plain)
    return 0


if __name__ == "__main__":
    sys.exit(main())
