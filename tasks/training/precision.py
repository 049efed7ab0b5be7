"""Which number format a job computes in: fp32, or bfloat16 autocast where the hardware has it.

bf16 keeps fp32's exponent range with an 8-bit mantissa, so training needs no loss scaling; under
`torch.autocast` the matrix products run in bf16 while the weights, the optimizer state and the
reductions (softmax, LayerNorm, losses) stay in fp32. It pays only where the hardware multiplies bf16
natively: on a CPU with AVX-512 BF16 or AMX (Intel since Cooper Lake / Sapphire Rapids, AMD since Zen 4),
on an NVIDIA GPU since Ampere. Elsewhere bf16 is emulated and slower than fp32, so `auto` picks fp32.

Read next: loop.py (where the autocast is applied).
"""

from __future__ import annotations

import torch

PRECISIONS = ("auto", "fp32", "bf16")


def cpu_has_native_bf16() -> bool:
    """AVX-512 BF16 or AMX tiles, as PyTorch's own CPU dispatch sees them."""
    probes = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(getattr(torch.cpu, name, lambda: False)() for name in probes)


def device_has_native_bf16(device: str) -> bool:
    if device.startswith("cuda"):
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported(including_emulation=False)
    return cpu_has_native_bf16()


def resolve_precision(requested: str, device: str) -> tuple[str, str]:
    """("fp32" or "bf16", why): `auto` becomes bf16 exactly where the device multiplies bf16 natively."""
    if requested not in PRECISIONS:
        raise ValueError(f"--precision must be one of {PRECISIONS}, got {requested!r}")
    if requested != "auto":
        return requested, f"--precision {requested}"
    where = "the GPU" if device.startswith("cuda") else "this CPU"
    if device_has_native_bf16(device):
        return "bf16", f"--precision auto: {where} multiplies bfloat16 natively"
    return "fp32", f"--precision auto: {where} has no native bfloat16 matrix multiply"
