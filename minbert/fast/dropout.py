"""Dropout (Srivastava et al. 2014) whose random mask costs a quarter of PyTorch's on a CPU.

On a CPU PyTorch draws one 32-bit Mersenne-Twister number per element, and in BERT those flips took 30%
of the main job's forward pass on 2 cores (45% under bf16). Here one 64-bit draw gives four 16-bit
numbers, each compared with p * 2^16: a quarter of the draws for the same mask. The cost in exactness: p
is rounded to a multiple of 2^-16 (0.1 becomes 0.1000061). On a GPU PyTorch's own dropout is already
cheap, so there we call it.

The model's files use `nn.Dropout`, as a reader expects; `use_fast_dropout(model)` swaps this one in for
each of them (names and checkpoints unchanged: dropout has no weights), once, before the loop
(tasks/training/job.py).

Read next: ../extras/ (label attention, layer analysis).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

_LEVELS = 1 << 16  # the 16-bit numbers' range


def keep_mask(shape: torch.Size | tuple[int, ...], p: float, dtype: torch.dtype,
              device: torch.device | str = "cpu") -> torch.Tensor:
    """A tensor of `shape`: 1 / (1 - p) where an element is kept (probability 1 - p), 0 where dropped."""
    return keep_masks([shape], p, dtype, device)[0]


def keep_masks(shapes: list[tuple[int, ...]], p: float, dtype: torch.dtype,
               device: torch.device | str = "cpu") -> list[torch.Tensor]:
    """keep_mask of each shape, the same numbers as one call per shape in turn, from one draw.

    PyTorch's CPU generator hands out its 64-bit numbers in order, so one randint of the calls' summed
    lengths gives each call's numbers back to back; one comparison and one scaling then serve them all.
    For the unpadded kernel's attention, which drops out one small (1, H, L, L) tensor per sequence.
    """
    sizes = [(math.prod(shape) + 3) // 4 for shape in shapes]  # each call's 64-bit draws
    # Four 16-bit numbers per 64-bit draw; randint's range [-2^63, 2^63 - 1) spans every bit pattern
    # (the one it leaves out changes nothing measurable), so each int16 is uniform on [-2^15, 2^15).
    draws = torch.randint(-(1 << 63), (1 << 63) - 1, (sum(sizes),), dtype=torch.int64, device=device)
    threshold = round(p * _LEVELS) - (1 << 15)  # P(int16 < threshold) = p, to 2^-16
    masks = (draws.view(torch.int16) >= threshold).to(dtype) * (1.0 / (1.0 - p))  # (4 * draws,)
    return [piece[:math.prod(shape)].view(shape)
            for piece, shape in zip(masks.split([4 * n for n in sizes]), shapes)]


def dropout(x: torch.Tensor, p: float, training: bool = True) -> torch.Tensor:
    """x with each element zeroed with probability p and the rest scaled by 1 / (1 - p) (when training)."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability must be in [0, 1], got {p}")
    if not training or p == 0.0:
        return x
    if p == 1.0 or x.device.type != "cpu":
        return F.dropout(x, p, training=True)
    return x * keep_mask(x.shape, p, x.dtype, x.device)


class Dropout(nn.Module):
    """`torch.nn.Dropout` with the cheaper mask above: same argument, same behaviour in train/eval."""

    def __init__(self, p: float = 0.5) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability must be in [0, 1], got {p}")
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"


def use_fast_dropout(model: nn.Module) -> nn.Module:
    """Replace every `nn.Dropout` inside `model` by the Dropout above, with the same p, in place.

    Attention hands its dropout module to the kernel (minbert/attention.py), so the probabilities' dropout
    is swapped with the rest. Returns the model.
    """
    found = [(parent, name, child.p) for parent in model.modules() for name, child in parent.named_children()
             if type(child) is nn.Dropout]  # exactly torch's: a subclass may do more than drop
    for parent, name, p in found:
        setattr(parent, name, Dropout(p))
    return model
