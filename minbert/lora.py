"""LoRA: fine-tune a frozen model through a small low-rank update beside each chosen weight matrix.

Hu et al. 2021, "LoRA: Low-Rank Adaptation of Large Language Models". Fine-tuning changes a pretrained
weight W (out x in) by some ΔW; the paper's hypothesis (§4.1) is that ΔW has a low "intrinsic rank", so it
writes ΔW = B A with B (out x r) and A (r x in), r much smaller than in and out, freezes W, and trains
only A and B:

    y = W x + b + (alpha / r) B A x                                       (§4.1, eq. 3, with the scaling)

- Initialisation (§4.1): A random, B zero, so that B A = 0 and the adapted model starts as exactly the
  pretrained one. The paper says "random Gaussian" for A; its code (loralib) and Hugging Face's `peft`,
  whose default we follow, draw A as nn.Linear draws its weights (kaiming_uniform_ with a = sqrt(5)).
- Scaling (§4.1): the update is multiplied by alpha / r, so that changing r does not change how far a
  given learning rate moves the output ("we simply set alpha to the first r we try and do not tune it").
- Dropout on the adapter's input x, as the paper's code (loralib) and `peft` apply it: the base path W x
  is left as it was.
- Which matrices (§4.2, §7.1): the paper adapts the attention's query and value projections only
  (W_q, W_v), its default and ours; "all-linear" adapts every nn.Linear of the module it is given, as
  `peft`'s option of that name does (apply it to the encoder, so that a task's head is not adapted).
- No inference latency (§4.1): `merge()` adds (alpha / r) B A into W, after which the layer is one plain
  matrix again; `unmerge()` subtracts it to go on training.

What it saves: with r = 8 on the query and value of all-MiniLM-L6-v2, 73,728 numbers train instead of
22.7 million, and AdamW keeps its two moments for those alone.

Files: minbert.loading.adapter_files reads and writes `peft`'s adapter folder (adapter_config.json and
adapter_model.safetensors) and the merged model as a plain Hugging Face folder.

Shape legend: N any leading axes (B, T for a batch of tokens), I in_features, O out_features, r the rank.

Read next: minbert.text.tokenizer (text to the ids the model reads).
"""

from __future__ import annotations

import math
import warnings

import torch
from torch import nn

# The paper's default targets (§4.2, §7.1): the attention's query and value projections. A module is
# adapted when its name ends with one of these (`peft` matches its target_modules the same way).
QUERY_VALUE = ("attention.self.query", "attention.self.value")
ALL_LINEAR = "all-linear"  # every nn.Linear of the module given, `peft`'s target_modules="all-linear"


class LoRALinear(nn.Module):
    """An nn.Linear, frozen, plus the trainable low-rank update (alpha / r) B A (Hu et al. §4.1).

    The names (base_layer, lora_A, lora_B) are `peft`'s, so that its adapter files map key for key.
    """

    def __init__(self, base_layer: nn.Linear, r: int, alpha: float, dropout: float = 0.0) -> None:
        super().__init__()
        if not isinstance(base_layer, nn.Linear):
            raise TypeError(f"LoRALinear wraps an nn.Linear, got {type(base_layer).__name__}")
        check_lora_settings(r, alpha, dropout)
        self.base_layer = base_layer
        # The pretrained weight and bias stay as they are: only A and B learn (§4.1).
        self.base_layer.requires_grad_(False)
        self.in_features, self.out_features = base_layer.in_features, base_layer.out_features
        self.r = r
        self.lora_alpha = alpha
        self.scaling = alpha / r  # §4.1: keeps the update's size independent of r
        # nn.Identity when there is no dropout, as peft does: nothing to draw.
        self.lora_dropout = nn.Dropout(dropout) if dropout > 0 else nn.Identity()
        factory = dict(device=base_layer.weight.device, dtype=base_layer.weight.dtype)
        self.lora_A = nn.Parameter(torch.empty(r, self.in_features, **factory))  # (r, I): down to r numbers
        self.lora_B = nn.Parameter(torch.empty(self.out_features, r, **factory))  # (O, r): back up to O
        self.merged = False  # whether base_layer.weight holds the update now (merge, below)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """A as nn.Linear initialises a weight (peft's default, loralib's code), B zero: B A = 0 (§4.1)."""
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
        nn.init.zeros_(self.lora_B)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (N, I) -> (N, O): W x + b + (alpha / r) B A dropout(x), or W x + b once merged."""
        # Hints: 1. a merged layer (self.merged) already holds the update in its base weight: its output is
        #           the base layer's alone (adding the adapter again would count it twice)
        #        2. otherwise, the frozen base layer's output W x + b, plus the adapter's update:
        #        3. dropout on the adapter's input x (self.lora_dropout), then A (r, I) down to r numbers,
        #           then B (O, r) back up to O, times self.scaling = alpha / r (not alpha: §4.1)
        #        4. x has any number of leading axes; like nn.Linear, act on the last one
        # BEGIN SOLUTION
        if self.merged:
            return self.base_layer(x)
        down = self.lora_dropout(x) @ self.lora_A.T  # (N, I) -> (N, r)
        return self.base_layer(x) + self.scaling * (down @ self.lora_B.T)  # (N, r) -> (N, O)
        # END SOLUTION

    def delta_weight(self) -> torch.Tensor:
        """The update as a matrix, (alpha / r) B A: (O, I), the shape of the base weight."""
        return (self.lora_B @ self.lora_A).mul(self.scaling)

    def merge(self) -> None:
        """Fold the update into the base weight: W <- W + (alpha / r) B A (§4.1, no inference latency).

        Merging a merged layer changes nothing and warns, as `peft` does ("already merged"): adding the
        update twice would silently double it.
        """
        if self.merged:
            warnings.warn("this LoRA layer is already merged; merging it again changes nothing", stacklevel=2)
            return
        with torch.no_grad():
            self.base_layer.weight += self.delta_weight().to(self.base_layer.weight.dtype)
        self.merged = True

    def unmerge(self) -> None:
        """Take the update back out of the base weight (W - (alpha / r) B A), to train on; rounding means
        W comes back within float precision, not bit for bit. A layer not merged warns, as in `peft`."""
        if not self.merged:
            warnings.warn("this LoRA layer is not merged; unmerging it changes nothing", stacklevel=2)
            return
        with torch.no_grad():
            self.base_layer.weight -= self.delta_weight().to(self.base_layer.weight.dtype)
        self.merged = False

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, r={self.r}, "
                f"lora_alpha={self.lora_alpha}, merged={self.merged}")


def check_not_adapted(model: nn.Module) -> None:
    """A model takes one set of adapters: a second would wrap the first's base layer."""
    already = [name for name, module in model.named_modules() if isinstance(module, LoRALinear)]
    if already:
        raise ValueError(f"{type(model).__name__} already has LoRA adapters ({already[:3]}...); "
                         "merge_and_unload it first, or load it again")


def check_lora_settings(r: object, alpha: object, dropout: object, source: str = "") -> None:
    """r a positive int, alpha a positive finite number, dropout in [0, 1); `source` names a file."""
    def is_number(x: object) -> bool:
        return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
    where = f"{source}: " if source else ""
    if not (isinstance(r, int) and not isinstance(r, bool) and r >= 1):
        raise ValueError(f"{where}the LoRA rank r must be a positive integer, got {r!r}")
    if not (is_number(alpha) and alpha > 0):
        raise ValueError(f"{where}the LoRA alpha must be a positive finite number, got {alpha!r}")
    if not (is_number(dropout) and 0.0 <= dropout < 1.0):
        raise ValueError(f"{where}the LoRA dropout must be a number in [0, 1), got {dropout!r}")


def target_names(model: nn.Module, targets: str | tuple[str, ...] | list[str] = QUERY_VALUE) -> list[str]:
    """The names of the nn.Linear modules of `model` that `targets` picks: "all-linear", or name suffixes
    (a module is picked when its name is one of them or ends with "." + one, as `peft` matches)."""
    linear = [name for name, module in model.named_modules() if isinstance(module, nn.Linear)]
    if targets == ALL_LINEAR:
        return linear
    if isinstance(targets, str):
        targets = (targets,)
    if not isinstance(targets, (tuple, list)) or not all(isinstance(t, str) for t in targets):
        raise TypeError(f"LoRA targets must be {ALL_LINEAR!r}, a module name or a list of names, got "
                        f"{targets!r}")
    picked = [name for name in linear if any(name == t or name.endswith("." + t) for t in targets)]
    if not picked:
        raise ValueError(f"LoRA targets {list(targets)} match no nn.Linear of {type(model).__name__}; its "
                         f"linear layers are named like {linear[:4]} (or use {ALL_LINEAR!r})")
    return picked


def apply_lora(model: nn.Module, r: int = 8, alpha: float = 16.0, dropout: float = 0.0,
               targets: str | tuple[str, ...] | list[str] = QUERY_VALUE) -> list[str]:
    """Put a LoRALinear in place of each targeted nn.Linear of `model`, and freeze everything else.

    Every parameter of `model` stops learning except the adapters' A and B; a caller that trains a task
    head beside the adapted encoder unfreezes that head itself (`head.requires_grad_(True)`). Apply it
    after loading the pretrained weights. Returns the adapted modules' names. The defaults r = 8,
    alpha = 16 are common choices (`peft`'s examples); the paper's GLUE runs use r = 8, alpha = 8 or 16.
    """
    check_not_adapted(model)
    names = target_names(model, targets)
    model.requires_grad_(False)
    for name in names:
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name)
        base = getattr(parent, child)
        # In the mode of the layer it replaces: an adapter put into a model in eval mode drops nothing.
        setattr(parent, child, LoRALinear(base, r, alpha, dropout).train(base.training))
    return names


def lora_layers(model: nn.Module) -> dict[str, LoRALinear]:
    """The adapted layers of `model` by name."""
    return {name: module for name, module in model.named_modules() if isinstance(module, LoRALinear)}


def merge_and_unload(model: nn.Module) -> nn.Module:
    """Merge every adapter into its base weight and put the plain nn.Linear back in its place (`peft`'s
    name): the model is then the original architecture with W + (alpha / r) B A, ready to save as a plain
    checkpoint. The base layers stay frozen. Returns `model`, changed in place."""
    for name, layer in lora_layers(model).items():
        if not layer.merged:
            layer.merge()
        parent_name, _, child = name.rpartition(".")
        setattr(model.get_submodule(parent_name), child, layer.base_layer)
    return model
