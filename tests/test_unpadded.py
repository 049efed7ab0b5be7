"""Unpadded execution (minbert/fast/unpadded.py's UnpaddedBertModel) against the padded path, on models with the
same weights.

The padded path with the eager kernel is the reference (the lesson, itself held to transformers in
test_model.py), the padded sdpa path is compared too, and one test holds the unpadded path to
transformers directly. Outputs are compared at the real tokens only: at padding positions the unpadded
path returns 0 and the padded path vectors that mean nothing. The pooler reads position 0, a real token
in every batch here. Tolerances are test_model.py's: float32 outputs and gradients agree to atol 1e-5 /
rtol 1e-5 (the paths sum in different orders).
"""

from __future__ import annotations

import pytest
import torch
import transformers

from minbert.attention import sdpa_attention
from minbert.config import BertConfig
from minbert.loading.forward_contract import check_ids
from minbert.encoder import BertEncoder
from minbert.heads import BertForPreTraining
from minbert.model import BertModel, extended_attention_mask
from minbert.fast.unpadded import Packing, UnpaddedBertModel, UnpaddedSelfAttention, model_class

TOL = dict(atol=1e-5, rtol=1e-5)

# Masks of 3 sequences of up to 9 tokens: mixed lengths; one sequence of a single token; nothing padded;
# and padding that is not at the end (left padding, a hole), which the padded path also allows.
MASKS = {
    "mixed": [[1] * 9, [1] * 6 + [0] * 3, [1] * 3 + [0] * 6],
    "one_token": [[1] * 9, [1] + [0] * 8, [1] * 5 + [0] * 4],
    "none_padded": [[1] * 9] * 3,
    "holes": [[1] * 9, [1, 1, 0, 1, 1, 0, 0, 1, 0], [1] * 4 + [0] * 5],
}


@pytest.fixture
def config() -> BertConfig:
    # Dropout off so train-mode gradients are deterministic and comparable.
    return BertConfig.tiny(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def make_batch(config: BertConfig, mask_name: str, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    attention_mask = torch.tensor(MASKS[mask_name])
    input_ids = torch.randint(1, config.vocab_size, attention_mask.shape, generator=g) * attention_mask
    token_type_ids = torch.zeros_like(input_ids)
    token_type_ids[:, 5:] = 1
    return input_ids, attention_mask, token_type_ids


def with_kernel(model: BertModel, kernel: str) -> BertModel:
    """A model of the same weights, in the same mode, with attention `kernel` (an UnpaddedBertModel for
    "unpadded")."""
    other = model_class(kernel)(model.config, attn_implementation=kernel).train(model.training)
    other.load_state_dict(model.state_dict())
    return other


def run(model: BertModel, kernel: str, batch, weights: torch.Tensor, pooler_weights: torch.Tensor,
        **kwargs):
    """Forward with `kernel`, backward from a loss over real tokens and the pooler; returns (out, grads)."""
    input_ids, attention_mask, token_type_ids = batch
    model = with_kernel(model, kernel)
    out = model(input_ids, attention_mask, token_type_ids, **kwargs)
    real = attention_mask[..., None]
    ((out.last_hidden_state * weights * real).sum() + (out.pooler_output * pooler_weights).sum()).backward()
    return out, {name: p.grad.clone() for name, p in model.named_parameters()}


@pytest.mark.parametrize("reference", ["eager", "sdpa"])
@pytest.mark.parametrize("mask_name", sorted(MASKS))
def test_unpadded_equals_padded_outputs_hidden_states_pooler_and_gradients(config, mask_name, reference):
    torch.manual_seed(0)
    model = BertModel(config).train()  # train mode: the path that training takes (dropout is 0)
    batch = make_batch(config, mask_name)
    real = batch[1].bool()
    weights = torch.randn(*real.shape, config.hidden_size)
    pooler_weights = torch.randn(real.shape[0], config.hidden_size)
    ref, ref_grads = run(model, reference, batch, weights, pooler_weights, output_hidden_states=True)
    out, grads = run(model, "unpadded", batch, weights, pooler_weights, output_hidden_states=True)
    assert out.last_hidden_state.shape == ref.last_hidden_state.shape
    torch.testing.assert_close(out.last_hidden_state[real], ref.last_hidden_state[real], **TOL)
    torch.testing.assert_close(out.pooler_output, ref.pooler_output, **TOL)
    assert len(out.hidden_states) == config.num_hidden_layers + 1
    for mine, theirs in zip(out.hidden_states, ref.hidden_states):
        assert mine.shape == theirs.shape
        torch.testing.assert_close(mine[real], theirs[real], **TOL)
    assert ref_grads.keys() == grads.keys()
    for name, grad in grads.items():
        torch.testing.assert_close(grad, ref_grads[name], **TOL, msg=lambda m: f"{name}: {m}")


def test_unpadded_matches_transformers_at_real_tokens_with_the_same_gradients(config):
    """The default path against the reference we did not write (transformers' SDPA BertModel)."""
    torch.manual_seed(0)
    fields = {k: v for k, v in config.to_dict().items() if k not in ("architectures", "model_type")}
    theirs = transformers.BertModel(transformers.BertConfig(**fields, attn_implementation="sdpa")).train()
    ours = UnpaddedBertModel(config).train()
    ours.load_state_dict({k: v for k, v in theirs.state_dict().items() if not k.endswith("_ids")})
    input_ids, attention_mask, token_type_ids = make_batch(config, "one_token")
    real = attention_mask.bool()
    out = ours(input_ids, attention_mask, token_type_ids)
    ref = theirs(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
    torch.testing.assert_close(out.last_hidden_state[real], ref.last_hidden_state[real], **TOL)
    torch.testing.assert_close(out.pooler_output, ref.pooler_output, **TOL)
    weights = torch.randn_like(ref.last_hidden_state) * attention_mask[..., None]
    ((out.last_hidden_state * weights).sum() + out.pooler_output.sum()).backward()
    ((ref.last_hidden_state * weights).sum() + ref.pooler_output.sum()).backward()
    their_params = dict(theirs.named_parameters())
    for name, param in ours.named_parameters():
        torch.testing.assert_close(param.grad, their_params[name].grad, **TOL, msg=lambda m: f"{name}: {m}")


def test_the_unpadded_model_is_the_plain_one_with_its_attention_subclassed(config):
    torch.manual_seed(0)
    model, next_draw = UnpaddedBertModel(config), torch.rand(1)
    torch.manual_seed(0)
    plain, plain_next_draw = BertModel(config), torch.rand(1)
    assert isinstance(model, BertModel) and type(model.encoder) is BertEncoder
    assert model.attn_implementation == "unpadded"
    assert all(type(layer.attention.self) is UnpaddedSelfAttention for layer in model.encoder.layer)
    # One checkpoint layout, and the same weights drawn from the same seed: the subclass draws none more
    # (what a job draws next, its heads' weights, stays the same).
    assert list(model.state_dict()) == list(plain.state_dict())
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), plain.state_dict().values()))
    assert torch.equal(next_draw, plain_next_draw)


def test_the_lesson_knows_no_unpadded_kernel(config):
    with pytest.raises(ValueError, match=r"must be one of \['eager', 'sdpa'\], got 'unpadded'"):
        BertModel(config, attn_implementation="unpadded")
    with pytest.raises(ValueError, match="must be one of"):  # pre-training runs padded batches
        BertForPreTraining(config, attn_implementation="unpadded")
    with pytest.raises(ValueError, match="UnpaddedBertModel runs the 'unpadded' attention only, got 'sdpa'"):
        UnpaddedBertModel(config, attn_implementation="sdpa")


def test_padding_positions_are_zero_and_embeddings_and_layers_see_only_real_tokens(config):
    model = UnpaddedBertModel(config).eval()
    input_ids, attention_mask, token_type_ids = make_batch(config, "mixed")
    shapes = []
    model.embeddings.register_forward_pre_hook(lambda module, args: shapes.append(args[0].shape))
    model.encoder.layer[0].register_forward_pre_hook(lambda module, args: shapes.append(args[0].shape))
    out = model(input_ids, attention_mask, token_type_ids, output_hidden_states=True)
    N = int(attention_mask.sum())
    assert shapes == [(1, N), (1, N, config.hidden_size)]  # ids (1, N), then (1, N, C): one packed row
    for hidden in (out.last_hidden_state, *out.hidden_states):
        assert hidden[attention_mask == 0].abs().max() == 0
        assert hidden[attention_mask == 1].abs().min() > 0


def test_word_vectors_given_directly_get_the_same_gradients(config):
    torch.manual_seed(0)
    model = BertModel(config).train()
    input_ids, attention_mask, token_type_ids = make_batch(config, "one_token")
    words = model.embeddings.word_embeddings(input_ids).detach()
    weights = torch.randn_like(words)
    grads = {}
    for kernel in ("eager", "unpadded"):
        leaf = words.clone().requires_grad_()
        out = with_kernel(model, kernel)(inputs_embeds=leaf, attention_mask=attention_mask,
                                         token_type_ids=token_type_ids)
        (out.last_hidden_state * weights * attention_mask[..., None]).sum().backward()
        grads[kernel] = leaf.grad
    torch.testing.assert_close(grads["unpadded"], grads["eager"], **TOL)
    assert grads["unpadded"][attention_mask == 0].abs().max() == 0  # padding never reaches the output


def test_attention_probabilities_fall_back_to_the_padded_eager_path(config):
    model = UnpaddedBertModel(config).eval()
    input_ids, attention_mask, token_type_ids = make_batch(config, "mixed")
    out = model(input_ids, attention_mask, token_type_ids, output_attentions=True)
    ref = with_kernel(model, "eager")(input_ids, attention_mask, token_type_ids, output_attentions=True)
    assert len(out.attentions) == config.num_hidden_layers
    for mine, theirs in zip(out.attentions, ref.attentions):
        assert mine.shape == (3, config.num_attention_heads, 9, 9)
        torch.testing.assert_close(mine, theirs, **TOL)
    # The padded path ran, so even the padding positions agree.
    torch.testing.assert_close(out.last_hidden_state, ref.last_hidden_state, **TOL)


def test_without_a_mask_or_padding_the_padded_path_runs(config):
    assert Packing.from_mask(torch.ones(2, 5)) is None
    model = UnpaddedBertModel(config).eval()
    input_ids = torch.randint(1, config.vocab_size, (2, 5))
    ref = with_kernel(model, "sdpa")(input_ids)
    torch.testing.assert_close(model(input_ids).last_hidden_state, ref.last_hidden_state, atol=0, rtol=0)


def test_packing_records_lengths_positions_and_round_trips():
    mask = torch.tensor(MASKS["holes"])
    packing = Packing.from_mask(mask)
    assert packing.lengths == (9, 5, 4) and packing.batch_shape == (3, 9)
    assert packing.positions.tolist() == [[*range(9), 0, 1, 3, 4, 7, 0, 1, 2, 3]]  # positions kept
    x = torch.randn(3, 9, 2)
    packed = packing.unpad(x)
    assert packed.shape == (1, 18, 2)
    torch.testing.assert_close(packing.pad(packed), x * mask[..., None], atol=0, rtol=0)


def test_unpadded_attention_given_an_additive_mask_is_the_sdpa_kernel(config):
    """An unpadded model's layers see additive masks when nothing is padded or probabilities are asked."""
    attention = UnpaddedSelfAttention(config).eval()
    q, k, v = (torch.randn(2, config.num_attention_heads, 5, config.head_dim) for _ in range(3))
    mask = extended_attention_mask(torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]]), torch.float32)
    torch.testing.assert_close(attention.attend(q, k, v, mask)[0], sdpa_attention(q, k, v, mask)[0],
                               atol=0, rtol=0)


def test_every_forward_checks_its_arguments_once(config, monkeypatch):
    import minbert.loading.pretrained as pretrained

    calls = []
    check = pretrained.check_model_inputs
    monkeypatch.setattr(pretrained, "check_model_inputs", lambda *args: calls.append(1) or check(*args))
    for mask_name in ("mixed", "none_padded"):
        input_ids, attention_mask, token_type_ids = make_batch(config, mask_name)
        for model in (BertModel(config), UnpaddedBertModel(config)):
            for output_attentions in (False, True):
                calls.clear()
                model(input_ids, attention_mask, token_type_ids, output_attentions=output_attentions)
                assert len(calls) == 1, (type(model).__name__, mask_name, output_attentions)


def test_a_packed_row_may_outgrow_the_position_table_but_a_padded_row_may_not(config):
    """Tiny's table has 64 positions: 3 rows of up to 40 tokens pack into one row of 100."""
    torch.manual_seed(0)
    model = BertModel(config).eval()
    attention_mask = torch.tensor([[1] * 40, [1] * 35 + [0] * 5, [1] * 25 + [0] * 15])
    input_ids = torch.randint(1, config.vocab_size, attention_mask.shape) * attention_mask
    real = attention_mask.bool()
    ref = model(input_ids, attention_mask).last_hidden_state
    out = with_kernel(model, "unpadded")(input_ids, attention_mask).last_hidden_state
    torch.testing.assert_close(out[real], ref[real], **TOL)
    too_long = torch.ones(2, 65, dtype=torch.long)
    too_long[1, 60:] = 0
    # The padded length is checked before packing (forward_contract.py), so both paths refuse it alike.
    with pytest.raises(ValueError, match=r"sequence length 65 exceeds the position table.*64"):
        with_kernel(model, "unpadded")(too_long, too_long)


def test_mismatched_mask_is_refused_naming_both_shapes(config):
    model = UnpaddedBertModel(config)
    with pytest.raises(ValueError, match=r"attention_mask has shape \(1, 3\).*\(1, 4\)"):
        model(torch.ones(1, 4, dtype=torch.long), attention_mask=torch.tensor([[1, 1, 0]]))
    with pytest.raises(ValueError, match=r"attention_mask must have shape \(B, T\), got \(1, 1, 4\)"):
        model(torch.ones(1, 4, dtype=torch.long), attention_mask=torch.ones(1, 1, 4, dtype=torch.long))
    with pytest.raises(TypeError, match="input_ids must be a torch.Tensor, got list"):
        model([[1, 2, 3]], attention_mask=torch.tensor([[1, 1, 0]]))


def test_ids_are_range_checked_on_the_cpu_only_and_not_while_compiling(monkeypatch):
    with pytest.raises(ValueError, match=r"input_ids must lie in \[0, 5\)"):
        check_ids(torch.tensor([[1, 5]]), 5, "input_ids", "vocab_size")
    with monkeypatch.context() as patch:  # under torch.compile the host read would break the graph
        patch.setattr(torch.compiler, "is_compiling", lambda: True)
        check_ids(torch.tensor([[1, 5]]), 5, "input_ids", "vocab_size")
    # A tensor that lives elsewhere is not read back (a meta tensor has no values: reading would fail).
    check_ids(torch.tensor([[1, 5]], device="meta"), 5, "input_ids", "vocab_size")
    with pytest.raises(TypeError, match="integer tensor"):  # the checks that need no values still run
        check_ids(torch.ones(1, 2, device="meta"), 5, "input_ids", "vocab_size")


def test_training_attention_with_the_fast_dropout_is_the_sequence_by_sequence_kernel_bit_for_bit():
    # dropped_out_attention batches sequences of equal length and draws the masks at once; the loop of
    # sdpa_attention calls (the eager kernel with the same dropout) must give the same bits, gradients too
    from minbert.fast.dropout import Dropout
    from minbert.fast.unpadded import dropped_out_attention
    lengths = (4, 2, 4, 1, 6, 2, 4)  # groups of three, two and one
    torch.manual_seed(0)
    inputs = [torch.randn(1, 3, sum(lengths), 7, requires_grad=True) for _ in range(3)]  # (1, H, N, D)
    upstream = torch.randn(1, 3, sum(lengths), 7)

    def run(kernel):
        torch.manual_seed(5)
        out = kernel(*inputs)
        grads = torch.autograd.grad(out, inputs, upstream)
        return out, grads

    def one_by_one(q, k, v):
        pieces = zip(*(x.split(lengths, dim=2) for x in (q, k, v)))
        return torch.cat([sdpa_attention(a, b, c, None, Dropout(0.1))[0] for a, b, c in pieces], dim=2)

    fast, slow = run(lambda q, k, v: dropped_out_attention(q, k, v, lengths, 0.1)), run(one_by_one)
    assert torch.equal(fast[0], slow[0])
    assert all(torch.equal(a, b) for a, b in zip(fast[1], slow[1]))
