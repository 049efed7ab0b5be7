"""minbert: a from-scratch, teachable BERT in PyTorch that loads real Hugging Face checkpoints.

The lesson, the model a student writes, is this folder's files, read bottom-up:

    config.py -> embeddings.py -> attention.py -> layer.py -> encoder.py -> model.py -> heads.py
    -> masking.py -> pooling.py -> task_heads.py -> label_attention.py -> metrics.py (then ../optim/)

Around it, each in a folder of its own: text/ (the tokenizer), loading/ (from_pretrained, checkpoints,
the model cache, sentence-transformers' files), fast/ (the unpadded model and a cheaper CPU dropout, each
tested equal to the lesson's modules; the student handout leaves it out), extras/ (layer analysis), and
sentence_encoder.py (sentence embeddings in one call).

The names a library user needs, each defined in the file named:

    BertConfig          the sizes of a model, with config.json's field names (config.py)
    BertTokenizer       text to [CLS] A [SEP] B [SEP] ids; `tokenizer(texts)` gives the model's inputs
                        (text/tokenizer.py)
    BertModel           the encoder; `BertModel.from_pretrained(name_or_path)` loads a checkpoint (model.py)
    BertForPreTraining  BertModel with the masked-LM and next-sentence heads (heads.py)
    SentenceEncoder     sentence embeddings in one call, as sentence-transformers gives them
                        (sentence_encoder.py)
    MinbertError        what every call raises for a fault of the user's files, paths or environment,
                        with its subclasses FileContentError, ConfigError, CheckpointError,
                        FileAccessError, ModelNotFoundError, DeviceError (loading/errors.py)

`import minbert` loads none of them: each is imported the first time it is asked for, so a job loads
only the files it uses. The fast paths are imported from their own files (`from minbert.fast.unpadded
import UnpaddedBertModel`, the same encoder, faster on padded batches), so that the lesson runs without them.

Read next: config.py.
"""

import importlib

# name -> the module that defines it (imported on first use: PEP 562's module __getattr__)
_EXPORTS = {
    "BertConfig": "minbert.config",
    "BertTokenizer": "minbert.text.tokenizer",
    "BertModel": "minbert.model",
    "BertForPreTraining": "minbert.heads",
    "SentenceEncoder": "minbert.sentence_encoder",
    "MinbertError": "minbert.loading.errors",
    "FileContentError": "minbert.loading.files",
    "ConfigError": "minbert.loading.pretrained",
    "CheckpointError": "minbert.loading.checkpoint_keys",
    "FileAccessError": "minbert.loading.errors",
    "ModelNotFoundError": "minbert.loading.hub",
    "DeviceError": "minbert.loading.errors",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'minbert' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value  # once imported, an ordinary attribute
    return value


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
