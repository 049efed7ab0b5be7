"""Reading a tokenizer.json: the file `transformers` 5 and sentence-transformers 3+ save instead of vocab.txt.

A tokenizer.json is the `tokenizers` library's whole pipeline as JSON. BertTokenizer needs only the
WordPiece vocabulary and the BertNormalizer's three settings (lowercase, strip_accents,
handle_chinese_chars); from them it builds the pipeline a vocab.txt gives, so both files give the same ids.
A normalizer Sequence of the BertNormalizer and steps that only lowercase or strip accents (as
sentence-transformers saves a lowercasing model) folds into the same settings. Anything else (a BPE or
Unigram model, NFKC, Replace, ...) is a FileContentError naming the file and what it holds. Added tokens
(tokenizer.json's added_tokens, tokenizer_config.json's added_tokens_decoder) take ids from the
vocabulary's size on, in order.

Read next: sentence_files.py (sentence-transformers' files).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple

from tokenizers import AddedToken

from minbert.loading.files import FileContentError, read_json_object
from minbert.loading.schema import Field, Schema, check_fields


class TokenizerJson(NamedTuple):
    """What BertTokenizer takes from a BERT tokenizer.json."""

    vocab: list[str]  # index = id
    lowercase: bool
    strip_accents: bool | None  # None: follow lowercase, as BERT does
    tokenize_chinese_chars: bool
    max_input_chars_per_word: int
    added: list[AddedToken]  # tokens past the vocabulary, in id order


# The WordPiece model's one number BertTokenizer reads (its other keys are the tokenizers library's).
_WORDPIECE = Schema({"max_input_chars_per_word": Field("integer", "[1, inf]")}, unknown="keep")


def read_tokenizer_json(path: str | Path) -> TokenizerJson:
    """The vocabulary and normalizer settings of a BERT WordPiece tokenizer.json; FileContentError for any
    other."""
    path = Path(path)
    saved = read_json_object(path)  # a folder, unreadable, empty, not UTF-8, not JSON: named as such
    model, normalizer, pre_tokenizer = (saved.get(key) or {}
                                        for key in ("model", "normalizer", "pre_tokenizer"))
    wanted = [("model", model, "WordPiece"), ("pre_tokenizer", pre_tokenizer, "BertPreTokenizer")]
    for key, part, expected in wanted:
        found = part.get("type") if isinstance(part, dict) else type(part).__name__
        if found != expected:
            raise FileContentError(f"{path}: {key} is {found!r}, not {expected!r}; BertTokenizer reads only "
                                   "a BERT WordPiece tokenizer (a vocab.txt, or a tokenizer.json saved from "
                                   "one)")
    if model.get("continuing_subword_prefix", "##") != "##" or model.get("unk_token", "[UNK]") != "[UNK]":
        prefix, unk = model.get("continuing_subword_prefix"), model.get("unk_token")
        raise FileContentError(f"{path}: the WordPiece model uses continuing_subword_prefix={prefix!r} and "
                               f"unk_token={unk!r}; BERT's are '##' and '[UNK]'")
    vocab = _vocab_list(path, model.get("vocab"))
    entries = saved.get("added_tokens") or []
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise FileContentError(f"{path}: added_tokens must be a list of tokens, got "
                               f"{json.dumps(entries)[:80]}")
    added = added_tokens({str(e.get("id")): e for e in entries}, vocab, path)
    lowercase, strip_accents, chinese = _normalizer_settings(path, normalizer)
    check_fields(model, _WORDPIECE, f"{path}: model.")
    return TokenizerJson(vocab=vocab, lowercase=lowercase, strip_accents=strip_accents,
                         tokenize_chinese_chars=chinese,
                         max_input_chars_per_word=model.get("max_input_chars_per_word", 100), added=added)


def added_tokens(decoder: object, vocab: list[str], path: Path) -> list[AddedToken]:
    """The tokens of an added-tokens map ({"30522": {"content": ..., "special": ...}, ...}, transformers'
    added_tokens_decoder), in id order, for add_tokens: an id inside the vocabulary `vocab` (index = id)
    must be its own entry (BERT's special tokens are); the others follow it, each once, as add_tokens gave
    them; BERT's five special tokens, added anyway, are left out."""
    tokens: list[AddedToken] = []
    by_id = sorted((decoder or {}).items(), key=lambda item: int(item[0]) if item[0].isdigit() else -1)
    for key, entry in by_id:
        content = entry.get("content") if isinstance(entry, dict) else None
        token_id = int(key) if key.isdigit() else None
        known = token_id is not None and token_id < len(vocab) and vocab[token_id] == content
        past = len(vocab) + sum(t.content not in vocab for t in tokens)
        if not (known or token_id == past) or not isinstance(content, str) or not content:
            raise FileContentError(f"{path}: added token {content!r} has id {key}; a token added past the "
                                   f"{len(vocab)} of the vocabulary takes the next id from {len(vocab)} on")
        if content not in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"):
            tokens.append(AddedToken(content, **{k: bool(entry.get(k, d)) for k, d in (
                ("single_word", False), ("lstrip", False), ("rstrip", False), ("normalized", True),
                ("special", False))}))
    return tokens


def _normalizer_settings(path: Path, normalizer: dict) -> tuple[bool, bool | None, bool]:
    """(lowercase, strip_accents, handle_chinese_chars) of a BertNormalizer, alone or in a Sequence with
    steps that only lowercase or strip accents (the module docstring)."""
    sequence = isinstance(normalizer, dict) and normalizer.get("type") == "Sequence"
    steps = normalizer.get("normalizers") if sequence else [normalizer]
    steps = steps if isinstance(steps, list) else [steps]
    types = [step.get("type") if isinstance(step, dict) else type(step).__name__ for step in steps]
    if types.count("BertNormalizer") != 1:
        raise FileContentError(f"{path}: normalizer is {' + '.join(map(repr, types)) or 'none'}, not "
                               "'BertNormalizer'; BertTokenizer reads only a BERT WordPiece tokenizer (a "
                               "vocab.txt, or a tokenizer.json saved from one)")
    bert = steps[types.index("BertNormalizer")]
    lowercase, strip_accents = bert.get("lowercase", True), bert.get("strip_accents")
    chinese = bert.get("handle_chinese_chars", True)
    if strip_accents is not None and not isinstance(strip_accents, bool):
        raise FileContentError(f"{path}: normalizer.strip_accents is {strip_accents!r}; expected true, false "
                               "or null")
    for key, value in (("lowercase", lowercase), ("handle_chinese_chars", chinese)):
        if not isinstance(value, bool):  # "no" would read as true
            raise FileContentError(f"{path}: the BertNormalizer's {key} is {value!r}; expected true or false")
    if bert.get("clean_text", True) is not True:  # control characters kept: not BERT's text
        raise FileContentError(f"{path}: the BertNormalizer has clean_text {bert.get('clean_text')!r}; "
                               "BertTokenizer always drops control characters, as BERT does")
    strips = lowercase if strip_accents is None else strip_accents
    for i, kind in enumerate(types):
        if kind == "Lowercase":
            lowercase = True
        elif kind == "StripAccents" and "NFD" in types[:i]:  # strips only the marks NFD set apart
            strips = True
        elif not (kind == "BertNormalizer" or kind == "NFD" and "StripAccents" in types[i + 1:]):
            raise FileContentError(f"{path}: the normalizer's step {kind!r} changes the text in a way "
                                   "BertTokenizer does not implement; it reads a BertNormalizer, with "
                                   "Lowercase or NFD then StripAccents beside it")
    # None: accents follow lowercase (BERT's rule), where they agree, so the saved settings stay as they were.
    strip_accents = None if strip_accents is None and strips == lowercase else strips
    return lowercase, strip_accents, chinese


def _vocab_list(path: Path, vocab: object) -> list[str]:
    """The token -> id map as a list indexed by id; the ids must be 0..n-1, each once (as vocab.txt's)."""
    if not isinstance(vocab, dict) or not vocab:
        raise FileContentError(f"{path}: model.vocab must be a non-empty map of token to id, got "
                               f"{type(vocab).__name__}")
    tokens: list[str | None] = [None] * len(vocab)
    for token, token_id in vocab.items():
        if not isinstance(token_id, int) or not 0 <= token_id < len(vocab) or tokens[token_id] is not None:
            raise FileContentError(f"{path}: model.vocab gives {token!r} the id {token_id!r}; the ids must "
                                   f"be 0..{len(vocab) - 1}, each used once")
        tokens[token_id] = token
    return tokens


# tokenizer_config.json's settings BertTokenizer reads, and what each must be (null: the default); the file's
# other keys are transformers' and kept.
SETTINGS = Schema({"do_lower_case": Field("boolean"), "strip_accents": Field("boolean", null=True),
                   "tokenize_chinese_chars": Field("boolean"),
                   "model_max_length": Field("integer", "[1, inf]", null=True),
                   "clean_up_tokenization_spaces": Field("boolean"),
                   "added_tokens_decoder": Field("object", items=Field("object"))}, unknown="keep")


def check_settings(config: dict, path: Path) -> None:
    """tokenizer_config.json's fields BertTokenizer reads, named when wrong: a do_lower_case of "no" would
    otherwise read as true."""
    check_fields(config, SETTINGS, f"{path}: ")


def check_fits_model(tokenizer, model_dir: Path, source: Path):
    """Refuse a vocabulary with more ids than the model beside it has embeddings (config.json's vocab_size):
    its extra tokens would fail in the first batch that uses one. Returns the tokenizer."""
    config = model_dir / "config.json"
    try:
        vocab_size = read_json_object(config).get("vocab_size")
    except (OSError, ValueError):
        return tokenizer  # no readable config.json here: loading the model names what is wrong with it
    if isinstance(vocab_size, int) and len(tokenizer) > vocab_size:
        raise FileContentError(f"{source} holds {len(tokenizer)} tokens, but {config} gives the model "
                               f"vocab_size {vocab_size} embeddings: ids from {vocab_size} on would fail; "
                               "the vocabulary and the model do not belong together")
    return tokenizer
