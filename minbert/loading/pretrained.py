"""What minbert's models and config share with `transformers`', so that a `transformers` user's habits work.

- `ModelOutput`, what a model returns: an OrderedDict as in `transformers` (`out.last_hidden_state`,
  `out["last_hidden_state"]`, `out[0]`, `out.to_tuple()`). The keys are the fields that are not None, so
  `out[i]` counts only what is there; iterating gives the keys, so `a, b = out` unpacks two names.
- `BertPreTrainedModel`, the base class of BertModel and BertForPreTraining, as PreTrainedModel is:
  from_pretrained, save_pretrained and the habits around them; and `check_inputs` / `check_labels`, the one
  call at the top of a forward that refuses a wrong argument by name (forward_contract.py). It holds no
  layer and no step of the model.
- `PretrainedConfig`, the base class of BertConfig: config.json read, written and checked field by field
  (config_json.py); the sizes and their invariants are config.py's.

This is the one file of minbert/loading/ that the lesson files import: everything else about loading and
saving sits behind it.

Read next: forward_contract.py (what a model's forward accepts).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
from collections import OrderedDict
from pathlib import Path

import torch
import torch.utils._pytree as pytree
import torch.utils.checkpoint
from torch import nn

from minbert.loading.atomic import atomic_write_text, settled
from minbert.loading.config_json import CONFIG_JSON, FIELDS
from minbert.loading.errors import MinbertError, user_faults
from minbert.loading.files import read_json_object
from minbert.loading.checkpoint import LoadReport, as_dtype, load_weights, save_model, saved_dtype
from minbert.loading.forward_contract import (CheckedInputs, check_flags, check_model_inputs,
                                              check_pretraining_labels, check_tensors)
from minbert.loading.hub import check_name_or_path, resolve_model
from minbert.loading.schema import Schema, check_fields


class ConfigError(MinbertError, ValueError):
    """A config.json that does not describe a model we can build; the message names the file."""


class PretrainedConfig:
    """config.json in and out for a dataclass subclass (BertConfig), whose fields are config.json's keys."""

    def __post_init__(self) -> None:
        check_fields(dataclasses.asdict(self), Schema(FIELDS), f"{type(self).__name__}.", ValueError)

    def to_dict(self) -> dict:
        """The fields as config.json writes them, plus the keys `transformers` needs to open it."""
        return {"architectures": ["BertModel"], "model_type": "bert", **dataclasses.asdict(self)}

    @classmethod
    def from_dict(cls, values: dict, source: str = "config", *, return_ignored: bool = False):
        """Build a config from config.json's dictionary; `source` names the file in error messages.
        return_ignored: (config, the keys minbert ignores, as transformers does, sorted)."""
        ignored = check_fields(values, CONFIG_JSON, f"{source}: ", ConfigError)
        try:
            config = cls(**{k: v for k, v in values.items() if k in FIELDS})
        except (TypeError, ValueError) as error:
            raise ConfigError(f"{source}: {error}") from None
        return (config, ignored) if return_ignored else config

    @classmethod
    @user_faults
    def from_json_file(cls, path: str | os.PathLike, *, return_ignored: bool = False):
        """Read a Hugging Face config.json (a file, or a directory holding one). return_ignored: (config,
        the keys of the file minbert ignores, as transformers ignores keys it does not know)."""
        path = Path(path) / "config.json" if Path(path).is_dir() else Path(path)
        values = read_json_object(path, ConfigError)  # missing, a folder, unreadable, empty, not JSON
        return cls.from_dict(values, source=str(path), return_ignored=return_ignored)

    @classmethod
    @user_faults
    def from_pretrained(cls, name_or_path: str | os.PathLike | None = None, *, revision: str = "main"):
        """The config of a checkpoint: a directory holding config.json (or the file itself), a name in the
        local Hugging Face cache, or None for the embedded all-MiniLM-L6-v2, as the models'
        from_pretrained find them (hub.py)."""
        check_name_or_path(name_or_path)
        if name_or_path is not None and Path(name_or_path).expanduser().exists():
            return cls.from_json_file(Path(name_or_path).expanduser())  # config.json alone is enough here
        return cls.from_json_file(resolve_model(name_or_path, revision))

    @user_faults
    def to_json_file(self, path: str | os.PathLike) -> Path:
        """Write config.json atomically (a file path, or a directory to write config.json into)."""
        path = Path(path) / "config.json" if Path(path).is_dir() else Path(path)
        atomic_write_text(path, json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n")
        return path

    def save_pretrained(self, directory: str | os.PathLike) -> Path:
        """Write config.json into `directory` (made if missing), as transformers' config.save_pretrained."""
        Path(directory).mkdir(parents=True, exist_ok=True)
        return self.to_json_file(Path(directory) / "config.json")


class ModelOutput(OrderedDict):
    """A dataclass that is also an OrderedDict of its fields that are not None, in field order, as
    transformers' ModelOutput is (so `isinstance(out, dict)` holds and torch.jit.trace(..., strict=False)
    returns it as a dict). Subclasses are dataclasses; see the module docstring for the ways to read one."""

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        # DistributedDataParallel finds an output's tensors through torch's pytree, which sees inside tuples
        # and dicts but not inside a class it has not been told about; unseen, an output left out of the
        # loss (find_unused_parameters=True) fails the next step. transformers registers its outputs too.
        pytree.register_pytree_node(cls, _flatten, lambda values, names: cls(**dict(zip(names, values))),
                                    serialized_type_name=f"{cls.__module__}.{cls.__qualname__}")

    def __post_init__(self) -> None:  # the dataclass's __init__ calls it: the fields become the keys
        for f in dataclasses.fields(self):
            if getattr(self, f.name) is not None:
                super().__setitem__(f.name, getattr(self, f.name))

    def __setattr__(self, name: str, value) -> None:  # a field set later stays its key, as in transformers
        if name in self and value is not None:
            super().__setitem__(name, value)
        super().__setattr__(name, value)

    def __getitem__(self, key: str | int | slice):
        """out["name"] by key; out[0], out[-1], out[1:] over the values that are there."""
        if not isinstance(key, str):
            return self.to_tuple()[key]
        if key not in self:
            raise KeyError(f"{key!r} is not a key of this {type(self).__name__}: its keys are {list(self)} "
                           "(a field that is None, such as hidden_states nobody asked for, is no key)")
        return super().__getitem__(key)

    def __reduce__(self):  # pickled by its fields: OrderedDict's own would call cls() without them
        callable_, _, *rest = super().__reduce__()
        return (callable_, tuple(getattr(self, f.name) for f in dataclasses.fields(self)), *rest)

    def to_tuple(self) -> tuple:
        """The values that are not None, in field order."""
        return tuple(self.values())


def _checkpointed(forward, kwargs: dict, *args, **keywords):
    """A layer's forward under torch.utils.checkpoint, when a backward will need it."""
    if forward.__self__.training and torch.is_grad_enabled():
        return torch.utils.checkpoint.checkpoint(forward, *args, **keywords, **kwargs)
    return forward(*args, **keywords)


def _added_rows(weight: torch.Tensor, n: int, mean_resizing: bool, std: float) -> torch.Tensor:
    """(n, C) new embedding rows, drawn as transformers' resize_token_embeddings draws them."""
    if not mean_resizing:
        return torch.randn(n, weight.shape[1], dtype=weight.dtype, device=weight.device) * std
    old = weight.float()
    mean = old.mean(dim=0)
    covariance = (old - mean).T @ (old - mean) / old.shape[0]
    if not torch.distributions.constraints.positive_definite.check(1e-9 * covariance).all():
        return mean.expand(n, -1).to(weight.dtype)
    return torch.distributions.MultivariateNormal(mean, covariance_matrix=1e-9 * covariance).sample((n,)).to(
        weight.dtype)


def _flatten(output: ModelOutput) -> tuple[list, list[str]]:
    names = [f.name for f in dataclasses.fields(output)]
    return [getattr(output, name) for name in names], names


class BertPreTrainedModel(nn.Module):
    """Loading, saving and the questions a `transformers` user asks of a model (dtype, device, size)."""

    config_class: type[PretrainedConfig]  # the model's config (BertConfig), set by each model class
    base_model_prefix = "bert"  # where a model with heads keeps its encoder (checkpoint.load_weights)
    load_report: LoadReport | None = None  # what from_pretrained's loading did; None for a model built here
    name_or_path: str = ""  # the folder from_pretrained read (transformers' name); "" for a model built here

    @classmethod
    @user_faults
    def from_pretrained(cls, name_or_path: str | os.PathLike | None = None, *, revision: str = "main",
                        return_report: bool = False, dtype: torch.dtype | str | None = None,
                        torch_dtype: torch.dtype | str | None = None, **model_kwargs):
        """Load a Hugging Face-format checkpoint, in eval mode.

        name_or_path: a directory, a name in the local Hugging Face cache (at `revision`), or None for the
        embedded all-MiniLM-L6-v2 (hub.py; it never downloads). What loading did is the LoadReport at
        `model.load_report` (return_report=True: (model, report)); anything that does not fit is a
        CheckpointError naming the key.
        dtype (torch_dtype is its older name): torch.bfloat16, "bfloat16", ... or "auto", the checkpoint's
        own; the default is float32, as in transformers 4. model_kwargs go to the class
        (attn_implementation="eager", add_pooling_layer=False).
        """
        if dtype is not None and torch_dtype is not None and dtype != torch_dtype:
            raise ValueError(f"from_pretrained got dtype={dtype!r} and torch_dtype={torch_dtype!r}: give "
                             "one (torch_dtype is dtype's older name)")
        dtype = torch_dtype if dtype is None else dtype
        # while no save swaps the folder in (atomic.py): the config and weights of one save, never two
        return settled(name_or_path, cls._load, name_or_path, revision, dtype, return_report, model_kwargs)

    @classmethod
    def _load(cls, name_or_path: str | os.PathLike | None, revision: str, dtype: torch.dtype | str | None,
              return_report: bool, model_kwargs: dict):
        model_dir = resolve_model(name_or_path, revision)
        config, ignored = cls.config_class.from_json_file(model_dir, return_ignored=True)
        model = cls(config, **model_kwargs)
        if dtype is not None:
            # Cast before the copy, so that the report says what the checkpoint's tensors were converted to.
            model.to(saved_dtype(model_dir) if dtype == "auto" else
                     as_dtype(dtype, "from_pretrained's dtype", hint=", or 'auto' for the checkpoint's own"))
        model.load_report = load_weights(model, model_dir)
        model.load_report.ignored_config = ignored
        model.name_or_path = str(model_dir)  # SentenceEncoder(model, tokenizer) reads its settings there
        model.eval()
        return (model, model.load_report) if return_report else model

    @user_faults
    def save_pretrained(self, directory: str | os.PathLike, *, tokenizer: object | None = None,
                        max_shard_size: int | str | None = None) -> Path:
        """Write config.json and model.safetensors (and the tokenizer's files, if given) into `directory`,
        in the format from_pretrained and `transformers` read (checkpoint.save_model). max_shard_size
        ("5GB", "200MB", or bytes): weights past it are written as transformers' shards,
        model-00001-of-0000N.safetensors and model.safetensors.index.json."""
        return save_model(self, directory, tokenizer=tokenizer, max_shard_size=max_shard_size)

    def gradient_checkpointing_enable(self, gradient_checkpointing_kwargs: dict | None = None) -> None:
        """Keep no layer's activations for backward, and recompute them there instead (Chen et al. 2016),
        with torch.utils.checkpoint as transformers 5 does it: each layer's forward (not its hooks),
        only in training mode with gradients on, with use_reentrant=False unless the kwargs say otherwise;
        the gradients are the same, the memory of L layers' activations is saved for one more forward."""
        kwargs = {"use_reentrant": False, **(gradient_checkpointing_kwargs or {})}
        for layer in self.base_model.encoder.layer:
            layer.forward = functools.partial(_checkpointed, type(layer).forward.__get__(layer), kwargs)

    def gradient_checkpointing_disable(self) -> None:
        for layer in self.base_model.encoder.layer:
            layer.__dict__.pop("forward", None)

    @property
    def is_gradient_checkpointing(self) -> bool:
        return any("forward" in layer.__dict__ for layer in self.base_model.encoder.layer)

    # transformers 5's names (the ones above are its deprecated aliases)
    activation_checkpointing_enable = gradient_checkpointing_enable
    activation_checkpointing_disable = gradient_checkpointing_disable
    is_activation_checkpointing = is_gradient_checkpointing

    def resize_token_embeddings(self, new_num_tokens: int | None = None,
                                pad_to_multiple_of: int | None = None,
                                mean_resizing: bool = True) -> nn.Embedding:
        """Give the word embeddings `new_num_tokens` rows (rounded up to pad_to_multiple_of), as
        transformers does after tokenizer.add_tokens: rows kept in order, rows past the end dropped, new
        rows drawn from N(mean, 1e-9 cov) of the old rows (mean_resizing; else N(0, initializer_range^2));
        a masked-LM head's bias (tied decoder) grows with them, its new entries 0, as there. config.vocab_size
        follows. Returns the new table."""
        old = self.get_input_embeddings()
        rows = old.num_embeddings if new_num_tokens is None else new_num_tokens
        if pad_to_multiple_of is not None:
            rows = -(-rows // pad_to_multiple_of) * pad_to_multiple_of
        if rows == old.num_embeddings:
            return old
        weight, kept = old.weight.detach(), min(rows, old.num_embeddings)
        padding = old.padding_idx if (old.padding_idx or 0) < rows else None
        new = nn.Embedding(rows, old.embedding_dim, padding, device=weight.device, dtype=weight.dtype)
        with torch.no_grad():
            new.weight[:kept] = weight[:kept]
            if rows > kept:
                new.weight[kept:] = _added_rows(weight, rows - kept, mean_resizing,
                                                self.config.initializer_range)
        new.requires_grad_(old.weight.requires_grad)
        self.set_input_embeddings(new)
        head = getattr(getattr(self, "cls", None), "predictions", None)
        if head is not None:  # the tied decoder's bias: (V,)
            bias = head.bias.detach()
            head.bias = nn.Parameter(torch.cat([bias[:kept], bias.new_zeros(rows - kept)]),
                                     requires_grad=head.bias.requires_grad)
        for module in {self, self.base_model}:
            module.config = module.config.replace(vocab_size=rows)
        return new

    def check_inputs(self, input_ids: torch.Tensor | None, attention_mask: torch.Tensor | None,
                     token_type_ids: torch.Tensor | None, inputs_embeds: torch.Tensor | None,
                     **flags: bool) -> CheckedInputs:
        """forward's arguments checked (forward_contract.py says what is accepted), once per call: the ids
        widened to a dtype nn.Embedding reads, the rest as given; `flags` (output_attentions=..., ...) must
        be True or False. A wrong one is a TypeError or ValueError naming it."""
        checked = check_model_inputs(self.config, self.dtype, input_ids, attention_mask, token_type_ids,
                                     inputs_embeds)
        check_flags(**flags)
        return checked

    def check_labels(self, input_ids: torch.Tensor, labels: torch.Tensor | None,
                     next_sentence_label: torch.Tensor | None, ignore_index: int) -> None:
        """Pre-training labels checked against the ids' shape before the model runs, so that a wrong label
        costs no forward pass (forward_contract.check_pretraining_labels says what is accepted)."""
        check_tensors(input_ids=input_ids)
        check_pretraining_labels(labels, next_sentence_label, tuple(input_ids.shape), self.config.vocab_size,
                                 ignore_index)

    @property
    def dtype(self) -> torch.dtype:
        """The dtype of the floating-point parameters (of the first, as in transformers)."""
        return next(p.dtype for p in self.parameters() if p.is_floating_point())

    @property
    def device(self) -> torch.device:
        """The device of the parameters (of the first, as in transformers)."""
        return next(self.parameters()).device

    def num_parameters(self, only_trainable: bool = False, exclude_embeddings: bool = False) -> int:
        """How many numbers the model learns; a parameter shared by two modules counts once.

        only_trainable: only those with requires_grad. exclude_embeddings: without the embedding tables
        (word, position, segment), as transformers counts "non-embedding" parameters.
        """
        tables = {f"{name}.weight" for name, m in self.named_modules() if isinstance(m, nn.Embedding)}
        return sum(p.numel() for name, p in self.named_parameters()
                   if (p.requires_grad or not only_trainable) and not (exclude_embeddings and name in tables))

    @property
    def base_model(self) -> nn.Module:
        """The encoder: the model itself for BertModel, its `.bert` for a model with heads."""
        return getattr(self, self.base_model_prefix, self)

    def get_input_embeddings(self) -> nn.Embedding:
        """The word embedding table (V, C); the masked-LM decoder is tied to it (heads.py)."""
        return self.base_model.embeddings.word_embeddings

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.base_model.embeddings.word_embeddings = value
