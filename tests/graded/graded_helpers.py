"""Helpers shared by the graded tests (a plain module: tests/graded/conftest.py puts this folder on sys.path).

Tolerances: float32 comparisons at atol = rtol = 1e-5 unless a test says otherwise.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from minbert.config import BertConfig

TOL = dict(atol=1e-5, rtol=1e-5)


def reference_attention(query, key, value, attention_mask, dropout_p=0.0, return_probs=False):
    """torch's own attention kernel, a stand-in for the student's where another component needs one.

    The probabilities come from the same kernel applied to identity values (probs @ I = probs).
    """
    context = F.scaled_dot_product_attention(query, key, value, attn_mask=attention_mask)
    probs = None
    if return_probs:
        T = key.size(-2)
        eye = torch.eye(T, dtype=query.dtype).expand(*query.shape[:-2], T, T)
        probs = F.scaled_dot_product_attention(query, key, eye, attn_mask=attention_mask)
    return context, probs


def additive(mask: torch.Tensor, dtype=torch.float32) -> torch.Tensor:
    """(B, T) 1/0 mask -> additive (B, 1, 1, T), as minbert.model.extended_attention_mask builds it."""
    return (1.0 - mask[:, None, None, :].to(dtype)) * torch.finfo(dtype).min


def randomize(module: torch.nn.Module, std: float = 0.5) -> torch.nn.Module:
    """Non-trivial weights everywhere (LayerNorm scales too), so every parameter shows in the output."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            p.copy_(torch.randn_like(p) * std + (1.0 if "LayerNorm.weight" in name else 0.0))
    return module


def torch_encoder_layer(layer, config: BertConfig) -> torch.nn.TransformerEncoderLayer:
    """torch's own post-LN encoder layer (exact GELU) holding the same weights as our BertLayer."""
    theirs = torch.nn.TransformerEncoderLayer(
        config.hidden_size, config.num_attention_heads, config.intermediate_size, dropout=0.0,
        activation="gelu", layer_norm_eps=config.layer_norm_eps, batch_first=True, norm_first=False)
    a = layer.attention
    with torch.no_grad():
        theirs.self_attn.in_proj_weight.copy_(torch.cat([a.self.query.weight, a.self.key.weight,
                                                         a.self.value.weight]))
        theirs.self_attn.in_proj_bias.copy_(torch.cat([a.self.query.bias, a.self.key.bias,
                                                       a.self.value.bias]))
        pairs = [(theirs.self_attn.out_proj, a.output.dense), (theirs.norm1, a.output.LayerNorm),
                 (theirs.linear1, layer.intermediate.dense), (theirs.linear2, layer.output.dense),
                 (theirs.norm2, layer.output.LayerNorm)]
        for mine, ours in pairs:
            mine.weight.copy_(ours.weight)
            mine.bias.copy_(ours.bias)
    return theirs.eval()
