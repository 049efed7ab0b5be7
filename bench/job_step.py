"""The main job's own training step against the same step written with `transformers`, taking turns.

What the jobs train on: a pair task's batch is 32 sentence pairs (64 sentences) grouped by length
(tasks/data/batching.py), so about nine positions in ten are real tokens, with dropout on. Here two steps
take turns on those batches, in one process (a few steps of each, the same steps, round after round, so
that both see the same machine):
- minbert's step exactly as tasks/training/loop.py runs it on the model `python -m tasks.multitask` builds
  (`build_job`): the job's kernel for the precision (--attn-implementation auto), the job's
  dropout (minbert/fast/dropout.py), the task's head and loss, clipping, our AdamW with its fast path, the
  schedule; under bf16, the loop's torch.autocast. LoRA arms add the adapters as `--lora 8` does.
- the reference, as a user writes it: `transformers.BertModel` from the same folder (sdpa attention, train
  mode, so dropout on), mean pooling, SBERT's cosine loss (MSE between cos(u, v) and the label), backward,
  clipping, `torch.optim.AdamW` with its defaults but the job's lr and weight decay; `peft`'s LoRA (r = 8,
  query and value, the job's alpha and dropout) for the LoRA arms; the same autocast.
The steps are the job's epoch-1 steps of the pair tasks (Quora and STS), in the job's order. The job keeps
freed memory for the next step (tasks/training/job.py's keep_freed_memory), a setting of the whole process:
before each turn the bench sets glibc's malloc as each side's own process would have it
(`as_a_plain_process` for the reference; --plain-malloc for minbert too).

Per round, the ratio is the reference's time over minbert's on the same steps; the table gives each arm's
median ratio and its range over the rounds, and each step's share of this CPU's measured matmul peak: the
matmul FLOPs of its batches counted from their shapes (bench.batches.matmul_flops; the positions each kernel
computes: the padded batch for sdpa and transformers, the real tokens for the unpadded kernel; backward
costs 2x forward, so 3x forward in all, except that a frozen weight has no gradient, so under LoRA the linear
layers cost 2x forward) over its median time, against the best 2048^3 matmul of the arm's compute dtype
measured in the same process.

    python -m bench.job_step --rounds 7 --steps 4 --threads 1        # about 6 minutes on one core
    python -m bench.job_step --arms full-bf16 --rounds 9 --threads 1

Everything after the bench's own flags goes to the job's parser (--threads 1, --limit N, ...). This is a
benchmark, not a test: it prints what it measured on this machine now.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F
import transformers

from bench.batches import matmul_flops, measure_peak
from minbert.loading.hub import embedded_model_dir
from minbert.pooling import mean_pool
from tasks.data.course import SPLITS, find_data, read_splits
from tasks.multitask import TASKS, build_model, with_settings
from tasks.multitask import build_parser as job_parser
from tasks.training.flags import choice_list, positive_int
from tasks.training.job import (M_MMAP_MAX, M_TRIM_THRESHOLD, add_adapters, build_optimizer, freeze, glibc,
                                keep_freed_memory, load_job_encoder, use_fast_paths)
from tasks.training.loop import interleave, make_schedule
from tasks.training.settings import resolve_settings

ARMS = ("full-fp32", "full-bf16", "lora-fp32", "lora-bf16")
LORA_RANK = 8
PAIR_TASKS = ("para", "sts")  # the sentence-pair tasks: Quora and STS


def build_job(argv: list[str]):
    """The main job's model, tasks and epoch-1 steps, as tasks.multitask builds them."""
    settings = resolve_settings(job_parser().parse(argv))
    job, train = settings.job, settings.training
    torch.manual_seed(train.seed)
    paths = settings.files.inputs(SPLITS)
    source = find_data(TASKS, job.data_dir, paths, ("train", "dev"))
    data = {t.name: read_splits(source, t.dataset, job.strict, job.limit, splits=("train", "dev"),
                                files=paths[t.name])
            for t in TASKS}
    bert, tokenizer, _ = load_job_encoder(job, pairs=True)
    model, task_list = build_model(with_settings(TASKS, settings.multitask), settings, data, bert, tokenizer)
    if job.freeze_encoder:  # as the job's run does before its loop
        freeze(model.bert)
    steps = interleave({t.name: t.train_batches(0) for t in task_list}, train.sampling, train.seed, 0)
    return model, {t.name: t for t in task_list}, steps, train, job


def step_flops(config, step, unpadded: bool, lora: bool) -> int:
    """Forward + backward matmul FLOPs of one step's batches, as the kernel computes them."""
    total = 0
    for _, (tokens, _) in step:
        lengths = tokens.attention_mask.sum(dim=1).tolist()
        forward = matmul_flops(config, lengths, unpadded)
        squares = sum(n * n for n in lengths) if unpadded else len(lengths) * max(lengths) ** 2
        attention = config.num_hidden_layers * 2 * 2 * squares * config.hidden_size
        # frozen linear weights (LoRA) get no weight gradient: forward + input gradient only
        total += 2 * (forward - attention) + 3 * attention if lora else 3 * forward
    return total


M_MMAP_THRESHOLD = -3
GLIBC_DYNAMIC_MAX = 32 << 20  # glibc's dynamic mmap threshold never rises above 32 MiB (64-bit)


def as_a_plain_process() -> None:
    """glibc's malloc as a process that never called keep_freed_memory has it after a few steps: blocks of
    32 MiB or more mmapped and unmapped when freed, smaller ones from the heap. The reference runs so,
    minbert's step as the loop sets it (tasks/training/job.py's keep_freed_memory). (The heap is not trimmed: a plain
    process's heap keeps the pages its steps use too.)"""
    libc = glibc()
    if libc is not None:
        libc.mallopt(M_MMAP_MAX, 65536)
        libc.mallopt(M_MMAP_THRESHOLD, GLIBC_DYNAMIC_MAX)
        libc.mallopt(M_TRIM_THRESHOLD, 2 * GLIBC_DYNAMIC_MAX)


class Minbert:
    """The job's step on the job's model (a LoRA arm: on a copy with the adapters)."""

    def __init__(self, job_argv: list[str], lora: bool) -> None:
        model, tasks, steps, train, job = build_job(job_argv)
        if lora:
            add_adapters(model.bert, LORA_RANK, job.lora_alpha, job.lora_dropout, job.lora_targets)
        use_fast_paths(model)  # as the job does before its loop
        model.train()
        self.model, self.tasks, self.train, self.job = model, tasks, train, job
        self.optimizer = build_optimizer(model, train)
        self.scheduler = make_schedule(self.optimizer, train, len(steps), len(steps))
        self.trainable = [p for p in model.parameters() if p.requires_grad]
        self.bf16 = train.precision == "bf16"
        self.unpadded = job.attn_implementation == "unpadded"
        self.steps = [s for s in steps if all(name in PAIR_TASKS for name, _ in s)]

    def __call__(self, step) -> None:  # tasks/training/loop.py's step, one process
        self.optimizer.zero_grad(set_to_none=True)
        for name, batch in step:
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.bf16):
                loss = self.tasks[name].loss(self.model, batch)
            if not torch.isfinite(loss):
                raise FloatingPointError(f"the {name} loss became {loss.item()}")
            (loss * self.tasks[name].weight).backward()
            loss.item()
        torch.nn.utils.clip_grad_norm_(self.trainable, self.train.max_grad_norm)
        self.optimizer.step()
        self.scheduler.step()


class Reference:
    """The same step as a user writes it: transformers (sdpa) + mean pooling + cosine loss + torch's AdamW
    (+ peft's LoRA)."""

    def __init__(self, minbert: Minbert, lora: bool) -> None:
        model = transformers.BertModel.from_pretrained(embedded_model_dir(), attn_implementation="sdpa")
        if lora:
            import peft
            job = minbert.job
            config = peft.LoraConfig(r=LORA_RANK, lora_alpha=job.lora_alpha, lora_dropout=job.lora_dropout,
                                     target_modules=["query", "value"])
            model = peft.get_peft_model(model, config)
        model.train()
        self.model, self.bf16 = model, minbert.bf16
        self.trainable = [p for p in model.parameters() if p.requires_grad]
        self.max_grad_norm = minbert.train.max_grad_norm
        self.optimizer = torch.optim.AdamW(self.trainable, lr=minbert.train.lr,
                                           weight_decay=minbert.train.weight_decay)

    def __call__(self, step) -> None:
        self.optimizer.zero_grad(set_to_none=True)
        for name, (tokens, labels) in step:
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.bf16):
                out = self.model(input_ids=tokens.input_ids, attention_mask=tokens.attention_mask,
                                 token_type_ids=tokens.token_type_ids).last_hidden_state
                u, v = mean_pool(out, tokens.attention_mask).chunk(2)  # (B, C) each
                target = labels / 5.0 if name == "sts" else labels
                loss = F.mse_loss(F.cosine_similarity(u, v).float(), target)  # SBERT's CosineSimilarityLoss
            loss.backward()
            loss.item()
        torch.nn.utils.clip_grad_norm_(self.trainable, self.max_grad_norm)
        self.optimizer.step()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.job_step", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    parser.add_argument("--arms", type=choice_list(ARMS), default=",".join(ARMS[:3]),
                        help=f"comma-separated, of {', '.join(ARMS)} (default: the first three)")
    parser.add_argument("--rounds", type=positive_int, default=7, help="turns of every arm (default 7)")
    parser.add_argument("--steps", type=positive_int, default=4, help="steps of a side per turn (default 4)")
    parser.add_argument("--plain-malloc", action="store_true",
                        help="minbert's side without keep_freed_memory's setting too (to measure it)")
    return parser


def main(argv: list[str] | None = None) -> None:
    args, job_argv = build_parser().parse_known_args(argv)
    arms = args.arms
    keep = as_a_plain_process if args.plain_malloc else keep_freed_memory
    sides = {}
    for arm in arms:
        kind, precision = arm.split("-")
        ours = Minbert(job_argv + ["--precision", precision], lora=kind == "lora")
        sides[arm] = (ours, Reference(ours, lora=kind == "lora"))
    steps = next(iter(sides.values()))[0].steps
    needed = 1 + args.rounds * args.steps
    if needed > len(steps):
        raise SystemExit(f"error: the pair tasks have {len(steps)} steps in epoch 1, {needed} asked for")
    for ours, reference in sides.values():  # warm-up: AdamW allocates its state (and builds its kernel)
        keep()
        ours(steps[0])
        as_a_plain_process()
        reference(steps[0])
    # each arm's seconds per step, round by round: (minbert's, the reference's)
    times: dict[str, tuple[list[float], list[float]]] = {arm: ([], []) for arm in arms}
    peaks: dict[torch.dtype, list[float]] = {torch.float32: [], torch.bfloat16: []}  # GFLOP/s, each round
    rounds = [steps[1 + i * args.steps:1 + (i + 1) * args.steps] for i in range(args.rounds)]
    for chunk in rounds:
        for dtype, measured in peaks.items():  # the peak too takes turns: the load moves
            measured.append(measure_peak(dtype, torch.device("cpu"), tries=2))
        for arm, (ours, reference) in sides.items():
            for side, malloc, spent in zip((ours, reference), (keep, as_a_plain_process), times[arm]):
                malloc()  # each side's process as it would be (the loop keeps freed memory)
                started = time.perf_counter()
                for step in chunk:
                    side(step)
                spent.append((time.perf_counter() - started) / len(chunk))
    measured = steps[1:needed]
    real = sum(int(t.attention_mask.sum()) for s in measured for _, (t, _) in s)
    positions = sum(t.attention_mask.numel() for s in measured for _, (t, _) in s)
    print(f"\n{args.rounds} rounds of {args.steps} steps per side, {torch.get_num_threads()} thread(s); the main "
          f"job's Quora and STS batches of {len(measured)} steps: {100 * real / positions:.0f}% of the positions "
          f"are real tokens. Matmul peak (2048^3, each round, median): fp32 "
          f"{statistics.median(peaks[torch.float32]):.0f} GFLOP/s, bf16 {statistics.median(peaks[torch.bfloat16]):.0f}"
          f" GFLOP/s. transformers {transformers.__version__}, torch {torch.__version__}.")
    print("% peak: each round's step FLOP/s over that round's peak, median of the rounds")
    print(f"{'arm':<12}{'minbert kernel':>16}{'minbert ms':>12}{'reference ms':>14}{'ratio (median, range)':>26}"
          f"{'minbert % peak':>16}{'reference % peak':>18}")
    for arm, (ours, reference) in sides.items():
        kind, precision = arm.split("-")
        peak = peaks[torch.bfloat16 if precision == "bf16" else torch.float32]
        config = ours.model.bert.config
        shares = []
        for unpadded, spent in zip((ours.unpadded, False), times[arm]):
            shares.append(statistics.median(
                100 * sum(step_flops(config, s, unpadded, kind == "lora") for s in chunk) / len(chunk)
                / seconds / (gflops * 1e9) for chunk, seconds, gflops in zip(rounds, spent, peak)))
        ms = [statistics.median(t) for t in times[arm]]
        r = [theirs / mine for mine, theirs in zip(*times[arm])]  # round by round
        print(f"{arm:<12}{ours.job.attn_implementation:>16}{1000 * ms[0]:>12.0f}{1000 * ms[1]:>14.0f}"
              f"{statistics.median(r):>13.2f}x ({min(r):.2f}-{max(r):.2f}){shares[0]:>15.0f}%{shares[1]:>17.0f}%")

if __name__ == "__main__":
    main()
