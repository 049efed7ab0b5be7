"""Where the main job's training step spends its time, and what share of the matmul peak it reaches.

Builds the main job as `python -m tasks.multitask` does (the same flags, the same defaults, the embedded
model), runs a few warm-up steps, then the first --steps steps of epoch 1 under torch.profiler, exactly as
the training loop runs them (forward, backward, clipping, AdamW, the schedule). Every operator's own CPU time
goes to one row:
- matmuls: the linear layers (aten::mm / addmm) and the attention products (aten::bmm, the batched 4-D
  matmuls of Q K^T and probs V), forward and backward;
- softmax: attention's softmax and its backward;
- elementwise: everything else the forward and backward run (GELU, dropout, LayerNorm, adds, copies, ...);
- the optimizer and clipping: everything inside AdamW's step, the schedule and clip_grad_norm_;
- Python and data: the rest of the wall time (the tasks' loss code, autograd's bookkeeping, moving batches).
The matmul FLOPs of each step (bench.batches.matmul_flops on the padded batch, or on the real tokens for
the unpadded kernel; R-Drop's SST batch counts twice; backward = 2x forward) over the wall time give the
step's GFLOP/s, which the run compares with the best 2048^3 matmul it measures in the step's compute dtype
(bf16 under --precision bf16, else fp32).

    python -m bench.step_profile                           # 200 steps, the job's defaults (--precision auto)
    python -m bench.step_profile --steps 50 --precision fp32 --threads 1 --top 15

Everything after the bench's own --steps / --warmup-steps goes to the job's parser. This is a benchmark, not a
test: it prints what it measured on this machine now.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict

import torch
from torch.profiler import ProfilerActivity, profile, record_function

from bench.batches import matmul_flops
from bench.model_speed import measure_peak
from tasks.data.course import read_splits
from tasks.data.course_files import SPLITS, find_data
from tasks.multitask import TASKS, build_model, with_settings
from tasks.multitask import build_parser as job_parser
from tasks.training.flags import non_negative_int, positive_int
from tasks.training.job import freeze, load_job_encoder
from tasks.training.fast_paths import use_fast_paths
from tasks.training.loop import interleave
from tasks.training.optimizer import build_optimizer, make_schedule
from tasks.training.settings import resolve_settings

REGIONS = ("forward", "backward", "clip", "optimizer")
MATMULS = {"aten::mm": "matmuls: linear layers", "aten::addmm": "matmuls: linear layers",
           "aten::bmm": "matmuls: attention products", "aten::baddbmm": "matmuls: attention products"}
SOFTMAX = ("aten::_softmax", "aten::_softmax_backward_data")


def build_job(argv: list[str]):
    """The main job's model, tasks, optimizer, schedule and epoch-1 steps, as tasks.multitask builds them."""
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
    tasks = {t.name: t for t in task_list}
    optimizer = build_optimizer(model, train)
    steps = interleave({t.name: t.train_batches(0) for t in task_list}, train.sampling, train.seed, 0)
    scheduler = make_schedule(optimizer, train, len(steps) * train.epochs, len(steps))
    return model, tasks, optimizer, scheduler, steps, train, job, settings.multitask.r_drop


def step_flops(config, step, r_drop: float, unpadded: bool) -> int:
    """Forward + backward matmul FLOPs of one step's batches, as the kernel computes them: every position
    of the padded batch (sdpa), or the real tokens alone (unpadded)."""
    total = 0
    for name, (tokens, _) in step:
        copies = 2 if name == "sst" and r_drop else 1  # R-Drop runs SST's batch twice
        lengths = tokens.attention_mask.sum(dim=1).tolist()
        total += 3 * copies * matmul_flops(config, lengths, unpadded)
    return total


def regions_of(events) -> dict[int, str | None]:
    """id(event) -> the REGIONS name it runs inside (None: outside them); each chain of parents is walked
    once."""
    found: dict[int, str | None] = {}
    for event in events:
        chain = []
        while event is not None and id(event) not in found and event.name not in REGIONS:
            chain.append(event)
            event = event.cpu_parent
        region = None if event is None else found.get(id(event), event.name)
        for child in chain:
            found[id(child)] = region
    return found


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.step_profile", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    parser.add_argument("--steps", type=positive_int, default=200, help="steps profiled (default 200)")
    parser.add_argument("--warmup-steps", type=non_negative_int, default=10,
                        help="steps run first, not profiled (default 10: AdamW compiles on its first steps)")
    parser.add_argument("--top", type=non_negative_int, default=0,
                        help="also list the N operators with the most own CPU time (default 0: none)")
    return parser


def main(argv: list[str] | None = None) -> None:
    args, job_argv = build_parser().parse_known_args(argv)
    model, tasks, optimizer, scheduler, steps, train, job, r_drop = build_job(job_argv)
    if args.warmup_steps + args.steps > len(steps):
        raise SystemExit(f"error: an epoch has {len(steps)} steps; ask for fewer")
    weight = {name: task.weight for name, task in tasks.items()}
    trainable = [p for p in model.parameters() if p.requires_grad]
    bf16 = train.precision == "bf16"
    use_fast_paths(model)  # as the job does before its loop
    model.train()

    def run(step) -> None:  # one step of tasks/training/loop.py, one process
        optimizer.zero_grad(set_to_none=True)
        for name, batch in step:
            with record_function("forward"), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                loss = tasks[name].loss(model, batch)
            with record_function("backward"):
                (loss * weight.get(name, 1.0)).backward()
            loss.item()
        with record_function("clip"):
            torch.nn.utils.clip_grad_norm_(trainable, train.max_grad_norm)
        with record_function("optimizer"):
            optimizer.step()
            scheduler.step()

    for step in steps[:args.warmup_steps]:  # AdamW compiles its kernels on its first steps
        run(step)
    profiled = steps[args.warmup_steps:args.warmup_steps + args.steps]
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        started = time.perf_counter()
        for step in profiled:
            run(step)
        wall = time.perf_counter() - started

    rows: dict[str, float] = defaultdict(float)  # seconds
    events = prof.events()
    region_of = regions_of(events)
    for event in events:
        if event.name in REGIONS:
            continue  # a region's own time is Python inside it: counted with the rest of the wall time
        seconds = event.self_cpu_time_total / 1e6
        region = region_of[id(event)]
        if region in ("clip", "optimizer"):
            rows[region] += seconds
        elif event.name in MATMULS:
            rows[MATMULS[event.name]] += seconds
        elif event.name in SOFTMAX:
            rows["softmax"] += seconds
        else:
            rows["elementwise (GELU, dropout, LayerNorm, adds, copies, ...)"] += seconds
    rows["Python and data (the rest of the wall time)"] = wall - sum(rows.values())

    dtype = torch.bfloat16 if bf16 else torch.float32
    peak = measure_peak(dtype, torch.device("cpu"))
    unpadded = job.attn_implementation == "unpadded"
    flops = sum(step_flops(model.bert.config, step, r_drop, unpadded) for step in profiled)
    print(f"\n{len(profiled)} steps of epoch 1 (after {args.warmup_steps} warm-up steps), {train.precision}, "
          f"{torch.get_num_threads()} thread(s): {wall:.1f} s, {1000 * wall / len(profiled):.0f} ms a step")
    counted = "real tokens" if unpadded else "padded batches"
    print(f"matmul FLOPs of the steps ({counted}, forward + backward): {flops / wall / 1e9:.1f} GFLOP/s "
          f"against a {str(dtype).split('.')[-1]} 2048^3 matmul's {peak:.0f} GFLOP/s: "
          f"{100 * flops / wall / 1e9 / peak:.0f}% of peak")
    print(f"\n{'where the time goes':<62}{'s':>8}{'share':>8}")
    for name, seconds in sorted(rows.items(), key=lambda item: -item[1]):
        print(f"{name:<62}{seconds:>8.1f}{100 * seconds / wall:>7.0f}%")
    if args.top:
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.top))


if __name__ == "__main__":
    sys.exit(main())
