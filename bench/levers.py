"""One fast path measured alone: with it and without it, taking turns in one process.

Two ways, both turn about (which side goes first alternates), round after round, so that both see the same
machine; speed-up per round: the time without the lever over the time with it, printed as the median of
the rounds and their range.
- The main job's step (default): bench/job_step.py's minbert step (the job's model, batches, dropout, loss,
  clipping, AdamW, schedule, autocast) built twice from the same weights, the lever switched on in one; the
  process's CPU time (time.process_time: with --threads 1 the step's one thread, which other programs on a
  shared machine steal less of than wall time).
- One layer (--layer): a MiniLM-sized BertLayer (hidden 384, 12 heads, intermediate 1536) with the jobs'
  dropout, forward and backward on 64 sequences of 30 tokens under the arm's precision; the calling thread's
  CPU time (time.thread_time). The
  compiled lever (torch.compile, dynamic shapes) prints its compile time first.

    python -m bench.levers --lever fused-qkv --arms full-bf16 --rounds 9 --steps 3 --threads 1 --limit 3200
    python -m bench.levers --lever compile --layer --arms full-bf16 --rounds 30

Everything after the bench's own flags goes to the job's parser. This is a benchmark, not a test: it prints
what it measured on this machine now.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Callable

import torch
from torch import nn

from bench.job_step import ARMS, Minbert
from minbert.config import BertConfig
from minbert.fast.dropout import use_fast_dropout
from experiments.embedding_grad import use_fast_embedding_grad
from experiments.fused_qkv import use_fused_qkv
from minbert.layer import BertLayer
from tasks.training.flags import positive_int
from tasks.training.memory import keep_freed_memory


def compiled(module: nn.Module) -> Callable:
    return torch.compile(module, dynamic=True)  # dynamic: the jobs' batches come in many lengths


# name -> what switches it on for a model (or layer): the module to call from then on
LEVERS: dict[str, Callable[[nn.Module], Callable]] = {
    "fused-qkv": use_fused_qkv, "compile": compiled, "embedding-grad": use_fast_embedding_grad}


def turns(off: Callable[[], None], on: Callable[[], None], rounds: int, clock: Callable[[], float]):
    """Each side's time per round, taking turns; returns (off times, on times)."""
    times: tuple[list[float], list[float]] = ([], [])
    for round_ in range(rounds):
        order = ((off, times[0]), (on, times[1]))
        for side, spent in order if round_ % 2 == 0 else order[::-1]:
            started = clock()
            side()
            spent.append(clock() - started)
    return times


def report(what: str, times: tuple[list[float], list[float]], per: int) -> None:
    speedups = [a / b for a, b in zip(*times)]
    print(f"{what}: off {1000 * statistics.median(times[0]) / per:.1f} ms, on "
          f"{1000 * statistics.median(times[1]) / per:.1f} ms; speed-up {statistics.median(speedups):.2f}x "
          f"({min(speedups):.2f}-{max(speedups):.2f})", flush=True)


def layer_turns(lever: str, precision: str, rounds: int) -> None:
    config = BertConfig(hidden_size=384, num_attention_heads=12, intermediate_size=1536, num_hidden_layers=1)
    off = use_fast_dropout(BertLayer(config)).train()
    on = use_fast_dropout(BertLayer(config)).train()
    on.load_state_dict(off.state_dict())
    on_call = LEVERS[lever](on)
    mask = torch.zeros(64, 1, 1, 30)  # additive: nothing masked

    def step(layer: Callable) -> Callable[[], None]:
        def run() -> None:
            x = torch.randn(64, 30, config.hidden_size, requires_grad=True)  # (B, T, C)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
                out = layer(x, mask).hidden_states
            out.float().sum().backward()
        return run

    started = time.perf_counter()
    step(on_call)()
    print(f"{lever}: first call {time.perf_counter() - started:.1f} s (wall)", flush=True)
    step(off)()
    times = turns(step(off), step(on_call), rounds, time.thread_time)
    report(f"{lever}, one layer forward + backward, {precision}, {rounds} rounds (thread CPU time)", times, 1)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.levers", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    parser.add_argument("--lever", required=True, choices=sorted(LEVERS), help="the fast path to measure")
    parser.add_argument("--arms", default="full-bf16", help=f"comma-separated, of {', '.join(ARMS)}")
    parser.add_argument("--layer", action="store_true", help="one layer, not the job's step (full arms only)")
    parser.add_argument("--rounds", type=positive_int, default=9, help="turns of each side (default 9)")
    parser.add_argument("--steps", type=positive_int, default=3, help="steps of a side per turn (default 3)")
    args, job_argv = parser.parse_known_args(argv)
    for arm in args.arms.split(","):
        if arm not in ARMS:
            raise SystemExit(f"error: --arms: {arm} not among {', '.join(ARMS)}")
        kind, precision = arm.split("-")
        if args.layer:
            torch.set_num_threads(1)
            layer_turns(args.lever, precision, args.rounds)
            continue
        off = Minbert(job_argv + ["--precision", precision], lora=kind == "lora")
        on = Minbert(job_argv + ["--precision", precision], lora=kind == "lora")
        on.model = LEVERS[args.lever](on.model)
        steps = off.steps
        if 1 + args.rounds * args.steps > len(steps):
            raise SystemExit(f"error: the pair tasks have {len(steps)} steps in epoch 1, "
                             f"{1 + args.rounds * args.steps} asked for")
        keep_freed_memory()
        for side in (off, on):  # warm-up: AdamW allocates its state
            side(steps[0])
        chunks = iter(range(2 * args.rounds))

        def side_turn(side: Minbert) -> Callable[[], None]:
            def run() -> None:
                i = next(chunks) // 2  # both sides of a round run the same steps
                for step in steps[1 + i * args.steps:1 + (i + 1) * args.steps]:
                    side(step)
            return run

        times = turns(side_turn(off), side_turn(on), args.rounds, time.process_time)
        report(f"{args.lever} on {arm}, the job's step, {args.rounds} rounds of {args.steps} steps (CPU time)", times,
               args.steps)


if __name__ == "__main__":
    main()
