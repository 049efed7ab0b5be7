"""What a classifier reads (tasks/models/features.py) on a tiny model: layer selection against the encoder's
own output_hidden_states, combinations, chunking that covers every piece once, chunk pooling that ignores
padding chunks, and the classify job's chunked path against a hand computation. Tolerance: float32, atol
1e-6."""

from __future__ import annotations

import pytest
import torch

from minbert.config import BertConfig
from minbert.model import BertModel
from tasks.classify import ClassifyTask
from tasks.data.batching import pad_batch
from tasks.data.classify_sets import SPECS
from tasks.data.examples import SentenceExample
from tasks.models.classifier import ChunkBatch, ClassifyModel
from tasks.models.features import ChunkPooling, chunk_pieces, feature_size, layer_features, select_layers

TOL = dict(atol=1e-6, rtol=1e-6)


@pytest.fixture
def bert() -> BertModel:
    torch.manual_seed(0)
    return BertModel(BertConfig.tiny(num_hidden_layers=6, hidden_dropout_prob=0.0,
                                     attention_probs_dropout_prob=0.0)).eval()


@pytest.mark.parametrize("spec, expected", [("last", (6,)), ("layer:0", (0,)), ("layer:3", (3,)),
                                            ("first-4", (1, 2, 3, 4)), ("last-4", (3, 4, 5, 6)),
                                            ("all", (1, 2, 3, 4, 5, 6))])
def test_select_layers(spec, expected):
    assert select_layers(spec, 6) == expected


@pytest.mark.parametrize("spec", ["layer:7", "layer:-1", "last-3", "middle", ""])
def test_bad_layer_specs_are_refused(spec):
    with pytest.raises(ValueError, match="layer features must be"):
        select_layers(spec, 6)


def test_layer_features_are_the_chosen_hidden_states_cls_vectors(bert):
    tokens = pad_batch([[2, 5, 7, 3], [2, 9, 3]], pad_id=0)
    hidden = bert(tokens.input_ids, tokens.attention_mask, output_hidden_states=True).hidden_states
    layers = select_layers("last-4", 6)
    concat = layer_features(hidden, layers, "concat")
    assert concat.shape == (2, feature_size(32, layers, "concat")) == (2, 128)
    torch.testing.assert_close(concat[:, 32:64], hidden[4][:, 0], **TOL)  # the second chosen layer is layer 4
    stacked = torch.stack([hidden[i][:, 0] for i in layers])
    torch.testing.assert_close(layer_features(hidden, layers, "mean"), stacked.mean(0), **TOL)
    torch.testing.assert_close(layer_features(hidden, layers, "max"), stacked.amax(0), **TOL)
    model = ClassifyModel(bert, 3, 0.0, layer_features="layer:2").eval()
    torch.testing.assert_close(model.features(tokens), hidden[2][:, 0], **TOL)


@pytest.mark.parametrize("n, size, max_chunks", [(0, 5, 0), (1, 5, 0), (10, 5, 0), (11, 5, 0), (23, 4, 0),
                                                 (23, 4, 3)])
def test_chunks_cover_every_piece_exactly_once(n, size, max_chunks):
    pieces = list(range(100, 100 + n))
    chunks = chunk_pieces(pieces, size, max_chunks)
    assert all(1 <= len(c) <= size for c in chunks if n) and len(chunks) >= 1
    if not max_chunks:
        assert [p for c in chunks for p in c] == pieces  # in order, once each
        assert len(chunks) == max(1, -(-n // size))  # ceil(n / size)
    else:
        assert len(chunks) == max_chunks and chunks[-1] == pieces[20:]  # the first two and the last
        assert chunks[:2] == [pieces[0:4], pieces[4:8]]


def test_chunk_pooling_ignores_padding_chunks():
    torch.manual_seed(0)
    chunks = torch.randn(2, 3, 8)
    mask = torch.tensor([[True, True, False], [True, False, False]])
    garbage = chunks.clone()
    garbage[0, 2] = 1e4
    garbage[1, 1:] = -1e4
    for how in ("mean", "max", "attention"):
        pool = ChunkPooling(8, how)
        torch.testing.assert_close(pool(garbage, mask), pool(chunks, mask), **TOL)
    torch.testing.assert_close(ChunkPooling(8, "mean")(chunks, mask)[0], chunks[0, :2].mean(0), **TOL)
    torch.testing.assert_close(ChunkPooling(8, "max")(chunks, mask)[1], chunks[1, 0], **TOL)


def test_classify_task_chunks_a_long_text_and_the_model_pools_its_windows(embedded_model_dir):
    from minbert.text.tokenizer import BertTokenizer

    tokenizer = BertTokenizer.from_pretrained(embedded_model_dir)
    torch.manual_seed(0)
    bert = BertModel(BertConfig.tiny(vocab_size=tokenizer.vocab_size, hidden_dropout_prob=0.0,
                                     attention_probs_dropout_prob=0.0)).eval()
    long_text = " ".join(f"word{i}" for i in range(40))
    examples = [SentenceExample("a", long_text, 1), SentenceExample("b", "short one", 0)]
    task = ClassifyTask("cfimdb", SPECS["cfimdb"], tokenizer, examples, examples, batch_size=2, seed=0,
                        max_length=16, chunks=True)
    pieces = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(long_text))
    first = task.train_inputs[0]
    assert [p for chunk in first for p in chunk[1:-1]] == pieces  # every piece once, in order
    assert all(chunk[0] == tokenizer.cls_token_id and chunk[-1] == tokenizer.sep_token_id and len(chunk) <= 16
               for chunk in first)
    batch = task.collate(task.train_inputs)
    assert isinstance(batch, ChunkBatch) and batch.chunk_mask.tolist() == [[True] * len(first),
                                                                        [True] + [False] * (len(first) - 1)]
    model = ClassifyModel(bert, 2, 0.0, chunk_pooling="mean").eval()
    by_hand = []
    for item in task.train_inputs:
        cls = [bert(torch.tensor([c]), torch.ones(1, len(c), dtype=torch.long)).last_hidden_state[0, 0]
               for c in item]
        by_hand.append(torch.stack(cls).mean(0))
    expected = model.head.classifier(torch.stack(by_hand))
    torch.testing.assert_close(model(batch), expected, atol=1e-5, rtol=1e-5)
    assert isinstance(task.collate([task.train_inputs[1]]), ChunkBatch)
