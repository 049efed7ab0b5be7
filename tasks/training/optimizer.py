"""The optimizer and its schedule: AdamW over parameter groups, and the learning rate's course over the steps.

The encoder (the model's one BertModel) trains at --lr, with --layerwise-decay's smaller rates for its lower
layers (optim/param_groups.py), the freshly initialised heads at --head-lr; biases and LayerNorm weights never
decay. The class is the lesson's AdamW, or its fast subclass where the fast paths ship (fast_paths.py). The
--schedule (optim/schedules.py) is a LambdaLR stepped once per optimizer step.

Read next: loop.py (which steps both).
"""

from __future__ import annotations

import torch
from torch import nn

from minbert.model import BertModel
from optim.adamw import AdamW
from optim.param_groups import make_param_groups, uses_weight_decay
from optim.schedules import SCHEDULES
from tasks.training.fast_paths import optimizer_class
from tasks.training.settings import TrainingSettings


def build_optimizer(model: nn.Module, training: TrainingSettings) -> AdamW:
    """AdamW (fast_paths.py picks the class): the model's one BertModel (or, without one, all of it) at `lr`,
    with optional layer-wise decay, the rest (heads) at `head_lr`; biases and LayerNorm weights never decay.
    Frozen parameters (--option pretrain's encoder, all but --lora's adapters) are left out: no state kept."""
    encoders = [module for module in model.modules() if isinstance(module, BertModel)]
    if len(encoders) > 1:
        raise TypeError(f"build_optimizer: {type(model).__name__} holds {len(encoders)} BertModels, not one")
    encoder = encoders[0] if encoders else model
    groups = make_param_groups(encoder, lr=training.lr, weight_decay=training.weight_decay,
                               layer_decay=training.layerwise_decay)
    groups = [{**g, "params": [p for p in g["params"] if p.requires_grad],
               "param_names": [n for n, p in zip(g["param_names"], g["params"]) if p.requires_grad]}
              for g in groups]
    groups = [g for g in groups if g["params"]]
    in_encoder = {id(p) for p in encoder.parameters()}
    heads = [(name, p) for name, p in model.named_parameters() if id(p) not in in_encoder and p.requires_grad]
    for decay in (True, False):
        chosen = [(n, p) for n, p in heads if uses_weight_decay(n) == decay]
        if chosen:
            groups.append({"params": [p for _, p in chosen], "param_names": [n for n, _ in chosen],
                           "lr": training.head_lr, "weight_decay": training.weight_decay if decay else 0.0})
    return optimizer_class()(groups, lr=training.lr, weight_decay=training.weight_decay)


def make_schedule(optimizer: torch.optim.Optimizer, training: TrainingSettings, total_steps: int,
                  steps_per_epoch: int):
    """The --schedule's LambdaLR; --warmup is its warm-up fraction (slanted triangular: cut_frac)."""
    warmup_steps = int(training.warmup * total_steps)
    if training.schedule in ("linear", "cosine"):
        return SCHEDULES[training.schedule](optimizer, warmup_steps, total_steps)
    if training.schedule == "constant":
        return SCHEDULES["constant"](optimizer, warmup_steps)
    if training.schedule == "slanted_triangular":
        return SCHEDULES["slanted_triangular"](optimizer, total_steps, cut_frac=training.warmup or 0.1)
    return SCHEDULES["exponential"](optimizer, steps_per_epoch=steps_per_epoch)  # CS224N reports: gamma 0.96
