"""Speed of our BertModel against transformers' BertModel, on identical weights and inputs.

In one process, at the MiniLM size (hidden 384, 6 layers, 12 heads, intermediate 1536) and the bert-base
size, the models take turns on one batch of 32 sequences padded to the batch's longest, with an
attention mask. Two kinds of batch (--lengths), each with a fixed seed:
- uniform: lengths uniform in [2, 128];
- data: lengths drawn from the course's training data, SST sentences and Quora and STS sentence pairs
  ([CLS] A [SEP] B [SEP]) tokenized with our tokenizer and the embedded checkpoint's vocabulary, cut at
  128 ($MINBERT_DATA/cs224n, or --data-dir). Mostly short, so most of a padded batch is padding.
The runners: transformers' BertModel with SDPA attention (the reference) and with eager attention, and
ours with the padded sdpa kernel and with unpadded execution (minbert/fast/unpadded.py). With --precision
bf16 each also runs under torch.autocast to bfloat16; with --compile, ours unpadded also runs with its
layers compiled by torch.compile. Two modes:
- forward: eval mode under torch.no_grad();
- fwd+bwd: train mode (dropout probabilities are 0 in every model, so train and eval compute the same
  thing) with a backward pass from a fixed random projection of last_hidden_state at the real tokens.
Tokens per second count real (non-padding) tokens only. GFLOP/s count the matmul FLOPs each runner
does (2 m n k for every linear and the two attention matmuls, over all B * T positions when padded and
over the real tokens and each sequence's own length when unpadded; backward = 2x forward), and "% peak"
compares them with the best big matmul measured in the same run in the runner's compute dtype.

Targets, all against transformers SDPA at fp32 on the same batch: ours padded at least 1.0x in both
modes; ours unpadded at fp32 at least 1.4x forward+backward; ours unpadded under bf16 autocast at least
3x forward+backward.

Timing: time.perf_counter around one call (synchronizing an accelerator), warm-up calls first, then
rounds in which every runner runs once, in an order that rotates each round so machine-load drifts hit
all alike; the table reports the median (and min / max) over rounds, and each ratio's range over rounds
shows how noisy the run was. This is a benchmark, not a test: on a busy machine compare ratios, not times.

    python -m bench.model_speed                              # both sizes and kinds of batch, fp32
    python -m bench.model_speed --precision fp32,bf16        # also everything under bf16 autocast
    python -m bench.model_speed --quick                      # a smoke run of a few seconds
    python -m bench.model_speed --sizes minilm --lengths data --repeats 9 --compile
    python -m bench.model_speed --device cuda --precision fp32,bf16

Read next: minbert/fast/unpadded.py (the unpadded path measured here).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import torch
import transformers
from tqdm import tqdm

from bench.batches import Batch, course_lengths, default_data_dir, describe, make_batch, matmul_flops
from minbert.config import BertConfig
from minbert.fast.dropout import use_fast_dropout
from minbert.fast.unpadded import UnpaddedBertModel
from minbert.model import BertModel
from tasks.training.flags import choice_list, existing_dir, integer, non_negative_int, nonempty, positive_int

# Model sizes by name; dropout is 0 so that train mode (for the backward pass) is deterministic.
SIZES: dict[str, BertConfig] = {
    "minilm": BertConfig(hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536,
                         hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0),
    "bert-base": BertConfig(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0),
}
MODES = ("forward", "fwd+bwd")
LENGTHS = ("uniform", "data")
PRECISIONS: dict[str, torch.dtype] = {"fp32": torch.float32, "bf16": torch.bfloat16}
MODELS = ("transformers-sdpa", "transformers-eager", "ours-sdpa", "ours-unpadded")
REFERENCE = "transformers-sdpa"  # at fp32: the runner every target is stated against
# (runner, mode) -> the speed-up over the reference that is the target; "*" is either mode.
TARGETS: dict[tuple[str, str], float] = {("ours-sdpa", "*"): 1.0, ("ours-unpadded", "fwd+bwd"): 1.4,
                                         ("ours-unpadded-bf16", "fwd+bwd"): 3.0}


class Runner(NamedTuple):
    model: torch.nn.Module
    dtype: torch.dtype  # the compute dtype: bfloat16 runs under autocast


class Row(NamedTuple):
    """The timings of one (size, lengths, runner, mode)."""
    size: str
    lengths: str
    name: str
    mode: str
    times: list[float]  # seconds, one per round

    @property
    def median(self) -> float:
        return statistics.median(self.times)


def measure_peak(dtype: torch.dtype, device: torch.device, n: int = 2048, tries: int = 3) -> float:
    """GFLOP/s of the best of `tries` n x n matmuls in `dtype`: the matmul peak we can hope to reach."""
    a, b = (torch.randn(n, n, device=device).to(dtype) for _ in range(2))
    best = float("inf")
    for _ in range(tries):
        best = min(best, timed(lambda: torch.mm(a, b), device))
    return 2 * n ** 3 / best / 1e9


# ----- runners ---------------------------------------------------------------------------------------


def build_runners(config: BertConfig, args: argparse.Namespace, seed: int = 0) -> dict[str, Runner]:
    """Ours and transformers' with one set of random weights, at each precision asked for."""
    torch.manual_seed(seed)
    ours = BertModel(config, attn_implementation="sdpa")
    models: dict[str, torch.nn.Module] = {"ours-sdpa": ours, "ours-unpadded": UnpaddedBertModel(config)}
    for impl in ("sdpa", "eager"):
        hf = transformers.BertModel(transformers.BertConfig(**config.to_dict(), attn_implementation=impl))
        if hf.config._attn_implementation != impl:
            raise RuntimeError(f"transformers picked {hf.config._attn_implementation!r}, not {impl!r}")
        models[f"transformers-{impl}"] = hf
    if args.compile:
        models["ours-unpadded-compiled"] = UnpaddedBertModel(config)
    for name, model in models.items():
        model.load_state_dict(ours.state_dict(), strict=True)  # the same keys, so a strict copy
        model.to(args.device)
        if name.startswith("ours"):
            use_fast_dropout(model)  # as a training job does (at dropout 0 it passes its input on)
    if args.compile:
        # Layer by layer: the model itself finds the real tokens (unpadded.py), a read on the host.
        layers = models["ours-unpadded-compiled"].encoder.layer
        for i, layer in enumerate(layers):
            layers[i] = torch.compile(layer, fullgraph=True, dynamic=True)
    runners = {REFERENCE: Runner(models[REFERENCE], torch.float32)}  # always, at fp32
    for precision in args.precision:
        suffix = "" if precision == "fp32" else f"-{precision}"
        for name, model in models.items():
            runners[name + suffix] = Runner(model, PRECISIONS[precision])
    return runners


def make_step(runner: Runner, mode: str, batch: Batch) -> Callable[[], None]:
    """One call to time: a forward (no_grad, eval) or a forward and backward (train, dropout 0)."""
    model = runner.model
    device_type = batch.input_ids.device.type

    def run() -> torch.Tensor:
        with torch.autocast(device_type, dtype=torch.bfloat16, enabled=runner.dtype == torch.bfloat16):
            return model(batch.input_ids, attention_mask=batch.attention_mask).last_hidden_state

    def forward() -> None:
        model.eval()
        with torch.no_grad():
            run()

    def forward_backward() -> None:
        model.train()
        model.zero_grad(set_to_none=True)
        (run().float() * batch.target).sum().backward()

    return forward if mode == "forward" else forward_backward


def timed(step: Callable[[], object], device: torch.device) -> float:
    """Seconds one call takes, waiting for an accelerator to finish."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    step()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - start


def check_outputs(runners: dict[str, Runner], batch: Batch) -> list[str]:
    """Each runner's largest difference from the reference's output, over real tokens."""
    outputs = {}
    for name, runner in runners.items():
        runner.model.eval()
        with torch.no_grad():
            with torch.autocast(batch.input_ids.device.type, dtype=torch.bfloat16,
                                enabled=runner.dtype == torch.bfloat16):
                outputs[name] = runner.model(batch.input_ids, batch.attention_mask).last_hidden_state.float()
    real = batch.attention_mask.bool()
    reference = outputs[REFERENCE][real]
    return [f"  max |{name} - {REFERENCE}| = {float((out[real] - reference).abs().max()):.1e}"
            f"{'' if out.isfinite().all() else '  (NOT FINITE)'}"
            for name, out in outputs.items() if name != REFERENCE] + [
        f"  (std of the reference's output: {float(reference.std()):.2f})"]


def run_case(size: str, lengths: str, args: argparse.Namespace, peaks: dict[torch.dtype, float],
             pool: list[int] | None) -> tuple[list[Row], Batch, list[str]]:
    """Time every (runner, mode) of one size and kind of batch; returns the rows, batch and checks."""
    config = SIZES[size]
    batch = make_batch(config, args.batch_size, args.max_len, seed=0,
                       pool=pool if lengths == "data" else None)
    batch = Batch(*(t.to(args.device) for t in (batch.input_ids, batch.attention_mask, batch.target)))
    runners = build_runners(config, args)
    for name in [name for name in runners if name.startswith("ours-unpadded-compiled")]:
        start = time.perf_counter()
        make_step(runners[name], "fwd+bwd", batch)()
        print(f"{size} {lengths}: the first call of {name} (compiling) took "
              f"{time.perf_counter() - start:.0f} s")
    checks = check_outputs(runners, batch)
    rows = []
    for mode in MODES:
        steps = {name: make_step(runner, mode, batch) for name, runner in runners.items()}
        for step in steps.values():
            for _ in range(args.warmup):
                step()
        times: dict[str, list[float]] = {name: [] for name in steps}
        names = list(steps)
        for r in tqdm(range(args.repeats), desc=f"{size} {lengths} {mode}", leave=False):
            for dtype in peaks:  # the peak is measured along the way, so it sees the same machine load
                peaks[dtype] = max(peaks[dtype], measure_peak(dtype, args.device))
            for name in names[r % len(names):] + names[:r % len(names)]:  # rotate who goes first
                times[name].append(timed(steps[name], args.device))
        rows += [Row(size, lengths, name, mode, times[name]) for name in names]
    return rows, batch, checks


# ----- report ----------------------------------------------------------------------------------------


def target_verdict(ratio: float, rounds: list[float], target: float) -> str:
    """A target, read with the run's noise: a shortfall smaller than the spread is not a verdict."""
    if ratio >= target:
        return f"  meets the {target}x target"
    if max(rounds) >= target:
        return f"  below {target}x, but within this run's round-to-round spread"
    return f"  MISSES the {target}x target"


def report(rows: list[Row], batches: dict[tuple[str, str], Batch], checks: dict[tuple[str, str], list[str]],
           peaks: dict[torch.dtype, float], args: argparse.Namespace) -> None:
    print(f"\nBertModel speed: ours vs transformers {transformers.__version__}; torch {torch.__version__}, "
          f"{args.device}, {torch.get_num_threads()} threads. Batch {args.batch_size}, padded to the "
          f"longest. Median of {args.repeats} rounds after {args.warmup} warm-up call(s).")
    print("forward = eval mode + no_grad; fwd+bwd = train mode with dropout 0 (every model alike).")
    print("real tok/s counts non-padding tokens; GFLOP/s the matmul FLOPs each runner computes.")
    print("Matmul peak this run (best 2048^3 matmul): "
          + ", ".join(f"{str(dtype).split('.')[-1]} {peak:.0f} GFLOP/s" for dtype, peak in peaks.items()))
    for (size, lengths), batch in batches.items():
        print(f"  {size} {lengths}: {describe(batch.attention_mask.sum(dim=1).cpu())}")
    header = (f"\n{'size':<10}{'lengths':<9}{'runner':<30}{'mode':<9}{'ms min / median / max':>24}"
              f"{'real tok/s':>12}{'GFLOP/s':>9}{'% peak':>8}")
    print(header)
    print("-" * len(header))
    by_key = {(row.size, row.lengths, row.name, row.mode): row for row in rows}
    runners = {row.name: row for row in rows}
    for row in rows:
        batch = batches[row.size, row.lengths]
        lengths = batch.attention_mask.sum(dim=1).tolist()
        dtype = torch.bfloat16 if row.name.endswith("-bf16") else torch.float32
        flops = matmul_flops(SIZES[row.size], lengths, "unpadded" in row.name)
        gflops = flops * (3 if row.mode == "fwd+bwd" else 1) / row.median / 1e9
        spread = " / ".join(f"{t * 1e3:.0f}" for t in (min(row.times), row.median, max(row.times)))
        print(f"{row.size:<10}{row.lengths:<9}{row.name:<30}{row.mode:<9}{spread:>24}"
              f"{batch.real_tokens / row.median:>12.0f}{gflops:>9.1f}{100 * gflops / peaks[dtype]:>7.0f}%")

    print(f"\nSpeed-up over {REFERENCE} at fp32 on the same batch (>1 = faster); in brackets the range of "
          "the per-round ratios:")
    for size, lengths, name, mode in by_key:
        if name == REFERENCE:
            continue
        a, b = by_key[size, lengths, name, mode], by_key[size, lengths, REFERENCE, mode]
        ratio = b.median / a.median
        rounds = [tb / ta for ta, tb in zip(a.times, b.times)]
        target = TARGETS.get((name, mode), TARGETS.get((name, "*")))
        verdict = target_verdict(ratio, rounds, target) if target else ""
        print(f"  {size:<10}{lengths:<9}{mode:<9}{name:<30}{ratio:5.2f}x  "
              f"[{min(rounds):.2f}-{max(rounds):.2f}]"
              f"{verdict}")
    if not any(name in runners for name, _ in TARGETS):
        print("  (no runner with a target was measured)")

    print("\nOutput checks (last_hidden_state, real tokens only):")
    for (size, lengths), lines in checks.items():
        print(f" {size} {lengths}:")
        print("\n".join(lines))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    # The comma lists' defaults are strings, so argparse parses them too: args.sizes etc. are always lists.
    parser.add_argument("--sizes", type=choice_list(tuple(SIZES)), default="minilm,bert-base",
                        help=f"comma-separated model sizes, from {', '.join(SIZES)} (default: both)")
    parser.add_argument("--lengths", type=choice_list(LENGTHS), default="uniform,data",
                        help="comma-separated kinds of batch: uniform (lengths uniform in [2, max-len]) and "
                             "data (lengths of the course's training examples) (default: both)")
    parser.add_argument("--precision", type=choice_list(tuple(PRECISIONS)), default="fp32",
                        help="comma-separated compute precisions, from fp32 and bf16 (bf16: under "
                             "torch.autocast); the reference is always transformers SDPA at fp32 "
                             "(default fp32)")
    # torch.device parses it after argparse (a type cannot know every device string torch takes)
    parser.add_argument("--device", type=nonempty, default="cpu",
                        help="device to run on, e.g. cpu or cuda (default cpu)")
    parser.add_argument("--compile", action="store_true",
                        help="also time ours unpadded with its layers compiled by torch.compile "
                             "(compiling takes minutes on 2 CPU cores)")
    parser.add_argument("--batch-size", type=positive_int, default=None,
                        help="sequences per batch (default 32)")
    # A sequence needs 2 tokens at least; the top, the position table's size, is checked after argparse.
    parser.add_argument("--max-len", type=integer(2), default=None,
                        help="longest sequence length: the uniform range's top and where data lengths are "
                             "cut (default 128)")
    parser.add_argument("--data-dir", type=existing_dir, default=None,
                        help="folder of the course's CSV files (default: $MINBERT_DATA/cs224n, else "
                             "../shared/data/cs224n beside the checkout)")
    parser.add_argument("--repeats", type=positive_int, default=None,
                        help="timed rounds; each runs every runner once per mode (default 5)")
    parser.add_argument("--warmup", type=non_negative_int, default=1,
                        help="untimed calls per runner and mode before the rounds (default 1)")
    parser.add_argument("--threads", type=positive_int, default=None,
                        help="torch intra-op threads (default: torch's choice)")
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run: batch 4, max-len 32, 2 rounds (flags given explicitly still win)")
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    sizes, kinds = args.sizes, args.lengths
    quick = dict(batch_size=4, max_len=32, repeats=2) if args.quick else {}
    defaults = dict(batch_size=32, max_len=128, repeats=5)
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, quick.get(name, value))
    longest = min(c.max_position_embeddings for c in SIZES.values())
    if args.max_len > longest:
        parser.error(f"argument --max-len: must be at most {longest} (the position table), "
                     f"got {args.max_len}")
    try:
        args.device = torch.device(args.device)
    except RuntimeError as error:  # torch names the device types it knows
        parser.error(f"argument --device: {error}")
    if args.device.type == "cuda" and not torch.cuda.is_available():
        parser.error("argument --device: this torch build or machine has no CUDA device")
    if args.threads is not None:
        torch.set_num_threads(args.threads)

    start = time.perf_counter()
    data_dir = Path(args.data_dir) if args.data_dir else default_data_dir()
    pool = course_lengths(data_dir, args.max_len) if "data" in kinds else None
    # Only the precisions asked for: where bf16 is emulated (no AVX-512 BF16 or AMX) one 2048^3 bf16
    # matmul takes about a minute.
    peaks = {PRECISIONS[p]: 0.0 for p in args.precision}
    rows, batches, checks = [], {}, {}
    for size in sizes:
        for kind in kinds:
            case_rows, batches[size, kind], checks[size, kind] = run_case(size, kind, args, peaks, pool)
            rows += case_rows
    report(rows, batches, checks, peaks, args)
    print(f"\nTotal time {time.perf_counter() - start:.0f} s.")


if __name__ == "__main__":
    main()
