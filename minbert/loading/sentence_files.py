"""sentence-transformers' folder layout: how a sentence encoder's settings travel with its weights.

A sentence-transformers model is a Hugging Face checkpoint plus files that say what is done with the token
vectors: modules.json (Transformer, Pooling in 1_Pooling/, Normalize when vectors are scaled to unit
length), sentence_bert_config.json (max_seq_length, do_lower_case), 1_Pooling/config.json (the pooling
mode), config_sentence_transformers.json (the similarity function and the prompts). `read_settings` reads
them into `SentenceSettings`; `write_settings` writes the layout every sentence-transformers version from 2
to 6 reads, so each library loads what the other saves.

Read next: adapter_files.py (LoRA's adapters on disk).
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import torch

from minbert.loading.atomic import write_text
from minbert.loading.files import FileContentError, inside
from minbert.loading.schema import Field, Schema, read_document

# modules.json names a module by its class's import path, which sentence-transformers has moved between
# versions ("sentence_transformers.models.Pooling", "....sentence_transformer.modules.pooling.Pooling").
_LIBRARY = "sentence_transformers."
_WRITTEN_TYPE = "sentence_transformers.models."  # the oldest paths, which every version still reads
# The Pooling config's flags (sentence-transformers before v5; later ones write "pooling_mode").
_POOLING_FLAGS = {"pooling_mode_cls_token": "cls", "pooling_mode_mean_tokens": "mean",
                  "pooling_mode_max_tokens": "max",
                  "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
                  "pooling_mode_weightedmean_tokens": "weightedmean", "pooling_mode_lasttoken": "lasttoken"}
# sentence-transformers' SimilarityFunction names.
SIMILARITY_FUNCTIONS = ("cosine", "dot", "euclidean", "manhattan")


@dataclass(frozen=True)
class SentenceSettings:
    """What turns token vectors into sentence vectors, and how sentences are compared.

    The defaults are sentence-transformers' for a plain Hugging Face checkpoint: mean pooling, no
    normalisation, the tokenizer's length, cosine similarity, no prompts.
    """

    pooling: str = "mean"
    normalize: bool = False
    max_seq_length: int | None = None  # None: the tokenizer's model_max_length
    lowercase: bool = False  # sentence_bert_config.json's do_lower_case: lower-case before tokenizing
    similarity_fn_name: str = "cosine"
    prompts: dict[str, str] = field(default_factory=dict)
    default_prompt_name: str | None = None
    include_prompt: bool = True  # False: a prompt's tokens are left out of the pooling
    truncate_dim: int | None = None  # keep the first dimensions of every vector (Matryoshka models)
    source: Path | None = None  # the file the pooling came from, for error messages


# What we read of each file, as sentence-transformers (2 to 6) writes it: an allow-list. Every field is one
# we implement with sentence-transformers' meaning, or one whose only value allowed is its default; any other
# field or value is refused naming the file, the field and the value.
_DEFAULT, _TEXT = "minbert implements its default only", Field("string")
_MODULES = Field("array", items=Schema(
    {"idx": Field("integer", "[0, inf]"), "name": Field("string"), "path": Field("string"),
     "type": Field("string"), "kwargs": Field("array", allowed=([],), why=_DEFAULT)}, ("type",)))
_TRANSFORMER = Schema({
    "max_seq_length": Field("integer", "[1, inf]", null=True), "do_lower_case": Field("boolean"),
    "transformer_task": Field("string", allowed=("feature-extraction",), why=_DEFAULT),
    "modality_config": Field("object", allowed=({"text": {"method": "forward",
                                                          "method_output_name": "last_hidden_state"}},),
                             why="minbert reads text into the encoder's last hidden state only"),
    "module_output_name": Field("string", allowed=("token_embeddings",), why=_DEFAULT),
    "unpad_inputs": Field("boolean", null=True),  # how the batch is computed, not what it gives
    "processing_kwargs": Field("object", allowed=({},), why=_DEFAULT),
    **{name: Field("any", null=True, allowed=(None,), why=_DEFAULT)  # multi-vector models' settings
       for name in ("query_length", "document_length", "query_expansion")}})
_POOLING = Schema({
    "word_embedding_dimension": Field("integer", "[1, inf]"),
    "embedding_dimension": Field("integer", "[1, inf]"),
    "pooling_mode": Field("any"),  # a name or a list of names: checked below
    "include_prompt": Field("boolean"), **{flag: Field("boolean") for flag in _POOLING_FLAGS}})
# What SentenceEncoder's arguments and config_sentence_transformers.json both state (null: not set).
ARGUMENTS = Schema({"normalize": Field("boolean", null=True),
                    "prompts": Field("object", null=True, items=_TEXT),
                    "default_prompt_name": Field("string", null=True),
                    "truncate_dim": Field("integer", "[1, inf]", null=True)})  # the dimensions kept
_TOP = Schema({
    "__version__": Field("object"), "requirements": Field("any", null=True),  # what it was saved with
    "model_type": Field("string", allowed=("SentenceTransformer",),
                        why="minbert's SentenceEncoder is a SentenceTransformer"),
    "similarity_fn_name": Field("string", null=True, allowed=SIMILARITY_FUNCTIONS,
                                why="sentence-transformers' similarity functions are"),
    **{k: ARGUMENTS.fields[k] for k in ("prompts", "default_prompt_name", "truncate_dim")}})


def read_settings(model_dir: str | os.PathLike) -> SentenceSettings | None:
    """The settings a sentence-transformers folder states; None for a folder without modules.json (a plain
    Hugging Face checkpoint). A module we cannot run (Dense, a second Transformer, ...) is a ValueError:
    its vectors would not be this model's."""
    model_dir = Path(model_dir)
    if not (model_dir / "modules.json").exists():
        return None
    values: dict = {"normalize": False}
    for i, module in enumerate(read_document(model_dir / "modules.json", _MODULES)):
        kind, path = module["type"], module.get("path", "")
        name = kind.rsplit(".", 1)[-1] if kind.startswith(_LIBRARY) else kind
        if name == "Transformer" and path in ("", "."):
            config = model_dir / "sentence_bert_config.json"
            transformer = read_document(config, _TRANSFORMER) if config.exists() else {}
            values["max_seq_length"] = transformer.get("max_seq_length")
            values["lowercase"] = transformer.get("do_lower_case", False)
        elif name == "Pooling":
            # a path out of the folder ('..', absolute, a link) is refused, as sentence-transformers does
            values["source"] = inside(model_dir, Path(path, "config.json"), f"{model_dir / 'modules.json'}")
            pooling = read_document(values["source"], _POOLING)
            modes = pooling.get("pooling_mode") or [mode for flag, mode in _POOLING_FLAGS.items()
                                                    if pooling.get(flag)]
            if not (isinstance(modes, str)
                    or (isinstance(modes, list) and all(isinstance(m, str) for m in modes))):
                raise FileContentError(f"{values['source']}: pooling_mode must be a name such as "
                                       f"\"mean\", got {json.dumps(modes)}")
            values["pooling"] = modes if isinstance(modes, str) else "+".join(modes)  # several: concatenated
            values["include_prompt"] = pooling.get("include_prompt", True)
        elif name == "Normalize":
            values["normalize"] = True
        else:
            where = f"in {path}/" if path else "at the top of the directory"
            raise ValueError(f"{model_dir / 'modules.json'}: module {kind!r} {where} is not one "
                             "SentenceEncoder runs (it has a BERT Transformer at the top, Pooling and "
                             "Normalize), so its vectors would not be this model's")
    if "pooling" not in values:  # sentence-transformers' vectors would be the token vectors themselves
        raise FileContentError(f"{model_dir / 'modules.json'}: lists no Pooling module; SentenceEncoder "
                               "pools token vectors into one vector per sentence, as the Pooling module does")
    top = model_dir / "config_sentence_transformers.json"
    config = read_document(top, _TOP) if top.exists() else {}
    values.update({k: config[k] for k in ("similarity_fn_name", "prompts", "default_prompt_name",
                                          "truncate_dim") if config.get(k) is not None})
    return SentenceSettings(**{k: v for k, v in values.items() if v is not None})


def write_settings(directory: str | os.PathLike, settings: SentenceSettings, hidden_size: int) -> None:
    """Write modules.json, sentence_bert_config.json, 1_Pooling/config.json and
    config_sentence_transformers.json beside a checkpoint already in `directory`, a folder that
    atomic_directory is writing (the settings and the weights are one save)."""
    check_writable(settings)
    directory = Path(directory)
    modules = [{"idx": 0, "name": "0", "path": "", "type": _WRITTEN_TYPE + "Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": _WRITTEN_TYPE + "Pooling"}]
    if settings.normalize:  # a module without weights or settings: no folder of its own is needed
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize", "type": _WRITTEN_TYPE + "Normalize"})
    pooling = {"word_embedding_dimension": hidden_size,
               **{flag: settings.pooling == mode for flag, mode in _POOLING_FLAGS.items()},
               "include_prompt": settings.include_prompt}
    _write_json(directory / "1_Pooling" / "config.json", pooling)
    _write_json(directory / "sentence_bert_config.json",
                {"max_seq_length": settings.max_seq_length, "do_lower_case": settings.lowercase})
    # Which libraries wrote the folder, in sentence-transformers' field (it writes its own, transformers' and
    # torch's versions; these files were written by minbert, on torch, so those are the ones named).
    top = {"model_type": "SentenceTransformer",
           "__version__": {"minbert": _version(), "pytorch": torch.__version__}, "prompts": settings.prompts,
           "default_prompt_name": settings.default_prompt_name,
           "similarity_fn_name": settings.similarity_fn_name}
    if settings.truncate_dim is not None:  # as sentence-transformers writes it: only when set
        top["truncate_dim"] = settings.truncate_dim
    _write_json(directory / "config_sentence_transformers.json", top)
    _write_json(directory / "modules.json", modules)


def sentence_card(settings: SentenceSettings, config, dimension: int) -> str:
    """README.md for a folder SentenceEncoder.save writes: sentence-transformers' front matter and what a user
    needs to know, read from what is saved (nothing of data or scores, which the folder cannot back)."""
    prompts = ", ".join(f"{name} = {text!r}" for name, text in settings.prompts.items() if text) or "none"
    return f"""---
library_name: sentence-transformers
pipeline_tag: sentence-similarity
tags:
- sentence-transformers
- sentence-similarity
- feature-extraction
- minbert
---

# Sentence encoder

A BERT sentence encoder saved by minbert's `SentenceEncoder`: it maps a text to a {dimension}-dimensional
vector.

- Encoder: BERT, {config.num_hidden_layers} layers, hidden size {config.hidden_size}, \
{config.num_attention_heads} heads, {config.vocab_size} word pieces
- Maximum sequence length: {settings.max_seq_length or "the tokenizer's model_max_length"} tokens
- Pooling: {settings.pooling}{", normalized to unit length" if settings.normalize else ""}
- Similarity function: {settings.similarity_fn_name}
- Prompts: {prompts}

## Usage

```python
from sentence_transformers import SentenceTransformer  # or: from minbert import SentenceEncoder

model = SentenceTransformer("path/to/this/folder")
vectors = model.encode(["A man is playing a guitar.", "Someone plays an instrument."])
print(model.similarity(vectors, vectors))
```
"""


def _version() -> str:
    try:
        return importlib.metadata.version("minbert")
    except importlib.metadata.PackageNotFoundError:  # run from a checkout that is not installed
        return "unknown"


def check_writable(settings: SentenceSettings) -> None:
    """Refuse settings sentence-transformers' files cannot state, before anything is written."""
    if settings.pooling not in ("cls", "mean", "max"):
        raise ValueError(f"pooling {settings.pooling!r} has no sentence-transformers Pooling mode; "
                         "save with cls, mean or max (nothing was written)")


def replace(settings: SentenceSettings, **changes) -> SentenceSettings:
    """A copy with the given fields changed (None values left as they were)."""
    return dataclasses.replace(settings, **{k: v for k, v in changes.items() if v is not None})


def _write_json(path: Path, values) -> None:
    write_text(path, json.dumps(values, indent=2) + "\n")
