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
import math
from dataclasses import dataclass

from minbert.loading.pretrained import ConfigError, PretrainedConfig

# Keys that Hugging Face writes into config.json but that do not change the model we build.
_IGNORED_KEYS = {
    "architectures", "model_type", "transformers_version", "_name_or_path", "gradient_checkpointing",
    "use_cache", "torch_dtype", "dtype", "classifier_dropout", "directionality", "pooler_fc_size",
    "pooler_num_attention_heads", "pooler_num_fc_layers", "pooler_size_per_head", "pooler_type",
    "output_past", "id2label", "label2id", "problem_type", "tie_word_embeddings", "is_decoder",
    "add_cross_attention", "chunk_size_feed_forward", "output_hidden_states", "output_attentions",
    "return_dict", "bos_token_id", "eos_token_id", "finetuning_task", "tokenizer_class", "prefix",
    "task_specific_params", "torchscript", "pruned_heads", "use_return_dict", "_attn_implementation",
}

# What a config.json must state: the sizes (Hugging Face's BertConfig would take bert-base's; see above).
REQUIRED_KEYS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                 "max_position_embeddings", "type_vocab_size")


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
        # Each field's type first, so that a config.json holding "0.1" or null is named, not a TypeError.
        for name in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                     "intermediate_size", "max_position_embeddings", "type_vocab_size"):
            value = getattr(self, name)
            if not _is_int(value) or value <= 0:
                raise ValueError(f"BertConfig.{name} must be a positive integer, got {value!r}")
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob", "initializer_range",
                     "layer_norm_eps"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)):
                raise ValueError(f"BertConfig.{name} must be a finite number, got {value!r}")
        if self.hidden_size % self.num_attention_heads != 0:
            raise ValueError(
                f"BertConfig.hidden_size ({self.hidden_size}) must be divisible by "
                f"num_attention_heads ({self.num_attention_heads}): each head gets hidden_size / heads dims"
            )
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            value = getattr(self, name)
            if not 0.0 <= value < 1.0:
                raise ValueError(f"BertConfig.{name} must be in [0, 1), got {value!r}")
        if self.hidden_act != "gelu":
            raise ValueError(
                f"BertConfig.hidden_act={self.hidden_act!r} is not supported: minbert implements BERT's "
                "exact erf GELU only ('gelu')"
            )
        if self.position_embedding_type != "absolute":
            raise ValueError(
                f"BertConfig.position_embedding_type={self.position_embedding_type!r} is not supported: "
                "minbert implements BERT's learned absolute positions only ('absolute')"
            )
        # None, as in transformers: no embedding row is kept at zero for padding (nn.Embedding's padding_idx).
        if self.pad_token_id is not None and not (_is_int(self.pad_token_id)
                                                  and 0 <= self.pad_token_id < self.vocab_size):
            raise ValueError(f"BertConfig.pad_token_id must be a token id below vocab_size "
                             f"({self.vocab_size}) or null, got {self.pad_token_id!r}")
        for name in ("layer_norm_eps", "initializer_range"):
            if getattr(self, name) <= 0:
                raise ValueError(f"BertConfig.{name} must be positive, got {getattr(self, name)!r}")

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
    def from_dict(cls, values: dict, source: str = "config") -> "BertConfig":
        """Build a config from config.json's dictionary; `source` names the file in error messages."""
        model_type = values.get("model_type", "bert")
        if model_type != "bert":
            raise ConfigError(f"{source}: model_type is {model_type!r}, but minbert builds BERT models only "
                             "('bert')")
        fields = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(k for k in values if k not in fields and k not in _IGNORED_KEYS)
        if unknown:
            raise ConfigError(f"{source}: unknown config field(s) {unknown}; minbert's BertConfig has "
                             f"{sorted(fields)}")
        missing = [k for k in REQUIRED_KEYS if k not in values]
        if missing:
            raise ConfigError(f"{source} lacks {', '.join(missing)} (a BERT config.json states its sizes; "
                              "minbert does not guess bert-base's)")
        kwargs = {k: v for k, v in values.items() if k in fields}
        try:
            return cls(**kwargs)
        except (TypeError, ValueError) as error:
            raise ConfigError(f"{source}: {error}") from None


def _is_int(value: object) -> bool:
    """An int that is not a bool (JSON's true would otherwise count as 1)."""
    return isinstance(value, int) and not isinstance(value, bool)
