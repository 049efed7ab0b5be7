"""A lever measured and not kept: queries, keys and values from one matrix product of width 3C, under bf16.

Measured on the main job's bf16 step (docs/results.md, "The jobs' own step"): no gain beyond the noise, the
three products of width C already run at the bf16 matmul peak; kept here, tested equal to the readable
projections (tests/test_fused_qkv.py), so that the measurement can be repeated (`python -m bench.levers
--lever fused-qkv`). Nothing in minbert/ or tasks/ uses it.

BertSelfAttention (attention.py) projects its input three times, `query`, `key` and `value`, each an
nn.Linear C -> C, as BERT's checkpoint names them. Stacking the three weights into one (3C, C) matrix
gives the same numbers up to rounding in one product of width 3C, as Hugging Face's fused QKV kernels and
nanoGPT's `c_attn` do. Under autocast on a CPU that spares two of the three bf16 casts of the input (the
LayerNorm before hands over float32), two of the three float32 sums of the input's gradient, and it
runs one larger matmul in place of three small ones forward, two in place of six backward.

Only where the precision is low already: in float32 the three products and the one product of width 3C
sum in different orders, so the stacked product would change a float32 run's last digits; in float32
(no autocast) the readable forward runs unchanged, bit for bit.

The parameters stay where they are (`query.weight`, `key.weight`, `value.weight`, so checkpoints do not
change); each forward stacks them afresh (a copy of 3 C^2 numbers, against the product's 3 N C^2
multiply-adds), and autograd hands the stacked gradient back to each weight. Projections that are not three
plain nn.Linear (LoRA's adapted query and value) run the readable forward.

`use_fused_qkv(model)` turns every BertSelfAttention of a model (or a subclass that keeps its forward,
such as the unpadded model's attention) into this variant in place; its modules, names and state stay.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from minbert.attention import BertSelfAttention, SelfAttentionOutput

LOW_PRECISION = (torch.bfloat16, torch.float16)


class FusedQKV:
    """Mixed in before BertSelfAttention (or a subclass of it): one product of width 3C in low precision."""

    def forward(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor,
                output_attentions: bool = False) -> SelfAttentionOutput:
        """BertSelfAttention.forward's arguments and result."""
        low = (torch.is_autocast_enabled(hidden_states.device.type) or hidden_states.dtype in LOW_PRECISION)
        # Only three plain nn.Linear stack (LoRA's adapted projections, for one, keep their own forward).
        plain = all(type(m) is nn.Linear for m in (self.query, self.key, self.value))
        if not (low and plain):
            return super().forward(hidden_states, attention_mask, output_attentions)
        return self.fused_forward(hidden_states, attention_mask, output_attentions)

    def fused_forward(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor,
                      output_attentions: bool = False) -> SelfAttentionOutput:
        """The stacked product, whatever the precision (the tests run it in float64 too)."""
        parts = (self.query, self.key, self.value)
        weight = torch.cat([linear.weight for linear in parts])  # 3 x (C, C) -> (3C, C)
        bias = torch.cat([linear.bias for linear in parts])  # (3C,)
        projected = F.linear(hidden_states, weight, bias).chunk(3, dim=-1)  # (B, T, 3C) -> 3 x (B, T, C)
        heads = [self.split_heads(x) for x in projected]  # 3 x (B, T, C) -> (B, H, T, D)
        context, probs = self.attend(*heads, attention_mask, output_attentions)
        return SelfAttentionOutput(self.merge_heads(context), probs)


_FUSED: dict[type, type] = {}  # attention class -> its fused variant, made once


def fused_class(cls: type) -> type:
    """FusedQKV mixed into `cls`: the variant keeps cls's attend, so it attends as cls does."""
    if cls not in _FUSED:
        _FUSED[cls] = type(f"FusedQKV{cls.__name__}", (FusedQKV, cls), {"__module__": __name__})
    return _FUSED[cls]


def use_fused_qkv(model: nn.Module) -> nn.Module:
    """Give every BertSelfAttention inside `model` the stacked projection, in place; returns `model`.

    A module's class changes, nothing else (its submodules, parameters and their names stay): an attention
    class that overrides forward itself is left as it is, since its forward may do more than project.
    """
    for module in model.modules():
        cls = type(module)
        if isinstance(module, BertSelfAttention) and not isinstance(module, FusedQKV) \
                and cls.forward is BertSelfAttention.forward:
            module.__class__ = fused_class(cls)
    return model
