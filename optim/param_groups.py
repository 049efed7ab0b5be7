"""Parameter groups for fine-tuning BERT: which tensors get weight decay, and layer-wise learning rates.

Two conventions of BERT fine-tuning, both applied by `make_param_groups`:

* No weight decay for biases and LayerNorm parameters. Google's BERT code excludes them
  (google-research/bert optimization.py: `exclude_from_weight_decay=["LayerNorm", "layer_norm", "bias"]`);
  old PyTorch ports named the LayerNorm parameters `gamma` / `beta` (pytorch-pretrained-bert, and Sun et
  al.'s released code: `no_decay = ['bias', 'gamma', 'beta']`), and we recognise those names too. Any
  parameter of an `nn.LayerNorm` module is also exempt, whatever a task head calls it.
* Layer-wise learning-rate decay (Sun et al. 2019, "How to Fine-Tune BERT for Text Classification?",
  eq. 2): the top encoder layer L-1 gets the base rate eta and layer k-1 gets xi times
  layer k's, so layer k gets eta * xi^(L-1-k). Below layer 0 the embeddings get eta * xi^L (one more
  factor, continuing the paper's rule); with `embeddings="base"` they get eta instead, which is what the
  paper's released code does (run_classifier_discriminative.py only decays `layer.{i}.` parameters).
  The pooler and task heads get eta.

Groups are built from `model.named_parameters()`, so any model that holds a BERT under any attribute
works: a parameter is in encoder layer i when its name contains `encoder.layer.<i>.` anywhere, in the
embeddings when a name component is `embeddings`, and in the "head" part otherwise. Each group carries
its tensors' names under "param_names", torch's own key, so `describe_param_groups` can show them.

Read next: tasks.training.job (build_optimizer: where these groups meet the optimizer).
"""

from __future__ import annotations

import math

import re
from typing import Any

from torch import nn
from torch.optim import Optimizer

_LAYER = re.compile(r"(?:^|\.)encoder\.layer\.(\d+)\.")
_EMBEDDINGS = re.compile(r"(?:^|\.)embeddings\.")
_NO_DECAY_NAMES = ("bias", "gamma", "beta")  # a parameter's own name (gamma, beta: old ports' LayerNorm)
_NO_DECAY_MODULES = ("LayerNorm", "layer_norm")  # the name of a module holding it
_EMBEDDINGS_CHOICES = ("decayed", "base")


def uses_weight_decay(name: str) -> bool:
    """False for biases and LayerNorm parameters (`*.bias`, `*LayerNorm.*`, `*.gamma`, `*.beta`)."""
    # Hints: a name is the module path, then the parameter's own name, joined by dots
    # (`bert.encoder.layer.0.output.LayerNorm.weight`). Exempt: a parameter whose own name is one of
    # _NO_DECAY_NAMES, and any parameter of a module named one of _NO_DECAY_MODULES. Compare whole parts
    # of the name: a substring test would miss `gamma` / `beta` and exempt a module called `biased`.
    # BEGIN SOLUTION
    *modules, own = name.split(".")
    return own not in _NO_DECAY_NAMES and not any(module in _NO_DECAY_MODULES for module in modules)
    # END SOLUTION


def encoder_layer_index(name: str) -> int | None:
    """i for a parameter of encoder layer i (`...encoder.layer.<i>....`), else None."""
    match = _LAYER.search(name)
    return int(match.group(1)) if match else None


def layer_lr_scale(name: str, num_layers: int, layer_decay: float, embeddings: str = "decayed") -> float:
    """The factor on the base learning rate for one parameter (Sun et al. 2019, eq. 2).

    xi^(L-1-i) in encoder layer i; xi^L in the embeddings (1 with embeddings="base"); 1 elsewhere.
    """
    index = encoder_layer_index(name)
    if index is not None:
        return layer_decay ** (num_layers - 1 - index)
    if _EMBEDDINGS.search(name):
        return layer_decay**num_layers if embeddings == "decayed" else 1.0
    return 1.0


def _part(name: str) -> tuple[int, str]:
    """Sort key and label of the part a parameter belongs to: embeddings, encoder layer i, or the rest."""
    index = encoder_layer_index(name)
    if index is not None:
        return index + 1, f"encoder layer {index}"
    if _EMBEDDINGS.search(name):
        return 0, "embeddings"
    return 1 << 30, "pooler and heads"


def make_param_groups(
    model: nn.Module,
    lr: float,
    weight_decay: float = 0.01,
    layer_decay: float = 1.0,
    num_layers: int | None = None,
    embeddings: str = "decayed",
) -> list[dict[str, Any]]:
    """Parameter groups for AdamW: decay / no-decay, and with layer_decay < 1 one lr per layer.

    model: any module whose parameter names contain BERT's (`embeddings.`, `encoder.layer.<i>.`).
    lr: eta, the learning rate of the top encoder layer, the pooler and the heads.
    weight_decay: for the parameters that take it; biases and LayerNorm parameters get 0.
    layer_decay: xi in (0, 1]; 1 gives every parameter lr (and just two groups).
    num_layers: L; by default the highest encoder layer index found plus one.
    embeddings: "decayed" (eta * xi^L, the default) or "base" (eta, as Sun et al.'s released code).

    Returns a list of dicts with "params", "param_names", "lr" and "weight_decay", ordered from the
    embeddings up to the heads, decay group before no-decay group; empty groups are left out.
    All parameters are included, frozen ones too: the optimizer skips those without gradients, and
    a parameter unfrozen later trains without rebuilding the optimizer.
    """
    for arg, value in (("lr", lr), ("weight_decay", weight_decay)):
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 <= value < math.inf:
            raise ValueError(f"make_param_groups: {arg} must be a number >= 0 and finite, got {value!r}")
    if not isinstance(layer_decay, (int, float)) or not 0 < layer_decay <= 1:
        raise ValueError(f"make_param_groups: layer_decay must be in (0, 1] (1 = no layer-wise decay), "
                         f"got {layer_decay!r}")
    if embeddings not in _EMBEDDINGS_CHOICES:
        raise ValueError(f"make_param_groups: embeddings must be one of {_EMBEDDINGS_CHOICES}, "
                         f"got {embeddings!r}")

    named = list(model.named_parameters())  # shared (tied) tensors appear once, under their first name
    layer_norm_params = {id(p) for m in model.modules() if isinstance(m, nn.LayerNorm)
                         for p in m.parameters(recurse=False)}
    indices = [i for i in (encoder_layer_index(n) for n, _ in named) if i is not None]
    found = max(indices) + 1 if indices else 0
    if num_layers is None:
        num_layers = found
    elif not isinstance(num_layers, int) or num_layers < found:
        raise ValueError(f"make_param_groups: num_layers={num_layers!r}, but the model has parameters in "
                         f"encoder layer {found - 1}: give at least {found}, or None to count them")
    if layer_decay != 1 and num_layers == 0:
        raise ValueError("make_param_groups: layer_decay < 1 needs encoder layers, but no parameter name "
                         "contains 'encoder.layer.<i>.'")

    groups: dict[tuple[int, bool], dict[str, Any]] = {}
    for name, p in named:
        decay = uses_weight_decay(name) and id(p) not in layer_norm_params
        if layer_decay == 1:
            key, scale = (0, decay), 1.0  # one learning rate: just a decay and a no-decay group
        else:
            key, scale = (_part(name)[0], decay), layer_lr_scale(name, num_layers, layer_decay, embeddings)
        group = groups.setdefault(key, {"params": [], "param_names": [], "lr": lr * scale,
                                        "weight_decay": weight_decay if decay else 0.0})
        group["params"].append(p)
        group["param_names"].append(name)
    return [groups[key] for key in sorted(groups, key=lambda k: (k[0], not k[1]))]


def _name_patterns(names: list[str]) -> list[tuple[str, int]]:
    """Distinct names, each with a count; the layer index is written '*' when the names span layers."""
    several_layers = len({encoder_layer_index(n) for n in names} - {None}) > 1
    counts: dict[str, int] = {}
    for name in names:
        pattern = name
        if several_layers:
            pattern = _LAYER.sub(lambda m: m.group(0).replace(m.group(1), "*"), name)
        counts[pattern] = counts.get(pattern, 0) + 1
    return list(counts.items())


def describe_param_groups(groups: list[dict[str, Any]] | Optimizer) -> str:
    """A table of the groups (lr, weight decay, tensor and number counts) with their name patterns."""
    if isinstance(groups, Optimizer):
        groups = groups.param_groups
    lines = [f"{'group':>5}  {'lr':>10}  {'decay':>6}  {'tensors':>7}  {'numbers':>11}  part"]
    for i, group in enumerate(groups):
        params = list(group["params"])
        names = group.get("param_names")
        parts = sorted({_part(n) for n in names}) if names else []
        if len(parts) <= 2:
            label = ", ".join(label for _, label in parts)
        else:
            label = f"{parts[0][1]} to {parts[-1][1]}"
        lines.append(f"{i:>5}  {group['lr']:>10.4e}  {group.get('weight_decay', 0.0):>6g}  {len(params):>7}  "
                     f"{sum(p.numel() for p in params):>11,}  {label}")
        if names:
            lines += [f"{'':>7}{pattern}" + (f"  x{count}" if count > 1 else "")
                      for pattern, count in _name_patterns(names)]
        else:
            lines.append(f"{'':>7}(no 'param_names' in this group: build it with make_param_groups)")
    return "\n".join(lines)


def print_param_groups(groups: list[dict[str, Any]] | Optimizer) -> None:
    """Print `describe_param_groups(groups)`, to see what each group holds before training."""
    print(describe_param_groups(groups))
