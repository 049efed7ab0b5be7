"""Graded: BertEmbeddings.forward, the sum of word, position and segment embeddings, LayerNorm, dropout."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch
from graded_helpers import TOL, check_close, check_that, expectation, fail
from safetensors.torch import load_file

from minbert.embeddings import BertEmbeddings

pytestmark = pytest.mark.component("embeddings")

STORED = Path(__file__).resolve().parent / "reference" / "embeddings.safetensors"


def stored(config) -> tuple[BertEmbeddings, dict[str, torch.Tensor]]:
    """Embeddings with stored weights, and stored inputs and outputs (made by a staff script)."""
    tensors = load_file(str(STORED))
    emb = BertEmbeddings(config).eval()
    emb.load_state_dict({name: tensors[name] for name in emb.state_dict()})
    return emb, tensors


def normalised(x: torch.Tensor) -> bool:
    """Each vector has mean 0 and variance 1 (a LayerNorm's output with scale 1 and shift 0)."""
    mean, var = x.mean(dim=-1), x.var(dim=-1, unbiased=False)
    return torch.allclose(mean, torch.zeros_like(mean), atol=1e-4) and torch.allclose(
        var, torch.ones_like(var), atol=1e-3)


def embeddings_mistake(emb: BertEmbeddings, ids: torch.Tensor, segments: torch.Tensor) -> str | None:
    """The mistake an embedding layer makes, read off its outputs (LayerNorm scale 1, shift 0)."""
    probe = copy.deepcopy(emb).eval()
    with torch.no_grad():
        probe.LayerNorm.weight.fill_(1.0)
        probe.LayerNorm.bias.zero_()
        out = probe(ids, segments)
        if not normalised(out):
            return "the LayerNorm over the sum is missing (it comes after the sum, before dropout)"
        if torch.allclose(probe(ids.flip(1), segments.flip(1)), out.flip(1), **TOL):
            return ("the position embeddings are missing from the sum: reversing the tokens only reverses "
                    "the output")
        if torch.allclose(probe(ids, 1 - segments), out, **TOL):
            probe.token_type_embeddings.weight.add_(torch.randn_like(probe.token_type_embeddings.weight))
            if torch.allclose(probe(ids, segments), out, **TOL):
                return "the segment (token type) embeddings are missing from the sum"
            return "every token got segment 0: use the token_type_ids given"
    return None


def name_the_mistake(emb, ids, segments, what: str) -> None:
    """Fail naming the mistake the embedding layer makes, where its outputs show one (embeddings_mistake)."""
    __tracebackhide__ = True
    mistake = embeddings_mistake(emb, ids, segments)
    if mistake:
        fail(f"{what} are wrong: {mistake}")


@pytest.mark.points(3)
def test_embeddings_are_layernorm_of_word_plus_position_plus_segment(config):
    emb, t = stored(config)
    what = "the embeddings (stored weights and ids)"
    name_the_mistake(emb, t["ids"], t["segments"], what)
    check_close(emb(t["ids"], t["segments"]), t["output"], what)


@pytest.mark.points(1)
def test_embeddings_default_segments_are_zero(config):
    emb, t = stored(config)
    what = "the embeddings without token_type_ids (every token in segment 0)"
    name_the_mistake(emb, t["ids"], t["segments"], what)
    check_close(emb(t["ids"]), t["output_segment_0"], what)


@pytest.mark.points(1)
def test_embeddings_accept_word_vectors_directly(config):
    emb, t = stored(config)
    words = emb.word_embeddings(t["ids"])
    # Vectors that are no row of the word table: a copy whose table holds them as rows 0 .. B*T - 1 gives,
    # for ids 0 .. B*T - 1, what inputs_embeds must give.
    other = torch.randn_like(words)
    given = emb(inputs_embeds=other, token_type_ids=t["segments"])
    if isinstance(given, torch.Tensor) and torch.allclose(
            given, emb(inputs_embeds=2 * other + 1, token_type_ids=t["segments"]), **TOL):
        fail("the embeddings did not change when inputs_embeds did: inputs_embeds was ignored; when it is "
             "given, it replaces the word-table lookup")
    check_close(emb(inputs_embeds=words, token_type_ids=t["segments"]), t["output"],
                "the embeddings given inputs_embeds (word vectors instead of ids)")
    check_close(given, as_rows_of_the_table(emb, other, t["segments"]),
                "the embeddings given random vectors as inputs_embeds", [
        (t["output"], "inputs_embeds was ignored: the output is that of the ids' own word vectors; when "
         "inputs_embeds is given it replaces the word-table lookup")])


@expectation
def as_rows_of_the_table(emb: BertEmbeddings, vectors: torch.Tensor, segments: torch.Tensor) -> torch.Tensor:
    """What `emb` must give for inputs_embeds=vectors (B, T, C): the output of a copy whose word table holds
    them as rows 0 .. B*T - 1, for those ids."""
    B, T, _ = vectors.shape
    table = copy.deepcopy(emb)
    with torch.no_grad():
        table.word_embeddings.weight[:B * T] = vectors.reshape(B * T, -1)
    return table(torch.arange(B * T).view(B, T), segments)


@expectation
def moved_positions(emb: BertEmbeddings, position_ids: torch.Tensor) -> BertEmbeddings:
    """A copy of `emb` whose default positions 0, 1, ... read the rows `position_ids` (T,) of the table:
    what `emb` must give with those position_ids, without writing the TODO's sum here."""
    moved = copy.deepcopy(emb)
    with torch.no_grad():
        moved.position_embeddings.weight[:len(position_ids)] = emb.position_embeddings.weight[position_ids]
    return moved


@pytest.mark.points(1)
def test_embeddings_use_the_position_ids_given(config):
    # Hugging Face's position_ids argument: the position of token t is position_ids[t], not t.
    emb, t = stored(config)
    ids, segments = t["ids"], t["segments"]
    B, T = ids.shape
    # The expectation below comes from the student's own forward on a moved table, so first the default
    # positions must give the stored output (otherwise a forward that reads no table at all would pass).
    check_close(emb(ids, segments), t["output"], "the embeddings with the default positions 0, 1, ..., T - 1")
    shared = torch.arange(T).flip(0) + 3  # (1, T): the same positions for every row
    rows = torch.stack([torch.randperm(config.max_position_embeddings)[:T] for _ in range(B)])  # (B, T)
    for position_ids, what in ((shared[None], "(1, T) position_ids 3 + T - 1, ..., 3"),
                               (rows, "(B, T) position_ids, a different permutation in every row")):
        check_close(emb(ids, segments, position_ids=position_ids),
                    at_positions(emb, ids, segments, position_ids),
                    f"the embeddings with {what}", [
            (t["output"], "position_ids was ignored: every token got position 0, 1, ..., T - 1; add the "
             "vectors of the positions given")])


@expectation
def at_positions(emb, ids, segments, position_ids):
    """What `emb` must give with these position_ids, row by row through moved tables (moved_positions)."""
    return torch.cat([moved_positions(emb, position_ids[min(b, len(position_ids) - 1)])(
        ids[b:b + 1], segments[b:b + 1]) for b in range(len(ids))])


@pytest.mark.points(1)
def test_embeddings_apply_dropout_in_training_only(config):
    emb, t = stored(config.replace(hidden_dropout_prob=0.5))
    ids = t["ids"]
    emb.train()
    zeros = (emb(ids) == 0).float().mean().item()
    if zeros == 0 and torch.equal(emb(ids), emb(ids)):
        fail("in training mode with hidden_dropout_prob=0.5 no output is 0 and two calls agree: self.dropout "
             "was not applied (LayerNorm, then dropout)")
    check_that(zeros >= 0.2, f"in training mode with hidden_dropout_prob=0.5 only {zeros:.0%} of the outputs "
               "are 0: apply dropout after the LayerNorm")
    emb.eval()
    check_close(emb(ids), t["output_segment_0"], "the embeddings in eval mode (no dropout)")
