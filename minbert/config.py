"""BertConfig: the sizes of a BERT model, with the field names of Hugging Face's `config.json`.

The defaults are bert-base-uncased (Devlin et al. 2019, Table 1: L=12, H=768, A=12). A config is
frozen: a model's shape never changes after it is built, so nothing may edit it by accident.

`BertConfig.from_pretrained(name_or_path)` reads the config.json of a directory or of a model name; what
a config.json may say, and every field's type and range, are checked by the base class
(minbert.loading.pretrained, with the schema in minbert.loading.config_json).

Read next: embeddings.py (token ids to vectors).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from minbert.loading.pretrained import PretrainedConfig


@dataclass(frozen=True)
class BertConfig(PretrainedConfig):
    """Sizes and regularisation of a BERT encoder (names as in Hugging Face's config.json).

    config.json in and out (`from_json_file`, `from_pretrained`, `to_json_file`) come from the base class,
    as transformers' BertConfig gets them from PretrainedConfig (minbert.loading.pretrained)."""

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
        super().__post_init__()  # each field's type and range first, so a config.json's "0.1" or null is named
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
