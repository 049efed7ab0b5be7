"""Loading and saving: what turns a folder on disk into a minbert model and back.

    pretrained.py      the base classes the model and its config inherit: from_pretrained, save_pretrained
    forward_contract.py what a forward accepts, checked once (the base class's check_inputs)
    hub.py             a model name to a folder: a path, the Hugging Face cache, the embedded default
    checkpoint.py      Hugging Face-format weights in and out, key for key, with a LoadReport
    checkpoint_keys.py the names inside a checkpoint and the legacy fix-ups
    tokenizer_files.py a tokenizer.json's vocabulary and normaliser settings
    sentence_files.py  sentence-transformers' folder layout (modules.json, 1_Pooling/, ...)
    atomic.py          atomic file writes: a save is whole or absent
    files.py           reading a folder's files, every fault named (a folder, unreadable, empty, not UTF-8)
    errors.py          the errors a user can fix (MinbertError and its subclasses); the library's boundary

The lesson files import only pretrained.py of these (and reach forward_contract.py through it).

Read next: pretrained.py.
"""
