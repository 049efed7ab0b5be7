"""The model, component by component, against `transformers`' BERT modules with identical weights.

Every comparison checks outputs and gradients (with respect to every parameter and to the input
embeddings). Tolerances: float32 outputs and gradients agree to atol 1e-5 / rtol 1e-5 (the two
implementations sum in different orders, so bit equality is not expected); float64 gradcheck uses
torch's defaults.
"""

from __future__ import annotations

import json

import pytest
import torch
import transformers
from transformers.models.bert import modeling_bert as hf_bert

from minbert.attention import BertSelfAttention, eager_attention, sdpa_attention
from minbert.config import BertConfig
from minbert.embeddings import BertEmbeddings
from minbert.heads import BertForPreTraining
from minbert.layer import BertLayer
from minbert.model import BertModel, extended_attention_mask
from minbert.fast.unpadded import model_class

TOL = dict(atol=1e-5, rtol=1e-5)


def hf_config(config: BertConfig, attn: str = "eager") -> transformers.BertConfig:
    fields = {k: v for k, v in config.to_dict().items() if k not in ("architectures", "model_type")}
    return transformers.BertConfig(**fields, attn_implementation=attn)


def copy_weights(ours: torch.nn.Module, theirs: torch.nn.Module) -> None:
    """Copy `theirs` into `ours`; the names must agree key for key (no position_ids buffers on our side)."""
    reference = {k: v for k, v in theirs.state_dict().items() if not k.endswith("position_ids")
                 and not k.endswith("token_type_ids") and not k.startswith("cls.predictions.decoder")}
    ours.load_state_dict(reference, strict=True)


def assert_same_grads(ours: torch.nn.Module, theirs: torch.nn.Module, unused: tuple[str, ...] = ()) -> None:
    """Every parameter's gradient agrees; `unused` names parameters the loss does not reach in both."""
    their_params = dict(theirs.named_parameters())
    for name, param in ours.named_parameters():
        ref = their_params[name]
        if name in unused:
            assert param.grad is None and ref.grad is None, name
            continue
        assert param.grad is not None, f"no gradient reached {name}"
        torch.testing.assert_close(param.grad, ref.grad, **TOL, msg=lambda m: f"{name}: {m}")


@pytest.fixture
def config() -> BertConfig:
    # Dropout off so train-mode gradients are deterministic and comparable.
    return BertConfig.tiny(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


@pytest.fixture
def batch(config):
    """Three sequences of length 11: one full, two padded; segment ids 0 then 1, as in a pair."""
    input_ids = torch.randint(1, config.vocab_size, (3, 11))
    attention_mask = torch.ones(3, 11, dtype=torch.long)
    attention_mask[1, 7:] = 0
    attention_mask[2, 4:] = 0
    input_ids[attention_mask == 0] = config.pad_token_id
    token_type_ids = torch.zeros(3, 11, dtype=torch.long)
    token_type_ids[0, 6:] = 1
    token_type_ids[1, 3:7] = 1
    return input_ids, attention_mask, token_type_ids


def pooled_loss(hidden: torch.Tensor, mask: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """A loss that touches every real token's output with a different weight (padding excluded)."""
    return (hidden * weights * mask[..., None]).sum()


# ----- config ---------------------------------------------------------------------------------------


def test_config_defaults_are_bert_base():
    c = BertConfig()
    assert (c.hidden_size, c.num_hidden_layers, c.num_attention_heads,
            c.intermediate_size) == (768, 12, 12, 3072)
    assert c.vocab_size == 30522 and c.layer_norm_eps == 1e-12 and c.head_dim == 64


def test_config_rejects_hidden_not_divisible_by_heads():
    with pytest.raises(ValueError,
                       match=r"hidden_size \(30\) must be divisible by num_attention_heads \(4\)"):
        BertConfig.tiny(hidden_size=30)


@pytest.mark.parametrize("field, value, message", [
    ("num_hidden_layers", 0, "positive integer"),
    ("hidden_dropout_prob", 1.5, r"in \[0, 1\)"),
    ("hidden_act", "relu", "erf GELU"),
    ("position_embedding_type", "relative_key", "absolute"),
    ("pad_token_id", 500, "below vocab_size"),
])
def test_config_rejects_bad_values_naming_the_field(field, value, message):
    with pytest.raises(ValueError, match=f"BertConfig.{field}.*{message}|{field}.*{message}"):
        BertConfig.tiny(**{field: value})


def test_config_is_frozen():
    with pytest.raises(Exception):
        BertConfig().hidden_size = 10


def test_config_json_round_trip_and_transformers_reads_it(tmp_path):
    c = BertConfig.tiny()
    c.to_json_file(tmp_path)
    assert BertConfig.from_json_file(tmp_path / "config.json") == c
    theirs = transformers.BertConfig.from_pretrained(tmp_path)
    assert (theirs.hidden_size, theirs.intermediate_size, theirs.vocab_size) == (32, 37, 99)


def test_config_json_errors_name_the_file_and_field(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**BertConfig.tiny().to_dict(), "num_attention_heads": 5}))
    with pytest.raises(ValueError, match=f"{path}.*divisible"):
        BertConfig.from_json_file(path)
    path.write_text('{"model_type": "gpt2"}')
    with pytest.raises(ValueError, match="model_type is 'gpt2'"):
        BertConfig.from_json_file(path)
    path.write_text(json.dumps({**BertConfig.tiny().to_dict(), "is_decoder": True}))
    with pytest.raises(ValueError, match=f"{path}: is_decoder is true, but minbert implements BERT's encoder"):
        BertConfig.from_json_file(path)
    path.write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        BertConfig.from_json_file(path)


# ----- components against transformers ------------------------------------------------------------


def test_embeddings_match_transformers(config, batch):
    input_ids, _, token_type_ids = batch
    theirs = hf_bert.BertEmbeddings(hf_config(config))
    ours = BertEmbeddings(config)
    copy_weights(ours, theirs)
    out, ref = ours(input_ids, token_type_ids), theirs(input_ids=input_ids, token_type_ids=token_type_ids)
    torch.testing.assert_close(out, ref, **TOL)
    weights = torch.randn_like(out)
    (out * weights).sum().backward()
    (ref * weights).sum().backward()
    assert_same_grads(ours, theirs)


def test_embeddings_given_position_ids_match_transformers(config, batch):
    input_ids, _, token_type_ids = batch
    theirs = hf_bert.BertEmbeddings(hf_config(config)).eval()
    ours = BertEmbeddings(config).eval()
    copy_weights(ours, theirs)
    position_ids = torch.randint(0, config.max_position_embeddings, input_ids.shape)  # (B, T), any order
    out = ours(input_ids, token_type_ids, position_ids=position_ids)
    ref = theirs(input_ids=input_ids, token_type_ids=token_type_ids, position_ids=position_ids)
    torch.testing.assert_close(out, ref, **TOL)
    # Not the length but each position must fit the table: one row of 65 tokens at positions < 64 may.
    ours(torch.ones(1, 65, dtype=torch.long), position_ids=torch.arange(65)[None] % 64)


@pytest.mark.parametrize("kernel", ["eager", "sdpa"])
def test_self_attention_matches_transformers(config, batch, kernel):
    _, attention_mask, _ = batch
    theirs = hf_bert.BertSelfAttention(hf_config(config, kernel))
    ours = BertSelfAttention(config, attn_implementation=kernel)
    copy_weights(ours, theirs)
    hidden = torch.randn(3, 11, config.hidden_size)
    hidden_ours, hidden_theirs = hidden.clone().requires_grad_(), hidden.clone().requires_grad_()
    mask = extended_attention_mask(attention_mask, torch.float32)
    out = ours(hidden_ours, mask, output_attentions=(kernel == "eager"))
    ref, ref_probs = theirs(hidden_theirs, mask)
    torch.testing.assert_close(out.context, ref, **TOL)
    if kernel == "eager":
        torch.testing.assert_close(out.probs, ref_probs, **TOL)
    weights = torch.randn_like(ref)
    pooled_loss(out.context, attention_mask, weights).backward()
    pooled_loss(ref, attention_mask, weights).backward()
    assert_same_grads(ours, theirs)
    torch.testing.assert_close(hidden_ours.grad, hidden_theirs.grad, **TOL)


def test_layer_matches_transformers(config, batch):
    _, attention_mask, _ = batch
    theirs = hf_bert.BertLayer(hf_config(config))
    ours = BertLayer(config, attn_implementation="eager")
    copy_weights(ours, theirs)
    hidden = torch.randn(3, 11, config.hidden_size)
    hidden_ours, hidden_theirs = hidden.clone().requires_grad_(), hidden.clone().requires_grad_()
    mask = extended_attention_mask(attention_mask, torch.float32)
    out = ours(hidden_ours, mask).hidden_states
    ref = theirs(hidden_theirs, mask)
    ref = ref[0] if isinstance(ref, tuple) else ref
    torch.testing.assert_close(out, ref, **TOL)
    weights = torch.randn_like(ref)
    pooled_loss(out, attention_mask, weights).backward()
    pooled_loss(ref, attention_mask, weights).backward()
    assert_same_grads(ours, theirs)
    torch.testing.assert_close(hidden_ours.grad, hidden_theirs.grad, **TOL)


@pytest.mark.parametrize("kernel", ["eager", "sdpa"])
def test_full_model_matches_transformers(config, batch, kernel):
    input_ids, attention_mask, token_type_ids = batch
    theirs = transformers.BertModel(hf_config(config, kernel))
    ours = BertModel(config, attn_implementation=kernel)
    copy_weights(ours, theirs)
    # Gradients with respect to the input embeddings: give both models the same word vectors as leaves.
    words = theirs.embeddings.word_embeddings(input_ids).detach()
    words_ours, words_theirs = words.clone().requires_grad_(), words.clone().requires_grad_()
    out = ours(inputs_embeds=words_ours, attention_mask=attention_mask, token_type_ids=token_type_ids,
               output_hidden_states=True)
    ref = theirs(inputs_embeds=words_theirs, attention_mask=attention_mask, token_type_ids=token_type_ids,
                 output_hidden_states=True)
    torch.testing.assert_close(out.last_hidden_state, ref.last_hidden_state, **TOL)
    torch.testing.assert_close(out.pooler_output, ref.pooler_output, **TOL)
    assert len(out.hidden_states) == config.num_hidden_layers + 1
    for mine, reference in zip(out.hidden_states, ref.hidden_states):
        torch.testing.assert_close(mine, reference, **TOL)
    weights = torch.randn_like(ref.last_hidden_state)
    pooler_weights = torch.randn_like(ref.pooler_output)
    (pooled_loss(out.last_hidden_state, attention_mask, weights) + (out.pooler_output * pooler_weights).sum()
     ).backward()
    (pooled_loss(ref.last_hidden_state, attention_mask, weights) + (ref.pooler_output * pooler_weights).sum()
     ).backward()
    # The word vectors were given directly, so the gradient stops at them instead of the table.
    assert_same_grads(ours, theirs, unused=("embeddings.word_embeddings.weight",))
    torch.testing.assert_close(words_ours.grad, words_theirs.grad, **TOL)


def test_attention_probabilities_match_transformers(config, batch):
    input_ids, attention_mask, token_type_ids = batch
    theirs = transformers.BertModel(hf_config(config, "eager")).eval()
    ours = BertModel(config).eval()  # sdpa by default: asking for probabilities switches to eager
    copy_weights(ours, theirs)
    out = ours(input_ids, attention_mask, token_type_ids, output_attentions=True)
    ref = theirs(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                 output_attentions=True)
    assert len(out.attentions) == config.num_hidden_layers
    for mine, reference in zip(out.attentions, ref.attentions):
        assert mine.shape == (3, config.num_attention_heads, 11, 11)
        torch.testing.assert_close(mine, reference, **TOL)
        torch.testing.assert_close(mine.sum(-1), torch.ones(mine.shape[:-1]))
        assert mine[1, :, :, 7:].abs().max() == 0  # padding gets exactly zero weight


def test_pretraining_logits_loss_and_gradients_match_transformers(config, batch):
    input_ids, attention_mask, token_type_ids = batch
    theirs = transformers.BertForPreTraining(hf_config(config))
    ours = BertForPreTraining(config, attn_implementation="eager")
    copy_weights(ours, theirs)
    labels = torch.full_like(input_ids, -100)
    labels[0, [1, 4, 9]] = input_ids[0, [1, 4, 9]]
    labels[1, 2] = 5
    next_sentence_label = torch.tensor([0, 1, 0])
    out = ours(input_ids, attention_mask, token_type_ids, labels=labels,
               next_sentence_label=next_sentence_label)
    ref = theirs(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                 labels=labels, next_sentence_label=next_sentence_label)
    torch.testing.assert_close(out.prediction_logits, ref.prediction_logits, **TOL)
    torch.testing.assert_close(out.seq_relationship_logits, ref.seq_relationship_logits, **TOL)
    torch.testing.assert_close(out.loss, ref.loss, **TOL)
    out.loss.backward()
    ref.loss.backward()
    # The tied decoder: transformers' gradient of the shared matrix arrives on the word embeddings too.
    assert_same_grads(ours, theirs)


def test_pretraining_loss_is_sum_of_the_two_cross_entropies(config, batch):
    input_ids, attention_mask, token_type_ids = batch
    model = BertForPreTraining(config).eval()
    labels = torch.full_like(input_ids, -100)
    labels[0, 2] = 7
    out = model(input_ids, attention_mask, token_type_ids, labels=labels,
                next_sentence_label=torch.tensor([1, 0, 1]))
    mlm = torch.nn.functional.cross_entropy(out.prediction_logits[0, 2][None], torch.tensor([7]))
    nsp = torch.nn.functional.cross_entropy(out.seq_relationship_logits, torch.tensor([1, 0, 1]))
    torch.testing.assert_close(out.mlm_loss, mlm)
    torch.testing.assert_close(out.loss, mlm + nsp)


# ----- our two kernels, gradcheck, and properties ----------------------------------------------------


def test_sdpa_kernel_equals_eager_kernel(config, batch):
    input_ids, attention_mask, token_type_ids = batch
    model = BertModel(config, attn_implementation="eager").eval()
    eager = model(input_ids, attention_mask, token_type_ids)
    sdpa_model = BertModel(config, attn_implementation="sdpa").eval()
    sdpa_model.load_state_dict(model.state_dict())
    sdpa = sdpa_model(input_ids, attention_mask, token_type_ids)
    torch.testing.assert_close(sdpa.last_hidden_state, eager.last_hidden_state, **TOL)
    torch.testing.assert_close(sdpa.pooler_output, eager.pooler_output, **TOL)


@pytest.mark.parametrize("kernel", [eager_attention, sdpa_attention])
def test_attention_kernel_gradcheck_float64(kernel):
    q, k, v = (torch.randn(2, 3, 5, 4, dtype=torch.float64, requires_grad=True) for _ in range(3))
    mask = extended_attention_mask(torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]]), torch.float64)
    assert torch.autograd.gradcheck(lambda q, k, v: kernel(q, k, v, mask)[0], (q, k, v))


def test_layer_gradcheck_float64(config):
    layer = BertLayer(config, attn_implementation="eager").double()
    hidden = torch.randn(2, 5, config.hidden_size, dtype=torch.float64, requires_grad=True)
    mask = extended_attention_mask(torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]]), torch.float64)
    assert torch.autograd.gradcheck(lambda h: layer(h, mask).hidden_states, (hidden,))


@pytest.mark.parametrize("kernel", ["eager", "sdpa", "unpadded"])
def test_padding_does_not_change_real_token_outputs(config, kernel):
    model = model_class(kernel)(config, attn_implementation=kernel).eval()
    ids = torch.randint(1, config.vocab_size, (1, 6))
    segments = torch.tensor([[0, 0, 0, 1, 1, 1]])
    alone = model(ids, torch.ones(1, 6, dtype=torch.long), segments)
    for extra in (1, 9, 30):
        padded_ids = torch.cat([ids, torch.zeros(1, extra, dtype=torch.long)], dim=1)
        mask = torch.cat([torch.ones(1, 6), torch.zeros(1, extra)], dim=1).long()
        padded_segments = torch.cat([segments, torch.zeros(1, extra, dtype=torch.long)], dim=1)
        padded = model(padded_ids, mask, padded_segments)
        torch.testing.assert_close(padded.last_hidden_state[:, :6], alone.last_hidden_state, atol=1e-6,
                                   rtol=1e-6)
        torch.testing.assert_close(padded.pooler_output, alone.pooler_output, atol=1e-6, rtol=1e-6)


def test_dropout_is_active_in_training_and_off_in_eval(batch):
    model = BertModel(BertConfig.tiny())
    input_ids, attention_mask, _ = batch
    model.train()
    a, b = (model(input_ids, attention_mask).last_hidden_state,
            model(input_ids, attention_mask).last_hidden_state)
    assert not torch.allclose(a, b)
    model.eval()
    a, b = (model(input_ids, attention_mask).last_hidden_state,
            model(input_ids, attention_mask).last_hidden_state)
    assert torch.equal(a, b)


def test_parameter_names_mirror_the_checkpoint_keys(config):
    theirs = set(transformers.BertForPreTraining(hf_config(config)).state_dict())
    ours = set(BertForPreTraining(config).state_dict())
    # The only keys transformers has that we do not are the tied decoder's aliases of E and b.
    assert theirs - ours == {"cls.predictions.decoder.weight", "cls.predictions.decoder.bias"}
    assert ours - theirs == set()


# ----- bad input --------------------------------------------------------------------------------------


def test_token_ids_out_of_range_are_refused(config):
    model = BertModel(config)
    with pytest.raises(ValueError, match=r"input_ids must lie in \[0, 99\).*99"):
        model(torch.tensor([[1, 2, 99]]))
    with pytest.raises(ValueError, match="input_ids must lie in"):
        model(torch.tensor([[1, -1, 3]]))
    with pytest.raises(ValueError, match=r"token_type_ids must lie in \[0, 2\)"):
        model(torch.tensor([[1, 2, 3]]), token_type_ids=torch.tensor([[0, 1, 2]]))


def test_sequence_longer_than_position_table_is_refused(config):
    model = BertModel(config)
    with pytest.raises(ValueError, match="sequence length 65 exceeds the position table.*64"):
        model(torch.ones(1, 65, dtype=torch.long))


def test_mismatched_mask_and_bad_shapes_are_refused(config):
    model = BertModel(config)
    with pytest.raises(ValueError, match=r"attention_mask has shape \(1, 3\).*\(1, 4\)"):
        model(torch.ones(1, 4, dtype=torch.long), attention_mask=torch.ones(1, 3, dtype=torch.long))
    with pytest.raises(ValueError, match=r"input_ids must have shape \(B, T\)"):
        model(torch.ones(4, dtype=torch.long))
    with pytest.raises(TypeError, match="integer tensor"):
        model(torch.ones(1, 4))
    with pytest.raises(ValueError, match="exactly one of input_ids and inputs_embeds"):
        model()


def test_unknown_attention_kernel_is_refused(config):
    with pytest.raises(ValueError, match=r"attn_implementation must be one of \['eager', 'sdpa'\]"):
        BertModel(config, attn_implementation="flash")
