"""BertConfig: the sizes of a BERT model, with the field names of Hugging Face's `config.json`.

The defaults are bert-base-uncased (Devlin et al. 2019, Table 1: L=12, H=768, A=12). A config is
frozen: a model's shape never changes after it is built, so nothing may edit it by accident.

A config.json must state the sizes (REQUIRED_KEYS) rather than take bert-base's: a checkpoint whose
config.json omits one almost surely is not bert-base-sized, and its number of heads would not even show
as a shape mismatch, only as wrong outputs. `BertConfig.from_pretrained(name_or_path)` reads the
config.json of a directory or of a model name (minbert/loading/pretrained.py).

Read next: embeddings.py (token ids to vectors).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from minbert.loading.pretrained import ConfigError, PretrainedConfig
from minbert.loading.schema import Field, Schema, check_fields

# What a config.json may say, as data (schema.py checks it): each field's type and range, and the keys whose
# other values would change what the model computes in ways minbert does not implement (an allow-list of
# meanings: a decoder, cross-attention, relative positions, another activation are refused, never ignored).
# transformers ignores keys it does not know; so does minbert, and the load report lists them. The keys
# transformers writes for its own bookkeeping are known here, so that they are not listed.
_SIZE, _RATE, _POSITIVE = Field("integer", "[1, inf]"), Field("number", "[0, 1)"), Field("number", "(0, inf)")
_SAME = "minbert implements BERT's encoder only"
FIELDS = {
    "vocab_size": _SIZE, "hidden_size": _SIZE, "num_hidden_layers": _SIZE, "num_attention_heads": _SIZE,
    "intermediate_size": _SIZE, "max_position_embeddings": _SIZE, "type_vocab_size": _SIZE,
    "hidden_act": Field("string", allowed=("gelu",), why="minbert implements BERT's exact erf GELU only"),
    "hidden_dropout_prob": _RATE, "attention_probs_dropout_prob": _RATE,
    "initializer_range": _POSITIVE, "layer_norm_eps": _POSITIVE,
    "pad_token_id": Field("integer", "[0, inf]", null=True),  # null: no padding row, as in transformers
    "position_embedding_type": Field("string", allowed=("absolute",),
                                     why="minbert implements BERT's learned absolute positions only"),
}
_MEANINGS = {
    "model_type": Field("string", allowed=("bert",), why="minbert builds BERT models only"),
    "is_decoder": Field("boolean", allowed=(False,), why=f"{_SAME} (no causal mask)"),
    "add_cross_attention": Field("boolean", allowed=(False,), why=f"{_SAME} (no cross-attention)"),
    "pruned_heads": Field("object", allowed=({},), why="minbert keeps every attention head"),
    "architectures": Field("array", items=Field("string")), "transformers_version": Field("string"),
    "torch_dtype": Field("string", null=True), "dtype": Field("string", null=True),
    "tie_word_embeddings": Field("boolean"), "_name_or_path": Field("string"),
    # Keys that do not change what the encoder computes: special tokens' ids, a decoder's cache, a
    # classifier's dropout, how memory, kernels or outputs are managed.
    **{key: Field("any", null=True) for key in (
        "bos_token_id", "eos_token_id", "classifier_dropout", "use_cache", "gradient_checkpointing",
        "chunk_size_feed_forward", "_attn_implementation", "output_attentions", "output_hidden_states",
        "return_dict", "torchscript")},
}

# What a config.json must state: the sizes (Hugging Face's BertConfig would take bert-base's; see above).
REQUIRED_KEYS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                 "max_position_embeddings", "type_vocab_size")
CONFIG_JSON = Schema({**FIELDS, **_MEANINGS}, REQUIRED_KEYS, unknown="keep",
                     lacks=" (a BERT config.json states its sizes; minbert does not guess bert-base's)")


@dataclass(frozen=True)
class BertConfig(PretrainedConfig):
    """Sizes and regularisation of a BERT encoder (names as in Hugging Face's config.json).

    config.json in and out (`from_json_file`, `from_pretrained`, `to_json_file`) come from the base class,
    as transformers' BertConfig gets them from PretrainedConfig (minbert/loading/pretrained.py)."""

    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"  # exact erf GELU, as in the original TF code (BERT paper §3)
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12  # 1e-12 matches the TF checkpoints
    pad_token_id: int | None = 0  # None: no padding row (transformers allows it too)
    position_embedding_type: str = "absolute"

    def __post_init__(self) -> None:
        # Each field's type and range first (FIELDS), so that a config.json holding "0.1" or null is named.
        check_fields(dataclasses.asdict(self), Schema(FIELDS), "BertConfig.", ValueError)
        if self.hidden_size % self.num_attention_heads != 0:
            raise ValueError(
                f"BertConfig.hidden_size ({self.hidden_size}) must be divisible by "
                f"num_attention_heads ({self.num_attention_heads}): each head gets hidden_size / heads dims"
            )
        # None, as in transformers: no embedding row is kept at zero for padding (nn.Embedding's padding_idx).
        if self.pad_token_id is not None and self.pad_token_id >= self.vocab_size:
            raise ValueError(f"BertConfig.pad_token_id must be a token id below vocab_size "
                             f"({self.vocab_size}) or null, got {self.pad_token_id!r}")

    @property
    def head_dim(self) -> int:
        """D, the size of one attention head."""
        return self.hidden_size // self.num_attention_heads

    @classmethod
    def tiny(cls, **overrides) -> "BertConfig":
        """A model small enough for unit tests; odd sizes (37) catch transposed weights."""
        sizes = dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=37, max_position_embeddings=64, type_vocab_size=2)
        sizes.update(overrides)
        return cls(**sizes)

    def replace(self, **changes) -> "BertConfig":
        """A copy with some fields changed (the config itself is frozen)."""
        return dataclasses.replace(self, **changes)

    # ----- config.json -------------------------------------------------------------------------

    def to_dict(self) -> dict:
        """The fields as config.json writes them, plus the keys `transformers` needs to open it."""
        return {"architectures": ["BertModel"], "model_type": "bert", **dataclasses.asdict(self)}

    @classmethod
    def from_dict(cls, values: dict, source: str = "config", *, return_ignored: bool = False):
        """Build a config from config.json's dictionary; `source` names the file in error messages.
        return_ignored: (config, the keys minbert ignores, as transformers does, sorted)."""
        ignored = check_fields(values, CONFIG_JSON, f"{source}: ", ConfigError)
        try:
            config = cls(**{k: v for k, v in values.items() if k in FIELDS})
        except (TypeError, ValueError) as error:
            raise ConfigError(f"{source}: {error}") from None
        return (config, ignored) if return_ignored else config
