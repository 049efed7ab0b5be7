"""minbert: a from-scratch, teachable BERT in PyTorch that loads real Hugging Face checkpoints.

The lesson, the model a student writes, is this folder's files, read bottom-up:

    config.py -> embeddings.py -> attention.py -> layer.py -> encoder.py -> model.py -> heads.py
    -> masking.py -> pooling.py -> task_heads.py -> label_attention.py -> metrics.py (then ../optim/)

Around it, each in a package of its own: minbert.text (the tokenizer), minbert.loading (from_pretrained,
checkpoints, the model cache, sentence-transformers' files), minbert.fast (the unpadded model and a cheaper
CPU dropout, each tested equal to the lesson's modules), minbert.extras (layer analysis) and
minbert.sentence_encoder (sentence embeddings in one call). In a student's handout they come installed.

The names a library user needs, each defined in the module named:

    BertConfig          the sizes of a model, with config.json's field names (minbert.config)
    BertTokenizer       text to [CLS] A [SEP] B [SEP] ids; `tokenizer(texts)` gives the model's inputs
                        (minbert.text.tokenizer)
    BertModel           the encoder; `BertModel.from_pretrained(name_or_path)` loads a checkpoint
                        (minbert.model)
    BertForPreTraining  BertModel with the masked-LM and next-sentence heads (minbert.heads)
    SentenceEncoder     sentence embeddings in one call, as sentence-transformers gives them
                        (minbert.sentence_encoder)
    MinbertError        what every call raises for a fault of the user's files, paths or environment,
                        with its subclasses FileContentError, ConfigError, CheckpointError,
                        FileAccessError, ModelNotFoundError, DeviceError (minbert.loading.errors)

`import minbert` loads none of them: each is imported the first time it is asked for, so a job loads
only the files it uses. The fast paths are imported from their own modules (`from minbert.fast.unpadded
import UnpaddedBertModel`, the same encoder, faster on padded batches), so that the lesson runs without them.

Read next: config.py.
"""

import importlib
import pkgutil

# The lesson is this folder; what runs it may be installed elsewhere, in a folder of the same name without an
# __init__.py (a student's handout installs minbert.loading, minbert.text, ... so): extend_path adds every
# such folder on sys.path to this package's, so that `minbert.loading` is found there.
__path__ = pkgutil.extend_path(__path__, __name__)

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
