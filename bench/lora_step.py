"""The main job's training step with full fine-tuning and with LoRA, timed in turns in one process.

On a machine other work shares, two runs measured one after the other see different loads; here the arms take
turns (a few steps of each, the same steps, round after round), so each sees the same machine, and the median
step of each arm is compared. The step is tasks/training/loop.py's in one process (forward, backward, clipping,
AdamW, the schedule) on the main job's model as `python -m tasks.multitask` builds it (bench.step_profile);
the LoRA arms put their adapters on a copy of the same model, as `--lora R` does (tasks/training/lora_run.py).
It also prints each arm's trained parameters and the bytes of AdamW's state after the steps.

    python -m bench.lora_step --rounds 6 --steps 5 --precision fp32 --threads 1 --limit 1000

Everything after the bench's own flags goes to the job's parser. This is a benchmark, not a test: it prints
what it measured on this machine now.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time

import torch

from bench.step_profile import build_job
from tasks.training.flags import positive_int
from tasks.training.fast_paths import use_fast_paths
from tasks.training.optimizer import build_optimizer, make_schedule
from tasks.training.lora_run import add_adapters

RANKS = (8, 16)


def state_bytes(optimizer: torch.optim.Optimizer) -> int:
    return sum(t.numel() * t.element_size() for s in optimizer.state.values() for t in s.values()
               if isinstance(t, torch.Tensor))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.lora_step", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    parser.add_argument("--rounds", type=positive_int, default=6, help="turns of every arm (default 6)")
    parser.add_argument("--steps", type=positive_int, default=5, help="steps of an arm per turn (default 5)")
    return parser


def main(argv: list[str] | None = None) -> None:
    args, job_argv = build_parser().parse_known_args(argv)
    model, tasks, _, _, steps, train, job, _ = build_job(job_argv)
    needed = 1 + args.rounds * args.steps  # one warm-up step per arm first
    if needed > len(steps):
        raise SystemExit(f"error: an epoch has {len(steps)} steps, {needed} asked for")
    arms = {"full fine-tuning": model}
    for r in RANKS:
        adapted = copy.deepcopy(model)
        add_adapters(adapted.bert, r, job.lora_alpha, job.lora_dropout, job.lora_targets)
        arms[f"LoRA r = {r}"] = adapted
    weight = {name: task.weight for name, task in tasks.items()}
    timings: dict[str, list[float]] = {name: [] for name in arms}
    optimizers = {}
    for name, arm in arms.items():
        use_fast_paths(arm)
        arm.train()
        optimizer = build_optimizer(arm, train)
        optimizers[name] = (optimizer, make_schedule(optimizer, train, len(steps), len(steps)),
                            [p for p in arm.parameters() if p.requires_grad])

    def run(name: str, step) -> None:  # one step of tasks/training/loop.py (fp32), one process
        arm, (optimizer, scheduler, trainable) = arms[name], optimizers[name]
        optimizer.zero_grad(set_to_none=True)
        for task, batch in step:
            # the tasks compute their loss with the model they are given
            (tasks[task].loss(arm, batch) * weight.get(task, 1.0)).backward()
        torch.nn.utils.clip_grad_norm_(trainable, train.max_grad_norm)
        optimizer.step()
        scheduler.step()

    for name in arms:  # AdamW allocates its state on its first step
        run(name, steps[0])
    for round_ in range(args.rounds):
        chunk = steps[1 + round_ * args.steps:1 + (round_ + 1) * args.steps]
        for name in arms:
            for step in chunk:
                started = time.perf_counter()
                run(name, step)
                timings[name].append(time.perf_counter() - started)
    print(f"{args.rounds} rounds of {args.steps} steps per arm, {train.precision}, {torch.get_num_threads()} "
          f"thread(s), the main job's batches of {train.batch_size}")
    print(f"{'arm':<20}{'median step':>14}{'mean step':>12}{'trained parameters':>22}{'AdamW state':>14}")
    for name, (optimizer, _, trainable) in optimizers.items():
        print(f"{name:<20}{1000 * statistics.median(timings[name]):>11.0f} ms"
              f"{1000 * statistics.mean(timings[name]):>9.0f} ms{sum(p.numel() for p in trainable):>22,}"
              f"{state_bytes(optimizer) / 2**20:>10.2f} MiB")


if __name__ == "__main__":
    main()
