"""What BertModel.forward accepts: every argument checked in one place, once, before the model reads it.

A wrong input to a neural network rarely fails where it is wrong: ids of the wrong dtype fail inside the
embedding, a mask holding 2 is quietly read as "attend twice as little" (and the eager and SDPA kernels
even disagree on it), word vectors of the wrong width fail in a broadcast far away. So each argument's
type, rank, shape, dtype and range is checked here, and a wrong one is a TypeError or ValueError that names
it and says what was expected. What is accepted has the result transformers gives:

- input_ids (B, T) and token_type_ids (B, T): any integer dtype (int8, uint8, ... are widened to int64, as
  an nn.Embedding needs), values in [0, vocab_size) and [0, type_vocab_size); not bool, not float;
- attention_mask (B, T): bool, integer or float, each value 0 (padding) or 1 (token);
- inputs_embeds (B, T, C): floating point, C = hidden_size, the model's dtype (under autocast any float);
  finite (a NaN would spread to every token it is attended by);
- exactly one of input_ids and inputs_embeds; 1 <= T <= max_position_embeddings; B = 0 is an empty batch.

Reading values (the ranges, the mask's 0/1, NaN) costs a read back to the host, so it is done for CPU
tensors outside torch.compile only, with one reduction per argument: on an accelerator it would stall every
step (there, a bad id still fails inside the embedding, as a device-side assert). Shapes and dtypes are
checked everywhere.

The models reach these checks through their base class (pretrained.py's `check_inputs` and `check_labels`),
one call at the top of each forward; the modules inside (embeddings, layers) read what arrives checked.

Read next: hub.py (which folder a model name means).
"""

from __future__ import annotations

from typing import NamedTuple

import torch

# Integer dtypes an id tensor may have; nn.Embedding reads int32 and int64, the narrower ones are widened.
_ID_DTYPES = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)


class CheckedInputs(NamedTuple):
    """The checked arguments, ids widened to a dtype nn.Embedding reads; the others as given."""

    input_ids: torch.Tensor | None
    attention_mask: torch.Tensor | None
    token_type_ids: torch.Tensor | None
    inputs_embeds: torch.Tensor | None


def check_model_inputs(config, model_dtype: torch.dtype, input_ids: torch.Tensor | None,
                       attention_mask: torch.Tensor | None, token_type_ids: torch.Tensor | None,
                       inputs_embeds: torch.Tensor | None) -> CheckedInputs:
    """BertModel.forward's contract (the module docstring): refuse what is wrong, naming the argument.
    config: the model's BertConfig (vocab_size, type_vocab_size, hidden_size, max_position_embeddings)."""
    check_tensors(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                  inputs_embeds=inputs_embeds)
    if (input_ids is None) == (inputs_embeds is None):
        given = "both" if input_ids is not None else "neither"
        raise ValueError(f"give exactly one of input_ids and inputs_embeds, got {given}")
    if input_ids is not None:
        input_ids = check_ids(input_ids, config.vocab_size, "input_ids", "vocab_size")
        shape, source = tuple(input_ids.shape), "input_ids"
    else:
        check_embeds(inputs_embeds, config.hidden_size, model_dtype)
        shape, source = tuple(inputs_embeds.shape[:2]), "inputs_embeds"
    T = shape[1]
    if T == 0:
        raise ValueError(f"{source} has (B, T) = {shape}: no tokens; every input holds at least [CLS] "
                         "and [SEP]")
    if T > config.max_position_embeddings:
        raise ValueError(f"sequence length {T} exceeds the position table (max_position_embeddings="
                         f"{config.max_position_embeddings}); truncate the input (tokenizer max_length)")
    if token_type_ids is not None:
        same_shape(token_type_ids, "token_type_ids", shape, source)
        token_type_ids = check_ids(token_type_ids, config.type_vocab_size, "token_type_ids",
                                   "type_vocab_size")
    if attention_mask is not None:
        same_shape(attention_mask, "attention_mask", shape, source)
        check_mask(attention_mask)
    return CheckedInputs(input_ids, attention_mask, token_type_ids, inputs_embeds)


def check_flags(**flags: object) -> None:
    """Refuse a switch that is not True or False, naming it: "no" would otherwise count as True."""
    for name, value in flags.items():
        if not isinstance(value, bool):
            raise TypeError(f"{name} must be True or False, got {value!r}")


def check_tensors(**inputs: torch.Tensor | None) -> None:
    """Refuse an input that is not a tensor (a list, a NumPy array), naming it: it would fail far inside."""
    for argument, value in inputs.items():
        if value is not None and not isinstance(value, torch.Tensor):
            raise TypeError(f"{argument} must be a torch.Tensor, got {type(value).__name__}; the "
                            "tokenizer makes them: model(**tokenizer(texts, padding=True))")


def same_shape(tensor: torch.Tensor, name: str, shape: tuple[int, int], source: str) -> None:
    """A (B, T) argument must have the shape of the ids (or of inputs_embeds' first two axes)."""
    if tensor.dim() != 2:
        raise ValueError(f"{name} must have shape (B, T), got {tuple(tensor.shape)}")
    if tuple(tensor.shape) != shape:
        raise ValueError(f"{name} has shape {tuple(tensor.shape)}, but {source} has (B, T) = {shape}")


def check_ids(ids: torch.Tensor, limit: int, name: str, limit_name: str) -> torch.Tensor:
    """Refuse ids that are not a (B, T) integer tensor with values in [0, limit); return them in a dtype
    nn.Embedding reads (int8, int16, uint8 widened to int64). The range is read on the CPU only (the
    module docstring says why)."""
    if ids.dim() != 2:
        raise ValueError(f"{name} must have shape (B, T), got {tuple(ids.shape)}")
    if ids.dtype not in _ID_DTYPES:
        raise TypeError(f"{name} must be an integer tensor (int64, int32, int16, int8 or uint8), got "
                        f"{ids.dtype}")
    if ids.dtype not in (torch.int64, torch.int32):
        ids = ids.long()
    if ids.device.type == "cpu" and not torch.compiler.is_compiling() and ids.numel():
        low, high = (int(v) for v in torch.aminmax(ids))
        if low < 0 or high >= limit:
            raise ValueError(f"{name} must lie in [0, {limit}) ({limit_name}), got values from {low} to "
                             f"{high}")
    return ids


def check_mask(attention_mask: torch.Tensor) -> None:
    """1 = token, 0 = padding, in any numeric dtype; another value (2, -1, 0.5, NaN) is refused, where
    transformers would compute with it and give neither the masked nor the unmasked result."""
    if attention_mask.is_complex():
        raise TypeError(f"attention_mask must be bool, integer or float (1 = token, 0 = padding), got "
                        f"{attention_mask.dtype}")
    if attention_mask.dtype == torch.bool:
        return  # True and False are 1 and 0
    if attention_mask.device.type != "cpu" or torch.compiler.is_compiling():
        return  # values are read on the CPU only (the module docstring)
    other = (attention_mask != 0) & (attention_mask != 1)  # NaN is neither
    if other.any():
        value = attention_mask[other][0].item()
        raise ValueError(f"attention_mask must hold only 0 (padding) and 1 (token), got {value!r}; "
                         "build it with the tokenizer, or as (input_ids != pad_token_id).long()")


def check_embeds(inputs_embeds: torch.Tensor, hidden_size: int, model_dtype: torch.dtype) -> None:
    """Word vectors given directly: (B, T, C) floats of the model's width and dtype, finite."""
    if inputs_embeds.dim() != 3:
        raise ValueError(f"inputs_embeds must have shape (B, T, C) with C = hidden_size ({hidden_size}), got "
                         f"{tuple(inputs_embeds.shape)}")
    if not inputs_embeds.is_floating_point():
        raise TypeError(f"inputs_embeds must be a floating-point tensor (word vectors), got "
                        f"{inputs_embeds.dtype}")
    if inputs_embeds.shape[-1] != hidden_size:
        raise ValueError(f"inputs_embeds has {inputs_embeds.shape[-1]} features per token, but the model's "
                         f"hidden_size is {hidden_size}: expected (B, T, {hidden_size})")
    autocast = torch.is_autocast_enabled(inputs_embeds.device.type)
    if inputs_embeds.dtype != model_dtype and not autocast:
        raise TypeError(f"inputs_embeds has dtype {inputs_embeds.dtype}, the model {model_dtype}: cast it "
                        "(inputs_embeds.to(model.dtype)) or run under torch.autocast")
    if inputs_embeds.device.type == "cpu" and not torch.compiler.is_compiling() and inputs_embeds.numel():
        if not torch.isfinite(inputs_embeds).all():
            raise ValueError("inputs_embeds holds NaN or infinite values")


def check_pretraining_labels(labels: torch.Tensor | None, next_sentence_label: torch.Tensor | None,
                             shape: tuple[int, ...], vocab_size: int, ignore_index: int) -> None:
    """BertForPreTraining's labels: (B, T) token ids in [0, vocab_size) or ignore_index (-100); the
    next-sentence labels (B,) or (B, 1), each 0 (IsNext) or 1 (NotNext). Values read on the CPU only."""
    check_tensors(labels=labels, next_sentence_label=next_sentence_label)
    B = shape[0]
    for name, tensor, shapes, allowed in (
            ("labels", labels, [shape], f"token ids in [0, {vocab_size}) or {ignore_index} (not predicted)"),
            ("next_sentence_label", next_sentence_label, [(B,), (B, 1)], "0 (IsNext) or 1 (NotNext)")):
        if tensor is None:
            continue
        if tuple(tensor.shape) not in shapes:
            raise ValueError(f"{name} has shape {tuple(tensor.shape)}, expected "
                             f"{' or '.join(map(str, shapes))} for input_ids of shape {shape}")
        if tensor.dtype not in _ID_DTYPES:
            raise TypeError(f"{name} must be an integer tensor, got {tensor.dtype}")
        if tensor.device.type != "cpu" or torch.compiler.is_compiling():
            continue
        limit = vocab_size if name == "labels" else 2
        bad = ((tensor < 0) | (tensor >= limit)) & (tensor != ignore_index if name == "labels" else True)
        if bad.any():
            raise ValueError(f"{name} must hold {allowed}, got {tensor[bad][0].item()}")
