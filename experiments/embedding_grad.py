"""A lever measured and not kept: an embedding whose weight gradient is rewritten in the rows a batch used,
not zeroed in full every step.

Measured on the main job's step (docs/results.md, "The jobs' own step"): the profile's 13-15 ms of zeroing
left the profile, the step did not get faster (1.00-1.01x, bf16 and fp32); kept here, tested equal to
nn.Embedding's gradient bit for bit (tests/test_embedding_grad.py), so that the measurement can be repeated
(`python -m bench.levers --lever embedding-grad`). Nothing in minbert/ or tasks/ uses it.

The gradient of a lookup table is dense in PyTorch: (V, C) numbers, zero except at the rows of the batch's
ids. Each backward allocates it and zeroes all of it before adding the rows in; for BERT's 30,522 x 384
word embeddings (MiniLM) that is 47 MB of zeros, 13-14 ms of the main job's 230 ms bf16 step on one CPU
thread (about 6%, bench/step_profile.py's aten::fill_), while a batch of 64 sentences uses a few hundred
rows.

Here the gradient tensor is kept from one step to the next. After the step the optimizer has read it and
`zero_grad(set_to_none=True)` has dropped the parameter's reference; at the next backward only the rows the
last gradient held are zeroed again, and this batch's rows are written in. Each row's sum is computed as
PyTorch's dense backward computes it (zero, then the batch's positions added in order, the padding id
skipped), so the gradient is the same, bit for bit (tests/test_embedding_grad.py).

The tensor handed to autograd is a new view of the kept storage, so autograd's accumulation takes it as the
parameter's .grad without a copy, hooks and gradient averaging (DDP) see it as usual. When the parameter's
.grad still holds the kept storage at the next backward (a second backward before zero_grad, or
zero_grad(set_to_none=False)), that backward gets a fresh zeroed tensor, as PyTorch's does, and autograd adds
it in. What the reuse relies on: nothing but this module and autograd writes into the gradient except by
scaling it (clipping, a gradient scaler's unscaling), which keeps zero rows zero; a NaN scale (a NaN
gradient norm) would not, so the rows are cleared in full again whenever the kept tensor holds a non-finite
number in the rows it wrote (checked on those rows only).

`use_fast_embedding_grad(model)` swaps this class in for every plain `nn.Embedding` of a model, on the CPU
(the module's name and its weight, so checkpoints, do not change).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class _Lookup(torch.autograd.Function):
    """F.embedding forward; the weight's gradient from RowGradEmbedding.weight_grad."""

    @staticmethod
    def forward(ctx, weight: torch.Tensor, ids: torch.Tensor, module: "RowGradEmbedding") -> torch.Tensor:
        ctx.save_for_backward(ids)
        ctx.module = module
        return F.embedding(ids, weight, module.padding_idx)

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor):
        (ids,) = ctx.saved_tensors
        return ctx.module.weight_grad(ids, grad_output), None, None


class RowGradEmbedding(nn.Embedding):
    """nn.Embedding (no max_norm, dense gradient) whose weight gradient is kept and rewritten row by row."""

    kept: torch.Tensor | None = None  # the last gradient's storage, (V, C)
    rows: torch.Tensor | None = None  # the rows it holds that may be nonzero, (U,)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        if not (torch.is_grad_enabled() and self.weight.requires_grad) or self.weight.device.type != "cpu":
            return super().forward(ids)
        return _Lookup.apply(self.weight, ids, self)

    def weight_grad(self, ids: torch.Tensor, grad_output: torch.Tensor) -> torch.Tensor:
        """The dense (V, C) gradient of the weight, as aten::embedding_dense_backward computes it."""
        C = self.embedding_dim
        flat_ids, grad = ids.reshape(-1), grad_output.reshape(-1, C)  # (N,), (N, C)
        if self.padding_idx is not None:  # the padding row gets no gradient (nn.Embedding's contract)
            keep = flat_ids != self.padding_idx
            flat_ids, grad = flat_ids[keep], grad[keep]
        rows, inverse = torch.unique(flat_ids, return_inverse=True)  # (U,), (N,)
        # Each row: 0, then its positions' gradients added in order, as the dense backward adds them.
        sums = grad.new_zeros(len(rows), C).index_add_(0, inverse, grad)  # (U, C)
        kept, grad_now = self.kept, self.weight.grad
        in_use = grad_now is not None and kept is not None and \
            grad_now.untyped_storage().data_ptr() == kept.untyped_storage().data_ptr()
        if kept is None or in_use or kept.dtype != grad.dtype:
            fresh = grad.new_zeros(self.weight.shape).index_copy_(0, rows, sums)
            if in_use:  # autograd adds `fresh` into the kept tensor: its rows now include these
                self.rows = torch.cat([self.rows, rows])
            else:
                self.kept, self.rows = fresh, rows
            return fresh.view(fresh.shape)
        stale = kept.index_select(0, self.rows)  # (U_last, C): the rows the last gradient wrote
        if not bool(torch.isfinite(stale).all()):
            kept.zero_()  # a NaN scale may have reached every row (see the module docstring)
        else:
            kept.index_fill_(0, self.rows, 0.0)
        kept.index_copy_(0, rows, sums)
        self.rows = rows
        return kept.view(kept.shape)  # a new view: autograd takes it as .grad without copying


def use_fast_embedding_grad(model: nn.Module) -> nn.Module:
    """Make every plain nn.Embedding of `model` (dense gradient, no max_norm) a RowGradEmbedding, in place;
    returns `model`."""
    for module in model.modules():
        if type(module) is nn.Embedding and module.max_norm is None and not module.sparse \
                and not module.scale_grad_by_freq:
            module.__class__ = RowGradEmbedding
    return model
