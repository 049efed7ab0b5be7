"""What the model's forward takes, and the `transformers`-style tokenizer call that builds it.

`BertTokenizer.encode` gives one `Encoding` (lists), `batch_encode` a padded `BatchEncoding` (tensors);
calling the tokenizer gives `ModelInputs`, a dict of the same three tensors, so that `model(**inputs)`
passes them as keywords, as `transformers` users write it.

Shape legend: B batch, T tokens.

Read next: truncation.py (which pieces survive a window too short for them).
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import torch

from minbert.truncation import TRUNCATION_STRATEGIES


class Encoding(NamedTuple):
    """One encoded example as lists of ints, each of length T <= max_length."""

    input_ids: list[int]  # [CLS] A [SEP] (B [SEP])
    token_type_ids: list[int]  # segment ids: 0 for [CLS] A [SEP], 1 for B [SEP]
    attention_mask: list[int]  # all ones: padding only appears in a batch


class BatchEncoding(NamedTuple):
    """A padded batch: (B, T) torch.long tensors, or lists of B lists of T ints."""

    input_ids: torch.Tensor | list[list[int]]  # (B, T), [PAD] after each example
    token_type_ids: torch.Tensor | list[list[int]]  # (B, T), 0 on padding
    attention_mask: torch.Tensor | list[list[int]]  # (B, T), 1 = token, 0 = padding


class ModelInputs(dict):
    """What calling a BertTokenizer returns: input_ids, token_type_ids, attention_mask, for model(**inputs).

    A dict, like `transformers`' BatchEncoding, so that `model(**inputs)` passes the three as keywords;
    the keys also read as attributes (inputs.input_ids), and `.to(device)` moves the tensors.
    """

    def __getattr__(self, name: str):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"ModelInputs has no {name!r}; its keys are {list(self)}") from None

    def to(self, device: torch.device | str) -> "ModelInputs":
        """A copy with every tensor on `device`."""
        lists = [key for key, value in self.items() if not isinstance(value, torch.Tensor)]
        if lists:
            raise TypeError(f"{lists[0]} is a list, not a tensor: call the tokenizer with "
                            "return_tensors='pt' to get tensors that can move to a device")
        return ModelInputs({key: value.to(device) for key, value in self.items()})


def call_tokenizer(tokenizer, texts: str | Sequence[str], pairs: str | Sequence[str] | None = None, *,
                   padding: bool | str = True, truncation: bool | str = True, max_length: int | None = None,
                   return_tensors: str | None = "pt") -> ModelInputs:
    """BertTokenizer.__call__ (see its docstring): batch_encode behind transformers' argument names."""
    single = isinstance(texts, str)
    if single:
        if pairs is not None and not isinstance(pairs, str):
            raise TypeError(f"pairs must be a str when texts is a str, got {type(pairs).__name__}")
        texts, pairs = [texts], (None if pairs is None else [pairs])
    elif isinstance(pairs, str):
        raise TypeError("pairs must be a list of str, one per text, got a single str")
    texts = check_texts(texts, "texts")
    if pairs is not None:
        pairs = check_texts(pairs, "pairs")
        if len(pairs) != len(texts):
            raise ValueError(f"pairs has {len(pairs)} items but texts has {len(texts)}; give one "
                             "second segment per text")
    pad = _padding_strategy(padding)
    strategy = _truncation_strategy(truncation)
    if return_tensors not in ("pt", None):
        raise ValueError(f"return_tensors must be 'pt' (torch tensors) or None (lists), got "
                         f"{return_tensors!r}")
    max_length = tokenizer._check_options(max_length, strategy or "head", 128, pairs is not None)
    if strategy is None:
        refuse_overlong(tokenizer, texts, pairs, max_length)

    # Unpadded tensors are built by unpad, from lists.
    tensors = return_tensors == "pt" and pad is not None
    batch = tokenizer.batch_encode(texts, pairs, max_length=max_length, truncation=strategy or "head",
                                   padding=pad or "longest", return_tensors=tensors)
    inputs = ModelInputs(batch._asdict())
    if pad is None:
        inputs = unpad(inputs, batch.attention_mask, return_tensors == "pt")
    if single and return_tensors is None:
        inputs = ModelInputs({key: rows[0] for key, rows in inputs.items()})
    return inputs


def unpad(inputs: ModelInputs, mask: list[list[int]], tensors: bool) -> ModelInputs:
    """Cut each row of a padded list batch back to its own length (padding=False)."""
    lengths = [sum(row) for row in mask]
    rows = {key: [row[:n] for row, n in zip(value, lengths)] for key, value in inputs.items()}
    if not tensors:
        return ModelInputs(rows)
    if len(set(lengths)) > 1:
        raise ValueError(f"padding=False left examples of {min(lengths)} to {max(lengths)} tokens, which "
                         "cannot be one tensor: pass padding=True, or return_tensors=None for lists")
    width = lengths[0] if lengths else 0
    return ModelInputs({key: torch.tensor(value, dtype=torch.long).reshape(len(lengths), width)  # (B, T)
                        for key, value in rows.items()})


def refuse_overlong(tokenizer, texts: list[str], pairs: list[str] | None, max_length: int) -> None:
    """truncation=False: an example that does not fit is an error, found before anything is cut."""
    pieces = tokenizer._piece_ids(texts + (pairs or []))
    n = len(texts)
    for i in range(n):
        length = len(pieces[i]) + 2 + (len(pieces[n + i]) + 1 if pairs is not None else 0)
        if length > max_length:
            what = f"texts[{i}] with pairs[{i}]" if pairs is not None else f"texts[{i}]"
            raise ValueError(f"{what} is {length} tokens, more than max_length={max_length}, and "
                             "truncation=False; pass truncation=True to cut it")


def _padding_strategy(padding: object) -> str | None:
    """The tokenizer call's padding argument as batch_encode's strategy; None: no padding."""
    if padding is True or padding == "longest":
        return "longest"
    if padding == "max_length":
        return "max_length"
    if padding is False or padding == "do_not_pad":
        return None
    raise ValueError(f"padding must be True, False, 'longest', 'max_length' or 'do_not_pad', got {padding!r}")


def _truncation_strategy(truncation: object) -> str | None:
    """The tokenizer call's truncation argument as one of TRUNCATION_STRATEGIES; None: never cut."""
    if truncation is True:
        return "head"
    if truncation is False:
        return None
    if isinstance(truncation, str) and truncation in TRUNCATION_STRATEGIES:
        return truncation
    raise ValueError(f"truncation must be True, False or one of {TRUNCATION_STRATEGIES}, got {truncation!r}")


def check_text(text: object, name: str) -> None:
    if not isinstance(text, str):
        raise TypeError(f"{name} must be a str, got {type(text).__name__}")


def check_texts(texts: object, name: str) -> list[str]:
    if isinstance(texts, (str, bytes)):
        raise TypeError(f"{name} must be a list of str, got a single {type(texts).__name__}; "
                        "use encode() for one text")
    try:
        texts = list(texts)
    except TypeError:
        raise TypeError(f"{name} must be a list of str, got {type(texts).__name__}") from None
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"{name}[{i}] must be a str, got {type(text).__name__}")
    return texts
