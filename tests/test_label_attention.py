"""Label-embedding attention: against a naive implementation of the paper's equations, padding and
minus-infinity properties, where the gradients go, the label loss by hand, and the initialisations.

Tolerances: float32, atol = rtol = 1e-5 against the naive loops; exact equality where the same
operations run in the same order (minus-infinity labels against the vanilla eager model).
"""

from __future__ import annotations

import copy
import math

import pytest
import torch

from minbert import label_attention as la
from minbert.attention import BertSelfAttention
from minbert.config import BertConfig
from minbert.label_attention import (LabelAttentionBert, LabelSelfAttention, add_label_attention,
                                     init_from_class_means, init_from_keywords, label_loss,
                                     merge_label_scores, parse_label_layers)
from minbert.model import BertModel, extended_attention_mask
from minbert.text.tokenizer import BertTokenizer
from minbert.fast.unpadded import UnpaddedBertModel

TOL = dict(atol=1e-5, rtol=1e-5)


@pytest.fixture
def config() -> BertConfig:
    return BertConfig.tiny(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


@pytest.fixture
def bert(config) -> BertModel:
    return BertModel(config, attn_implementation="eager").eval()


def padded_batch(config):
    input_ids = torch.randint(5, config.vocab_size, (3, 9))
    mask = torch.ones(3, 9, dtype=torch.long)
    mask[1, 6:] = 0
    mask[2, 3:] = 0
    return input_ids * mask, mask


def naive_label_self_attention(attention, hidden, labels, mask01):
    """Paper eq. 5-8 with loops: per example, per head, per key; the max written out."""
    B, T, C = hidden.shape
    H, D = attention.num_heads, attention.head_dim
    q, k, v = attention.query(hidden), attention.key(hidden), attention.value(hidden)
    ql = attention.query(labels)  # (M, C)
    out = torch.zeros(B, T, C)
    for b in range(B):
        for h in range(H):
            cols = slice(h * D, (h + 1) * D)
            scores = torch.zeros(T, T)
            for i in range(T):
                for j in range(T):
                    scores[i, j] = q[b, i, cols] @ k[b, j, cols] / math.sqrt(D)
            for j in range(1, T):  # the [CLS] row, every key but [CLS]
                best = scores[0, j]
                for m in range(labels.size(0)):
                    best = torch.maximum(best, ql[m, cols] @ k[b, j, cols] / math.sqrt(D))
                scores[0, j] = best
            scores = scores.masked_fill(mask01[b][None, :] == 0, float("-inf"))
            out[b, :, cols] = scores.softmax(-1) @ v[b, :, cols]
    return out


def test_label_self_attention_matches_the_paper_written_as_loops(bert, config):
    input_ids, mask = padded_batch(config)
    hidden = bert.embeddings(input_ids)
    labels = torch.randn(4, config.hidden_size)
    add_label_attention(bert, labels, [0])
    attention = bert.encoder.layer[0].attention.self
    assert isinstance(attention, LabelSelfAttention)
    ours = attention(hidden, extended_attention_mask(mask, hidden.dtype)).context
    naive = naive_label_self_attention(attention, hidden, labels, mask)
    real = mask.bool()
    torch.testing.assert_close(ours[real], naive[real], **TOL)


def test_merge_label_scores_worked_example():
    scores = torch.tensor([[0.0, 1.0, 2.0], [5.0, 6.0, 7.0], [8.0, 9.0, 10.0]])[None, None]  # (1, 1, 3, 3)
    labels = torch.tensor([[9.0, 0.5, 3.0], [9.0, 4.0, -1.0]])[None, None]  # (1, 1, M=2, 3)
    merged = merge_label_scores(scores, labels)
    # [CLS]->[CLS] stays 0 (the label scores' 9s are ignored there); keys 1, 2 take max(1, .5, 4),
    # max(2, 3, -1)
    assert merged[0, 0].tolist() == [[0.0, 4.0, 3.0], [5.0, 6.0, 7.0], [8.0, 9.0, 10.0]]
    assert scores[0, 0, 0].tolist() == [0.0, 1.0, 2.0], "the input was modified in place"


def test_padding_changes_no_output(bert, config):
    model = LabelAttentionBert(bert, num_labels=3).eval()
    input_ids = torch.randint(5, config.vocab_size, (2, 6))
    short = model(input_ids, torch.ones(2, 6, dtype=torch.long))
    padded_ids = torch.cat([input_ids, torch.randint(5, config.vocab_size, (2, 4))], dim=1)
    padded = model(padded_ids, torch.cat([torch.ones(2, 6), torch.zeros(2, 4)], dim=1).long())
    torch.testing.assert_close(padded.last_hidden_state[:, :6], short.last_hidden_state, **TOL)
    torch.testing.assert_close(padded.pooler_output, short.pooler_output, **TOL)


def test_padding_is_never_attended_even_by_a_label_that_loves_it(bert, config):
    model = LabelAttentionBert(bert, num_labels=2).eval()
    input_ids, mask = padded_batch(config)
    with torch.no_grad():
        probs = model(input_ids, mask, output_attentions=True).attentions
    for layer_probs in probs:
        assert float(layer_probs[mask[:, None, None, :].expand_as(layer_probs) == 0].abs().max()) == 0.0


def test_labels_that_change_no_score_leave_the_vanilla_model_exactly(bert, config, monkeypatch):
    """With the merge a no-op the label term is exactly 0, so the plumbing (modules swapped in, layers,
    encoder loop) is exact."""
    vanilla_bert = copy.deepcopy(bert)
    model = LabelAttentionBert(bert, num_labels=3).eval()
    monkeypatch.setattr(la, "merge_label_scores", lambda scores, label_scores: scores)
    input_ids, mask = padded_batch(config)
    ours = model(input_ids, mask, output_hidden_states=True)
    vanilla = vanilla_bert(input_ids, mask, output_hidden_states=True)
    assert torch.equal(ours.last_hidden_state, vanilla.last_hidden_state)
    assert torch.equal(ours.pooler_output, vanilla.pooler_output)


def test_gradients_reach_label_embeddings_through_the_argmax_rows_only(bert, config):
    M = 8
    model = LabelAttentionBert(bert, num_labels=M, label_layers=[0]).eval()
    with torch.no_grad():
        model.label_embeddings.mul_(5.0)  # label scores on the tokens' scale, so labels win some maxima
    # One short sequence (2 keys besides [CLS], 2 padding) and 4 heads: at most 8 maxima for 8 labels, so
    # some labels win and some do not.
    input_ids = torch.randint(5, config.vocab_size, (1, 5))
    mask = torch.tensor([[1, 1, 1, 0, 0]])
    # Which rows win the max, computed independently: [S_cls; A_l] over real non-[CLS] keys of layer 0.
    with torch.no_grad():
        attention = bert.encoder.layer[0].attention.self
        hidden = bert.embeddings(input_ids)
        B, T, C = hidden.shape
        H, D = attention.num_heads, attention.head_dim
        q = attention.query(hidden).view(B, T, H, D).transpose(1, 2)
        k = attention.key(hidden).view(B, T, H, D).transpose(1, 2)
        ql = attention.query(model.label_embeddings).view(1, M, H, D).transpose(1, 2)
        stacked = torch.cat([(q[:, :, :1] @ k.transpose(-1, -2)), ql @ k.transpose(-1, -2)],
                            dim=2)  # (B, H, 1+M, T)
        winner = stacked.argmax(dim=2)  # (B, H, T): 0 = [CLS]'s own score, m + 1 = label m
        real = mask[:, None, :].expand_as(winner).bool().clone()
        real[..., 0] = False  # the [CLS] -> [CLS] score is never replaced
        winners = {int(w) - 1 for w in winner[real] if w > 0}
    assert winners and len(winners) < M, f"the set-up should have winners and losers, got winners {winners}"
    weights = torch.randn(config.hidden_size)  # not a plain sum: a LayerNorm output always sums to 0
    (model(input_ids, mask).last_hidden_state[:, 0] * weights).sum().backward()
    grad = model.label_embeddings.grad
    for m in range(M):
        if m in winners:
            assert grad[m].abs().sum() > 0, f"label {m} wins a max but gets no gradient"
        else:
            assert torch.equal(grad[m],
                               torch.zeros_like(grad[m])), f"label {m} never wins but gets a gradient"


def test_only_the_chosen_layers_use_labels(bert, config):
    assert parse_label_layers("all", 6) == (0, 1, 2, 3, 4, 5)
    assert parse_label_layers("last:2", 12) == (10, 11)
    assert parse_label_layers([3, 1, 3], 6) == (1, 3)
    for bad in ("last:0", "first:2", [7], []):
        with pytest.raises(ValueError, match="label layers"):
            parse_label_layers(bad, 6)
    vanilla_bert = copy.deepcopy(bert)
    model = LabelAttentionBert(bert, num_labels=2, label_layers="last:1").eval()
    assert [type(layer.attention.self) for layer in bert.encoder.layer] == [BertSelfAttention,
                                                                          LabelSelfAttention]
    input_ids, mask = padded_batch(config)
    ours, vanilla = (model(input_ids, mask, output_hidden_states=True),
                     vanilla_bert(input_ids, mask, output_hidden_states=True))
    assert torch.equal(ours.hidden_states[1], vanilla.hidden_states[1])  # layer 0 untouched
    assert not torch.allclose(ours.last_hidden_state, vanilla.last_hidden_state)


def test_label_loss_by_hand():
    classifier = torch.nn.Linear(2, 2, bias=False)
    with torch.no_grad():
        classifier.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0]]))
    labels = torch.tensor([[2.0, 0.0], [0.0, 1.0]])
    # row 0: logits (2, 0) -> -log(e^2 / (e^2 + 1)); row 1: logits (0, 1) -> -log(e / (1 + e))
    expected = [math.log(1 + math.exp(-2.0)), math.log(1 + math.exp(-1.0))]
    torch.testing.assert_close(label_loss(classifier, labels), torch.tensor(sum(expected)))
    torch.testing.assert_close(label_loss(classifier, labels, reduction="mean"),
                               torch.tensor(sum(expected) / 2))
    pooler = torch.nn.Module()
    pooler.dense = torch.nn.Linear(2, 2)
    with torch.no_grad():
        pooler.dense.weight.copy_(torch.eye(2))
        pooler.dense.bias.zero_()
    tanh = [math.log(1 + math.exp(-math.tanh(2.0))), math.log(1 + math.exp(-math.tanh(1.0)))]
    torch.testing.assert_close(label_loss(classifier, labels, path="pooler", pooler=pooler),
                               torch.tensor(sum(tanh)))
    with pytest.raises(ValueError, match="path"):
        label_loss(classifier, labels, path="cls")


def test_keyword_initialisation_averages_word_embeddings(bert, embedded_model_dir):
    tokenizer = BertTokenizer.from_pretrained(embedded_model_dir)
    big = BertModel(BertConfig.tiny(vocab_size=tokenizer.vocab_size))
    model = LabelAttentionBert(big, num_labels=2)
    init_from_keywords(model, tokenizer, [["good", "great"], ["terrible"]])
    table = big.embeddings.word_embeddings.weight
    good, great = tokenizer.convert_tokens_to_ids(["good", "great"])
    pieces = tokenizer.convert_tokens_to_ids(tokenizer.tokenize("terrible"))
    torch.testing.assert_close(model.label_embeddings[0], (table[good] + table[great]) / 2)
    torch.testing.assert_close(model.label_embeddings[1], table[pieces].mean(0))
    with pytest.raises(ValueError, match="3 keyword lists for 2 labels"):
        init_from_keywords(model, tokenizer, [["a"], ["b"], ["c"]])


def test_class_mean_initialisation_averages_plain_berts_cls_vectors(bert, config):
    """The [CLS] vectors are the pretrained encoder's, not those of the model the labels are for."""
    input_ids, mask = padded_batch(config)
    cls = bert(input_ids, mask).last_hidden_state[:, 0]
    model = LabelAttentionBert(bert, num_labels=2)
    labels = torch.tensor([1, 0, 1])
    init_from_class_means(model, [(input_ids, mask, None, labels)], num_labels=2)
    torch.testing.assert_close(model.label_embeddings[0], cls[1], **TOL)
    torch.testing.assert_close(model.label_embeddings[1], (cls[0] + cls[2]) / 2, **TOL)
    with pytest.raises(ValueError, match=r"no training examples for label\(s\) \[2\]"):
        init_from_class_means(LabelAttentionBert(bert, num_labels=3), [(input_ids, mask, None, labels)], 3)


def test_random_initialisation_is_berts_and_checkpoint_weights_are_untouched(bert):
    before = {k: v.clone() for k, v in bert.state_dict().items()}
    model = LabelAttentionBert(bert, num_labels=50)
    assert abs(float(model.label_embeddings.detach().std()) - bert.config.initializer_range) < 0.003
    assert all(torch.equal(before[k], v) for k, v in bert.state_dict().items())
    # The table is saved once, beside the encoder, whose keys stay a plain BERT checkpoint's.
    assert set(model.state_dict()) == {f"bert.{k}" for k in before} | {"label_embeddings"}
    assert [name for name, _ in model.named_parameters()].count("label_embeddings") == 1


def test_the_label_layers_share_the_models_table_through_copies_and_moves(bert):
    model = LabelAttentionBert(bert, num_labels=3, label_layers=[0, 1])
    twin = copy.deepcopy(model)
    for m in (model, twin.to(torch.float64)):
        layers = m.bert.encoder.layer
        assert all(layer.attention.self.label_embeddings is m.label_embeddings for layer in layers)
    assert twin.label_embeddings is not model.label_embeddings


def test_the_unpadded_model_is_refused_with_the_kernels_to_use(config):
    with pytest.raises(ValueError, match="attn_implementation 'sdpa' or 'eager', not an UnpaddedBertModel"):
        LabelAttentionBert(UnpaddedBertModel(config), num_labels=2)
