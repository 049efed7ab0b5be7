"""nn.Linear whose frozen weight keeps its autocast copy: cast once, not at every call.

Under `torch.autocast` a linear layer casts its float32 weight and bias to the autocast dtype (bfloat16 on a
CPU) each time it runs. Autocast keeps such a copy for the rest of its region only for weights that require
a gradient; a frozen weight (every encoder weight under --lora, or under --option pretrain) is cast afresh at
every call, though it never changes. `CastCachedLinear` keeps the copy until the weight changes (its
version counter moves when it is written in place, as LoRA's merge does, or it is replaced) and then runs
the same product on the same low-precision numbers as autocast would: the outputs are the same bits.
Trainable weights and calls outside autocast take nn.Linear's path unchanged.

`use_cast_cache(model)` turns every nn.Linear of a model into one (the same object, parameters and names:
checkpoints do not change); the training loop calls it once before the first step.

Read next: ../extras/ (label attention, layer analysis).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class CastCachedLinear(nn.Linear):
    """nn.Linear; under autocast, a frozen weight's low-precision copy is made once and kept."""

    _cast: tuple | None = None  # (dtype, weight, its version, bias, its version, weight copy, bias copy)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        device = x.device.type
        if self.weight.requires_grad or self.weight.dtype != torch.float32 or not torch.is_autocast_enabled(device):
            return super().forward(x)
        dtype = torch.get_autocast_dtype(device)
        made_from = (dtype, self.weight, self.weight._version, self.bias,
                     None if self.bias is None else self.bias._version)
        if self._cast is None or not all(map(_same, self._cast[:5], made_from)):
            bias = None if self.bias is None else self.bias.detach().to(dtype)
            self._cast = (*made_from, self.weight.detach().to(dtype), bias)
        weight, bias = self._cast[5:]
        with torch.autocast(device, enabled=False):  # what autocast does for a linear: all in its dtype
            return F.linear(x.to(dtype), weight, bias)

def _same(a, b) -> bool:
    """Tensors: the same object (a replaced weight is a new one); versions and dtypes: equal."""
    return a is b if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor) else a == b


def use_cast_cache(model: nn.Module) -> nn.Module:
    """Every nn.Linear inside `model` (exactly nn.Linear: a subclass may do more) becomes a CastCachedLinear,
    in place; returns the model."""
    for module in model.modules():
        if type(module) is nn.Linear:
            module.__class__ = CastCachedLinear
    return model
