"""SentenceEncoder: sentence embeddings in one call, as sentence-transformers' `encode` gives them.

A sentence embedding is BertModel's token vectors pooled into one vector (pooling.py: by default the mean
of the real tokens, Sentence-BERT's choice, Reimers & Gurevych 2019 §3), optionally scaled to unit length
so that a dot product is a cosine similarity.

The settings (pooling, normalisation, max_seq_length, similarity function, prompts) travel with the
weights in sentence-transformers' own files (loading/sentence_files.py), so an encoder gives the same vectors
whatever it was built from: a sentence-transformers folder, a folder `save` wrote, a main-job run's best/,
or a BertModel loaded from one of those. A plain Hugging Face checkpoint gets sentence-transformers'
defaults (mean pooling, no normalisation, the tokenizer's length). Arguments given here win over the folder's.

Shape legend: N sentences, B batch, T tokens, C hidden size.

Read next: ../tasks/multitask.py (fine-tuning the encoder; its best/ directory loads here).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm

from minbert.loading.hub import resolve_model
from minbert.loading.forward_contract import check_flags
from minbert.model import BertModel
from minbert.pooling import POOLINGS, pool
from minbert.loading.atomic import settled, write_text
from minbert.loading.checkpoint import model_folder, write_model
from minbert.loading.errors import DeviceError, user_faults
from minbert.loading.schema import check_fields
from minbert.loading.sentence_files import (ARGUMENTS, SIMILARITY_FUNCTIONS, SentenceSettings, check_writable,
                                            read_settings, replace, sentence_card, write_settings)
from minbert.text.tokenizer import BertTokenizer

try:  # the student handout leaves minbert/fast/ out; there the encoder runs BertModel's kernels
    from minbert.fast.unpadded import UnpaddedBertModel
except ModuleNotFoundError as missing:
    if missing.name not in ("minbert.fast", "minbert.fast.unpadded"):
        raise
    UnpaddedBertModel = None

Sentence = str | tuple[str, str]  # one text, or a pair encoded as [CLS] a [SEP] b [SEP]
OUTPUT_VALUES = ("sentence_embedding", "token_embeddings")
PRECISIONS = ("float32", "int8", "uint8", "binary", "ubinary")  # sentence-transformers' quantizations


class SentenceEncoder(nn.Module):
    """BertModel + BertTokenizer + pooling: `encode(sentences)` gives one vector per sentence."""

    @user_faults
    def __init__(
        self,
        model: str | os.PathLike | BertModel | None = None,
        tokenizer: BertTokenizer | None = None,
        *,
        pooling: str | None = None,
        normalize: bool | None = None,
        max_seq_length: int | None = None,
        truncate_dim: int | None = None,
        similarity_fn_name: str | None = None,
        prompts: dict[str, str] | None = None,
        default_prompt_name: str | None = None,
        device: str | torch.device | None = None,
        revision: str = "main",
        attn_implementation: str = "auto",
        dtype: torch.dtype | str | None = None,
    ) -> None:
        """model: a checkpoint directory or a model name as loading/hub.py resolves it (None: the embedded
        all-MiniLM-L6-v2), or a BertModel given with its tokenizer (its settings then come from the folder
        it was loaded from, if any).

        pooling (pooling.POOLINGS), normalize, max_seq_length (special tokens included), truncate_dim
        (Matryoshka), similarity_fn_name, prompts, default_prompt_name: sentence-transformers' settings;
        None takes the folder's. device: None is a GPU if there is one (a model passed in: where it is).
        attn_implementation: "sdpa", "eager", "unpadded", or "auto": the unpadded model on a CPU where it
        ships (the same vectors, to 1e-6), else "sdpa". dtype: from_pretrained's.
        """
        super().__init__()
        if isinstance(model, BertModel):
            if tokenizer is None:
                raise TypeError("a BertModel passed to SentenceEncoder needs its tokenizer too: "
                                "SentenceEncoder(model, tokenizer)")
            source = getattr(model, "name_or_path", None)  # the folder from_pretrained read, if any
            self.model_dir = Path(source) if source and Path(source).is_dir() else None
            if device is None:
                device = next(model.parameters()).device
            stated = read_settings(self.model_dir) if self.model_dir is not None else None
        elif isinstance(model, nn.Module):
            raise TypeError(f"model must be a BertModel (or a name or directory), got "
                            f"{type(model).__name__}; for a model with heads pass its encoder (model.bert)")
        else:
            self.model_dir = resolve_model(model, revision)
            device = device or ("cuda" if torch.cuda.is_available() else "cpu")
            if attn_implementation == "auto":  # unpadded: one attention call per sentence, so CPUs only
                fast = as_device(device).type == "cpu" and UnpaddedBertModel is not None
                attn_implementation = "unpadded" if fast else "sdpa"
            model_class = UnpaddedBertModel if attn_implementation == "unpadded" else BertModel
            if model_class is None:
                raise ValueError("attn_implementation='unpadded': this install leaves the fast paths out "
                                 "(minbert/fast/); give 'auto', 'sdpa' or 'eager'")
            model, tokenizer, stated = settled(self.model_dir, lambda: (  # all of one save (atomic.py)
                model_class.from_pretrained(self.model_dir, attn_implementation=attn_implementation,
                                            dtype=dtype),
                tokenizer or BertTokenizer.from_pretrained(self.model_dir), read_settings(self.model_dir)))
        check_arguments(model, tokenizer, normalize=normalize, truncate_dim=truncate_dim, prompts=prompts,
                        default_prompt_name=default_prompt_name)
        settings = replace(stated or SentenceSettings(), pooling=pooling, normalize=normalize,
                           max_seq_length=max_seq_length, similarity_fn_name=similarity_fn_name,
                           prompts=prompts,
                           default_prompt_name=default_prompt_name, truncate_dim=truncate_dim)

        self.model = model.to(as_device(device))
        self.tokenizer = tokenizer
        self.pooling = settings.pooling
        if self.pooling not in POOLINGS:
            source = "" if pooling is not None else (
                f" (read from {settings.source}, field pooling_mode: a pooling we cannot reproduce; pass "
                "pooling= to choose one of ours)")
            raise ValueError(f"pooling must be one of {POOLINGS}, got {self.pooling!r}{source}")
        self.normalize = bool(settings.normalize)
        self.lowercase = settings.lowercase  # sentence_bert_config.json's do_lower_case
        self.include_prompt = settings.include_prompt
        self.prompts = {"query": "", "document": "", **settings.prompts}  # ST 6's two, empty by default
        if settings.default_prompt_name is not None and settings.default_prompt_name not in self.prompts:
            raise ValueError(f"default_prompt_name {settings.default_prompt_name!r} is not one of the prompts "
                             f"{sorted(self.prompts)}")
        self.default_prompt_name = settings.default_prompt_name
        # The folder's length, never more than the model's position table (all-MiniLM-L6-v2 says 256: the
        # length it was trained on, half its 512 positions).
        self.max_seq_length = settings.max_seq_length or min(tokenizer.model_max_length,
                                                             model.config.max_position_embeddings)
        self.similarity_fn_name = settings.similarity_fn_name
        # The argument wins over the folder's config_sentence_transformers.json, as in sentence-transformers.
        self.truncate_dim = settings.truncate_dim

    # ---------------------------------------------------------------- settings, checked when set

    @property
    def max_seq_length(self) -> int:
        """The tokens kept per input, [CLS] and [SEP] included (sentence-transformers' name)."""
        return self._max_seq_length

    @max_seq_length.setter
    def max_seq_length(self, value: int) -> None:
        positions = self.model.config.max_position_embeddings
        if not (isinstance(value, int) and not isinstance(value, bool) and 2 <= value <= positions):
            raise ValueError(f"max_seq_length must be an int from 2 ([CLS] and [SEP]) to the model's "
                             f"max_position_embeddings ({positions}), got {value!r}")
        self._max_seq_length = value

    @property
    def similarity_fn_name(self) -> str:
        """What `similarity` computes: "cosine", "dot", "euclidean" or "manhattan" (negated distances)."""
        return self._similarity_fn_name

    @similarity_fn_name.setter
    def similarity_fn_name(self, value: str) -> None:
        if value not in SIMILARITY_FUNCTIONS:
            raise ValueError(f"similarity_fn_name must be one of {SIMILARITY_FUNCTIONS}, got {value!r}")
        self._similarity_fn_name = value

    @property
    def device(self) -> torch.device:
        """Where the model's weights are."""
        return next(self.model.parameters()).device

    def get_sentence_embedding_dimension(self) -> int:
        """C: the length of every vector encode returns (truncate_dim when it is set)."""
        return min(self.truncate_dim or self.model.config.hidden_size, self.model.config.hidden_size)

    get_embedding_dimension = get_sentence_embedding_dimension  # sentence-transformers 6's name

    @property
    def settings(self) -> SentenceSettings:
        """The settings `save` writes."""
        return SentenceSettings(self.pooling, self.normalize, self.max_seq_length, self.lowercase,
                                self.similarity_fn_name, self.prompts, self.default_prompt_name,
                                self.include_prompt, self.truncate_dim)

    # ---------------------------------------------------------------- the module

    def tokenize(self, texts: Sequence[Sentence], padding: bool = True) -> Mapping[str, torch.Tensor]:
        """A batch of texts (or (a, b) pairs) -> the model's inputs, cut at max_seq_length (padding=False:
        lists, each text its own length)."""
        firsts = [item if isinstance(item, str) else item[0] for item in texts]
        seconds = None if not texts or isinstance(texts[0], str) else [item[1] for item in texts]
        if self.lowercase:
            firsts = [text.lower() for text in firsts]
            seconds = None if seconds is None else [text.lower() for text in seconds]
        return self.tokenizer(firsts, seconds, max_length=self.max_seq_length, padding=padding,
                              return_tensors="pt" if padding else None)

    def forward(self, features: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The tokenizer's output -> the same dict plus "token_embeddings" (B, T, C) and
        "sentence_embedding" (B, C), as a sentence-transformers model's forward gives them.

        "prompt_length" in features (the prompt's tokens, [CLS] included) leaves them out of the pooling
        when the Pooling module says include_prompt=false.
        """
        inputs = {key: features[key] for key in ("input_ids", "attention_mask", "token_type_ids") if key in features}
        output = self.model(**inputs)
        mask = features["attention_mask"]
        if not self.include_prompt and features.get("prompt_length"):
            mask = mask.clone()
            mask[:, :features["prompt_length"]] = 0
        vectors = pool(output, mask, self.pooling)  # (B, C)
        if self.normalize:  # sentence-transformers' Normalize module: x / max(||x||_2, 1e-12)
            vectors = F.normalize(vectors, p=2, dim=1)
        return {**features, "token_embeddings": output.last_hidden_state, "sentence_embedding": vectors}

    # ---------------------------------------------------------------- encode and compare

    @user_faults
    def encode(
        self,
        sentences: Sentence | Sequence[Sentence],
        prompt_name: str | None = None,
        prompt: str | None = None,
        batch_size: int = 32,
        show_progress_bar: bool | None = None,
        output_value: str = "sentence_embedding",
        precision: str = "float32",
        convert_to_numpy: bool = True,
        convert_to_tensor: bool = False,
        device: str | torch.device | None = None,
        normalize_embeddings: bool = False,
        truncate_dim: int | None = None,
    ) -> np.ndarray | torch.Tensor | list[torch.Tensor]:
        """One vector per sentence, in the order given (sentence-transformers' arguments and defaults).

        sentences: a str, a list of str, or a list of (a, b) pairs, each one input [CLS] a [SEP] b [SEP];
            a list mixing the two is a ValueError.
        prompt / prompt_name: a text, or the name of one of `prompts`, put before every sentence
            (default: default_prompt_name's prompt, if set).
        show_progress_bar: None shows a bar on a terminal when there is more than one batch.
        output_value: "sentence_embedding", or "token_embeddings": a list of (T_i, C) tensors, each
            sentence's real tokens only.
        precision: "float32", or sentence-transformers' quantized "int8", "uint8", "binary", "ubinary"
            (`quantize_embeddings`).
        convert_to_tensor, else convert_to_numpy, else a list of 1-D tensors (sentence-transformers'
            precedence). device: move the encoder there first (it stays there).
        normalize_embeddings: scale to unit length after truncate_dim (on top of the folder's Normalize).

        Returns (N, C), or (C,) for a single str, in the model's dtype (bfloat16 comes as float32 arrays).
        Fast because every sentence is tokenized in one call and batched in order of its token count, so a
        batch holds little padding, and on a CPU the unpadded model skips what is left.
        """
        single = isinstance(sentences, str)
        items = [sentences] if single else _check_sentences(sentences)
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
        if output_value not in OUTPUT_VALUES:
            raise ValueError(f"output_value must be one of {OUTPUT_VALUES}, got {output_value!r}")
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
        if precision != "float32" and output_value != "sentence_embedding":
            raise ValueError(f"precision={precision!r} quantizes sentence embeddings; token embeddings come "
                             "in float32 (sentence-transformers' multi-vector quantization is not "
                             "implemented)")
        # None or a positive int; more than the model's dimensions keeps them all, as in sentence-transformers
        check_fields({"truncate_dim": truncate_dim}, ARGUMENTS, "", ValueError)
        check_flags(convert_to_numpy=convert_to_numpy, convert_to_tensor=convert_to_tensor,
                    normalize_embeddings=normalize_embeddings)
        if show_progress_bar is not None:
            check_flags(show_progress_bar=show_progress_bar)
        for name, text in (("prompt", prompt), ("prompt_name", prompt_name)):
            if text is not None and not isinstance(text, str):
                raise TypeError(f"{name} must be a str or None, got {type(text).__name__}")
        prompt = self._prompt(prompt, prompt_name, items)
        if prompt:
            items = [prompt + item for item in items]
        if device is not None:
            self.to(as_device(device))
        dimension = truncate_dim or self.truncate_dim
        # The prompt's tokens ([CLS] included, its [SEP] not), left out of the pooling where include_prompt=false.
        prompt_length = len(self.tokenize([prompt])["input_ids"][0]) - 1 if prompt and not self.include_prompt else 0

        # Longest first, by tokens: batches of similar lengths waste little on padding, and running out of
        # memory shows in the first batch. (sentence-transformers sorts by characters.)
        pieces = self.tokenize(items, padding=False)
        order = sorted(range(len(items)), key=lambda i: -len(pieces["input_ids"][i]))
        starts = range(0, len(items), batch_size)
        hide = (None if len(starts) > 1 else True) if show_progress_bar is None else not show_progress_bar
        outputs: list = []
        was_training = self.model.training
        self.model.eval()  # no dropout
        try:
            with torch.inference_mode():
                for start in tqdm(starts, desc="encode", unit="batch", leave=False, disable=hide):
                    features = self.tokenizer.pad([{k: v[i] for k, v in pieces.items()}
                                                   for i in order[start:start + batch_size]]).to(self.device)
                    if prompt_length:
                        features["prompt_length"] = prompt_length
                    out = self(features)
                    if output_value == "token_embeddings":
                        lengths = features["attention_mask"].sum(dim=1).tolist()
                        outputs += [vectors[:n] for vectors, n in zip(out["token_embeddings"], lengths)]
                        continue
                    vectors = out["sentence_embedding"][:, :dimension]  # (B, C)
                    if normalize_embeddings:
                        vectors = F.normalize(vectors, p=2, dim=1)
                    outputs.append(vectors if convert_to_tensor else vectors.cpu())
        finally:
            self.model.train(was_training)

        if output_value == "token_embeddings":  # ragged: always a list, as sentence-transformers returns it
            in_order = [None] * len(items)
            for position, vectors in zip(order, outputs):
                in_order[position] = vectors
            return in_order[0] if single else in_order
        if not outputs:
            where = self.device if convert_to_tensor else "cpu"
            outputs = [torch.empty(0, self.get_sentence_embedding_dimension(), device=where)]
        sorted_vectors = torch.cat(outputs)  # (N, C), longest input first
        embeddings = torch.empty_like(sorted_vectors)  # (N, C)
        embeddings[torch.tensor(order, dtype=torch.long, device=sorted_vectors.device)] = sorted_vectors
        if precision != "float32":  # a numpy array, then converted as sentence-transformers does
            quantized = quantize_embeddings(embeddings, precision)
            embeddings = torch.from_numpy(quantized)
            if convert_to_numpy and not convert_to_tensor:
                return quantized[0] if single else quantized
        if convert_to_tensor:
            return embeddings[0] if single else embeddings
        if convert_to_numpy:
            bf16 = embeddings.dtype == torch.bfloat16  # which numpy lacks
            array = (embeddings.float() if bf16 else embeddings).numpy()
            return array[0] if single else array
        return embeddings[0] if single else list(embeddings)

    def encode_query(self, sentences: Sentence | Sequence[Sentence], prompt_name: str | None = None,
                     prompt: str | None = None, **kwargs):
        """encode with the "query" prompt, where the encoder has one (sentence-transformers' encode_query)."""
        if prompt is None and prompt_name is None and "query" in self.prompts:
            prompt_name = "query"
        return self.encode(sentences, prompt_name, prompt, **kwargs)

    def encode_document(self, sentences: Sentence | Sequence[Sentence], prompt_name: str | None = None,
                        prompt: str | None = None, **kwargs):
        """encode with the first of the "document", "passage" and "corpus" prompts the encoder has
        (sentence-transformers' encode_document)."""
        if prompt is None and prompt_name is None:
            prompt_name = next((name for name in ("document", "passage", "corpus") if name in self.prompts),
                               None)
        return self.encode(sentences, prompt_name, prompt, **kwargs)

    def similarity(self, embeddings1, embeddings2) -> torch.Tensor:
        """(N, C) and (M, C) vectors (tensors, numpy arrays, or lists of them; one vector counts as
        N = 1) -> (N, M) scores by `similarity_fn_name`: cosine, dot product, or the negated euclidean or
        manhattan distance (higher is always more similar)."""
        a, b = _as_matrix(embeddings1, "embeddings1"), _as_matrix(embeddings2, "embeddings2")
        common = torch.promote_types(a.dtype, b.dtype)  # float32 and float64 vectors compare in float64
        a, b = a.to(common), b.to(common)
        if a.shape[1] != b.shape[1] and a.numel() and b.numel():
            raise ValueError(f"embeddings1 has {a.shape[1]} dimensions per vector, embeddings2 {b.shape[1]}: "
                             "compare vectors of one size (the same truncate_dim)")
        if self.similarity_fn_name == "cosine":
            return F.normalize(a, p=2, dim=1) @ F.normalize(b, p=2, dim=1).T
        if self.similarity_fn_name == "dot":
            return a @ b.T
        return -torch.cdist(a, b, p=2.0 if self.similarity_fn_name == "euclidean" else 1.0)

    def similarity_pairwise(self, embeddings1, embeddings2) -> torch.Tensor:
        """(N, C) and (N, C) vectors -> (N,): the score of each pair i, by `similarity_fn_name`."""
        a, b = _as_matrix(embeddings1, "embeddings1"), _as_matrix(embeddings2, "embeddings2")
        if a.shape != b.shape:
            raise ValueError(f"similarity_pairwise compares vectors pair by pair: embeddings1 is "
                             f"{tuple(a.shape)}, embeddings2 {tuple(b.shape)}")
        a, b = (x.to(torch.promote_types(a.dtype, b.dtype)) for x in (a, b))
        if self.similarity_fn_name == "cosine":
            return torch.linalg.vecdot(F.normalize(a, p=2, dim=1), F.normalize(b, p=2, dim=1))
        if self.similarity_fn_name == "dot":
            return torch.linalg.vecdot(a, b)
        return -torch.linalg.vector_norm(a - b, ord=2 if self.similarity_fn_name == "euclidean" else 1, dim=1)

    # ---------------------------------------------------------------- saving

    @user_faults
    def save(self, path: str | os.PathLike) -> Path:
        """Write the model, its tokenizer and sentence-transformers' files into `path`, which
        `SentenceEncoder(path)` and `sentence_transformers.SentenceTransformer(path)` both load."""
        # One folder, written whole (atomic.py): a save that fails or is refused half-way leaves `path` as it
        # was, never new weights beside the old pooling.
        check_writable(self.settings)
        with model_folder(path) as new:
            write_model(self.model, new, tokenizer=self.tokenizer)
            write_settings(new, self.settings, self.model.config.hidden_size)
            write_text(new / "README.md", sentence_card(self.settings, self.model.config,
                                                        self.get_sentence_embedding_dimension()))
        return Path(path)

    save_pretrained = save  # sentence-transformers has both names

    def _prompt(self, prompt: str | None, prompt_name: str | None, items: list[Sentence]) -> str:
        if prompt is None and prompt_name is None:
            prompt_name = self.default_prompt_name
        if prompt is None and prompt_name is not None:
            if prompt_name not in self.prompts:
                raise ValueError(f"prompt_name {prompt_name!r} is not one of the prompts {sorted(self.prompts)}")
            prompt = self.prompts[prompt_name]
        if prompt and items and not isinstance(items[0], str):
            raise ValueError("a prompt goes before single texts; encode (a, b) pairs without one")
        return prompt or ""

    def extra_repr(self) -> str:
        source = self.model_dir if self.model_dir is not None else "a BertModel"
        return (f"source={source}, pooling={self.pooling!r}, normalize={self.normalize}, "
                f"max_seq_length={self.max_seq_length}, similarity_fn_name={self.similarity_fn_name!r}")


def check_arguments(model: BertModel, tokenizer: BertTokenizer, **settings) -> None:
    """The constructor's arguments that have no setter of their own, named when wrong; and a tokenizer
    whose ids the model has embeddings for."""
    check_fields(settings, ARGUMENTS, "", TypeError)  # as config_sentence_transformers.json states them
    if not callable(tokenizer):
        raise TypeError(f"tokenizer must be a BertTokenizer, got {type(tokenizer).__name__}")
    vocab_size = len(tokenizer)
    if vocab_size > model.config.vocab_size:
        raise ValueError(f"the tokenizer has {vocab_size} tokens, but the model has vocab_size "
                         f"{model.config.vocab_size} embeddings: ids from {model.config.vocab_size} on would "
                         "fail; the tokenizer and the model do not belong together")


def as_device(device: str | torch.device) -> torch.device:
    """A torch.device from a name that this PyTorch can use: an unknown name is a ValueError naming the
    argument, a device not present here (CUDA on a CPU-only build, a GPU index past the last) a
    DeviceError."""
    try:
        device = torch.device(device)
    except (RuntimeError, TypeError) as error:
        raise ValueError(f"device must be a torch.device or a name such as 'cpu' or 'cuda:0', got {device!r} "
                         f"({str(error).splitlines()[0][:80]})") from None
    if device.type == "meta":  # shapes without data: the vectors could never be read back
        raise ValueError("device='meta' holds shapes without values, so it cannot compute embeddings: use "
                         "'cpu' or a GPU")
    try:
        torch.empty(0, device=device)  # torch says only here, as an AssertionError or a RuntimeError
    except (AssertionError, RuntimeError) as error:
        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
        raise DeviceError(f"device={str(device)!r} is not available here ({str(error).splitlines()[0][:120]};"
                          f" this PyTorch sees {gpus} CUDA device(s)): use 'cpu', or leave device=None to"
                          " take a GPU where there is one") from None
    return device


def _as_matrix(embeddings, name: str) -> torch.Tensor:
    """Tensors, numpy arrays, or lists of either -> a float (N, C) tensor; `name` is the argument's."""
    if not isinstance(embeddings, (torch.Tensor, np.ndarray, list, tuple)):
        raise TypeError(f"{name} must be a tensor, a numpy array or a list of vectors (encode's output), got "
                        f"{type(embeddings).__name__}")
    try:
        if isinstance(embeddings, (list, tuple)):
            embeddings = torch.stack([torch.as_tensor(vector) for vector in embeddings]) if embeddings else \
                torch.empty(0, 0)
        matrix = torch.as_tensor(embeddings)
    except (TypeError, ValueError, RuntimeError):  # items that are not numbers, or vectors of two sizes
        raise TypeError(f"{name} must be vectors of one size (a tensor, a numpy array of numbers, or a list "
                        "of 1-D vectors)") from None
    if matrix.dim() not in (1, 2) or matrix.is_complex() or matrix.dtype == torch.bool:
        raise ValueError(f"{name} must be real vectors, (N, C) or one (C,), got shape {tuple(matrix.shape)} "
                         f"of {matrix.dtype}")
    matrix = matrix.float() if not matrix.is_floating_point() or matrix.dtype == torch.bfloat16 else matrix
    return matrix.unsqueeze(0) if matrix.dim() == 1 else matrix


def quantize_embeddings(embeddings: torch.Tensor | np.ndarray, precision: str) -> np.ndarray:
    """sentence-transformers' quantize_embeddings, with its ranges taken from these embeddings (N, C):
    int8 / uint8 cut each dimension's [min, max] into 256 buckets, floor((x - min) / step) with step
    (max - min) / 255 (1 where max = min), shifted by -128 for int8; binary / ubinary pack x > 0 into
    bits, 8 to a byte (C / 8 values), shifted by -128 for binary. float32 returns float32."""
    vectors = (embeddings.float().cpu().numpy() if isinstance(embeddings, torch.Tensor)
               else np.asarray(embeddings))
    if precision == "float32":
        return vectors.astype(np.float32)
    if precision.endswith("binary"):
        bits = np.packbits(vectors > 0, axis=-1)
        return (bits - 128).astype(np.int8) if precision == "binary" else bits
    if vectors.ndim == 1 or len(vectors) < 2:
        raise ValueError(f"precision={precision!r} takes each dimension's range from the embeddings encoded "
                         "together, and one embedding has none: encode several at once")
    low, high = vectors.min(axis=0).astype(np.float32), vectors.max(axis=0).astype(np.float32)
    steps = (high - low) / 255
    buckets = np.clip(np.floor((vectors - low) / np.where(steps == 0, 1, steps)), 0, 255)
    return buckets.astype(np.uint8) if precision == "uint8" else (buckets - 128).astype(np.int8)


def _check_sentences(sentences: object) -> list[Sentence]:
    """A list of str, or of (a, b) pairs of str; errors name the first bad item."""
    expected = "a str, a list of str, or a list of (a, b) pairs of str"
    if isinstance(sentences, bytes) or not isinstance(sentences, (Sequence, np.ndarray)):
        raise TypeError(f"sentences must be {expected}, got {type(sentences).__name__}")
    items: list[Sentence] = []
    for i, item in enumerate(sentences):
        if isinstance(item, str):
            items.append(item)
        elif isinstance(item, (tuple, list)) and len(item) == 2 and all(isinstance(x, str) for x in item):
            items.append((item[0], item[1]))
        else:
            raise TypeError(f"sentences[{i}] must be a str or an (a, b) pair of str, got {item!r:.80}")
    if len({isinstance(item, str) for item in items}) > 1:
        raise ValueError("sentences mixes single texts and (a, b) pairs; encode each kind in its own call")
    return items
