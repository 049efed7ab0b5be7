"""The optimizer side of a job: our AdamW over the encoder and the heads, and the learning-rate schedule.

The encoder (`model.bert`) learns at --lr, with optional layer-wise decay; the freshly initialised heads
at --head-lr; biases and LayerNorm weights never decay (optim/param_groups.py).

Read next: loop.py (where the optimizer steps).
"""

from __future__ import annotations

import torch
from torch import nn

from optim.adamw import AdamW
from optim.param_groups import make_param_groups, uses_weight_decay
from optim.schedules import SCHEDULES
from tasks.training.config import TrainConfig


def build_optimizer(model: nn.Module, config: TrainConfig) -> AdamW:
    """AdamW over the model: the encoder (`model.bert`) at `lr` with optional layer-wise decay, the heads
    at `head_lr`; biases and LayerNorm weights never decay. Frozen parameters get no gradient, and our
    AdamW skips them."""
    groups = make_param_groups(model.bert, lr=config.lr, weight_decay=config.weight_decay,
                               layer_decay=config.layerwise_decay)
    heads = [(name, p) for name, p in model.named_parameters() if not name.startswith("bert.")]
    for decay in (True, False):
        chosen = [(n, p) for n, p in heads if uses_weight_decay(n) == decay]
        if chosen:
            groups.append({"params": [p for _, p in chosen], "param_names": [n for n, _ in chosen],
                           "lr": config.head_lr, "weight_decay": config.weight_decay if decay else 0.0})
    return AdamW(groups, lr=config.lr, weight_decay=config.weight_decay)


def make_schedule(optimizer: torch.optim.Optimizer, config: TrainConfig, total_steps: int,
                  steps_per_epoch: int):
    """The --schedule's LambdaLR; --warmup is its warm-up fraction (slanted triangular: cut_frac)."""
    warmup_steps = int(config.warmup * total_steps)
    if config.schedule in ("linear", "cosine"):
        return SCHEDULES[config.schedule](optimizer, warmup_steps, total_steps)
    if config.schedule == "constant":
        return SCHEDULES["constant"](optimizer, warmup_steps)
    if config.schedule == "slanted_triangular":
        return SCHEDULES["slanted_triangular"](optimizer, total_steps, cut_frac=config.warmup or 0.1)
    return SCHEDULES["exponential"](optimizer, steps_per_epoch=steps_per_epoch)  # CS224N reports: gamma 0.96


def freeze(module: nn.Module) -> None:
    """The course's `--option pretrain`: the encoder's weights stay as loaded, only heads learn."""
    for param in module.parameters():
        param.requires_grad_(False)
