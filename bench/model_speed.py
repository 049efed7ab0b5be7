"""Speed of our BertModel against transformers' BertModel (eager and SDPA), on identical weights and inputs.

In one process, at the MiniLM size (hidden 384, 6 layers, 12 heads, intermediate 1536) and the bert-base
size, the models take turns on one batch: 32 sequences with lengths drawn uniformly from 2 to 128 (fixed
seed), padded to the batch's longest with an attention mask. Two modes:
- forward: eval mode under torch.no_grad();
- fwd+bwd: train mode (dropout probabilities are 0 in every model, so train and eval compute the same
  thing) with a backward pass from a fixed random projection of last_hidden_state.
Tokens per second count real (non-padding) tokens only. GFLOP/s count the matmul FLOPs of the padded
batch analytically (2 m n k for every linear and the two attention matmuls; backward = 2x forward), and
"% peak" compares them with the best big `torch.mm` measured in the same run. A fourth runner is our
model under `torch.autocast("cpu", dtype=torch.bfloat16)`; its rows are compared with the bf16 matmul peak.
The target: ours at least 1.0x transformers' SDPA in both modes at fp32.

Timing: time.perf_counter around one call, warm-up calls first, then rounds in which every runner runs
once, in an order that rotates each round so machine-load drifts hit all alike; the table reports the
median (and min / max) over rounds, and each ratio's range over rounds shows how noisy the run was.
This is a benchmark, not a test: on a busy machine compare ratios, not times.

    python -m bench.model_speed                            # both sizes, batch 32, ~5 minutes on 2 cores
    python -m bench.model_speed --quick                    # a smoke run of a few seconds
    python -m bench.model_speed --sizes minilm --repeats 9

Read next: minbert/model.py (the model measured here).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import torch
import transformers
from tqdm import tqdm

from minbert.config import BertConfig
from minbert.model import BertModel

# Model sizes by name; dropout is 0 so that train mode (for the backward pass) is deterministic.
SIZES: dict[str, BertConfig] = {
    "minilm": BertConfig(hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536,
                         hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0),
    "bert-base": BertConfig(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0),
}
MODES = ("forward", "fwd+bwd")
REFERENCE = "transformers-sdpa"  # the model the target is stated against


@dataclass
class Batch:
    input_ids: torch.Tensor  # (B, T), padding id 0 after each sequence's end
    attention_mask: torch.Tensor  # (B, T), 1 = token, 0 = padding
    target: torch.Tensor  # (B, T, C) fixed random weights: loss = sum(last_hidden_state * target) on tokens

    @property
    def real_tokens(self) -> int:
        return int(self.attention_mask.sum())


class Row(NamedTuple):
    """The timings of one (size, runner, mode)."""
    size: str
    name: str
    mode: str
    dtype: torch.dtype  # the compute dtype, whose matmul peak "% peak" refers to
    times: list[float]  # seconds, one per round
    batch: Batch

    @property
    def median(self) -> float:
        return statistics.median(self.times)


def make_batch(config: BertConfig, batch_size: int, max_len: int, seed: int = 0) -> Batch:
    """Lengths uniform in [2, max_len] (at least [CLS] and [SEP]), padded to the longest."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(2, max_len + 1, (batch_size,), generator=g)
    T = int(lengths.max())
    mask = (torch.arange(T)[None, :] < lengths[:, None]).long()  # (B, T)
    ids = torch.randint(1, config.vocab_size, (batch_size, T), generator=g) * mask
    target = torch.randn(batch_size, T, config.hidden_size, generator=g) * mask[..., None]
    return Batch(ids, mask, target)


def matmul_flops(config: BertConfig, B: int, T: int) -> int:
    """Forward matmul FLOPs of the padded batch: 2 m n k per linear and per attention product."""
    C, I, L = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    linears = 2 * B * T * (4 * C * C + 2 * C * I)  # query, key, value, attention output; FFN in and out
    attention = 2 * (2 * B * T * T * C)  # Q K^T and probs V, summed over the heads
    pooler = 2 * B * C * C
    return L * (linears + attention) + pooler


def measure_peak(dtype: torch.dtype, n: int = 2048, tries: int = 3) -> float:
    """GFLOP/s of the best of `tries` n x n torch.mm in `dtype`: the matmul peak we can hope to reach."""
    a, b = torch.randn(n, n).to(dtype), torch.randn(n, n).to(dtype)
    best = float("inf")
    for _ in range(tries):
        start = time.perf_counter()
        torch.mm(a, b)
        best = min(best, time.perf_counter() - start)
    return 2 * n ** 3 / best / 1e9


def build_models(config: BertConfig, seed: int = 0) -> dict[str, tuple[torch.nn.Module, torch.dtype]]:
    """Ours and transformers' (eager, SDPA) with one set of random weights; name -> (model, compute dtype)."""
    torch.manual_seed(seed)
    ours = BertModel(config, attn_implementation="sdpa")
    models = {"ours": (ours, torch.float32)}
    for impl in ("sdpa", "eager"):
        hf = transformers.BertModel(transformers.BertConfig(**config.to_dict(), attn_implementation=impl))
        hf.load_state_dict(ours.state_dict(), strict=True)  # the same keys, so a strict copy
        if hf.config._attn_implementation != impl:
            raise RuntimeError(f"transformers picked {hf.config._attn_implementation!r}, not {impl!r}")
        models[f"transformers-{impl}"] = (hf, torch.float32)
    models["ours-bf16-autocast"] = (ours, torch.bfloat16)  # the same module, so the same weights
    return models


def make_step(model: torch.nn.Module, dtype: torch.dtype, mode: str, batch: Batch) -> Callable[[], None]:
    """One call to time: a forward (no_grad, eval) or a forward and backward (train, dropout 0)."""
    def autocast() -> torch.autocast:
        return torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == torch.bfloat16)

    def forward() -> None:
        model.eval()
        with torch.no_grad(), autocast():
            model(batch.input_ids, attention_mask=batch.attention_mask)

    def forward_backward() -> None:
        model.train()
        model.zero_grad(set_to_none=True)
        with autocast():
            hidden = model(batch.input_ids, attention_mask=batch.attention_mask).last_hidden_state
        (hidden.float() * batch.target).sum().backward()

    return forward if mode == "forward" else forward_backward


def last_hidden(model: torch.nn.Module, batch: Batch, autocast: bool = False) -> torch.Tensor:
    model.eval()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        return model(batch.input_ids, attention_mask=batch.attention_mask).last_hidden_state.float()


def max_diff(a: torch.Tensor, b: torch.Tensor, mask: torch.Tensor) -> float:
    """Largest |a - b| over real tokens (padding positions carry no meaning)."""
    return float(((a - b).abs() * mask[..., None]).max())


def check_outputs(models: dict[str, tuple[torch.nn.Module, torch.dtype]], batch: Batch) -> list[str]:
    """Parity of the fp32 models, and how far bf16 autocast moves ours (sdpa and eager kernels)."""
    ours = models["ours"][0]
    reference = last_hidden(ours, batch)
    lines = [f"  max |{name} - ours| = {max_diff(last_hidden(m, batch), reference, batch.attention_mask):.1e}"
             for name, (m, dtype) in models.items() if dtype == torch.float32 and m is not ours]
    bf16_sdpa = last_hidden(ours, batch, autocast=True)
    ours.set_attn_implementation("eager")
    try:
        bf16_eager = last_hidden(ours, batch, autocast=True)
    finally:
        ours.set_attn_implementation("sdpa")
    finite = bool(bf16_sdpa.isfinite().all() and bf16_eager.isfinite().all())
    lines.append(f"  bf16 autocast, max |bf16 - fp32| (std of fp32 output {float(reference.std()):.2f}): "
                 f"sdpa {max_diff(bf16_sdpa, reference, batch.attention_mask):.1e}, "
                 f"eager {max_diff(bf16_eager, reference, batch.attention_mask):.1e}; "
                 f"all finite: {finite}")
    return lines


def run_size(size: str, args: argparse.Namespace,
             peaks: dict[torch.dtype, float]) -> tuple[list[Row], list[str]]:
    """Time every (runner, mode) of one size; returns the rows and the output checks' lines."""
    config = SIZES[size]
    batch = make_batch(config, args.batch_size, args.max_len, seed=0)
    models = build_models(config)
    checks = check_outputs(models, batch)
    rows = []
    for mode in MODES:
        steps = {name: make_step(model, dtype, mode, batch) for name, (model, dtype) in models.items()}
        for step in steps.values():
            for _ in range(args.warmup):
                step()
        times: dict[str, list[float]] = {name: [] for name in steps}
        names = list(steps)
        for r in tqdm(range(args.repeats), desc=f"{size} {mode}", leave=False):
            for dtype in peaks:  # the peak is measured along the way, so it sees the same machine load
                peaks[dtype] = max(peaks[dtype], measure_peak(dtype))
            for name in names[r % len(names):] + names[:r % len(names)]:  # rotate who goes first
                start = time.perf_counter()
                steps[name]()
                times[name].append(time.perf_counter() - start)
        rows += [Row(size, name, mode, models[name][1], times[name], batch) for name in names]
    return rows, checks


def target_verdict(ratio: float, rounds: list[float]) -> str:
    """The 1.0x target, read with the run's noise: a shortfall smaller than the spread is not a verdict."""
    if ratio >= 1.0:
        return "  meets the 1.0x target"
    if max(rounds) >= 1.0:
        return "  below 1.0x, but within this run's round-to-round spread"
    return "  MISSES the 1.0x target"


def report(rows: list[Row], checks: dict[str, list[str]], peaks: dict[torch.dtype, float],
           args: argparse.Namespace) -> None:
    print(f"\nBertModel speed: ours vs transformers {transformers.__version__} (eager, sdpa); "
          f"torch {torch.__version__}, {torch.get_num_threads()} threads.")
    print(f"Batch {args.batch_size}, lengths uniform in [2, {args.max_len}], padded to the longest. "
          f"Median of {args.repeats} rounds after {args.warmup} warm-up call(s).")
    print("forward = eval mode + no_grad; fwd+bwd = train mode with dropout 0 (every model alike).")
    print("real tok/s counts non-padding tokens only; GFLOP/s counts the matmul FLOPs of the padded batch.")
    print(f"Matmul peak this run (best 2048^3 torch.mm): fp32 {peaks[torch.float32]:.0f} GFLOP/s, "
          f"bf16 {peaks[torch.bfloat16]:.0f} GFLOP/s.\n")
    header = (f"{'size':<10}{'model':<20}{'mode':<9}{'ms min / median / max':>24}{'real tok/s':>12}"
              f"{'GFLOP/s':>9}{'% peak':>8}")
    print(header)
    print("-" * len(header))
    for row in rows:
        B, T = row.batch.input_ids.shape
        gflops = matmul_flops(SIZES[row.size], B, T) * (3 if row.mode == "fwd+bwd" else 1) / row.median / 1e9
        spread = " / ".join(f"{t * 1e3:.0f}" for t in (min(row.times), row.median, max(row.times)))
        tokens_per_s = row.batch.real_tokens / row.median
        print(f"{row.size:<10}{row.name:<20}{row.mode:<9}{spread:>24}{tokens_per_s:>12.0f}"
              f"{gflops:>9.1f}{100 * gflops / peaks[row.dtype]:>7.0f}%")

    print("\nRatios of real tokens per second (>1 = the first is faster); in brackets the range of the "
          "per-round ratios:")
    by_key = {(row.size, row.name, row.mode): row for row in rows}
    for size, name, mode in by_key:
        pairs = {"ours": [(name, REFERENCE), (name, "transformers-eager")],
                 "ours-bf16-autocast": [(name, "ours")]}.get(name, [])
        for fast, slow in pairs:
            a, b = by_key[size, fast, mode], by_key[size, slow, mode]
            ratio = b.median / a.median
            rounds = [tb / ta for ta, tb in zip(a.times, b.times)]
            verdict = target_verdict(ratio, rounds) if slow == REFERENCE else ""
            print(f"  {size:<10}{mode:<9}{f'{fast} / {slow}':<32}{ratio:5.2f}x  "
                  f"[{min(rounds):.2f}-{max(rounds):.2f}]{verdict}")

    print("\nOutput checks (last_hidden_state, real tokens only):")
    for size, lines in checks.items():
        print(f" {size}:")
        print("\n".join(lines))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="minilm,bert-base",
                        help=f"comma-separated model sizes, from {', '.join(SIZES)} (default: both)")
    parser.add_argument("--batch-size", type=int, default=None, help="sequences per batch (default 32)")
    parser.add_argument("--max-len", type=int, default=None,
                        help="longest sequence length; lengths are uniform in [2, max-len] (default 128)")
    parser.add_argument("--repeats", type=int, default=None,
                        help="timed rounds; each runs every model once per mode (default 3)")
    parser.add_argument("--warmup", type=int, default=1,
                        help="untimed calls per model and mode before the rounds (default 1)")
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run: batch 4, max-len 32, 2 rounds (flags given explicitly still win)")
    args = parser.parse_args(argv)
    sizes = [s.strip() for s in args.sizes.split(",") if s.strip()]
    unknown = [s for s in sizes if s not in SIZES]
    if unknown or not sizes:
        parser.error(f"--sizes: unknown size(s) {unknown}; choose from {', '.join(SIZES)}")
    quick = dict(batch_size=4, max_len=32, repeats=2) if args.quick else {}
    defaults = dict(batch_size=32, max_len=128, repeats=3)
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, quick.get(name, value))
    for name in ("batch_size", "repeats"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if args.warmup < 0:
        parser.error(f"--warmup must be >= 0, got {args.warmup}")
    longest = min(c.max_position_embeddings for c in SIZES.values())
    if not 2 <= args.max_len <= longest:
        parser.error(f"--max-len must be in [2, {longest}] (the position table), got {args.max_len}")

    start = time.perf_counter()
    peaks = {torch.float32: 0.0, torch.bfloat16: 0.0}
    rows, checks = [], {}
    for size in sizes:
        size_rows, checks[size] = run_size(size, args, peaks)
        rows += size_rows
    report(rows, checks, peaks, args)
    print(f"\nTotal time {time.perf_counter() - start:.0f} s.")


if __name__ == "__main__":
    main()
