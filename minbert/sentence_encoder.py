"""SentenceEncoder: sentence embeddings in one call, as sentence-transformers' `encode` gives them.

A sentence embedding is BertModel's token vectors pooled into one vector (pooling.py: by default the mean
of the real tokens, Sentence-BERT's choice, Reimers & Gurevych 2019 §3), optionally scaled to unit length
so that a dot product is a cosine similarity. `encode` is what makes this quick for many sentences: it
sorts them by length so that each batch carries little padding, runs the batches under
torch.inference_mode, and puts the vectors back in the input's order.

The defaults come from the model directory, so that a sentence-transformers model gives the vectors
sentence-transformers gives (tests/test_api.py checks all-MiniLM-L6-v2 against it):

- pooling: the mode in the Pooling module's config.json (1_Pooling/) when modules.json lists one, else
  "mean" (what sentence-transformers also uses for a plain Hugging Face model);
- normalize: True when modules.json lists a Normalize module, else False;
- max_length: sentence_bert_config.json's max_seq_length (all-MiniLM-L6-v2: 256, the length it was
  trained on, half its 512 positions), else the tokenizer's model_max_length; never more than the
  model's position table.

A module we do not have (Dense, a second Transformer, weighted-mean pooling, ...) is an error, not
silently different vectors. A fine-tuned run's best/ directory has no modules.json, so it gets mean
pooling without normalisation (cosine similarity does not mind); its heads.safetensors is not read.

Shape legend: N sentences, B batch, C hidden size.

Read next: ../tasks/multitask.py (fine-tuning the encoder; its best/ directory loads here).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from minbert.hub import resolve_model
from minbert.model import BertModel
from minbert.pooling import POOLINGS, pool
from minbert.tokenizer import BertTokenizer
from minbert.unpadded import model_class

Sentence = str | tuple[str, str]  # one text, or a pair encoded as [CLS] a [SEP] b [SEP]

# modules.json names a module by its class's import path, which sentence-transformers has moved between
# versions ("sentence_transformers.models.Pooling", "....sentence_transformer.modules.pooling.Pooling").
_LIBRARY = "sentence_transformers."
# The Pooling config's flags (sentence-transformers before v5; later ones write "pooling_mode").
_POOLING_FLAGS = {"pooling_mode_cls_token": "cls", "pooling_mode_mean_tokens": "mean",
                  "pooling_mode_max_tokens": "max",
                  "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
                  "pooling_mode_weightedmean_tokens": "weightedmean", "pooling_mode_lasttoken": "lasttoken"}


def sentence_transformers_settings(model_dir: str | os.PathLike) -> dict:
    """What a sentence-transformers model directory says about pooling (and the file that says it),
    normalize, max_length and lowercase; {} for a directory without modules.json (a plain Hugging Face
    checkpoint)."""
    model_dir = Path(model_dir)
    if not (model_dir / "modules.json").is_file():
        return {}
    settings: dict = {"normalize": False}
    for module in _read_json(model_dir / "modules.json"):
        kind, path = str(module.get("type", "")), str(module.get("path", ""))
        name = kind.rsplit(".", 1)[-1] if kind.startswith(_LIBRARY) else kind
        if name == "Transformer" and path in ("", "."):
            config = model_dir / "sentence_bert_config.json"
            values = _read_json(config) if config.is_file() else {}
            if values.get("max_seq_length"):
                settings["max_length"] = int(values["max_seq_length"])
            settings["lowercase"] = bool(values.get("do_lower_case", False))
        elif name == "Pooling":
            settings["pooling_file"] = model_dir / path / "config.json"
            settings["pooling"] = _pooling_mode(settings["pooling_file"])
        elif name == "Normalize":
            settings["normalize"] = True
        else:
            where = f"in {path}/" if path else "at the top of the directory"
            raise ValueError(f"{model_dir / 'modules.json'}: module {kind!r} {where} is not one "
                             "SentenceEncoder runs (it has a BERT Transformer at the top, Pooling and "
                             "Normalize), so its vectors would not be this model's")
    return settings


def _pooling_mode(config_file: Path) -> str:
    """The Pooling module's mode; several modes (concatenated vectors) are joined with "+"."""
    values = _read_json(config_file)
    modes = values.get("pooling_mode") or [mode for flag, mode in _POOLING_FLAGS.items() if values.get(flag)]
    return modes if isinstance(modes, str) else "+".join(modes)


def _read_json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise ValueError(f"{path}: cannot read it as JSON: {error}") from None


class SentenceEncoder:
    """BertModel + BertTokenizer + pooling: `encode(sentences)` gives one vector per sentence."""

    def __init__(
        self,
        model: str | os.PathLike | BertModel | None = None,
        tokenizer: BertTokenizer | None = None,
        *,
        pooling: str | None = None,
        normalize: bool | None = None,
        device: str | torch.device | None = None,
        max_length: int | None = None,
        revision: str = "main",
        attn_implementation: str = "sdpa",
    ) -> None:
        """model: a checkpoint directory or a model name as minbert.hub resolves it (None: the embedded
        all-MiniLM-L6-v2), or a BertModel already built, given with its tokenizer.

        pooling: one of pooling.POOLINGS; normalize: scale every vector to unit length; max_length: the
        tokens kept per input, special tokens included. None takes the model directory's setting (see the
        module docstring), else mean, False, and the tokenizer's model_max_length.
        device: where the model runs; None is a GPU if there is one, or, for a model passed in, where it is.
        attn_implementation: the attention kernel of a model loaded here; "unpadded" loads an
        UnpaddedBertModel (unpadded.py).
        """
        settings: dict = {}
        if isinstance(model, BertModel):
            if tokenizer is None:
                raise TypeError("a BertModel passed to SentenceEncoder needs its tokenizer too: "
                                "SentenceEncoder(model, tokenizer)")
            self.model_dir = None
            if device is None:
                device = next(model.parameters()).device
        elif isinstance(model, torch.nn.Module):
            raise TypeError(f"model must be a BertModel (or a name or directory), got "
                            f"{type(model).__name__}; for a model with heads pass its encoder (model.bert)")
        else:
            self.model_dir = resolve_model(model, revision)
            settings = sentence_transformers_settings(self.model_dir)
            model = model_class(attn_implementation).from_pretrained(
                self.model_dir, attn_implementation=attn_implementation)
            tokenizer = tokenizer or BertTokenizer.from_pretrained(self.model_dir)
        if device is None:
            device = "cuda" if torch.cuda.is_available() else "cpu"

        self.device = torch.device(device)
        self.model = model.to(self.device)
        self.tokenizer = tokenizer
        self.pooling = settings.get("pooling", "mean") if pooling is None else pooling
        if self.pooling not in POOLINGS:
            source = "" if pooling is not None else (
                f" (read from {settings['pooling_file']}: a pooling we cannot reproduce; pass pooling= to "
                "choose one of ours)")
            raise ValueError(f"pooling must be one of {POOLINGS}, got {self.pooling!r}{source}")
        self.normalize = bool(settings.get("normalize", False) if normalize is None else normalize)
        self.lowercase = settings.get("lowercase", False)  # sentence_bert_config.json's do_lower_case
        positions = model.config.max_position_embeddings
        if max_length is None:
            max_length = min(settings.get("max_length", tokenizer.model_max_length), positions)
        is_int = isinstance(max_length, int) and not isinstance(max_length, bool)
        if not (is_int and 2 <= max_length <= positions):
            raise ValueError(f"max_length must be an int from 2 ([CLS] and [SEP]) to the model's "
                             f"max_position_embeddings ({positions}), got {max_length!r}")
        self.max_length = max_length

    @property
    def embedding_dimension(self) -> int:
        """C: the length of every vector encode returns."""
        return self.model.config.hidden_size

    def encode(
        self,
        sentences: Sentence | Sequence[Sentence],
        batch_size: int = 32,
        show_progress_bar: bool | None = None,
        convert_to_numpy: bool = True,
        convert_to_tensor: bool = False,
        normalize_embeddings: bool | None = None,
    ) -> np.ndarray | torch.Tensor | list[torch.Tensor]:
        """One vector per sentence, in the order given.

        sentences: a str, a list of str, or a list of (a, b) pairs, each pair one input
            [CLS] a [SEP] b [SEP] (a cross-encoder's input); a list mixing the two is a ValueError.
        batch_size: inputs per forward pass (the vectors do not depend on it).
        show_progress_bar: None shows a bar on a terminal when there is more than one batch (tqdm's
            disable=None: never in logs); True always, False never.
        convert_to_tensor: a torch tensor on the model's device; else convert_to_numpy: a float32 numpy
            array; else a list of 1-D tensors (sentence-transformers' three outputs, in its precedence).
        normalize_embeddings: None follows the encoder's `normalize`.

        Returns (N, C), or (C,) for a single str, as sentence-transformers does.
        """
        single = isinstance(sentences, str)
        items = [sentences] if single else _check_sentences(sentences)
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
        normalize = self.normalize if normalize_embeddings is None else bool(normalize_embeddings)

        # Longest first (characters stand in for tokens, as in sentence-transformers): batches of similar
        # lengths waste little on padding, and running out of memory shows in the first batch.
        order = sorted(range(len(items)), key=lambda i: -_characters(items[i]))
        starts = range(0, len(items), batch_size)
        if show_progress_bar is None:
            hide = None if len(starts) > 1 else True  # tqdm's None: shown only on a terminal
        else:
            hide = not show_progress_bar
        bar = tqdm(starts, desc="encode", unit="batch", leave=False, disable=hide)
        batches = []
        was_training = self.model.training
        self.model.eval()  # no dropout
        try:
            with torch.inference_mode():
                for start in bar:
                    vectors = self._embed([items[i] for i in order[start:start + batch_size]], normalize)
                    batches.append(vectors if convert_to_tensor else vectors.cpu())
        finally:
            self.model.train(was_training)

        if not batches:
            where = self.device if convert_to_tensor else "cpu"
            batches = [torch.empty(0, self.embedding_dimension, device=where)]
        sorted_vectors = torch.cat(batches)  # (N, C), longest input first
        embeddings = torch.empty_like(sorted_vectors)  # (N, C)
        embeddings[torch.tensor(order, dtype=torch.long, device=sorted_vectors.device)] = sorted_vectors
        if convert_to_tensor:
            return embeddings[0] if single else embeddings
        if convert_to_numpy:
            array = embeddings.float().numpy()  # numpy has no bfloat16
            return array[0] if single else array
        return embeddings[0] if single else list(embeddings)

    def _embed(self, items: list[Sentence], normalize: bool) -> torch.Tensor:
        """One batch of inputs -> (B, C) on the model's device."""
        texts = [item if isinstance(item, str) else item[0] for item in items]
        pairs = None if isinstance(items[0], str) else [item[1] for item in items]
        if self.lowercase:
            texts = [text.lower() for text in texts]
            pairs = None if pairs is None else [pair.lower() for pair in pairs]
        inputs = self.tokenizer(texts, pairs, max_length=self.max_length).to(self.device)
        vectors = pool(self.model(**inputs), inputs.attention_mask, self.pooling)  # (B, C)
        # sentence-transformers' Normalize module: x / max(||x||_2, 1e-12).
        return F.normalize(vectors, p=2, dim=1) if normalize else vectors

    def __repr__(self) -> str:
        source = self.model_dir if self.model_dir is not None else "a BertModel"
        return (f"SentenceEncoder({source}, pooling={self.pooling!r}, normalize={self.normalize}, "
                f"max_length={self.max_length}, device={str(self.device)!r})")


def _characters(item: Sentence) -> int:
    return len(item) if isinstance(item, str) else len(item[0]) + len(item[1])


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
