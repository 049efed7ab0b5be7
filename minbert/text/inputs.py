"""What the model's forward takes, and the `transformers`-style tokenizer call that builds it.

`BertTokenizer.encode_example` gives one `Encoding` (lists), `batch_encode` a padded `BatchEncoding`
(tensors); calling the tokenizer gives `ModelInputs`, a dict of the same three tensors, so that
`model(**inputs)` passes them as keywords, as `transformers` users write it. The call's arguments
(`transformers`' names, forms and defaults) are sorted out here, so that tokenizer.py keeps the lesson.

Shape legend: B batch, T tokens.

Read next: truncation.py (which pieces survive a window too short for them).
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from typing import NamedTuple

import numpy as np
import torch

from minbert.text.truncation import ALL_STRATEGIES

RETURN_TENSORS = ("pt", "np", None)


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
        others = [(key, value) for key, value in self.items() if not isinstance(value, torch.Tensor)]
        if others:
            key, value = others[0]
            what = "a numpy array" if isinstance(value, np.ndarray) else f"a {type(value).__name__}"
            raise TypeError(f"{key} is {what}, not a tensor: call the tokenizer with "
                            "return_tensors='pt' to get tensors that can move to a device")
        return ModelInputs({key: value.to(device) for key, value in self.items()})


def call_tokenizer(tokenizer, text, text_pair=None, *, padding: bool | str = True,
                   truncation: bool | str = True, max_length: int | None = None,
                   return_tensors: str | None = "pt", add_special_tokens: bool = True,
                   return_token_type_ids: bool | None = True,
                   return_attention_mask: bool | None = True) -> ModelInputs:
    """BertTokenizer.__call__ (see its docstring): batch_encode behind transformers' argument names."""
    texts, pairs, single = split_inputs(text, text_pair)
    pad = _padding_strategy(padding)
    strategy = _truncation_strategy(truncation)
    if return_tensors not in RETURN_TENSORS:
        raise ValueError(f"return_tensors must be 'pt' (torch tensors), 'np' (numpy arrays) or None (lists), "
                         f"got {return_tensors!r}")
    max_length = tokenizer._check_options(max_length, strategy or "head", 128, pairs is not None,
                                          add_special_tokens)
    if strategy is None:
        refuse_overlong(tokenizer, texts, pairs, max_length, add_special_tokens)

    if pad is None:  # each example its own length, never padded
        examples = tokenizer._encode_each(texts, pairs, max_length, strategy or "head", 128,
                                          add_special_tokens)
        rows = {key: [getattr(e, key) for e in examples] for key in Encoding._fields}
    else:
        rows = tokenizer.batch_encode(texts, pairs, max_length=max_length, truncation=strategy or "head",
                                      padding=pad, return_tensors=False,
                                      add_special_tokens=add_special_tokens)._asdict()
    # transformers' None means "what the model takes", which for BERT is both.
    if return_token_type_ids is False:
        del rows["token_type_ids"]
    if return_attention_mask is False:
        del rows["attention_mask"]
    if return_tensors is not None:
        return ModelInputs({key: as_tensor(value, return_tensors) for key, value in rows.items()})
    if single:
        return ModelInputs({key: value[0] for key, value in rows.items()})
    return ModelInputs(rows)


def split_inputs(text: object, text_pair: object) -> tuple[list[str], list[str] | None, bool]:
    """The call's text and text_pair as (first texts, second texts or None, whether one str was given).

    transformers' forms: one str (and one str as its pair), a list of str (and a list of pairs), or a
    list of (a, b) tuples or two-item lists with no text_pair.
    """
    if isinstance(text, str):
        if text_pair is not None and not isinstance(text_pair, str):
            raise TypeError(f"text_pair must be a str when text is a str, got {type(text_pair).__name__}")
        return [text], (None if text_pair is None else [text_pair]), True
    if isinstance(text_pair, str):
        raise TypeError("text_pair must be a list of str, one per text, got a single str")
    if text is None:
        raise TypeError("text must be a str, a list of str or a list of (a, b) pairs, got None")
    items = check_list(text, "text")
    if any(isinstance(item, (tuple, list)) for item in items):
        if text_pair is not None:
            raise TypeError("text holds (a, b) pairs, so text_pair must be None")
        for i, item in enumerate(items):
            if not (isinstance(item, (tuple, list)) and len(item) == 2
                    and all(isinstance(part, str) for part in item)):
                raise TypeError(f"text[{i}] must be an (a, b) pair of str, as text holds pairs, got "
                                f"{_describe(item)}")
        return [a for a, _ in items], [b for _, b in items], False
    texts = check_texts(items, "text")
    if text_pair is None:
        return texts, None, False
    pairs = check_texts(text_pair, "text_pair")
    if len(pairs) != len(texts):
        raise ValueError(f"text_pair has {len(pairs)} items but text has {len(texts)}; give one second "
                         "segment per text")
    return texts, pairs, False


def as_tensor(rows: list[list[int]], return_tensors: str) -> torch.Tensor | np.ndarray:
    """Equal-length rows of ids as one (B, T) tensor: torch.long ("pt") or numpy int64 ("np")."""
    lengths = {len(row) for row in rows}
    if len(lengths) > 1:
        raise ValueError(f"padding=False left examples of {min(lengths)} to {max(lengths)} tokens, which "
                         "cannot be one tensor: pass padding=True, or return_tensors=None for lists")
    width = lengths.pop() if lengths else 0
    # reshape keeps the (B, T) shape when B or T is 0, where a tensor of [] would be (0,).
    if return_tensors == "np":
        return np.array(rows, dtype=np.int64).reshape(len(rows), width)  # (B, T)
    return torch.tensor(rows, dtype=torch.long).reshape(len(rows), width)  # (B, T)


def refuse_overlong(tokenizer, texts: list[str], pairs: list[str] | None, max_length: int,
                    add_special_tokens: bool = True) -> None:
    """truncation=False: an example that does not fit is an error, found before anything is cut."""
    pieces = tokenizer._piece_ids(texts + (pairs or []))
    n = len(texts)
    specials = (3 if pairs is not None else 2) if add_special_tokens else 0
    for i in range(n):
        length = len(pieces[i]) + (len(pieces[n + i]) if pairs is not None else 0) + specials
        if length > max_length:
            what = f"text[{i}] with text_pair[{i}]" if pairs is not None else f"text[{i}]"
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
    """The tokenizer call's truncation argument as one of ALL_STRATEGIES; None: never cut."""
    if truncation is True:
        return "longest_first"  # transformers' meaning; on a single text it keeps the head
    if truncation is False or truncation == "do_not_truncate":
        return None
    if isinstance(truncation, str) and truncation in ALL_STRATEGIES:
        return truncation
    raise ValueError(f"truncation must be True, False, 'do_not_truncate' or one of {ALL_STRATEGIES}, "
                     f"got {truncation!r}")


def check_text(text: object, name: str) -> None:
    if not isinstance(text, str):
        raise TypeError(f"{name} must be a str, got {type(text).__name__}")


def check_list(texts: object, name: str) -> list:
    if isinstance(texts, (str, bytes)):
        raise TypeError(f"{name} must be a list of str, got a single {type(texts).__name__}; "
                        "use encode_example() for one text")
    if isinstance(texts, (Mapping, Set)):  # list() would take a dict's keys, or a set in no fixed order
        raise TypeError(f"{name} must be a list of str, got a {type(texts).__name__}")
    try:
        return list(texts)
    except TypeError:
        raise TypeError(f"{name} must be a list of str, got {type(texts).__name__}") from None


def check_texts(texts: object, name: str) -> list[str]:
    texts = check_list(texts, name)
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"{name}[{i}] must be a str, got {type(text).__name__}")
    return texts


def _describe(item: object) -> str:
    if isinstance(item, (tuple, list)):
        kinds = ", ".join(type(part).__name__ for part in item)
        return f"a {type(item).__name__} of {len(item)} ({kinds})"
    return type(item).__name__
