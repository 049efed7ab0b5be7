"""sentence-transformers' folder layout: how a sentence encoder's settings travel with its weights.

A sentence-transformers model is a Hugging Face checkpoint (config.json, the weights, the tokenizer's
files) plus files that say what is done with the token vectors:

    modules.json                      the modules in order: Transformer (the checkpoint at the top of the
                                      folder), Pooling (in 1_Pooling/), Normalize (when the vectors are
                                      scaled to unit length)
    sentence_bert_config.json         max_seq_length, do_lower_case (newer versions leave the length to
                                      tokenizer_config.json's model_max_length)
    1_Pooling/config.json             the pooling mode
    config_sentence_transformers.json the similarity function and the prompts

`read_settings` reads them into `SentenceSettings`; `write_settings` writes them in the layout every
sentence-transformers version from 2 to 6 reads, so `SentenceTransformer(folder)` loads what minbert
saves, and minbert loads what sentence-transformers saves.

Read next: adapter_files.py (LoRA's adapters on disk).
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from minbert.loading.atomic import write_text
from minbert.loading.files import FileContentError, read_text

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


def read_settings(model_dir: str | os.PathLike) -> SentenceSettings | None:
    """The settings a sentence-transformers folder states; None for a folder without modules.json (a plain
    Hugging Face checkpoint). A module we cannot run (Dense, a second Transformer, ...) is a ValueError:
    its vectors would not be this model's."""
    model_dir = Path(model_dir)
    if not (model_dir / "modules.json").exists():
        return None
    values: dict = {"normalize": False}
    modules = _read_json(model_dir / "modules.json", list)
    for i, module in enumerate(modules):
        if not isinstance(module, dict):
            raise FileContentError(f"{model_dir / 'modules.json'}: entry {i} must be an object with \"type\" "
                                   f"and \"path\", got {json.dumps(module)[:80]}")
        kind, path = str(module.get("type", "")), str(module.get("path", ""))
        name = kind.rsplit(".", 1)[-1] if kind.startswith(_LIBRARY) else kind
        if name == "Transformer" and path in ("", "."):
            config = model_dir / "sentence_bert_config.json"
            transformer = _read_json(config, dict) if config.exists() else {}
            if transformer.get("max_seq_length") is not None:
                values["max_seq_length"] = _field(transformer, "max_seq_length", config, positive_int)
            values["lowercase"] = _field(transformer, "do_lower_case", config, is_bool, default=False)
        elif name == "Pooling":
            values["source"] = model_dir / path / "config.json"
            pooling = _read_json(values["source"], dict)
            modes = pooling.get("pooling_mode") or [mode for flag, mode in _POOLING_FLAGS.items()
                                                    if pooling.get(flag)]
            if not (isinstance(modes, str) or all(isinstance(mode, str) for mode in modes)):
                raise FileContentError(f"{values['source']}: pooling_mode must be a name such as "
                                       f"\"mean\", got {json.dumps(modes)}")
            values["pooling"] = modes if isinstance(modes, str) else "+".join(modes)  # several: concatenated
            values["include_prompt"] = _field(pooling, "include_prompt", values["source"], is_bool,
                                              default=True)
        elif name == "Normalize":
            values["normalize"] = True
        else:
            where = f"in {path}/" if path else "at the top of the directory"
            raise ValueError(f"{model_dir / 'modules.json'}: module {kind!r} {where} is not one "
                             "SentenceEncoder runs (it has a BERT Transformer at the top, Pooling and "
                             "Normalize), so its vectors would not be this model's")
    top = model_dir / "config_sentence_transformers.json"
    if top.exists():
        config = _read_json(top, dict)
        checks = {"similarity_fn_name": is_str, "prompts": is_prompts, "default_prompt_name": is_str,
                  "truncate_dim": positive_int}  # sentence-transformers 3+ writes truncate_dim here
        for key, check in checks.items():
            if config.get(key) is not None:
                values[key] = _field(config, key, top, check)
    return SentenceSettings(**values)


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
    top = {"model_type": "SentenceTransformer", "prompts": settings.prompts,
           "default_prompt_name": settings.default_prompt_name,
           "similarity_fn_name": settings.similarity_fn_name}
    if settings.truncate_dim is not None:  # as sentence-transformers writes it: only when set
        top["truncate_dim"] = settings.truncate_dim
    _write_json(directory / "config_sentence_transformers.json", top)
    _write_json(directory / "modules.json", modules)


def check_writable(settings: SentenceSettings) -> None:
    """Refuse settings sentence-transformers' files cannot state, before anything is written."""
    if settings.pooling not in ("cls", "mean", "max"):
        raise ValueError(f"pooling {settings.pooling!r} has no sentence-transformers Pooling mode; "
                         "save with cls, mean or max (nothing was written)")


def replace(settings: SentenceSettings, **changes) -> SentenceSettings:
    """A copy with the given fields changed (None values left as they were)."""
    return dataclasses.replace(settings, **{k: v for k, v in changes.items() if v is not None})


def _read_json(path: Path, kind: type) -> dict | list:
    """A JSON file holding an object (dict) or an array (list); errors name the file (files.py)."""
    try:
        values = json.loads(read_text(path))
    except json.JSONDecodeError as error:
        raise FileContentError(f"{path} is not valid JSON (line {error.lineno}, column {error.colno}: "
                               f"{error.msg})") from None
    if not isinstance(values, kind):
        expected = "an object ({...})" if kind is dict else "an array ([...])"
        raise FileContentError(f"{path}: expected {expected}, got a JSON {type(values).__name__}")
    return values


# What a field of these files must be: (check, what the error says is expected).
positive_int = (lambda v: isinstance(v, int) and not isinstance(v, bool) and v > 0, "a positive integer")
is_bool = (lambda v: isinstance(v, bool), "true or false")
is_str = (lambda v: isinstance(v, str), "a string")
is_prompts = (lambda v: isinstance(v, dict) and all(isinstance(x, str) for x in (*v, *v.values())),
              "an object of name: prompt strings")


def _field(values: dict, key: str, path: Path, check: tuple, default: object = None):
    """values[key] (default when absent), refused naming the file and the key unless check accepts it."""
    if key not in values:
        return default
    accepts, expected = check
    if not accepts(values[key]):
        raise FileContentError(f"{path}: {key} must be {expected}, got {json.dumps(values[key])[:80]}")
    return values[key]


def _write_json(path: Path, values) -> None:
    write_text(path, json.dumps(values, indent=2) + "\n")
