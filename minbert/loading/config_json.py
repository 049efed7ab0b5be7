"""config.json's schema for BertConfig: each field's type and range, the keys that must be there, and the keys
whose other values would change what the model computes in ways minbert does not implement.

PretrainedConfig (pretrained.py) checks a BertConfig's fields against FIELDS when it is built, and a
config.json against CONFIG_JSON when it is read, so config.py holds the sizes and their meaning only.

A config.json must state the sizes (REQUIRED_KEYS) rather than take bert-base's: a checkpoint whose
config.json omits one almost surely is not bert-base-sized, and its number of heads would not even show
as a shape mismatch, only as wrong outputs.

Read next: schema.py (how a schema is checked).
"""

from __future__ import annotations

from minbert.loading.schema import Field, Schema

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
