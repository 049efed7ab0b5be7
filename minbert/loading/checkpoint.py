"""Read and write Hugging Face-format checkpoints: a directory with config.json and the weights.

Loading (`load_weights`, which from_pretrained calls) is a strict key-for-key copy, because our parameter
names are the checkpoint's (STYLE.md §2), after the legacy fix-ups of checkpoint_keys.py, each reported.
Anything else that does not fit is an error naming the key (a shape mismatch with both shapes, missing or
unknown keys, an unreadable file). A head an encoder-only checkpoint never had is freshly initialised and
reported; a checkpoint's part the model was built without (the heads, the pooler, a task model's
`classifier.*`) is ignored and reported, as transformers' AutoModel does.

Saving writes config.json and model.safetensors (or pytorch_model.bin) with the same names, so
`transformers.BertModel.from_pretrained(directory)` opens what we save, whole or not at all (atomic.py).

Read next: checkpoint_keys.py (the legacy fix-ups).
"""

from __future__ import annotations

import io
import json
import os
import pickle
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file as load_safetensors
from safetensors.torch import save_file as save_safetensors
from torch import nn

from minbert.loading.atomic import atomic_directory, write_file, write_hashed, write_text
from minbert.loading.checkpoint_keys import CheckpointError, normalise_keys
from minbert.loading.files import (MAX_JSON_DEPTH, check_file, check_output_dir, inside, nested_deeper,
                                   read_json_object)
from minbert.loading.schema import Field, Schema, check_fields, read_document


# In order of preference: safetensors cannot run code when read and is checked for truncation.
WEIGHTS_FILES = ("model.safetensors", "pytorch_model.bin")
INDEX_FILES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")  # sharded checkpoints
_OTHER_FORMATS = ("tf_model.h5", "flax_model.msgpack", "model.ckpt.index")


# Heads an encoder-only checkpoint may lack. The pooler is among them: only next-sentence prediction
# trains it (BERT §3.1), and BertForMaskedLM checkpoints are saved without it.
_OPTIONAL_GROUPS = ("cls.predictions.", "cls.seq_relationship.", "pooler.", "bert.pooler.")

# The dtypes a model's weights may be loaded in (from_pretrained's dtype, config.json's torch_dtype).
FLOAT_DTYPES = {str(t).removeprefix("torch."): t
                for t in (torch.float32, torch.bfloat16, torch.float16, torch.float64)}

# A sharded checkpoint's index (each key -> the file that holds it), and a state dict (each name -> a tensor).
_INDEX = Schema({"weight_map": Field("object", items=Field("string"))}, ("weight_map",), unknown="keep")
_STATE_DICT = Field("object", items=Field("tensor"))

_CONFIG_HINT = ("config.json may not match the weights (hidden_size, intermediate_size, vocab_size, "
                "max_position_embeddings, type_vocab_size, num_hidden_layers)")


@dataclass
class LoadReport:
    """What load_weights did besides copying tensors: fix-ups, fresh heads, ignored keys."""

    model_class: str
    weights_file: Path
    fixups: list[str] = field(default_factory=list)  # one line per legacy fix-up applied
    initialised: list[str] = field(default_factory=list)  # keys not in the checkpoint: fresh weights
    ignored: list[str] = field(default_factory=list)  # keys in the checkpoint the model has no use for
    ignored_config: list[str] = field(default_factory=list)  # config.json keys unknown here (and ignored)

    @property
    def exact(self) -> bool:
        """True when every parameter came from the checkpoint."""
        return not self.initialised

    def __str__(self) -> str:
        lines = [f"loaded {self.model_class} from {self.weights_file}"]
        for title, items in (("fix-ups", self.fixups),
                             ("freshly initialised (not in the checkpoint)", self.initialised),
                             ("ignored (in the checkpoint, not used by the model)", self.ignored),
                             ("config.json keys ignored (unknown to minbert; transformers ignores them too)",
                              self.ignored_config)):
            if items:
                lines.append(f"{title}:")
                lines.extend(f"  - {item}" for item in items)
        if len(lines) == 1:
            lines.append("every key copied as is")
        return "\n".join(lines)


# ----- reading weights ----------------------------------------------------------------------------


def find_weights_file(directory: str | os.PathLike) -> Path:
    """The weights file of a checkpoint directory: model.safetensors, else pytorch_model.bin
    (or the index of a sharded checkpoint)."""
    directory = Path(directory)
    for name in WEIGHTS_FILES + INDEX_FILES:
        if (directory / name).is_file():
            return directory / name
    present = sorted(p.name for p in directory.iterdir()) if directory.is_dir() else []
    hint = ""
    if any(name in present for name in _OTHER_FORMATS):
        hint = (" (TensorFlow / Flax weights are not read: convert them once with transformers, "
                "e.g. BertModel.from_pretrained(d, from_tf=True).save_pretrained(d))")
    raise CheckpointError(f"{directory}: no weights file; expected one of {list(WEIGHTS_FILES)}, "
                          f"found {present}{hint}")


def read_weights(path: str | os.PathLike) -> dict[str, torch.Tensor]:
    """Read a state dict from a checkpoint directory or a weights file, onto the CPU.

    `.bin` files are read with `weights_only=True`: a pickle can run arbitrary code, and a state dict
    never needs to. A truncated or corrupt file raises CheckpointError naming the file.
    """
    path = Path(path)
    if path.is_dir():
        path = find_weights_file(path)
    if not path.exists():
        raise CheckpointError(f"no weights file at {path}")
    # A folder, a file this user may not read, an empty file: named as such, never "corrupt".
    check_file(path, CheckpointError)
    if path.stat().st_size == 0:
        raise CheckpointError(f"{path} is empty (0 bytes): the weights were never written, or the copy was "
                              "cut short; save or copy it again")
    if path.name.endswith(".index.json"):
        return _read_sharded(path)
    if path.suffix == ".safetensors":
        try:
            state = load_safetensors(path, device="cpu")
        except (SafetensorError, OSError) as error:
            raise CheckpointError(f"{path}: not a readable safetensors file ({error}); it may be "
                                  "truncated or corrupt: download or save it again") from None
    else:
        state = read_torch(path)
    return _check_state_dict(state, path)


def read_torch(path: Path, data: bytes | None = None) -> object:
    """A PyTorch file (`path`, or its bytes `data`, already read) with torch.load(weights_only=True): tensors
    and plain values only, so that no file minbert reads can run code; refused as a CheckpointError naming
    the file."""
    try:
        loaded = torch.load(path if data is None else io.BytesIO(data), map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as error:
        if "Weights only load failed" in str(error):
            raise CheckpointError(
                f"{path}: holds Python objects other than tensors and plain values, which minbert refuses "
                "to unpickle (torch.load(weights_only=True), so that a file cannot run code); it was not "
                "written by minbert: re-save its tensors as a plain dict") from None
        raise CheckpointError(f"{path}: not a readable PyTorch file ({error}); it may be corrupt") from None
    except (RuntimeError, EOFError, KeyError, ValueError, OSError) as error:
        # Truncation surfaces as a zip error (RuntimeError), garbage as a KeyError from the unpickler.
        first_line = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise CheckpointError(f"{path}: not a readable PyTorch file ({type(error).__name__}: "
                              f"{first_line}); it may be truncated or corrupt: download or save it "
                              "again") from None
    if nested_deeper(loaded):  # what reads it next (the schema's messages, json.dumps) would recurse
        raise CheckpointError(f"{path}: its values nest more than {MAX_JSON_DEPTH} deep; a state dict is "
                              "flat, a training checkpoint a few levels deep")
    return loaded


def _read_sharded(index: Path) -> dict[str, torch.Tensor]:
    """A sharded checkpoint: the index maps each key to the file that holds it."""
    weight_map = read_document(index, _INDEX, CheckpointError)["weight_map"]
    state: dict[str, torch.Tensor] = {}
    for shard in sorted(set(weight_map.values())):
        file = inside(index.parent, shard, str(index), CheckpointError)
        if file.is_dir() or file.name.endswith(".index.json"):  # the folder, a link to it, an index: loops
            what = "a folder" if file.is_dir() else "an index"
            raise CheckpointError(f"{index}: names {shard!r}, which is {what}; each shard is a weights "
                                  "file of the folder")
        state.update(read_weights(file))
    missing = sorted(set(weight_map) - set(state))
    if missing:
        raise CheckpointError(f"{index}: the index lists keys no shard holds: {_some(missing)}")
    return state


def _check_state_dict(state: object, path: Path) -> dict[str, torch.Tensor]:
    """A flat {name: tensor} dict, not a training checkpoint that nests one."""
    if not isinstance(state, dict):
        raise CheckpointError(f"{path}: holds a {type(state).__name__}, not a state dict")
    nested = [k for k in ("state_dict", "model", "model_state_dict") if isinstance(state.get(k), dict)]
    if nested:
        raise CheckpointError(f"{path}: looks like a training checkpoint (its weights are under "
                              f"{nested[0]!r}); save that dict on its own as the weights file")
    check_fields(state, _STATE_DICT, f"{path}: ", CheckpointError)
    return state


def as_dtype(value: object, what: str, hint: str = "") -> torch.dtype:
    """A floating-point torch.dtype from itself or its name ("bfloat16", "torch.bfloat16"); `what` names
    the argument or the file in the error, `hint` adds what else it may be."""
    name = str(value).removeprefix("torch.")
    if isinstance(value, (str, torch.dtype)) and name in FLOAT_DTYPES:
        return FLOAT_DTYPES[name]
    raise ValueError(f"{what} must be a floating-point torch.dtype or its name ({', '.join(FLOAT_DTYPES)})"
                     f"{hint}; got {value!r}")


def saved_dtype(model_dir: str | os.PathLike) -> torch.dtype:
    """The dtype a checkpoint was saved in, which from_pretrained(dtype="auto") loads it in, as
    transformers does: config.json's dtype (transformers 5's name) or torch_dtype, else the dtype of the
    weights' first floating-point tensor."""
    config_file = Path(model_dir) / "config.json"
    values = read_json_object(config_file, CheckpointError)
    for key in ("dtype", "torch_dtype"):
        if values.get(key) is not None:
            return as_dtype(values[key], f"{config_file}: {key}")
    state = read_weights(model_dir)
    return next((v.dtype for v in state.values() if v.is_floating_point()), torch.float32)


# ----- loading -----------------------------------------------------------------------------------


def load_weights(model: nn.Module, model_dir: str | os.PathLike) -> LoadReport:
    """Copy the checkpoint in `model_dir` into `model`, key for key, after the legacy fix-ups.

    As in Hugging Face, a model holding the encoder under `base_model_prefix` ("bert") reads bert.* and cls.*
    keys; the encoder itself reads the keys without the prefix and ignores the checkpoint's heads. Heads an
    encoder-only checkpoint lacks stay fresh, reported and warned about; any other disagreement is a
    CheckpointError. Returns the LoadReport.
    """
    model_dir = Path(model_dir)
    prefix = f"{model.base_model_prefix}." if hasattr(model, model.base_model_prefix) else ""
    if prefix:
        _check_tied_config(model_dir / "config.json")
    weights_file = find_weights_file(model_dir)
    saved = read_weights(weights_file)
    state, fixups = normalise_keys(saved, prefix)

    expected = model.state_dict()
    report = LoadReport(type(model).__name__, weights_file, fixups)
    # Parts of the checkpoint the model was built without: the heads, for the encoder alone; the pooler,
    # for an encoder built with add_pooling_layer=False (as in transformers, whose loader skips them too).
    absent = tuple(g for g in ("cls.", f"{prefix}pooler.") if not any(k.startswith(g) for k in expected))
    absent += _other_heads(saved, model)
    report.ignored = sorted(k for k in state if k.startswith(absent))
    state = {k: v for k, v in state.items() if not k.startswith(absent)}

    _check_keys(state, expected, model.config.num_hidden_layers, weights_file)
    report.initialised = sorted(set(expected) - set(state))
    _check_shapes(state, expected, weights_file)
    converted = _copy(model, state, weights_file)
    if converted:
        report.fixups.append(f"converted {converted}")
    if report.initialised:
        warnings.warn(f"{weights_file}: freshly initialised (not in the checkpoint): "
                      f"{_some(report.initialised)}", stacklevel=6)  # from_pretrained's caller: past
        # _load, atomic.settled, from_pretrained and errors.user_faults
    return report


def _other_heads(saved: dict, model: nn.Module) -> tuple[str, ...]:
    """The heads of a task model (classifier., qa_outputs., ...) that sit beside its encoder's `bert.` keys
    and that `model` has no module for: another model's heads, not a misfit of the encoder."""
    if not any(k.startswith("bert.") for k in saved):
        return ()
    ours = {name for name, _ in model.named_children()} | {"cls"}  # cls.: load_weights' own rule above
    return tuple(sorted({k.split(".")[0] + "." for k in saved if not k.startswith("bert.")} -
                        {f"{name}." for name in ours}))


def _check_tied_config(config_file: Path) -> None:
    """config.json may say the decoder is untied; our masked-LM head cannot represent that."""
    values = read_json_object(config_file, CheckpointError)
    if values.get("tie_word_embeddings") is False:
        raise CheckpointError(f"{config_file}: tie_word_embeddings is false, but minbert's masked-LM "
                              "decoder is always tied to the word embeddings; load a BertModel instead")


def _check_keys(state: dict, expected: dict, num_layers: int, source: Path) -> None:
    """Unknown keys and missing keys are errors, except a whole optional head that is absent."""
    unknown = sorted(set(state) - set(expected))
    missing = sorted(set(expected) - set(state))
    absent = [g for g in _OPTIONAL_GROUPS if not any(k.startswith(g) for k in state)]  # whole heads
    fatal_missing = [key for key in missing if not key.startswith(tuple(absent))]
    if not unknown and not fatal_missing:
        return
    problems = []
    if fatal_missing:
        problems.append(f"{len(fatal_missing)} missing key(s): {_some(fatal_missing)}")
    if unknown:
        problems.append(f"{len(unknown)} unknown key(s): {_some(unknown)}")
    raise CheckpointError(f"{source}: the checkpoint does not fit the model; "
                          + "; ".join(problems) + _layer_hint(state, num_layers))


def _layer_hint(state: dict, num_layers: int) -> str:
    layers = {int(m.group(1)) for k in state if (m := re.search(r"encoder\.layer\.(\d+)\.", k))}
    if layers and len(layers) != num_layers:
        return (f" (the weights have {len(layers)} layers, config.json says num_hidden_layers="
                f"{num_layers}: {_CONFIG_HINT})")
    return f" ({_CONFIG_HINT}, or this is not a BERT checkpoint)"


def _check_shapes(state: dict, expected: dict, source: Path) -> None:
    wrong = [f"{k}: checkpoint {tuple(v.shape)}, model {tuple(expected[k].shape)}"
             for k, v in state.items() if v.shape != expected[k].shape]
    if wrong:
        raise CheckpointError(f"{source}: shape mismatch for {len(wrong)} key(s): " + "; ".join(wrong[:10])
                              + (" ..." if len(wrong) > 10 else "") + f". {_CONFIG_HINT}")


def _copy(model: nn.Module, state: dict, source: Path) -> str:
    """Copy under no_grad; refuse non-finite values (a corrupt file that still parsed)."""
    targets = model.state_dict(keep_vars=True)
    converted: dict[str, int] = {}
    with torch.no_grad():
        for key, value in state.items():
            if value.is_floating_point() and not torch.isfinite(value).all():
                raise CheckpointError(f"{source}: {key} holds NaN or infinite values; the file is corrupt "
                                      "or the model diverged")
            target = targets[key]
            if value.dtype != target.dtype:
                name = f"{value.dtype} to {target.dtype}".replace("torch.", "")
                converted[name] = converted.get(name, 0) + 1
            target.copy_(value)
    return ", ".join(f"{n} tensor(s) from {name}" for name, n in converted.items())


# ----- saving ------------------------------------------------------------------------------------


def save_model(model: nn.Module, directory: str | os.PathLike,
               format: Literal["safetensors", "bin"] = "safetensors",
               tokenizer: object | None = None, max_shard_size: int | str | None = None) -> Path:
    """Write config.json and the weights (and the tokenizer's vocabulary, if given) into `directory`, whole
    or not at all (atomic.py): a failure half-way leaves the folder as it was. Other files in the folder stay,
    except a weights file of either format left from an earlier save, which the reader would prefer."""
    with model_folder(directory) as new:
        write_model(model, new, format, tokenizer, max_shard_size)
    return Path(directory)


def model_folder(directory: str | os.PathLike):
    """atomic_directory for a model folder: refused before anything is written when `directory` or a parent
    is a file; an earlier save's weights, of either format and sharded or not, are replaced, the folder's
    other files kept."""
    directory = check_output_dir(directory)
    shards = tuple(p.name for p in directory.glob("model-*-of-*.safetensors"))
    return atomic_directory(directory, replaces=WEIGHTS_FILES + INDEX_FILES + shards)


def shard(state: dict[str, torch.Tensor], max_shard_size: int | str) -> dict[str, dict[str, torch.Tensor]]:
    """{file name: its tensors}, split by huggingface_hub's split_torch_state_dict_into_shards, as transformers'
    save_pretrained splits them: one shard is model.safetensors, N are model-0000i-of-0000N.safetensors.
    Sizes: bytes, or a number and KB, MB, GB or TB (powers of 1000), as there."""
    from huggingface_hub import split_torch_state_dict_into_shards  # only a sharded save pays its import

    try:
        if not isinstance(max_shard_size, (int, str)):  # a float of bytes, a None: no size
            raise ValueError
        split = split_torch_state_dict_into_shards(state, max_shard_size=max_shard_size)
    except ValueError:
        raise ValueError(f"max_shard_size must be a number of bytes or a size such as '5GB' or '200MB' "
                         f"(KB, MB, GB, TB), got {max_shard_size!r}") from None
    return {name: {key: state[key] for key in keys} for name, keys in split.filename_to_tensors.items()}


def write_model(model: nn.Module, directory: Path, format: Literal["safetensors", "bin"] = "safetensors",
                tokenizer: object | None = None, max_shard_size: int | str | None = None) -> None:
    """save_model's files, into a folder that atomic_directory is writing.

    The keys are the model's own (BertModel: embeddings.*; BertForPreTraining: bert.*, cls.*) and
    carry no decoder keys: the decoder is tied, and transformers re-ties it on load.
    """
    if format not in ("safetensors", "bin"):
        raise ValueError(f"format must be 'safetensors' or 'bin', got {format!r}")
    if max_shard_size is not None and format != "safetensors":
        raise ValueError("max_shard_size shards safetensors files only (format='safetensors')")
    config = getattr(model, "config", None)
    if not callable(getattr(config, "to_dict", None)):  # a BertConfig (config.py, which imports this file)
        raise TypeError(f"save_model needs a model with a BertConfig at .config, got {type(model).__name__}")
    if tokenizer is not None and not callable(getattr(tokenizer, "save", None)):
        raise TypeError(f"tokenizer must have a save(directory) method, got {type(tokenizer).__name__}")
    state = {k: v.detach().to("cpu").contiguous() for k, v in model.state_dict().items()}
    _refuse_shared(state)
    if format == "safetensors":
        shards = shard(state, max_shard_size) if max_shard_size is not None else {WEIGHTS_FILES[0]: state}
        for name, tensors in shards.items():  # transformers refuses safetensors files without format metadata
            write_file(directory / name,
                       lambda path: save_safetensors(tensors, str(path), metadata={"format": "pt"}))
        if len(shards) > 1:  # transformers' index: its metadata, and each key's file
            index = {"metadata": {"total_parameters": sum(p.numel() for p in model.parameters()),
                                  "total_size": sum(v.numel() * v.element_size() for v in state.values())},
                     "weight_map": {key: name for name, tensors in shards.items() for key in tensors}}
            write_text(directory / INDEX_FILES[0], json.dumps(index, indent=2, sort_keys=True) + "\n")
    else:  # through a file object, a full disk's error keeps its errno
        write_hashed(directory / WEIGHTS_FILES[1], lambda file: torch.save(state, file))

    # torch_dtype: what from_pretrained(dtype="auto") reads back, ours and transformers' (4 and 5) alike.
    dtype = next((v.dtype for v in state.values() if v.is_floating_point()), torch.float32)
    values = {**config.to_dict(), "architectures": [type(model).__name__], "tie_word_embeddings": True,
              "torch_dtype": str(dtype).removeprefix("torch.")}
    write_text(directory / "config.json", json.dumps(values, indent=2, sort_keys=True) + "\n")
    if tokenizer is not None:
        tokenizer.save(directory)


def _refuse_shared(state: dict[str, torch.Tensor]) -> None:
    """safetensors cannot store two names for one memory; our layout has none, so one is a bug."""
    seen: dict[tuple, str] = {}
    for key, value in state.items():
        if value.numel() == 0:
            continue
        ident = (value.untyped_storage().data_ptr(), value.storage_offset(), tuple(value.shape))
        if ident in seen:
            raise CheckpointError(f"{seen[ident]} and {key} share memory (tied parameters); minbert's "
                                  "checkpoint layout stores each tensor once, so only one may be a parameter")
        seen[ident] = key


def _some(keys: list[str], limit: int = 12) -> str:
    shown = ", ".join(keys[:limit])
    return shown + (f", ... ({len(keys) - limit} more)" if len(keys) > limit else "")
