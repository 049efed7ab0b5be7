"""BertTokenizer: text to WordPiece ids, with BERT's [CLS] A [SEP] B [SEP] input format and truncation.

The splitting of text into word pieces is not the lesson here, so it is done by the `tokenizers`
library (Rust, parallel over a batch), configured to reproduce Google's BERT `tokenization.py` and
Hugging Face's `BertTokenizerFast` (and its pure-Python `BertTokenizer` but for one case: that one
NFC-composes a decomposed accent it keeps, "e" + U+0301 into "é"; the others split it as two characters):
normalize (drop control characters, spaces around CJK ideographs, lower-case, strip accents), split on
whitespace and punctuation, then WordPiece: greedy longest-match-first, continuation pieces prefixed "##",
a word with no match or longer than 100 characters [UNK] (Wu et al. 2016; BERT paper §3). The vocabulary
comes from a vocab.txt or a tokenizer.json (../loading/tokenizer_files.py); both give the same ids.

What is written out here is what BERT adds on top (BERT paper §3, Figure 2): the [CLS] and [SEP]
tokens, segment (token type) ids 0 for "[CLS] A [SEP]" and 1 for "B [SEP]", truncation to the model's
window (truncation.py), and padding a batch to one rectangle with an attention mask.

`encode_example` and `batch_encode` are the lesson. The rest is the habits of `transformers` users:
`tokenizer(text, text_pair)` gives a dict for `model(**inputs)` (inputs.py); `encode`, `pad`, `decode`,
`batch_decode`, `add_tokens`, `get_vocab`, `len()` and the `*_token_id` names mean what they mean there.

Read next: inputs.py (the batches it returns), then truncation.py.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

from minbert.loading.atomic import atomic_directory, settled, write_text
from minbert.loading.errors import MissingFileError, user_faults
from minbert.loading.hub import ModelNotFoundError, check_name_or_path, merged_folder, resolve_model
from minbert.text.inputs import BatchEncoding, Encoding, call_tokenizer, check_text, check_texts, pad_inputs
from minbert.loading.files import FileContentError, read_json_object, read_text
from minbert.loading.forward_contract import check_flags
from minbert.loading.tokenizer_files import (added_tokens, check_fits_model, check_settings,
                                             read_tokenizer_json)
from minbert.text.truncation import SUN_ET_AL_BUDGET, check_truncation, truncate, truncate_pair


PADDING_STRATEGIES = ("longest", "max_length")


# BERT's input is at most 512 tokens: bert-base has 512 position embeddings (BERT paper §A.2).
DEFAULT_MODEL_MAX_LENGTH = 512

# Hugging Face writes int(1e30) as model_max_length when a checkpoint does not say; treat it as unset.
_UNSET_MODEL_MAX_LENGTH = 10**6

CLS, SEP, PAD, MASK, UNK = "[CLS]", "[SEP]", "[PAD]", "[MASK]", "[UNK]"
SPECIAL_TOKENS = (PAD, UNK, CLS, SEP, MASK)

# Google's BERT splits the CJK Extension E block from U+2B820; `tokenizers`' BertNormalizer starts it
# at U+2B920 (a typo carried since its first release), so these 256 ideographs are split here instead.
_MISSING_CJK = Regex("[\U0002B820-\U0002B91F]")

_CLEANUP = ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"), (" 'm", "'m"),
            (" 's", "'s"), (" 've", "'ve"), (" 're", "'re"))


class BertTokenizer:
    """WordPiece tokenizer for BERT, from a vocab.txt (one token per line; line = id) or a tokenizer.json."""

    def __init__(
        self,
        vocab: Sequence[str],
        lowercase: bool = True,
        strip_accents: bool | None = None,
        tokenize_chinese_chars: bool = True,
        model_max_length: int = DEFAULT_MODEL_MAX_LENGTH,
        max_input_chars_per_word: int = 100,
        clean_up_tokenization_spaces: bool = False,
    ) -> None:
        """Build from the list of tokens (index = id). Prefer `from_vocab_file` or `from_pretrained`.

        strip_accents=None follows `lowercase`, as in BERT: uncased models strip accents, cased ones
        keep them. max_input_chars_per_word=100 is BERT's: longer "words" (URLs, DNA) become [UNK].
        clean_up_tokenization_spaces: decode's default, False as in transformers 5.
        """
        if isinstance(vocab, str):
            raise TypeError("vocab must be a list of tokens: for a file use BertTokenizer.from_vocab_file")
        if strip_accents is not None and not isinstance(strip_accents, bool):
            raise TypeError(f"strip_accents must be None, True or False, got {strip_accents!r}")
        check_flags(lowercase=lowercase, tokenize_chinese_chars=tokenize_chinese_chars)  # bool("no") is True
        for name, value in (("model_max_length", model_max_length),
                            ("max_input_chars_per_word", max_input_chars_per_word)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        self._id_to_token = list(vocab)
        bad = next((i for i, token in enumerate(self._id_to_token) if not isinstance(token, str)), None)
        if bad is not None:
            raise TypeError(f"vocab[{bad}] must be a str (a token), got "
                            f"{type(self._id_to_token[bad]).__name__}")
        # Later lines win on a duplicate token, as in Hugging Face's load_vocab.
        self._token_to_id = {token: i for i, token in enumerate(self._id_to_token)}
        missing = [t for t in SPECIAL_TOKENS if t not in self._token_to_id]
        if missing:
            raise ValueError(f"the vocabulary has no {', '.join(missing)} token(s); BERT needs all of "
                             f"{', '.join(SPECIAL_TOKENS)}")
        self.lowercase = bool(lowercase)
        self.strip_accents = strip_accents
        self.tokenize_chinese_chars = bool(tokenize_chinese_chars)
        self.model_max_length = int(model_max_length)
        self.max_input_chars_per_word = int(max_input_chars_per_word)
        self.clean_up_tokenization_spaces = bool(clean_up_tokenization_spaces)
        self._base_size = len(self._id_to_token)  # add_tokens puts its tokens after these
        self._added: dict[int, AddedToken] = {}  # add_tokens' tokens by id
        # `transformers`' names for the special tokens' ids.
        self.cls_token_id, self.sep_token_id, self.pad_token_id, self.mask_token_id, self.unk_token_id = (
            self._token_to_id[token] for token in (CLS, SEP, PAD, MASK, UNK))
        self._backend = self._build_backend()

    def _build_backend(self) -> Tokenizer:
        backend = Tokenizer(models.WordPiece(
            self._token_to_id, unk_token=UNK, continuing_subword_prefix="##",
            max_input_chars_per_word=self.max_input_chars_per_word))
        strips = self.lowercase if self.strip_accents is None else self.strip_accents
        # As transformers' BertTokenizerFast: a decomposed accent ("e" + U+0301) is kept as two characters
        # (stripping drops the mark), not composed into the vocabulary's "é" (its pure-Python tokenizer does).
        backend.normalizer = normalizers.BertNormalizer(
            clean_text=True, handle_chinese_chars=self.tokenize_chinese_chars, strip_accents=strips,
            lowercase=self.lowercase)
        backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        if self.tokenize_chinese_chars:
            backend.pre_tokenizer = pre_tokenizers.Sequence([
                backend.pre_tokenizer, pre_tokenizers.Split(_MISSING_CJK, behavior="isolated")])
        # Special tokens typed in the text ("[MASK]") map to their ids, as in Hugging Face's tokenizers.
        backend.add_special_tokens(list(SPECIAL_TOKENS))
        # What transformers' BertTokenizerFast adds around the word pieces, for the calls that ask tokenizers
        # for its Encodings (offsets, overflow, special tokens mask: inputs.py), and its decoder.
        backend.post_processor = processors.TemplateProcessing(
            single=f"{CLS}:0 $A:0 {SEP}:0", pair=f"{CLS}:0 $A:0 {SEP}:0 $B:1 {SEP}:1",
            special_tokens=[(CLS, self.cls_token_id), (SEP, self.sep_token_id)])
        backend.decoder = decoders.WordPiece(prefix="##", cleanup=True)
        return backend

    # ---------------------------------------------------------------- construction and saving

    @classmethod
    @user_faults
    def from_vocab_file(
        cls,
        path: str | os.PathLike,
        lowercase: bool = True,
        strip_accents: bool | None = None,
        tokenize_chinese_chars: bool = True,
        model_max_length: int = DEFAULT_MODEL_MAX_LENGTH,
    ) -> "BertTokenizer":
        """Read a vocab.txt: one token per line, the line number (from 0) being its id."""
        path = Path(path)
        text = read_text(path)  # each fault named: missing, a folder, unreadable, empty, not UTF-8
        # Split on "\n" only: str.splitlines would also split inside tokens holding U+0085 or U+2028.
        lines = text.removesuffix("\n").split("\n")
        # A vocab.txt saved on Windows ends lines in "\r\n"; the "\r" is not part of the token.
        try:
            return cls([line.rstrip("\r") for line in lines], lowercase=lowercase,
                       strip_accents=strip_accents, tokenize_chinese_chars=tokenize_chinese_chars,
                       model_max_length=model_max_length)
        except ValueError as error:  # a special token missing: say which file lacks it
            raise FileContentError(f"{path}: {error}") from None

    @classmethod
    @user_faults
    def from_pretrained(cls, name_or_path: str | os.PathLike | None = None,
                        revision: str = "main") -> "BertTokenizer":
        """Read vocab.txt (else tokenizer.json), and tokenizer_config.json if present, from a model's folder.

        name_or_path: a directory, or a model name as loading/hub.py resolves it (None: the embedded
        default). tokenizer_config.json's do_lower_case, strip_accents and tokenize_chinese_chars win over a
        tokenizer.json's normalizer, as in `transformers`.
        """
        check_name_or_path(name_or_path)
        return settled(name_or_path, cls._read, name_or_path, revision)  # the files of one save (atomic.py)

    @classmethod
    def _read(cls, name_or_path: str | os.PathLike | None, revision: str) -> "BertTokenizer":
        model_dir = Path(name_or_path).expanduser() if name_or_path is not None else None
        if model_dir is not None and model_dir.is_dir():
            model_dir = merged_folder(model_dir) or model_dir  # a LoRA run's best/: its merged/ folder
        if model_dir is None or not model_dir.is_dir():
            try:
                model_dir = resolve_model(name_or_path, revision)
            except ModelNotFoundError as error:
                raise ModelNotFoundError(f"{error}\nA tokenizer also loads from any directory holding "
                                         "vocab.txt or tokenizer.json.") from None
        config_path = model_dir / "tokenizer_config.json"
        config = read_json_object(config_path) if config_path.exists() else {}
        for key, expected in [("unk_token", UNK), ("sep_token", SEP), ("pad_token", PAD), ("cls_token", CLS),
                              ("mask_token", MASK)]:
            value = config.get(key, expected)
            value = value.get("content") if isinstance(value, dict) else value
            if value != expected:
                raise FileContentError(f"{config_path}: {key} is {value!r}; this tokenizer supports only "
                                       f"{expected!r}")
        if config.get("do_basic_tokenize", True) is False or config.get("never_split"):
            raise FileContentError(f"{config_path}: do_basic_tokenize=false and never_split are not "
                                   "supported")
        check_settings(config, config_path)
        max_length = config.get("model_max_length") or DEFAULT_MODEL_MAX_LENGTH
        if max_length >= _UNSET_MODEL_MAX_LENGTH:
            max_length = DEFAULT_MODEL_MAX_LENGTH
        if not (model_dir / "vocab.txt").exists() and not (model_dir / "tokenizer.json").exists():
            raise MissingFileError(f"no vocab.txt or tokenizer.json in {model_dir}: a BERT tokenizer's "
                                    "folder holds one of them")
        source = model_dir / "vocab.txt"
        if source.exists():
            tokenizer = cls.from_vocab_file(
                source, lowercase=config.get("do_lower_case", True),
                strip_accents=config.get("strip_accents"),
                tokenize_chinese_chars=config.get("tokenize_chinese_chars", True),
                model_max_length=int(max_length))
            tokenizer.clean_up_tokenization_spaces = config.get("clean_up_tokenization_spaces", False)
            added = added_tokens(config.get("added_tokens_decoder"), tokenizer._id_to_token, config_path)
        else:
            source = model_dir / "tokenizer.json"
            saved = read_tokenizer_json(source)
            tokenizer = cls(
                saved.vocab,
                lowercase=config.get("do_lower_case", saved.lowercase),
                strip_accents=config.get("strip_accents", saved.strip_accents),
                tokenize_chinese_chars=config.get("tokenize_chinese_chars", saved.tokenize_chinese_chars),
                model_max_length=int(max_length),
                max_input_chars_per_word=saved.max_input_chars_per_word,
                clean_up_tokenization_spaces=config.get("clean_up_tokenization_spaces", False),
            )
            added = saved.added
        tokenizer.add_tokens(added)
        return check_fits_model(tokenizer, model_dir, source)

    @user_faults
    def save(self, directory: str | os.PathLike) -> Path:
        """Write vocab.txt and tokenizer_config.json (Hugging Face names) into `directory`, both or neither
        (atomic.py: the folder's other files stay); return it."""
        config = {
            "tokenizer_class": "BertTokenizer",
            "do_lower_case": self.lowercase,
            "strip_accents": self.strip_accents,
            "tokenize_chinese_chars": self.tokenize_chinese_chars,
            "model_max_length": self.model_max_length,
            "unk_token": UNK, "sep_token": SEP, "pad_token": PAD, "cls_token": CLS, "mask_token": MASK,
        }
        if self.clean_up_tokenization_spaces:  # written only when not transformers 5's default
            config["clean_up_tokenization_spaces"] = True
        if self._added:  # transformers' record of add_tokens' tokens
            config["added_tokens_decoder"] = {str(i): {
                "content": t.content, "lstrip": t.lstrip, "normalized": t.normalized, "rstrip": t.rstrip,
                "single_word": t.single_word, "special": t.special} for i, t in sorted(self._added.items())}
        with atomic_directory(directory) as new:
            vocab = self._id_to_token[:self._base_size]  # add_tokens' tokens go in tokenizer_config.json
            write_text(new / "vocab.txt", "".join(f"{token}\n" for token in vocab))
            write_text(new / "tokenizer_config.json", json.dumps(config, indent=2) + "\n")
        return Path(directory)

    save_pretrained = save  # the name `transformers` users type

    # ---------------------------------------------------------------- tokens and ids

    @property
    def vocab_size(self) -> int:
        """The lines of vocab.txt, without added tokens (transformers' meaning; len() counts them too)."""
        return self._base_size

    def __len__(self) -> int:
        """Every id, added tokens included: the rows the word embedding matrix needs, as in transformers."""
        return len(self._id_to_token)

    def get_vocab(self) -> dict[str, int]:
        """token -> id, added tokens included (transformers' get_vocab)."""
        return dict(self._token_to_id)

    def add_tokens(self, new_tokens: str | AddedToken | Sequence[str | AddedToken],
                   special_tokens: bool = False) -> int:
        """Add tokens to the `tokenizers` library's added vocabulary, as transformers' add_tokens: each is
        matched whole in the text before the word pieces are cut, a new one taking the next id from
        len(tokenizer) on; special ones match before normalisation, and decode(..., skip_special_tokens=True)
        drops them. Returns the library's count of tokens added; then give the model as many rows:
        `model.resize_token_embeddings(len(tokenizer))`."""
        tokens = [new_tokens] if isinstance(new_tokens, (str, AddedToken)) else list(new_tokens)
        if not all(isinstance(t, (str, AddedToken)) and str(t) for t in tokens):
            raise TypeError(f"add_tokens takes non-empty str (or tokenizers.AddedToken), got {tokens!r:.80}")
        count = 0
        for token in tokens:
            token = AddedToken(token, normalized=not special_tokens) if isinstance(token, str) else token
            token.special = token.special or special_tokens
            add = self._backend.add_special_tokens if token.special else self._backend.add_tokens
            count += add([token])
            token_id = self._backend.token_to_id(token.content)
            if token_id == len(self._id_to_token):  # a new one, past the vocabulary
                self._token_to_id[token.content] = token_id
                self._id_to_token.append(token.content)
            self._added[token_id] = token
        return count

    @property
    def backend(self) -> Tokenizer:
        """The underlying `tokenizers.Tokenizer` (normalizer, pre-tokenizer, WordPiece, [CLS]/[SEP] template,
        decoder), as transformers' backend_tokenizer."""
        return self._backend

    def tokenize(self, text: str) -> list[str]:
        """Split `text` into word pieces, without [CLS]/[SEP]: "unaffable" -> ["una", "##ffa", "##ble"]."""
        check_text(text, "text")
        return self._backend.encode(text, add_special_tokens=False).tokens

    def convert_tokens_to_ids(self, tokens: Sequence[str]) -> list[int]:
        """Look up each token; tokens not in the vocabulary map to [UNK]'s id."""
        if isinstance(tokens, str):
            raise TypeError("convert_tokens_to_ids takes a list of tokens, got a str; wrap it: [token]")
        return [self._token_to_id.get(token, self.unk_token_id) for token in tokens]

    def convert_ids_to_tokens(self, ids: Sequence[int] | torch.Tensor) -> list[str]:
        """The token of each id; an id outside [0, len(tokenizer)) is a ValueError."""
        return [self._id_to_token[i] for i in self._check_ids(ids)]

    def decode(self, ids: int | Sequence[int] | torch.Tensor | np.ndarray, skip_special_tokens: bool = False,
               clean_up_tokenization_spaces: bool | None = None) -> str:
        """Join word pieces back into text with the `tokenizers` WordPiece decoder, as transformers 5 does
        (lower-casing, stripped accents and [UNK] cannot be undone). skip_special_tokens drops the special
        tokens, [UNK] and [MASK] included. clean_up_tokenization_spaces (None: the tokenizer's) also joins
        "it ' s" and "don ' t", as older transformers did by default.
        """
        text = self._backend.decode(self._check_ids(ids), skip_special_tokens=skip_special_tokens)
        if clean_up_tokenization_spaces is None:
            clean_up_tokenization_spaces = self.clean_up_tokenization_spaces
        if clean_up_tokenization_spaces:
            for spaced, joined in _CLEANUP:  # transformers' clean_up_tokenization
                text = text.replace(spaced, joined)
        return text

    def batch_decode(self, sequences: Sequence[Sequence[int]] | torch.Tensor | np.ndarray,
                     skip_special_tokens: bool = False,
                     clean_up_tokenization_spaces: bool | None = None) -> list[str]:
        """`decode` of each row of a batch ((B, T) tensor or array, or a list of lists of ids)."""
        return [self.decode(ids, skip_special_tokens, clean_up_tokenization_spaces) for ids in sequences]

    def _check_ids(self, ids: int | Sequence[int] | torch.Tensor | np.ndarray) -> list[int]:
        if isinstance(ids, (int, np.integer)):
            ids = [ids]
        if isinstance(ids, (torch.Tensor, np.ndarray)):
            if ids.ndim != 1:
                raise ValueError(f"expected a 1-D tensor of ids, got shape {tuple(ids.shape)}")
            ids = ids.tolist()
        not_ids = [i for i in ids if not isinstance(i, (int, np.integer)) or isinstance(i, bool)]
        if not_ids:  # int(1.5) would quietly read 1
            raise TypeError(f"ids must be integers, got {not_ids[0]!r} ({type(not_ids[0]).__name__})")
        ids = [int(i) for i in ids]
        bad = [i for i in ids if not 0 <= i < len(self)]
        if bad:
            raise ValueError(f"id {bad[0]} is outside the vocabulary [0, {len(self)})")
        return ids

    # ---------------------------------------------------------------- model inputs

    def encode_example(
        self,
        text: str,
        text_pair: str | None = None,
        *,
        max_length: int | None = None,
        truncation: str = "head",
        head_tokens: int = 128,
        add_special_tokens: bool = True,
    ) -> Encoding:
        """Encode one text, or one pair, as "[CLS] A [SEP]" or "[CLS] A [SEP] B [SEP]".

        max_length counts the special tokens and defaults to `model_max_length` (512 for BERT);
        truncation is one of truncation.ALL_STRATEGIES, head_tokens as in `head_tail_truncate`.
        add_special_tokens=False leaves out [CLS] and [SEP] (the segment ids stay 0 for A, 1 for B).
        """
        check_text(text, "text")
        if text_pair is not None:
            check_text(text_pair, "text_pair")
        max_length = self._check_options(max_length, truncation, head_tokens, text_pair is not None,
                                         add_special_tokens)
        return self._encode_each([text], None if text_pair is None else [text_pair], max_length, truncation,
                                 head_tokens, add_special_tokens)[0]

    def batch_encode(
        self,
        texts: Sequence[str],
        text_pairs: Sequence[str] | None = None,
        *,
        max_length: int | None = None,
        truncation: str = "head",
        padding: str = "longest",
        return_tensors: bool = True,
        head_tokens: int = 128,
        add_special_tokens: bool = True,
    ) -> BatchEncoding:
        """Encode a batch and pad it with [PAD] into (B, T) tensors (or lists, return_tensors=False).

        padding="longest" pads to the longest example (T <= max_length), "max_length" to T = max_length.
        Word pieces come from the `tokenizers` batch API in one call; truncation and the special tokens
        are then added per example in Python, which costs little next to tokenizing.
        """
        texts = check_texts(texts, "texts")
        if text_pairs is not None:
            text_pairs = check_texts(text_pairs, "text_pairs")
            if len(text_pairs) != len(texts):
                raise ValueError(f"texts has {len(texts)} items but text_pairs has {len(text_pairs)}")
        if padding not in PADDING_STRATEGIES:
            raise ValueError(f"padding must be one of {PADDING_STRATEGIES}, got {padding!r}")
        max_length = self._check_options(max_length, truncation, head_tokens, text_pairs is not None,
                                         add_special_tokens)
        examples = self._encode_each(texts, text_pairs, max_length, truncation, head_tokens,
                                     add_special_tokens)
        n = len(texts)
        longest = max((len(e.input_ids) for e in examples), default=0)
        width = max_length if padding == "max_length" else longest
        input_ids = [e.input_ids + [self.pad_token_id] * (width - len(e.input_ids)) for e in examples]
        token_type_ids = [e.token_type_ids + [0] * (width - len(e.token_type_ids)) for e in examples]
        attention_mask = [e.attention_mask + [0] * (width - len(e.attention_mask)) for e in examples]
        if not return_tensors:
            return BatchEncoding(input_ids, token_type_ids, attention_mask)
        # reshape keeps the (B, T) shape when B or T is 0, where torch.tensor([]) would give (0,).
        return BatchEncoding(*(torch.tensor(rows, dtype=torch.long).reshape(n, width)  # (B, T)
                               for rows in (input_ids, token_type_ids, attention_mask)))

    # The call as `transformers` users make it, and its pad (what DataCollatorWithPadding calls): their
    # arguments' names, forms and defaults are sorted out in inputs.py.
    __call__ = call_tokenizer
    pad = pad_inputs

    def encode(
        self,
        text: str,
        text_pair: str | None = None,
        add_special_tokens: bool = True,
        *,
        truncation: bool | str = True,
        max_length: int | None = None,
    ) -> list[int]:
        """The ids of one text or pair, as `transformers`' encode: `tokenizer(text, text_pair)["input_ids"]`.

        truncation=True by default, as in __call__ (`transformers`' encode cuts nothing unless asked).
        For the segment ids and mask too, use the call, or encode_example.
        """
        check_text(text, "text")
        if text_pair is not None:
            check_text(text_pair, "text_pair")
        return self(text, text_pair, add_special_tokens=add_special_tokens, truncation=truncation,
                    max_length=max_length, padding=False, return_tensors=None)["input_ids"]

    def _encode_each(self, texts: list[str], text_pairs: list[str] | None, max_length: int, truncation: str,
                     head_tokens: int, add_special_tokens: bool) -> list[Encoding]:
        """Each example of a checked batch, unpadded: batch_encode pads them, the call's padding=False not."""
        pieces = self._piece_ids(texts + (text_pairs or []))
        n = len(texts)
        examples = []
        for i in range(n):
            try:
                examples.append(self._build(pieces[i], pieces[n + i] if text_pairs is not None else None,
                                            max_length, truncation, head_tokens, add_special_tokens))
            except ValueError as error:  # only_first / only_second on a pair they cannot fit
                if n == 1:
                    raise
                raise ValueError(f"example {i} of the batch (from 0): {error}") from None
        return examples

    def _piece_ids(self, texts: list[str]) -> list[list[int]]:
        # encode_batch_fast skips computing character offsets, which we never use.
        return [e.ids for e in self._backend.encode_batch_fast(texts, add_special_tokens=False)]

    def _build(self, a: list[int], b: list[int] | None, max_length: int, truncation: str,
               head_tokens: int, add_special_tokens: bool = True) -> Encoding:
        # BERT paper §3, Figure 2: [CLS] A [SEP] with segment 0, then B [SEP] with segment 1.
        cls, sep = ([self.cls_token_id], [self.sep_token_id]) if add_special_tokens else ([], [])
        if b is None:
            a = truncate(a, max_length - len(cls + sep), truncation, head_tokens)
            ids = cls + a + sep
            return Encoding(ids, [0] * len(ids), [1] * len(ids))
        a, b = truncate_pair(a, b, max_length - len(cls + sep + sep), truncation, head_tokens)
        first, second = cls + a + sep, b + sep
        return Encoding(first + second, [0] * len(first) + [1] * len(second), [1] * len(first + second))

    def _check_options(self, max_length: int | None, truncation: str, head_tokens: int, pair: bool,
                       add_special_tokens: bool = True) -> int:
        check_truncation(truncation)
        if max_length is None:
            max_length = self.model_max_length
        specials = (3 if pair else 2) if add_special_tokens else 0
        if not isinstance(max_length, int) or isinstance(max_length, bool):
            raise TypeError(f"max_length must be an int, got {type(max_length).__name__}")
        if max_length < 0:
            raise ValueError(f"max_length must be >= 0, got {max_length}")
        if max_length < specials:
            layout = "[CLS] A [SEP] B [SEP]" if pair else "[CLS] A [SEP]"
            raise ValueError(f"max_length={max_length} is too small: {layout} needs {specials} "
                             "special tokens")
        if not 0 <= head_tokens <= SUN_ET_AL_BUDGET:
            raise ValueError(f"head_tokens must be in [0, {SUN_ET_AL_BUDGET}], got {head_tokens}")
        return max_length

    def __repr__(self) -> str:
        return (f"BertTokenizer(vocab_size={self.vocab_size}, lowercase={self.lowercase}, "
                f"strip_accents={self.strip_accents}, tokenize_chinese_chars={self.tokenize_chinese_chars}, "
                f"model_max_length={self.model_max_length})")
