"""BertEmbeddings: token ids to input vectors, the sum of word, position and segment embeddings.

BERT paper §3, Figure 2: "the input embeddings are the sum of the token embeddings, the segmentation
embeddings and the position embeddings", followed by LayerNorm and dropout (as in the TF code).

Shape legend: B batch, T tokens, C hidden size.

Read next: attention.py.
"""

from __future__ import annotations

import torch
from torch import nn

from minbert.config import BertConfig


class BertEmbeddings(nn.Module):
    """Word + learned absolute position + segment (token type) embeddings, then LayerNorm, dropout."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.config = config
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size,
                                            padding_idx=config.pad_token_id)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        # The capital L is the checkpoint's name (TF's "LayerNorm" scope); keeping it makes loading a copy.
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Embed a batch (BertModel.forward has checked the arguments: minbert.loading.forward_contract).

        input_ids: (B, T) token ids; or inputs_embeds: (B, T, C) word vectors given directly (for
        gradients with respect to the input, e.g. saliency maps).
        token_type_ids: (B, T) segment ids, 0 for sentence A and 1 for sentence B; default all 0.
        position_ids: (B, T) or (1, T) index of each token in the position table; default 0, 1, ..., T - 1
        (Hugging Face's argument).
        Returns (B, T, C).
        """
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("give exactly one of input_ids and inputs_embeds")
        B, T = input_ids.shape if input_ids is not None else inputs_embeds.shape[:2]
        if token_type_ids is None:
            token_type_ids = torch.zeros(B, T, dtype=torch.long, device=self._device())
        if position_ids is None:
            position_ids = torch.arange(T, device=self._device())  # (T,), broadcast over the batch

        # Hints: 1. the word vectors: look input_ids up in the word table, unless inputs_embeds gives them.
        #        2. add, position by position, the vector of the token's position and of its segment; the
        #           positions are `position_ids` (the argument, or the default made above), which need not
        #           be 0, 1, 2, ... (paper §3, Figure 2: the sum of three embeddings).
        #        3. then LayerNorm, then dropout, in that order (the TF code's order; the checkpoint's
        #           LayerNorm expects the raw sum).
        # BEGIN SOLUTION
        if inputs_embeds is None:
            inputs_embeds = self.word_embeddings(input_ids)  # (B, T, C)
        embeddings = (inputs_embeds
                      + self.position_embeddings(position_ids)  # (T, C) broadcast to (B, T, C)
                      + self.token_type_embeddings(token_type_ids))
        embeddings = self.dropout(self.LayerNorm(embeddings))
        # END SOLUTION
        return embeddings

    def _device(self) -> torch.device:
        return self.word_embeddings.weight.device

