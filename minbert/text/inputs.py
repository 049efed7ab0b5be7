"""What the model's forward takes, and the `transformers`-style tokenizer call that builds it.

Calling the tokenizer gives `ModelInputs`, a dict of the three tensors, so that `model(**inputs)` passes
them as keywords, as `transformers` users write it. The call's arguments (`transformers`' names, forms and
defaults) are sorted out here, so that tokenizer.py keeps the lesson; what only the `tokenizers` library's
Encodings hold (offsets, overflowing windows, the special tokens mask) comes from there
(`from_encodings`), as in transformers' fast tokenizer.

Shape legend: B batch, T tokens.

Read next: truncation.py (which pieces survive a window too short for them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
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

    encodings: list | None = None  # the tokenizers Encodings, when the call asked for what they hold

    def word_ids(self, batch_index: int = 0) -> list[int | None]:
        """The word each token of row `batch_index` comes from (None: a special token or padding), as
        transformers' BatchEncoding.word_ids."""
        if self.encodings is None:
            raise ValueError("word_ids() reads the tokenizers Encodings, which a call keeps when it asks for "
                             "what they hold: pass return_offsets_mapping=True (or is_split_into_words=True)")
        return self.encodings[batch_index].word_ids

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
        moved = ModelInputs({key: value.to(device) for key, value in self.items()})
        moved.encodings = self.encodings
        return moved


def call_tokenizer(tokenizer, text, text_pair=None, *, padding: bool | str = True,
                   truncation: bool | str = True, max_length: int | None = None,
                   return_tensors: str | None = "pt", add_special_tokens: bool = True,
                   return_token_type_ids: bool | None = True,
                   return_attention_mask: bool | None = True, return_special_tokens_mask: bool = False,
                   return_offsets_mapping: bool = False, return_overflowing_tokens: bool = False,
                   stride: int = 0, is_split_into_words: bool = False) -> ModelInputs:
    """BertTokenizer's call, `model(**tokenizer(text))`, with `transformers`' arguments and meanings.

    text: one str, a list of str, or a list of (a, b) pairs; text_pair: the second segments, one per text
        ([CLS] a [SEP] b [SEP], segment ids 0, then 1).
    padding: True or "longest", "max_length", or False / "do_not_pad" (then only equal lengths make
        tensors: use return_tensors=None for ragged lists).
    truncation: True is "longest_first"; "only_first", "only_second", "head", "tail", "head+tail"
        (truncation.py); False / "do_not_truncate" never cuts, and a too-long example is a ValueError.
    max_length: counts the special tokens (word pieces only with add_special_tokens=False); default
        `model_max_length`. return_tensors: "pt" (B, T) torch.long, "np", or None (lists).
    return_special_tokens_mask, return_offsets_mapping, return_overflowing_tokens (with stride),
    is_split_into_words: read from the `tokenizers` library's Encodings (from_encodings), kept at
    `inputs.encodings`; their truncation is the library's, so "head+tail" is refused there.

    padding=True, truncation=True and return_tensors="pt" differ from `transformers`' defaults on purpose:
    `model(**tokenizer(texts))` then runs as written. One str gives a batch of one, (1, T), with "pt" or
    "np", flat lists with None, as in `transformers`.
    """
    texts, pairs, single = (split_words if is_split_into_words else split_inputs)(text, text_pair)
    pad = _padding_strategy(padding)
    strategy = _truncation_strategy(truncation)
    if return_tensors not in RETURN_TENSORS:
        raise ValueError(f"return_tensors must be 'pt' (torch tensors), 'np' (numpy arrays) or None (lists), "
                         f"got {return_tensors!r}")
    max_length = tokenizer._check_options(max_length, strategy or "head", 128, pairs is not None,
                                          add_special_tokens)
    if stride and not return_overflowing_tokens:
        raise ValueError(f"stride={stride} is the overlap of the overflowing windows: pass "
                         "return_overflowing_tokens=True with it")
    encodings = None
    if any((return_special_tokens_mask, return_offsets_mapping, return_overflowing_tokens,
            is_split_into_words)):
        rows, encodings = from_encodings(tokenizer, texts, pairs, pad, strategy, max_length,
                                         add_special_tokens, return_overflowing_tokens, stride,
                                         is_split_into_words)
        single = single and not return_overflowing_tokens  # windows are rows, as in transformers
        for key, wanted in (("special_tokens_mask", return_special_tokens_mask),
                            ("offset_mapping", return_offsets_mapping)):
            rows.pop(key) if not wanted else None
    else:
        if strategy is None:  # lengths found before anything is cut
            pieces, n = tokenizer._piece_ids(texts + (pairs or [])), len(texts)
            specials = (3 if pairs is not None else 2) if add_special_tokens else 0
            refuse_overlong([len(pieces[i]) + (len(pieces[n + i]) if pairs is not None else 0) + specials
                             for i in range(n)], pairs is not None, max_length)
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
        inputs = ModelInputs({key: as_tensor(value, return_tensors) for key, value in rows.items()})
    else:
        inputs = ModelInputs({key: value[0] for key, value in rows.items()} if single else rows)
    inputs.encodings = encodings
    return inputs


def from_encodings(tokenizer, texts: list, pairs: list | None, pad: str | None, strategy: str | None,
                   max_length: int, add_special_tokens: bool, overflow: bool, stride: int,
                   words: bool) -> tuple[dict[str, list], list]:
    """The rows of the call from the `tokenizers` library's own Encodings (its truncation, with `stride`
    windows as overflow, and its padding), as transformers' BertTokenizerFast gets them: (rows by key,
    the Encodings, one per row)."""
    if not isinstance(stride, int) or isinstance(stride, bool) or stride < 0:
        raise ValueError(f"stride must be an int >= 0, got {stride!r}")
    if strategy == "head+tail":
        raise ValueError("truncation='head+tail' keeps two ends of a text, which the tokenizers library's "
                         "Encodings (offsets, overflow, special tokens mask, words) cannot cut: use 'head', "
                         "'tail' or a pair strategy")
    budget = max_length - ((3 if pairs is not None else 2) if add_special_tokens else 0)
    if overflow and strategy and pairs is None and stride >= budget:  # tokenizers would panic
        raise ValueError(f"stride={stride} must be below the {budget} word pieces a window of "
                         f"max_length={max_length} holds")
    backend = tokenizer.backend
    if strategy is not None:
        backend.enable_truncation(max_length, stride=stride if overflow else 0,
                                  strategy="longest_first" if strategy in ("head", "tail") else strategy,
                                  direction="left" if strategy == "tail" else "right")
    try:
        encodings = backend.encode_batch(texts if pairs is None else list(zip(texts, pairs)),
                                         is_pretokenized=words, add_special_tokens=add_special_tokens)
    except BaseException as error:  # a truncation the pair cannot take (tokenizers' Exception, or its panic)
        if not (type(error) is Exception or type(error).__name__ == "PanicException"):
            raise
        raise ValueError(f"truncation={strategy!r}, max_length={max_length}, stride={stride}: "
                         f"{str(error).splitlines()[0]}") from None
    finally:
        backend.no_truncation()
    if strategy is None:
        refuse_overlong([len(e.ids) for e in encodings], pairs is not None, max_length)
    samples = [i for i, e in enumerate(encodings) for _ in range(1 + (len(e.overflowing) if overflow else 0))]
    encodings = [w for e in encodings for w in ([e, *e.overflowing] if overflow else [e])]
    width = max_length if pad == "max_length" else max((len(e.ids) for e in encodings), default=0)
    for e in encodings if pad else ():
        e.pad(width, pad_id=tokenizer.pad_token_id, pad_token="[PAD]")
    rows = {key: [getattr(e, name) for e in encodings] for key, name in (
        ("input_ids", "ids"), ("token_type_ids", "type_ids"), ("attention_mask", "attention_mask"),
        ("special_tokens_mask", "special_tokens_mask"), ("offset_mapping", "offsets"))}
    if overflow:
        rows["overflow_to_sample_mapping"] = samples
    return rows, encodings


def split_words(text: object, text_pair: object) -> tuple[list[list[str]], list[list[str]] | None, bool]:
    """is_split_into_words: text is one list of words, or a batch of such lists (text_pair likewise)."""
    def batch(value: object, name: str) -> tuple[list[list[str]], bool]:
        items = check_list(value, name)
        if all(isinstance(word, str) for word in items):
            return [items], True
        return [check_texts(words, f"{name}[{i}]") for i, words in enumerate(items)], False
    texts, single = batch(text, "text")
    pairs = None if text_pair is None else batch(text_pair, "text_pair")[0]
    if pairs is not None and len(pairs) != len(texts):
        raise ValueError(f"text_pair has {len(pairs)} items but text has {len(texts)}")
    return texts, pairs, single


# What pad() fills each key with past an example's end (input_ids: the tokenizer's [PAD] id), as transformers.
PAD_VALUES = {"input_ids": None, "token_type_ids": 0, "attention_mask": 0, "special_tokens_mask": 1}


def pad_inputs(tokenizer, encoded_inputs, padding: bool | str = True, max_length: int | None = None,
               pad_to_multiple_of: int | None = None, return_attention_mask: bool | None = None,
               return_tensors: str | None = "pt") -> ModelInputs:
    """BertTokenizer.pad: examples already encoded (a list of dicts, or a dict of lists) padded into one
    batch, as transformers' tokenizer.pad (which its DataCollatorWithPadding calls): input_ids with [PAD],
    token_type_ids 0, attention_mask 0 (made where missing), special_tokens_mask 1; other keys (labels) are
    stacked as they are. return_tensors="pt" by default, as the call's (transformers': None)."""
    features = isinstance(encoded_inputs, Sequence) and encoded_inputs  # a collator's: one dict per example
    if features and all(isinstance(f, Mapping) for f in encoded_inputs):
        columns = {key: [f[key] for f in encoded_inputs] for key in encoded_inputs[0]}
    elif isinstance(encoded_inputs, Mapping) and "input_ids" in encoded_inputs:
        columns = dict(encoded_inputs)
    else:
        raise TypeError("pad takes a list of encoded examples (dicts with input_ids) or a dict of lists, got "
                        f"{type(encoded_inputs).__name__}")
    def as_list(value):  # a dataset's tensors or arrays, as lists
        return value.tolist() if isinstance(value, (torch.Tensor, np.ndarray)) else value
    columns = {key: as_list(value) for key, value in columns.items()}
    single = bool(columns["input_ids"]) and isinstance(columns["input_ids"][0], int)  # one example's dict
    columns = {key: [value] if single else [as_list(x) for x in value] for key, value in columns.items()}
    if return_attention_mask is not False and "attention_mask" not in columns:
        columns["attention_mask"] = [[1] * len(row) for row in columns["input_ids"]]
    strategy = _padding_strategy(padding)
    width = max(map(len, columns["input_ids"]), default=0)
    if strategy == "max_length":
        width = tokenizer.model_max_length if max_length is None else max_length
    if strategy and pad_to_multiple_of:
        width = -(-width // pad_to_multiple_of) * pad_to_multiple_of
    for key, fill in {**PAD_VALUES, "input_ids": tokenizer.pad_token_id}.items():
        if key in columns and strategy:
            columns[key] = [list(row) + [fill] * (width - len(row)) for row in columns[key]]
    if return_tensors not in RETURN_TENSORS:
        raise ValueError(f"return_tensors must be 'pt', 'np' or None, got {return_tensors!r}")
    if return_tensors is None:
        return ModelInputs({k: v[0] for k, v in columns.items()} if single else columns)
    try:
        return ModelInputs({k: as_tensor(v, return_tensors) if k in PAD_VALUES else
                            (np.array(v) if return_tensors == "np" else torch.tensor(v))
                            for k, v in columns.items()})
    except (TypeError, ValueError, RuntimeError) as error:
        key = "" if "padding=False" in str(error) else next(k for k in columns if k not in PAD_VALUES)
        raise ValueError(f"pad: {key or 'the batch'} cannot be one tensor ({str(error).splitlines()[0]})") \
            from None


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
            check_texts(item, f"text[{i}]")
        return [a for a, _ in items], [b for _, b in items], False
    texts = check_texts(items, "text")
    if text_pair is None:
        return texts, None, False
    pairs = check_texts(text_pair, "text_pair")
    if len(pairs) != len(texts):
        raise ValueError(f"text_pair has {len(pairs)} items but text has {len(texts)}; give one second "
                         "segment per text")
    return texts, pairs, False


def as_tensor(rows: list, return_tensors: str) -> torch.Tensor | np.ndarray:
    """Equal-length rows of ids as one (B, T) tensor: torch.long ("pt") or numpy int64 ("np"); rows of
    (start, end) offsets as (B, T, 2), a flat list (overflow_to_sample_mapping) as (B,)."""
    if rows and not isinstance(rows[0], (list, tuple)):
        return (np.array(rows, dtype=np.int64) if return_tensors == "np"
                else torch.tensor(rows, dtype=torch.long))
    pairs = (2,) if any(row and isinstance(row[0], tuple) for row in rows) else ()
    lengths = {len(row) for row in rows}
    if len(lengths) > 1:
        raise ValueError(f"padding=False left examples of {min(lengths)} to {max(lengths)} tokens, which "
                         "cannot be one tensor: pass padding=True, or return_tensors=None for lists")
    width = lengths.pop() if lengths else 0
    # reshape keeps the (B, T) shape when B or T is 0, where a tensor of [] would be (0,).
    if return_tensors == "np":
        return np.array(rows, dtype=np.int64).reshape(len(rows), width, *pairs)  # (B, T)
    return torch.tensor(rows, dtype=torch.long).reshape(len(rows), width, *pairs)  # (B, T)


def refuse_overlong(lengths: list[int], pair: bool, max_length: int) -> None:
    """truncation=False: an example longer than max_length (`lengths`: each one's tokens) is an error."""
    for i, length in enumerate(lengths):
        if length > max_length:
            what = f"text[{i}] with text_pair[{i}]" if pair else f"text[{i}]"
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
    """A str that is Unicode text: not one holding a lone surrogate (half of a UTF-16 pair, as bytes decoded
    with errors="surrogateescape" give), which the `tokenizers` library refuses with a bare TypeError."""
    if not isinstance(text, str):
        raise TypeError(f"{name} must be a str, got {type(text).__name__}")
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as error:
            raise ValueError(f"{name} is not Unicode text: character {error.start} is "
                             f"{text[error.start]!r}, a lone surrogate (half of a UTF-16 pair); decode the "
                             "bytes it came from as UTF-8 (errors='replace' keeps the rest)") from None


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
        check_text(text, f"{name}[{i}]")
    return texts


def _describe(item: object) -> str:
    if isinstance(item, (tuple, list)):
        kinds = ", ".join(type(part).__name__ for part in item)
        return f"a {type(item).__name__} of {len(item)} ({kinds})"
    return type(item).__name__
