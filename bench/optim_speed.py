"""Speed of one AdamW step over bert-base-sized parameters: ours against torch.optim.AdamW.

Six implementations take turns on the same parameters and random gradients in one process: FastAdamW's
C kernel (the jobs' default on the CPU: optim/adamw_kernel.c, run by optim/fast_adamw.py), its compiled path
(`adamw_update` through torch.compile, fused=False; the default on a GPU) and the lesson's AdamW, one
parameter at a time (optim/adamw.py), and torch's
for-loop, foreach and fused AdamW. Every optimizer is built and warmed up first (the first step
allocates its state, and builds or compiles ours; its time is printed), then they take single timed steps in
turn (time.perf_counter), so a change in machine load hits all of them alike; the table reports the
fastest and the median milliseconds per step, each also as a ratio to torch's fused step. The target:
our default no slower than torch's fused step (<= 1.0x).
This is a benchmark, not a test: on a busy machine the numbers move, so compare ratios, not times. The
verdict uses the fastest step, as `timeit` advises: slower repeats measure other processes' load, not
the code; the medians are printed beside it for honesty.
It holds one set of parameters and gradients and six optimizer states: about 6.1 GB.

What to expect: the step is memory-bound. The readable path, torch's for-loop and its foreach path make
about eight passes over memory per step (one per operation); torch's fused kernel, our C kernel and our
compiled path (Inductor fuses the seven operations of `adamw_update` into one loop per tensor) read and
write each tensor once, several times faster. The compiled path stays behind fused (about 1.3x on 2 CPU
cores): each of the 199 tensors costs a compiled call (~50 us of guards and wrappers) and starts its own
thread team. The C kernel makes one call per parameter group, and its threads split every tensor without
waiting for each other between tensors.

    python -m bench.optim_speed                  # bert-base shapes, 15 timed steps each
    python -m bench.optim_speed --threads 1      # steadier on a machine shared with other jobs

Read next: optim/fast_adamw.py (the fast paths, and how they are chosen).
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable

import torch
from tqdm import tqdm

from bench.batches import timed
from minbert.config import BertConfig
from minbert.model import BertModel
import optim.fast_adamw as fast_adamw
from optim.adamw import AdamW
from optim.fast_adamw import FastAdamW
from tasks.training.flags import integer, nonempty, positive_int


def bert_base_shapes() -> list[torch.Size]:
    """The parameter shapes of bert-base-uncased (199 tensors, ~109.5M numbers), without allocating it."""
    with torch.device("meta"):  # shapes only: no memory, no initialisation cost
        model = BertModel(BertConfig())
    return [p.shape for p in model.parameters()]


Factory = Callable[[list[torch.Tensor]], torch.optim.Optimizer]


def make_optimizers(lr: float, weight_decay: float) -> dict[str, Factory]:
    """Name -> factory. All use the same hyper-parameters."""
    kw = dict(lr=lr, weight_decay=weight_decay)
    return {
        "minbert C kernel": lambda ps: FastAdamW(ps, **kw),
        "minbert compiled": lambda ps: FastAdamW(ps, **kw, fused=False),
        "minbert readable": lambda ps: AdamW(ps, **kw),
        "torch for-loop": lambda ps: torch.optim.AdamW(ps, **kw, foreach=False),
        "torch foreach": lambda ps: torch.optim.AdamW(ps, **kw, foreach=True),
        "torch fused": lambda ps: torch.optim.AdamW(ps, **kw, fused=True),
    }


def fused_supported(device: torch.device) -> bool:
    """Whether this torch build runs fused AdamW on this device (CPU support arrived in torch 2.4)."""
    p = torch.zeros(2, device=device, requires_grad=True)
    p.grad = torch.ones_like(p)
    try:
        torch.optim.AdamW([p], fused=True).step()
    except (RuntimeError, ValueError):
        return False
    return True


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=positive_int, default=15,
                        help="timed steps per optimizer (default 15)")
    parser.add_argument("--warmup", type=integer(1, "the first step allocates the state"), default=3,
                        help="untimed steps per optimizer first; the first allocates its state (default 3)")
    parser.add_argument("--threads", type=positive_int, default=None,
                        help="torch intra-op threads (default: torch's choice)")
    # torch.device parses it after argparse (a type cannot know every device string torch takes)
    parser.add_argument("--device", type=nonempty, default="cpu",
                        help="device to run on, e.g. cpu or cuda (default cpu)")
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        device = torch.device(args.device)
    except RuntimeError as error:  # torch names the device types it knows
        parser.error(f"argument --device: {error}")
    if device.type == "cuda" and not torch.cuda.is_available():
        parser.error("argument --device: this torch build or machine has no CUDA device")
    if args.threads is not None:
        torch.set_num_threads(args.threads)

    torch.manual_seed(0)
    shapes = bert_base_shapes()
    # One set of parameters and gradients shared by all optimizers: each step changes the values a
    # little, which does not change the work a step does, and sharing saves four copies (1.75 GB).
    params = [torch.randn(s, device=device).mul_(0.02).requires_grad_() for s in shapes]
    for p in params:
        p.grad = torch.randn_like(p).mul_(1e-3)
    numel = sum(p.numel() for p in params)

    factories = make_optimizers(lr=1e-4, weight_decay=0.01)
    if not fused_supported(device):
        print("torch fused AdamW is not supported on this device and torch; left out")
        del factories["torch fused"]
    optimizers = {name: factory(params) for name, factory in factories.items()}
    first_step: dict[str, float] = {}
    for name, optimizer in tqdm(optimizers.items(), desc="warm-up"):
        for _ in range(args.warmup):
            seconds = timed(optimizer.step, device)
            first_step.setdefault(name, seconds)
    times: dict[str, list[float]] = {name: [] for name in optimizers}
    for _ in tqdm(range(args.steps), desc="timed steps"):
        for name, optimizer in optimizers.items():  # interleaved step by step
            times[name].append(timed(optimizer.step, device))

    print(f"\nAdamW step over bert-base shapes: {len(params)} tensors, {numel / 1e6:.1f}M parameters, "
          f"float32, {device}, torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"{args.steps} timed steps each")
    fastest = {name: min(ts) for name, ts in times.items()}
    median = {name: statistics.median(ts) for name, ts in times.items()}
    ref = "torch fused" if "torch fused" in times else "torch foreach"
    print(f"{'implementation':<20}{'fastest ms':>11}{'ratio':>8}{'median ms':>11}{'ratio':>8}")
    for name in times:
        print(f"{name:<20}{fastest[name] * 1e3:>11.1f}{fastest[name] / fastest[ref]:>7.2f}x"
              f"{median[name] * 1e3:>11.1f}{median[name] / median[ref]:>7.2f}x")
    spread = median[ref] / fastest[ref]
    if spread > 1.5:
        print(f"note: the median step of {ref} took {spread:.1f}x its fastest: the machine is busy. "
              "On shared cores, --threads 1 gives steadier numbers (idle threads wait on busy cores).")
    for name in ("minbert C kernel", "minbert compiled"):
        print(f"first step of {name} (allocates the state, builds or compiles): {first_step[name]:.1f} s")
    if fast_adamw.KERNEL_FAILURE is not None:
        print(f"note: the C kernel is unavailable, so 'minbert C kernel' ran the compiled path: "
              f"{fast_adamw.KERNEL_FAILURE}")
    if fast_adamw.COMPILE_FAILURE is not None:
        print("note: compiling failed, so 'minbert compiled' ran the readable path: "
              f"{fast_adamw.COMPILE_FAILURE}")
    default = "minbert C kernel" if device.type == "cpu" else "minbert compiled"
    ratio = fastest[default] / fastest[ref]
    verdict = "meets" if ratio <= 1.0 else "MISSES"
    print(f"{default} (the default here) / {ref} = {ratio:.2f}x (fastest step), "
          f"{median[default] / median[ref]:.2f}x (median): {verdict} the 1.0x target")


if __name__ == "__main__":
    main()
