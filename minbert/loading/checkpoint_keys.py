"""The names inside a BERT checkpoint, and the legacy fix-ups real checkpoints need before loading.

Our parameter names are the checkpoint's (STYLE.md §2), so loading is a key-for-key copy once these are
applied, each one a small function and each one reported:

- `LayerNorm.gamma` / `LayerNorm.beta`: the names of the original TF-era PyTorch port;
- the `bert.` prefix (Hugging Face's base_model_prefix): present in pre-training checkpoints, absent in
  encoder-only ones;
- `embeddings.position_ids` / `embeddings.token_type_ids`: index buffers older `transformers` saved
  (they are not weights; we compute positions on the fly);
- `cls.predictions.decoder.*`: the masked-LM decoder is tied to the word embeddings (heads.py), so its
  weight must equal them (checked, then dropped) and its bias is `cls.predictions.bias`.

Read next: tokenizer_files.py (a tokenizer.json's vocabulary).
"""

from __future__ import annotations

import re

import torch

from minbert.loading.errors import MinbertError

# Where a model keeps the encoder's keys: "" for BertModel itself (embeddings.*, ...), "bert." for a model
# that holds it at `.bert` beside its heads (BertForPreTraining: bert.*, cls.*).
ENCODER_PREFIXES = ("", "bert.")

WORD_EMBEDDINGS = "embeddings.word_embeddings.weight"
DECODER_WEIGHT = "cls.predictions.decoder.weight"
DECODER_BIAS = "cls.predictions.decoder.bias"
MLM_BIAS = "cls.predictions.bias"


class CheckpointError(MinbertError, ValueError):
    """A checkpoint that cannot be loaded as it stands; the message names the file or key."""


# ----- legacy fix-ups, one function each ----------------------------------------------------------
# Each takes the state dict and returns (new state dict, a line for the report, or None if no change).


def _rename(state: dict, renames: dict[str, str]) -> dict:
    """Apply renames, refusing two keys that land on one name (the checkpoint would be ambiguous)."""
    out: dict[str, torch.Tensor] = {}
    for key, value in state.items():
        new = renames.get(key, key)
        if new in out:
            raise CheckpointError(f"the checkpoint has both {key!r} and a key that also becomes {new!r} "
                                  "after legacy fix-ups; it is ambiguous which one to load")
        out[new] = value
    return out


def fix_gamma_beta(state: dict) -> tuple[dict, str | None]:
    """LayerNorm.gamma / .beta (the TF names kept by the first PyTorch port) -> .weight / .bias."""
    renames = {k: re.sub(r"\.gamma$", ".weight", re.sub(r"\.beta$", ".bias", k))
               for k in state if "LayerNorm" in k and k.endswith((".gamma", ".beta"))}
    if not renames:
        return state, None
    return _rename(state, renames), f"renamed {len(renames)} LayerNorm gamma/beta keys to weight/bias"


def drop_index_buffers(state: dict) -> tuple[dict, str | None]:
    """Drop embeddings.position_ids / token_type_ids: index buffers, not weights (we build positions
    on the fly, and a stale copy could even disagree with the position table)."""
    dropped = sorted(k for k in state if k.endswith(("embeddings.position_ids", "embeddings.token_type_ids")))
    if not dropped:
        return state, None
    return ({k: v for k, v in state.items() if k not in dropped},
            f"dropped index buffer(s) {dropped} (not weights; positions are computed)")


def fix_bert_prefix(state: dict, prefix: str) -> tuple[dict, str | None]:
    """BertModel keys have no prefix; BertForPreTraining keys put the encoder under `bert.`."""
    if not prefix:
        renames = {k: k[len("bert."):] for k in state if k.startswith("bert.")}
        line = f"stripped the 'bert.' prefix from {len(renames)} keys"
    else:
        # Only encoder names: anything else (a task head) must stay as it is and be reported unknown.
        renames = {k: "bert." + k for k in state if k.startswith(("embeddings.", "encoder.", "pooler."))}
        line = f"added the 'bert.' prefix to {len(renames)} keys (an encoder-only checkpoint)"
    if not renames:
        return state, None
    return _rename(state, renames), line


def fix_decoder_bias(state: dict) -> tuple[dict, str | None]:
    """cls.predictions.decoder.bias is the head's bias under a second name (transformers ties them)."""
    if DECODER_BIAS not in state:
        return state, None
    state = dict(state)
    bias = state.pop(DECODER_BIAS)
    if MLM_BIAS not in state:
        state[MLM_BIAS] = bias
        return state, f"renamed {DECODER_BIAS} to {MLM_BIAS}"
    if bias.shape != state[MLM_BIAS].shape or not torch.equal(bias, state[MLM_BIAS]):
        raise CheckpointError(f"{DECODER_BIAS} differs from {MLM_BIAS}; transformers ties the two, so "
                              "this checkpoint was not saved by a BERT model we know how to read")
    return state, f"dropped {DECODER_BIAS} (a copy of {MLM_BIAS})"


def fix_tied_decoder(state: dict, prefix: str) -> tuple[dict, str | None]:
    """Drop cls.predictions.decoder.weight after checking it equals the word embeddings.

    Our decoder *is* the word embedding matrix (heads.py), so a checkpoint whose decoder differs was
    trained untied: loading it would silently change the model, so for BertForPreTraining we refuse.
    For BertModel the whole `cls.*` head is ignored anyway, and so is this key.
    """
    if DECODER_WEIGHT not in state:
        return state, None
    embeddings = state.get(prefix + WORD_EMBEDDINGS)
    decoder = state[DECODER_WEIGHT]
    tied = embeddings is not None and decoder.shape == embeddings.shape and torch.equal(decoder, embeddings)
    if not tied:
        if not prefix:
            return state, None  # ignored with the rest of cls.*
        if embeddings is None:
            detail = "there are no word embeddings to compare with"
        elif decoder.shape != embeddings.shape:
            detail = f"shapes {tuple(decoder.shape)} and {tuple(embeddings.shape)}"
        else:
            detail = f"max |difference| {(decoder - embeddings).abs().max().item():.3g}"
        raise CheckpointError(
            f"{DECODER_WEIGHT} differs from bert.{WORD_EMBEDDINGS} ({detail}): this checkpoint has an "
            "untied masked-LM decoder, but minbert's decoder is tied to the word embeddings (BERT's "
            "design); load it as a BertModel (the encoder is unaffected) instead")
    return ({k: v for k, v in state.items() if k != DECODER_WEIGHT},
            f"dropped {DECODER_WEIGHT} (equal to the word embeddings: the decoder is tied)")


def normalise_keys(state: dict[str, torch.Tensor],
                   prefix: str) -> tuple[dict[str, torch.Tensor], list[str]]:
    """Apply every legacy fix-up; return the state dict with the encoder's keys under `prefix` (one of
    ENCODER_PREFIXES) and one line per fix-up.

    `cls.*` keys stay as they are for a bare encoder (prefix ""); checkpoint.py reports them as ignored.
    """
    if prefix not in ENCODER_PREFIXES:
        raise ValueError(f"prefix must be one of {ENCODER_PREFIXES}, got {prefix!r}")
    fixups: list[str] = []
    for fix in (fix_gamma_beta, drop_index_buffers, lambda s: fix_bert_prefix(s, prefix),
                fix_decoder_bias, lambda s: fix_tied_decoder(s, prefix)):
        state, line = fix(state)
        if line:
            fixups.append(line)
    return state, fixups
