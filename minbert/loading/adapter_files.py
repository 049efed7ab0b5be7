"""LoRA adapters on disk in `peft`'s own format, and the merged model as a plain Hugging Face folder.

An adapter folder holds what `peft.PeftModel.save_pretrained` writes: adapter_config.json and
adapter_model.safetensors with keys `base_model.model.<module>.lora_A.weight` (r, I) and `.lora_B.weight`
(O, r): peft wraps the model twice (PeftModel -> LoraModel -> the model), and <module> is our name too
(STYLE.md §2). So peft loads what `save_adapter` writes, and `load_adapter` puts peft's folder onto our
BertModel (safetensors, or older peft's adapter_model.bin, weights only). target_modules is written as full
names and read as peft matches it (names or suffixes, a regular expression, "all-linear"); the other fields
go through an allow-list of peft's LoraConfig: a setting LoRALinear does not compute as peft does (DoRA,
rsLoRA, per-layer ranks, PiSSA, ...) is refused by name.

Several adapters on one model, as peft names them: `add_adapter`, `set_adapter`, `disable_adapter`,
`save_adapter(model, folder, name)`. Those not in use sit outside the module tree, so the model's
parameters, state dict and forward are those of the one in use. `save_merged` writes the model with each
adapter folded in (lora.merge_and_unload) as an ordinary checkpoint folder.

Read next: atomic.py (how every save is written whole or not at all).
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import re
from pathlib import Path

import torch
from safetensors.torch import save_file as save_safetensors
from torch import nn

from minbert.loading.atomic import atomic_directory, settled, write_file, write_text
from minbert.loading.checkpoint import CheckpointError, read_weights, save_model
from minbert.loading.errors import user_faults
from minbert.loading.files import check_output_dir, read_json_object
from minbert.loading.hub import ADAPTER_CONFIG
from minbert.lora import (ALL_LINEAR, QUERY_VALUE, LoRALinear, apply_lora, check_lora_settings,
                          lora_layers, merge_and_unload, target_names)

CONFIG_FILE = ADAPTER_CONFIG  # adapter_config.json
WEIGHTS_FILE = "adapter_model.safetensors"
LEGACY_WEIGHTS_FILE = "adapter_model.bin"  # read only: torch.load(weights_only=True), as checkpoint.py
PEFT_PREFIX = "base_model.model."  # PeftModel -> LoraModel -> the transformers model

# adapter_config.json, read by an allow-list of peft's LoraConfig fields (peft 0.21's, with defaults):
# every field is one LoRALinear implements with peft's meaning, or one that changes nothing a loaded adapter
# computes, or it must hold peft's default, else it is refused by name. A field a later peft adds is
# accepted only at an "off" value (None, false, "none", empty), which is every new feature's default.
_IMPLEMENTED = ("peft_type", "r", "lora_alpha", "lora_dropout", "target_modules")  # checked one by one
# Where the adapter came from, which wrapper class peft builds, whether it trains: no output changes.
_DESCRIPTIVE = ("task_type", "auto_mapping", "peft_version", "base_model_name_or_path", "revision",
                "inference_mode", "runtime_config")
# init_lora_weights values that only draw A and B, which the file's weights then replace. The others
# ("pissa", "olora", "loftq", "corda", "eva", "mica", ...) rewrite the base weights or change the forward.
_PLAIN_INIT = ("gaussian", "orthogonal")  # and true or false
# Settings peft reads only while another one is on: they mean nothing while it is off.
_USED_WITH = {"megatron_core": "megatron_config", "qalora_group_size": "use_qalora"}
# Written by save_adapter at peft's defaults, so that peft reads our file as it writes its own.
_OFF = {"use_dora": False, "use_rslora": False, "fan_in_fan_out": False, "bias": "none", "rank_pattern": {},
        "alpha_pattern": {}, "layers_to_transform": None, "modules_to_save": None}
# peft's AutoPeftModel builds the base model from this (a class of transformers' BERT module).
_AUTO_CLASS = {"BertForPreTraining": "BertForPreTraining"}  # anything else: the encoder, BertModel
_AUTO_LIBRARY = "transformers.models.bert.modeling_bert"


def adapter_state(model: nn.Module, adapter_name: str | None = None) -> dict[str, torch.Tensor]:
    """The adapters' A and B under peft's key names (see the module docstring), on the CPU."""
    state = {}
    for name, layer in adapter_layers(model, adapter_name).items():
        state[f"{PEFT_PREFIX}{name}.lora_A.weight"] = layer.lora_A.detach().to("cpu").contiguous()
        state[f"{PEFT_PREFIX}{name}.lora_B.weight"] = layer.lora_B.detach().to("cpu").contiguous()
    return state


def adapter_config(model: nn.Module, adapter_name: str | None = None) -> dict:
    """adapter_config.json's fields for `model`'s adapters (all must share r, alpha and dropout)."""
    layers = adapter_layers(model, adapter_name)
    if not layers:
        raise ValueError(f"{type(model).__name__} has no LoRA adapters to save (apply_lora first)")
    settings = {(layer.r, layer.lora_alpha, layer.lora_dropout.p if isinstance(layer.lora_dropout, nn.Dropout)
                 else 0.0) for layer in layers.values()}
    if len(settings) > 1:
        raise ValueError(f"the adapters differ in (r, alpha, dropout): {sorted(settings)}; peft's file holds "
                         "one setting for them all")
    r, alpha, dropout = settings.pop()
    return {
        "peft_type": "LORA", "task_type": None, "r": r, "lora_alpha": alpha, "lora_dropout": dropout,
        "target_modules": sorted(layers),
        "base_model_name_or_path": getattr(model, "name_or_path", "") or None,
        "inference_mode": True, "init_lora_weights": True, "revision": None, **_OFF,
        "auto_mapping": {"base_model_class": _AUTO_CLASS.get(type(model).__name__, "BertModel"),
                         "parent_library": _AUTO_LIBRARY},
    }


def check_arguments(call: str, model: object, directory: object) -> None:
    """The model and folder of a public call, each of its type: a TypeError naming the argument."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"{call}: model must be a torch nn.Module (a BertModel, ...), got "
                        f"{type(model).__name__}")
    if not isinstance(directory, (str, os.PathLike)):
        raise TypeError(f"{call}: directory must be a folder's path (str or os.PathLike), got "
                        f"{type(directory).__name__}")


@user_faults
def save_adapter(model: nn.Module, directory: str | os.PathLike, adapter_name: str | None = None) -> Path:
    """Write `model`'s adapters (the ones in use, or those named `adapter_name`) as peft's adapter folder
    (adapter_config.json, adapter_model.safetensors) with a README.md model card, all or none (atomic.py: a
    save that fails half-way leaves the old A, B and alpha together; the folder's other files stay).

    A merged adapter is saved as its A and B all the same (merging changes W, not A and B).
    """
    check_arguments("save_adapter", model, directory)
    with atomic_directory(check_output_dir(directory)) as new:
        write_text(new / "README.md", adapter_card(*write_adapter(model, new, adapter_name)))
    return Path(directory)


def adapter_card(config: dict, state: dict[str, torch.Tensor]) -> str:
    """README.md for an adapter folder: peft's front matter (library_name, base_model, tags) and what a user
    needs to use it, read from the files beside it."""
    base = config["base_model_name_or_path"] or "the model it was trained on"
    targets, alpha, r = config["target_modules"], config["lora_alpha"], config["r"]
    return f"""---
library_name: peft
base_model: {json.dumps(base)}
tags:
- lora
- minbert
---

# LoRA adapter

LoRA adapters (Hu et al. 2021) for a BERT encoder ({config["auto_mapping"]["base_model_class"]}), saved by
minbert.

- Rank r = {r}, alpha = {alpha:g} (scaling alpha / r = {alpha / r:g}), dropout {config["lora_dropout"]:g}
- Adapted layers: {len(targets)} ({", ".join(targets[:4])}{", ..." if len(targets) > 4 else ""})
- Parameters: {sum(v.numel() for v in state.values()):,}

## Usage

```python
from peft import AutoPeftModel  # or: minbert.loading.adapter_files.load_adapter(model, folder)

model = AutoPeftModel.from_pretrained("path/to/this/folder")  # builds {base} and puts the adapters on it
merged = model.merge_and_unload()  # one plain BERT again
```
"""


def write_adapter(model: nn.Module, directory: Path, adapter_name: str | None = None) -> tuple[dict, dict]:
    """save_adapter's two files, into a folder that atomic_directory is writing; returns what they hold."""
    config = adapter_config(model, adapter_name)
    state = adapter_state(model, adapter_name)
    write_file(directory / WEIGHTS_FILE,
               lambda path: save_safetensors(state, str(path), metadata={"format": "pt"}))
    write_text(directory / CONFIG_FILE, json.dumps(config, indent=2, sort_keys=True) + "\n")
    return config, state


def read_adapter_config(directory: str | os.PathLike) -> dict:
    """adapter_config.json, checked: a LoRA adapter whose settings minbert's LoRALinear computes."""
    path = Path(directory) / CONFIG_FILE
    if not path.exists():
        raise CheckpointError(f"{directory}: no {CONFIG_FILE}; is this a peft adapter folder?")
    config = read_json_object(path, CheckpointError)  # a folder, unreadable, empty, not UTF-8 or not JSON
    if config.get("peft_type") != "LORA":
        raise CheckpointError(f"{path}: peft_type is {config.get('peft_type')!r}; only LORA adapters load")
    for key in ("r", "lora_alpha", "target_modules"):
        if key not in config:
            raise CheckpointError(f"{path}: has no {key!r}")
    unsupported = [f"{key}={value!r}" for key, value in config.items() if not _allowed(key, value, config)]
    if unsupported:
        plain = " or ".join(map(repr, _PLAIN_INIT))
        raise CheckpointError(f"{path}: settings minbert's LoRA does not implement: {', '.join(unsupported)} "
                              "(it computes r, lora_alpha, lora_dropout and target_modules with peft's "
                              f"meaning; init_lora_weights may be true, false, {plain}; every other setting "
                              "must hold peft's default)")
    targets = config["target_modules"]
    names_list = isinstance(targets, list) and all(isinstance(t, str) for t in targets)
    if not (isinstance(targets, str) or names_list):
        raise CheckpointError(f"{path}: target_modules must be a module name pattern or a list of names, got "
                              f"{json.dumps(targets)[:80]}")
    try:
        check_lora_settings(config["r"], config["lora_alpha"], config.get("lora_dropout", 0.0), str(path))
    except ValueError as error:
        raise CheckpointError(str(error)) from None
    return config


def _allowed(key: str, value: object, config: dict) -> bool:
    """An adapter_config.json field that minbert computes as peft does (the allow-list above)."""
    if key in _IMPLEMENTED or key in _DESCRIPTIVE:
        return True
    if key == "init_lora_weights":
        return isinstance(value, bool) or value in _PLAIN_INIT
    if key in _USED_WITH:
        return _is_off(config.get(_USED_WITH[key]))
    return _is_off(value)


def _is_off(value: object) -> bool:
    """None, False, "none" or empty; not 0, which layers_to_transform reads as layer 0."""
    empty = isinstance(value, (dict, list)) and not value
    return value is None or value is False or value == "none" or empty


@user_faults
def load_adapter(model: nn.Module, directory: str | os.PathLike, adapter_name: str = "default") -> list[str]:
    """Put the adapter folder at `directory` (ours or peft's) onto `model`, and return the adapted modules'
    names. On a model without adapters: apply_lora with the file's settings, then a strict copy of A and B
    (a missing or unknown key, or a wrong shape, is a CheckpointError naming it). On a model with adapters:
    another set named `adapter_name`, not in use until set_adapter (peft's load_adapter). Keys of a model
    with heads load onto the encoder alone, and the other way round.
    """
    check_arguments("load_adapter", model, directory)
    _check_new(model, adapter_name)
    path = _weights_file(Path(directory))  # its config and weights all of one save (atomic.py)
    config, state = settled(directory, lambda: (read_adapter_config(directory), read_weights(path)))
    state = {key.removeprefix(PEFT_PREFIX): value for key, value in state.items()}
    # An adapter saved from a model with heads (keys bert.encoder...) fits the encoder alone, and the other
    # way round: the base_model_prefix convention of checkpoint.load_weights.
    prefix = getattr(model, "base_model_prefix", "")
    under_prefix = bool(state) and all(k.startswith(prefix + ".") for k in state)
    if prefix and not hasattr(model, prefix) and under_prefix:
        state = {key.removeprefix(prefix + "."): value for key, value in state.items()}
        targets = config["target_modules"]
        config["target_modules"] = targets if isinstance(targets, str) else [
            t.removeprefix(prefix + ".") for t in targets]
    elif prefix and hasattr(model, prefix) and not under_prefix:
        state = {f"{prefix}.{key}": value for key, value in state.items()}

    targets = config["target_modules"]
    r, alpha, dropout = config["r"], config["lora_alpha"], config.get("lora_dropout", 0.0)
    with disable_adapter(model):  # the names and shapes of the base model's layers
        if isinstance(targets, str) and targets != ALL_LINEAR:  # peft reads one string as a regexp
            targets = [name for name, module in model.named_modules()
                       if isinstance(module, nn.Linear) and re.fullmatch(targets, name)] or [targets]
        # Keys and shapes are checked before the model changes: a refused adapter leaves it as it was.
        try:
            names = target_names(model, targets)
        except ValueError as error:
            raise CheckpointError(f"{path}: {error}") from None
        expected = {}  # key -> (module name, "A" or "B", the shape the model needs)
        for name in names:
            base = model.get_submodule(name)
            expected[f"{name}.lora_A.weight"] = (name, "A", (r, base.in_features))
            expected[f"{name}.lora_B.weight"] = (name, "B", (base.out_features, r))
        missing, unknown = sorted(set(expected) - set(state)), sorted(set(state) - set(expected))
        if missing or unknown:
            raise CheckpointError(f"{path}: the adapter does not fit the model: missing {missing[:6]}, "
                                  f"unknown {unknown[:6]}")
        for key, (_, _, shape) in expected.items():
            if tuple(state[key].shape) != shape:
                raise CheckpointError(f"{path}: {key} has shape {tuple(state[key].shape)}, the model's is "
                                      f"{shape}")
        layers = _build(model, adapter_name, r, alpha, dropout, names)
    with torch.no_grad():
        for key, (name, part, _) in expected.items():
            getattr(layers[name], f"lora_{part}").copy_(state[key])
    return names


# ----- several named adapters (peft's add_adapter, set_adapter, disable_adapter) -----------------------


def active_adapter(model: nn.Module) -> str | None:
    """The name of the adapters in use (peft's active_adapter; "default" as apply_lora made them), or None."""
    return model.__dict__.get("active_adapter", "default") if lora_layers(model) else None


def adapters_aside(model: nn.Module) -> dict[str, dict[str, LoRALinear]]:
    """The adapters not in use, by name: each a {module name: LoRALinear} around the model's base layers."""
    return model.__dict__.setdefault("_lora_adapters_aside", {})


def adapter_layers(model: nn.Module, adapter_name: str | None = None) -> dict[str, LoRALinear]:
    """The layers of the adapters named (None: those in use)."""
    if adapter_name is None or adapter_name == active_adapter(model):
        return lora_layers(model)
    if adapter_name not in adapters_aside(model):
        raise ValueError(f"{type(model).__name__} has no adapters named {adapter_name!r}; it has "
                         f"{sorted(filter(None, [active_adapter(model), *adapters_aside(model)]))}")
    return adapters_aside(model)[adapter_name]


def _check_new(model: nn.Module, adapter_name: str) -> None:
    if not isinstance(adapter_name, str) or not adapter_name:
        raise TypeError(f"adapter_name must be a non-empty str, got {adapter_name!r}")
    if adapter_name == active_adapter(model) or adapter_name in adapters_aside(model):
        raise ValueError(f"{type(model).__name__} has adapters named {adapter_name!r} already; give another "
                         "name, or merge_and_unload it and load it again")


def add_adapter(model: nn.Module, adapter_name: str, r: int = 8, alpha: float = 16.0, dropout: float = 0.0,
                targets: str | tuple[str, ...] | list[str] = QUERY_VALUE) -> list[str]:
    """Fresh adapters (apply_lora's arguments) named `adapter_name`: apply_lora's, in use, on a model
    without adapters; else kept aside, frozen, until set_adapter (peft's add_adapter). Returns their layers'
    names."""
    _check_new(model, adapter_name)
    with disable_adapter(model):
        names = target_names(model, targets)
        _build(model, adapter_name, r, alpha, dropout, names)
    return names


def _build(model: nn.Module, adapter_name: str, r: int, alpha: float, dropout: float,
           names: list[str]) -> dict[str, LoRALinear]:
    """New adapters on a model whose base layers stand in place (inside disable_adapter)."""
    if not model.__dict__.get("_lora_disabled"):  # the model's first adapters
        apply_lora(model, r, alpha, dropout, names)
        model.__dict__["active_adapter"] = adapter_name
        return lora_layers(model)
    layers = {name: LoRALinear(model.get_submodule(name), r, alpha, dropout).train(model.training)
              for name in names}
    for layer in layers.values():
        layer.lora_A.requires_grad = layer.lora_B.requires_grad = False
    adapters_aside(model)[adapter_name] = layers
    return layers


def set_adapter(model: nn.Module, adapter_name: str) -> None:
    """Put the adapters named `adapter_name` in place of those in use, which are kept aside; the new ones
    train, the others are frozen (peft's set_adapter). Merged adapters are refused: unmerge them first."""
    if adapter_name == active_adapter(model):
        return
    incoming, outgoing = adapter_layers(model, adapter_name), lora_layers(model)
    _refuse_merged(outgoing, "set_adapter")
    _put(model, {name: layer.base_layer for name, layer in outgoing.items()})
    _put(model, incoming)
    aside = adapters_aside(model)
    del aside[adapter_name]
    aside[model.__dict__.get("active_adapter", "default")] = outgoing
    for layers, train in ((outgoing, False), (incoming, True)):
        for layer in layers.values():
            layer.lora_A.requires_grad = layer.lora_B.requires_grad = train
    model.__dict__["active_adapter"] = adapter_name


@contextlib.contextmanager
def disable_adapter(model: nn.Module):
    """`with disable_adapter(model):` the model computes as its base, each LoRALinear's base layer in its
    place, and after it the adapters are back (peft's disable_adapter). Merged adapters are refused: their
    update is in the base weights."""
    layers, disabled = lora_layers(model), model.__dict__.get("_lora_disabled", False)
    _refuse_merged(layers, "disable_adapter")
    _put(model, {name: layer.base_layer for name, layer in layers.items()})
    model.__dict__["_lora_disabled"] = disabled or bool(layers)
    try:
        yield model
    finally:
        _put(model, layers)
        model.__dict__["_lora_disabled"] = disabled


def _put(model: nn.Module, modules: dict[str, nn.Module]) -> None:
    for name, module in modules.items():
        parent, _, child = name.rpartition(".")
        setattr(model.get_submodule(parent), child, module)


def _refuse_merged(layers: dict[str, LoRALinear], call: str) -> None:
    if any(layer.merged for layer in layers.values()):
        merged = next(name for name, layer in layers.items() if layer.merged)
        raise ValueError(f"{call}: the adapters of {merged} (and maybe more) are merged into the base "
                         "weights; unmerge() them first")


def _weights_file(directory: Path) -> Path:
    """adapter_model.safetensors, else the adapter_model.bin older peft releases wrote."""
    for name in (WEIGHTS_FILE, LEGACY_WEIGHTS_FILE):
        if (directory / name).exists():
            return directory / name
    raise CheckpointError(f"{directory}: no {WEIGHTS_FILE} (nor peft's older {LEGACY_WEIGHTS_FILE}) beside "
                          f"{CONFIG_FILE}; holds {sorted(p.name for p in directory.iterdir())}")


@user_faults
def save_merged(model: nn.Module, directory: str | os.PathLike, tokenizer: object | None = None) -> Path:
    """Write the model with its adapters merged in as a plain Hugging Face folder (config.json,
    model.safetensors, and the tokenizer's files if given), through checkpoint.save_model: whole or not at
    all.

    `model` itself is left as it was (adapted, merged or not): a copy is merged and unloaded.
    """
    check_arguments("save_merged", model, directory)
    plain = merge_and_unload(copy.deepcopy(model))
    return save_model(plain, directory, tokenizer=tokenizer)
