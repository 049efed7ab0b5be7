"""LoRA (minbert/lora.py) and its files (minbert/loading/adapter_files.py) against Hugging Face's `peft`.

The reference is `peft`'s LoraModel on `transformers`' BertModel holding the same weights as our BertModel
(the tiny config, and the embedded all-MiniLM-L6-v2), its adapters' A and B copied into ours, with B drawn
at random so that the update is not zero. Outputs and gradients are compared merged and unmerged.

Tolerances: float32 outputs and gradients agree to atol 1e-5 / rtol 1e-5 on the tiny model, as in
tests/test_model.py: the base models sum in different orders, so bit equality is not expected (the
adapters compute x A^T B^T times alpha / r in the same order as peft). On all-MiniLM-L6-v2 (6 layers of
width 384) the outputs agree to 1e-5 too, and the gradients to atol 1e-4 / rtol 1e-4: they reach ~140,
and six layers of float32 sums leave ~1e-6 of that. A merged model is compared with the unmerged one at the
same tolerances (merging rounds W + (alpha / r) B A). Every field of the installed peft's LoraConfig at a
non-default value either gives peft's outputs when the adapter is read (the fields minbert computes, or
that change no output) or is refused naming it, so a field a new peft adds is caught; our folder opens in
peft's AutoPeftModel, and peft's .bin adapter loads. Measured (torch 2.13, peft 0.21, 2 CPU cores), the
largest differences from peft: tiny model, outputs 7e-7, adapter gradients 1e-6, merged outputs 5e-7;
MiniLM, outputs 2e-6, adapter gradients 1.2e-4 (of 140), merged outputs 1.5e-6, input gradients when
merged 1e-4 (of 100).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import re
import warnings

import peft
import pytest
import torch
import transformers
from safetensors.torch import load_file
from torch import nn

from minbert.loading.checkpoint import CheckpointError
from minbert.config import BertConfig
from minbert.heads import BertForPreTraining
from minbert.lora import ALL_LINEAR, QUERY_VALUE, LoRALinear, apply_lora, lora_layers, merge_and_unload
from minbert.loading.adapter_files import (CONFIG_FILE, WEIGHTS_FILE, active_adapter, add_adapter,
                                          disable_adapter, load_adapter, save_adapter, save_merged,
                                          set_adapter)
from minbert.model import BertModel

TOL = dict(atol=1e-5, rtol=1e-5)
GRAD_TOL_MINILM = dict(atol=1e-4, rtol=1e-4)
PEFT_TARGETS = {QUERY_VALUE: ["query", "value"], ALL_LINEAR: "all-linear"}  # peft's spelling of ours


def hf_config(config: BertConfig) -> transformers.BertConfig:
    fields = {k: v for k, v in config.to_dict().items() if k not in ("architectures", "model_type")}
    return transformers.BertConfig(**fields, attn_implementation="eager")


def copy_base(ours: nn.Module, theirs: nn.Module) -> None:
    """Copy transformers' BertModel weights into ours (the names agree key for key)."""
    state = {k: v for k, v in theirs.state_dict().items()
             if not k.endswith(("position_ids", "token_type_ids"))}
    ours.load_state_dict(state, strict=True)


def peft_lora(theirs: nn.Module, r: int, alpha: float, targets) -> peft.PeftModel:
    config = peft.LoraConfig(r=r, lora_alpha=alpha, lora_dropout=0.0, target_modules=PEFT_TARGETS[targets])
    return peft.get_peft_model(theirs, config)


def peft_name(name: str) -> str:
    """Our adapter parameter's name -> peft's (encoder...query.lora_A -> base_model.model.encoder...query
    .lora_A.default.weight)."""
    return f"base_model.model.{name}.default.weight"


def randomize_b_and_copy(ours: nn.Module, theirs: peft.PeftModel) -> None:
    """Draw peft's B at random (its A is already random) and copy A and B into our adapters."""
    params = dict(theirs.named_parameters())
    with torch.no_grad():
        for name, p in ours.named_parameters():
            if p.requires_grad:
                reference = params[peft_name(name)]
                if name.endswith("lora_B"):
                    reference.normal_(std=0.05)
                p.copy_(reference)


def adapted_pair(config: BertConfig, theirs: nn.Module, ours: nn.Module, r: int = 4, alpha: float = 8.0,
                 targets=QUERY_VALUE) -> tuple[nn.Module, peft.PeftModel]:
    copy_base(ours, theirs)
    their_lora = peft_lora(theirs, r, alpha, targets)
    apply_lora(ours, r, alpha, 0.0, targets)
    randomize_b_and_copy(ours, their_lora)
    return ours, their_lora


@pytest.fixture
def config() -> BertConfig:
    return BertConfig.tiny(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


@pytest.fixture
def batch():
    """Three sequences of length 11 (vocabulary 99): one full, two padded; segment 1 on a pair's end."""
    input_ids = torch.randint(1, 99, (3, 11))
    attention_mask = torch.ones(3, 11, dtype=torch.long)
    attention_mask[1, 7:] = 0
    attention_mask[2, 4:] = 0
    input_ids[attention_mask == 0] = 0
    token_type_ids = torch.zeros(3, 11, dtype=torch.long)
    token_type_ids[0, 6:] = 1
    return dict(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)


def loss_of(out, batch, weights) -> torch.Tensor:
    """Every real token's output and the pooler's, each with its own weight (padding excluded)."""
    hidden, pooled = out.last_hidden_state, out.pooler_output
    return ((hidden * weights[0] * batch["attention_mask"][..., None]).sum() + (pooled * weights[1]).sum())


def compare(ours: nn.Module, theirs: peft.PeftModel, batch, grad_tol=TOL) -> dict[str, float]:
    """Outputs, and the adapters' gradients, of both adapted models; returns the largest differences."""
    out, ref = ours(**batch), theirs(**batch)
    torch.testing.assert_close(out.last_hidden_state, ref.last_hidden_state, **TOL)
    torch.testing.assert_close(out.pooler_output, ref.pooler_output, **TOL)
    weights = (torch.randn_like(ref.last_hidden_state), torch.randn_like(ref.pooler_output))
    loss_of(out, batch, weights).backward()
    loss_of(ref, batch, weights).backward()
    trainable = {n: p for n, p in ours.named_parameters() if p.requires_grad}
    their_trainable = {n for n, p in theirs.named_parameters() if p.requires_grad}
    assert {peft_name(n) for n in trainable} == their_trainable
    params = dict(theirs.named_parameters())
    grad_diff = 0.0
    for name, p in trainable.items():
        reference = params[peft_name(name)].grad
        torch.testing.assert_close(p.grad, reference, **grad_tol, msg=lambda m: f"{name}: {m}")
        grad_diff = max(grad_diff, (p.grad - reference).abs().max().item())
    for name, p in ours.named_parameters():  # the frozen base got no gradient
        assert p.requires_grad or p.grad is None, name
    ours.zero_grad(set_to_none=True)
    theirs.zero_grad(set_to_none=True)
    return {"output": (out.last_hidden_state - ref.last_hidden_state).abs().max().item(), "grad": grad_diff}


def compare_merged(ours: nn.Module, theirs: peft.PeftModel, batch, grad_tol=TOL) -> dict[str, float]:
    """Merged, both give the unmerged outputs, and the same gradients with respect to the input word
    vectors (a merged model has nothing left to train); then both are unmerged again. Returns the largest
    differences."""
    with torch.no_grad():
        before = ours(**batch).last_hidden_state
    for layer in lora_layers(ours).values():
        layer.merge()
    theirs.merge_adapter()
    words = theirs.get_input_embeddings()(batch["input_ids"]).detach()
    inputs = {k: v for k, v in batch.items() if k != "input_ids"}
    words_ours, words_theirs = words.clone().requires_grad_(), words.clone().requires_grad_()
    out, ref = ours(inputs_embeds=words_ours, **inputs), theirs(inputs_embeds=words_theirs, **inputs)
    torch.testing.assert_close(out.last_hidden_state, ref.last_hidden_state, **TOL)
    torch.testing.assert_close(out.pooler_output, ref.pooler_output, **TOL)
    torch.testing.assert_close(out.last_hidden_state, before, **TOL)
    weights = (torch.randn_like(ref.last_hidden_state), torch.randn_like(ref.pooler_output))
    loss_of(out, batch, weights).backward()
    loss_of(ref, batch, weights).backward()
    torch.testing.assert_close(words_ours.grad, words_theirs.grad, **grad_tol)
    for layer in lora_layers(ours).values():
        layer.unmerge()
    theirs.unmerge_adapter()
    return {"output": (out.last_hidden_state - ref.last_hidden_state).abs().max().item(),
            "merged_vs_unmerged": (out.last_hidden_state - before).abs().max().item(),
            "input_grad": (words_ours.grad - words_theirs.grad).abs().max().item()}


# ----- against peft: the tiny model -------------------------------------------------------------------


@pytest.mark.parametrize("targets", [QUERY_VALUE, ALL_LINEAR], ids=["query-value", "all-linear"])
def test_tiny_adapted_model_matches_peft_outputs_and_gradients_merged_and_unmerged(config, batch, targets):
    theirs = transformers.BertModel(hf_config(config))
    ours, their_lora = adapted_pair(config, theirs, BertModel(config, attn_implementation="eager"),
                                    targets=targets)
    compare(ours, their_lora, batch)
    compare_merged(ours, their_lora, batch)
    compare(ours, their_lora, batch)  # unmerged again: the adapter trains as before


def test_fresh_adapters_change_nothing_and_only_they_train(config, batch):
    model = BertModel(config).eval()
    with torch.no_grad():
        before = model(**batch).last_hidden_state
    names = apply_lora(model, r=4, alpha=8)
    assert names == [f"encoder.layer.{i}.attention.self.{m}" for i in range(2) for m in ("query", "value")]
    with torch.no_grad():
        torch.testing.assert_close(model(**batch).last_hidden_state, before, atol=0, rtol=0)  # B = 0
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable == [f"{name}.lora_{m}" for name in names for m in "AB"]
    layer = model.encoder.layer[0].attention.self.query
    assert isinstance(layer, LoRALinear) and layer.scaling == 2.0
    assert not layer.base_layer.weight.requires_grad and not layer.base_layer.bias.requires_grad
    assert layer.lora_A.shape == (4, 32) and layer.lora_B.shape == (32, 4) and layer.lora_B.abs().max() == 0


def test_a_from_kaiming_uniform_as_peft_draws_it(config):
    torch.manual_seed(3)
    reference = peft_lora(transformers.BertModel(hf_config(config)), 8, 16, QUERY_VALUE)
    bound = 1 / 32 ** 0.5  # kaiming_uniform_(a=sqrt(5)) on fan_in 32: U(-1/sqrt(32), 1/sqrt(32))
    layer = LoRALinear(nn.Linear(32, 32), r=8, alpha=16)
    theirs = reference.base_model.model.encoder.layer[0].attention.self.query.lora_A["default"].weight
    for a in (layer.lora_A, theirs):
        assert a.abs().max() <= bound and a.abs().max() > 0.9 * bound and abs(a.mean()) < 0.05


def test_merging_twice_warns_and_adds_nothing_unmerge_restores_w():
    layer = LoRALinear(nn.Linear(5, 7), r=2, alpha=6)
    with torch.no_grad():
        layer.lora_B.normal_()
    x = torch.randn(3, 5)
    expected = layer(x)
    w = layer.base_layer.weight.detach().clone()
    layer.merge()
    torch.testing.assert_close(layer.base_layer.weight, w + 3 * layer.lora_B @ layer.lora_A, **TOL)
    with pytest.warns(UserWarning, match="already merged"):
        layer.merge()
    torch.testing.assert_close(layer(x), expected, **TOL)  # not twice, and not added again in forward
    layer.unmerge()
    torch.testing.assert_close(layer.base_layer.weight, w, atol=1e-6, rtol=0)
    with pytest.warns(UserWarning, match="not merged"):
        layer.unmerge()
    torch.testing.assert_close(layer(x), expected, **TOL)


def test_dropout_acts_on_the_adapters_input_only():
    layer = LoRALinear(nn.Linear(6, 6), r=6, alpha=6, dropout=0.5)
    with torch.no_grad():
        layer.lora_A.copy_(torch.eye(6))
        layer.lora_B.copy_(torch.eye(6))
    x = torch.randn(200, 6)
    base = layer.base_layer(x)
    update = layer(x) - base  # train mode: dropout(x), each element 0 or 2 x
    ratio = update / x
    assert torch.allclose(ratio[ratio > 1], torch.tensor(2.0)) and (ratio.abs() < 1e-5).float().mean() > 0.3
    layer.eval()
    torch.testing.assert_close(layer(x) - base, x, **TOL)


def test_all_linear_adapts_every_linear_layer_the_pooler_too_as_peft_does(config):
    model = BertModel(config)
    names = apply_lora(model, r=2, alpha=2, targets=ALL_LINEAR)
    reference = peft_lora(transformers.BertModel(hf_config(config)), 2, 2, ALL_LINEAR)
    assert set(names) == set(reference.peft_config["default"].target_modules)
    assert "pooler.dense" in names and len(names) == 2 * 6 + 1


def test_bad_targets_and_a_second_apply_are_refused(config):
    model = BertModel(config)
    with pytest.raises(ValueError, match=r"LoRA targets \['attention.query'\] match no nn.Linear"):
        apply_lora(model, targets=("attention.query",))
    apply_lora(model)
    with pytest.raises(ValueError, match="already has LoRA adapters"):
        apply_lora(model)
    with pytest.raises(ValueError, match="rank r must be a positive integer"):
        LoRALinear(nn.Linear(2, 2), r=0, alpha=1)


def test_merge_and_unload_leaves_plain_linear_layers_with_the_merged_weight(config, batch):
    model = BertModel(config).eval()
    apply_lora(model, r=4, alpha=4)
    with torch.no_grad():
        for layer in lora_layers(model).values():
            layer.lora_B.normal_(std=0.1)
        expected = model(**batch).last_hidden_state
    merge_and_unload(model)
    assert not lora_layers(model) and type(model.encoder.layer[1].attention.self.value) is nn.Linear
    assert set(model.state_dict()) == set(BertModel(config).state_dict())
    with torch.no_grad():
        torch.testing.assert_close(model(**batch).last_hidden_state, expected, **TOL)


# ----- peft's adapter folder, both ways, and the merged folder ----------------------------------------


@pytest.fixture(scope="module")
def tiny_base(tmp_path_factory):
    """A tiny transformers BertModel saved to a folder both libraries open."""
    folder = tmp_path_factory.mktemp("base")
    torch.manual_seed(0)
    config = BertConfig.tiny(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    transformers.BertModel(hf_config(config)).save_pretrained(folder)
    return folder


def test_our_adapter_folder_loads_in_peft_and_auto_peft_model_with_the_same_outputs(tiny_base, batch,
                                                                                   tmp_path):
    ours = BertModel.from_pretrained(tiny_base, attn_implementation="eager")
    apply_lora(ours, r=4, alpha=12, targets=ALL_LINEAR)
    with torch.no_grad():
        for layer in lora_layers(ours).values():
            layer.lora_B.normal_(std=0.05)
    save_adapter(ours, tmp_path)
    saved = json.loads((tmp_path / CONFIG_FILE).read_text())
    assert saved["peft_type"] == "LORA" and saved["r"] == 4 and saved["lora_alpha"] == 12
    assert saved["base_model_name_or_path"] == str(tiny_base)  # where AutoPeftModel finds the base model
    keys = load_file(tmp_path / WEIGHTS_FILE)
    assert "base_model.model.encoder.layer.0.attention.self.query.lora_A.weight" in keys and len(keys) == 26
    theirs = transformers.BertModel.from_pretrained(tiny_base, attn_implementation="eager")
    loaded = peft.PeftModel.from_pretrained(theirs, tmp_path).eval()
    auto = peft.AutoPeftModel.from_pretrained(tmp_path, attn_implementation="eager").eval()  # builds the base
    assert type(auto.get_base_model()) is transformers.BertModel
    with torch.no_grad():
        out = ours.eval()(**batch)
        for ref in (loaded(**batch), auto(**batch)):
            torch.testing.assert_close(out.last_hidden_state, ref.last_hidden_state, **TOL)
            torch.testing.assert_close(out.pooler_output, ref.pooler_output, **TOL)


def test_peft_adapter_folder_loads_onto_our_model_with_the_same_outputs(config, batch, tmp_path):
    theirs = transformers.BertModel(hf_config(config)).eval()
    ours = BertModel(config, attn_implementation="eager").eval()
    copy_base(ours, theirs)
    reference = peft_lora(theirs, 8, 16, QUERY_VALUE).eval()
    with torch.no_grad():
        for name, p in reference.named_parameters():
            if "lora_B" in name:
                p.normal_(std=0.05)
    reference.save_pretrained(tmp_path)
    names = load_adapter(ours, tmp_path)
    assert len(names) == 4
    assert all(layer.r == 8 and layer.scaling == 2 for layer in lora_layers(ours).values())
    with torch.no_grad():
        out, ref = ours(**batch), reference(**batch)
    torch.testing.assert_close(out.last_hidden_state, ref.last_hidden_state, **TOL)
    torch.testing.assert_close(out.pooler_output, ref.pooler_output, **TOL)


def test_named_adapters_set_and_disabled_give_peft_outputs_and_save_by_name(tiny_base, batch, tmp_path):
    """Two adapters on one model (other targets and ranks): peft's add_adapter, set_adapter, disable_adapter
    and its folder of several (an adapter not named "default" in a subfolder of its name), both ways."""
    base = transformers.BertModel.from_pretrained(tiny_base, attn_implementation="eager")
    reference = peft.get_peft_model(
        base, peft.LoraConfig(r=4, lora_alpha=8, target_modules=["query", "value"]), "one")
    reference.add_adapter("two", peft.LoraConfig(r=2, lora_alpha=6,
                                                 target_modules=["key", "intermediate.dense"]))
    with torch.no_grad():
        for name, p in reference.named_parameters():
            if "lora_B" in name:
                p.normal_(std=0.05)
    reference.eval().save_pretrained(tmp_path / "peft")  # one/ and two/
    ours = BertModel.from_pretrained(tiny_base, attn_implementation="eager").eval()
    with torch.no_grad():
        base = ours(**batch).last_hidden_state
    assert load_adapter(ours, tmp_path / "peft" / "one", "one") and active_adapter(ours) == "one"
    assert len(load_adapter(ours, tmp_path / "peft" / "two", "two")) == 4 and active_adapter(ours) == "one"

    def same(expected_base: bool = False) -> None:
        with torch.no_grad():
            out, ref = ours(**batch).last_hidden_state, reference(**batch).last_hidden_state
        torch.testing.assert_close(out, ref, **TOL)
        assert (out - base).abs().max() < 1e-6 if expected_base else (out - base).abs().max() > 1e-3

    reference.set_adapter("one")
    same()
    for name in ("two", "one", "two"):
        set_adapter(ours, name), reference.set_adapter(name)
        same()
        assert {n for n, p in ours.named_parameters() if p.requires_grad} == set(lora_parameter_names(ours))
    with disable_adapter(ours), reference.disable_adapter():
        same(expected_base=True)
    same()  # the adapters in use are back
    save_adapter(ours, tmp_path / "ours" / "one", "one")  # the one aside, by name
    save_adapter(ours, tmp_path / "ours" / "two")  # the one in use
    theirs = peft.PeftModel.from_pretrained(transformers.BertModel.from_pretrained(
        tiny_base, attn_implementation="eager"), tmp_path / "ours" / "one", "one").eval()
    theirs.load_adapter(tmp_path / "ours" / "two", "two")
    for name in ("one", "two"):
        theirs.set_adapter(name), reference.set_adapter(name)
        with torch.no_grad():
            torch.testing.assert_close(theirs(**batch).last_hidden_state,
                                       reference(**batch).last_hidden_state, **TOL)
    with pytest.raises(ValueError, match="has adapters named 'two' already"):
        add_adapter(ours, "two")
    with pytest.raises(ValueError, match="has no adapters named 'three'; it has \\['one', 'two'\\]"):
        set_adapter(ours, "three")
    assert add_adapter(ours, "three", r=3, targets=ALL_LINEAR)  # fresh, kept aside
    assert active_adapter(ours) == "two"
    for layer in lora_layers(ours).values():
        layer.merge()
    with pytest.raises(ValueError, match="disable_adapter: the adapters of .* are merged into the base"):
        with disable_adapter(ours):
            pass
    with pytest.raises(ValueError, match="set_adapter: the adapters of .* are merged"):
        set_adapter(ours, "one")


def lora_parameter_names(model: nn.Module) -> list[str]:
    return [n for n, _ in model.named_parameters() if n.endswith(("lora_A", "lora_B"))]


def test_save_adapter_writes_a_model_card_of_what_it_saved(tiny_base, tmp_path):
    ours = BertModel.from_pretrained(tiny_base)
    apply_lora(ours, r=4, alpha=12)
    save_adapter(ours, tmp_path)
    card = (tmp_path / "README.md").read_text()
    assert card.startswith(f"---\nlibrary_name: peft\nbase_model: {json.dumps(str(tiny_base))}\n")
    for fact in ("Rank r = 4, alpha = 12 (scaling alpha / r = 3)", "Adapted layers: 4 (encoder.layer.0",
                 "Parameters: 1,024", "AutoPeftModel.from_pretrained"):
        assert fact in card, fact
    assert peft.AutoPeftModel.from_pretrained(tmp_path) is not None  # peft reads the folder, card and all


def test_an_encoders_adapter_loads_onto_a_model_with_heads_and_back(config, batch, tmp_path):
    encoder = BertModel(config).eval()
    base_state = copy.deepcopy(encoder.state_dict())
    apply_lora(encoder, r=2, alpha=4, targets=ALL_LINEAR)
    with torch.no_grad():
        for layer in lora_layers(encoder).values():
            layer.lora_B.normal_(std=0.05)
        expected = encoder(**batch).last_hidden_state
    save_adapter(encoder, tmp_path / "encoder")
    with_heads = BertForPreTraining(config).eval()
    with_heads.bert.load_state_dict(base_state)
    # The encoder's and the pooler's adapters come onto .bert; the heads' linear layers are left alone.
    names = load_adapter(with_heads, tmp_path / "encoder")
    assert len(names) == 13 and all(name.startswith("bert.") for name in names)
    assert not any(layer.training for layer in lora_layers(with_heads).values())  # the model's eval mode
    save_adapter(with_heads, tmp_path / "heads")
    assert all(k.startswith("base_model.model.bert.") for k in load_file(tmp_path / "heads" / WEIGHTS_FILE))
    again = BertModel(config).eval()
    again.load_state_dict(base_state)
    load_adapter(again, tmp_path / "heads")
    with torch.no_grad():
        torch.testing.assert_close(with_heads.bert(**batch).last_hidden_state, expected, **TOL)
        torch.testing.assert_close(again(**batch).last_hidden_state, expected, **TOL)


def test_adapter_files_that_do_not_fit_are_refused_naming_the_problem(config, tmp_path):
    model = BertModel(config)
    apply_lora(model, r=2, alpha=2)
    save_adapter(model, tmp_path)
    config_file = tmp_path / CONFIG_FILE
    values = json.loads(config_file.read_text())
    config_file.write_text(json.dumps({**values, "use_dora": True}))
    with pytest.raises(CheckpointError, match="does not implement: use_dora=True"):
        load_adapter(BertModel(config), tmp_path)
    config_file.write_text(json.dumps({**values, "r": 3}))
    with pytest.raises(CheckpointError, match=r"lora_A.weight has shape \(2, 32\), the model's is \(3, 32\)"):
        load_adapter(BertModel(config), tmp_path)
    config_file.write_text(json.dumps({**values, "target_modules": r".*\.(query|value)"}))  # peft's regex
    assert len(load_adapter(BertModel(config), tmp_path)) == 4
    config_file.write_text(json.dumps({**values, "layers_to_transform": 0}))
    with pytest.raises(CheckpointError, match="does not implement: layers_to_transform=0"):
        load_adapter(BertModel(config), tmp_path)
    config_file.write_text(json.dumps({**values, "target_modules": ["query", "value", "key"]}))
    with pytest.raises(CheckpointError, match=r"missing \['encoder.layer.0.attention.self.key.lora_A"):
        load_adapter(BertModel(config), tmp_path)


def test_merged_folder_opens_in_transformers_and_ours_with_the_adapted_outputs(config, batch, tmp_path):
    model = BertModel(config, attn_implementation="eager").eval()
    apply_lora(model, r=4, alpha=8)
    with torch.no_grad():
        for layer in lora_layers(model).values():
            layer.lora_B.normal_(std=0.05)
        expected = model(**batch)
    save_merged(model, tmp_path)
    assert lora_layers(model) and not any(layer.merged for layer in lora_layers(model).values())  # untouched
    assert not [k for k in load_file(tmp_path / "model.safetensors") if "lora" in k or "base_layer" in k]
    theirs = transformers.BertModel.from_pretrained(tmp_path, attn_implementation="eager").eval()
    reloaded = BertModel.from_pretrained(tmp_path)
    with torch.no_grad():
        for other in (theirs(**batch), reloaded(**batch)):
            torch.testing.assert_close(other.last_hidden_state, expected.last_hidden_state, **TOL)
            torch.testing.assert_close(other.pooler_output, expected.pooler_output, **TOL)


# ----- peft's LoraConfig, field by field, and the folders peft opens --------------------------------------

# A non-default value of each field that minbert reads with peft's meaning, or that changes no output: each
# must give peft's outputs. Every other field of the installed peft's LoraConfig, at a non-default value,
# must be refused naming the field (so a field a new peft release adds is caught by this loop).
EQUAL_TO_PEFT = {
    "r": [6], "lora_alpha": [5], "lora_dropout": [0.1],
    "target_modules": [["query", "key", "dense"], r".*\.attention\.self\.(query|value)", "all-linear"],
    "init_lora_weights": [False, "gaussian", "orthogonal"], "inference_mode": [True],
    "task_type": ["FEATURE_EXTRACTION"], "base_model_name_or_path": ["somewhere/else"], "revision": ["v1"],
    "auto_mapping": [{"base_model_class": "BertModel", "parent_library": "transformers"}],
    "peft_version": ["0.1.0"], "megatron_core": ["other.megatron"], "qalora_group_size": [8],
}
NEVER_WRITTEN = ("runtime_config",)  # peft's to_dict leaves it out of adapter_config.json


def non_default(default: object) -> object:
    """A value other than a LoraConfig field's default, of a kind that field could hold."""
    if isinstance(default, bool):
        return not default
    if isinstance(default, (int, float)):
        return default + 1
    if isinstance(default, str):
        return default + "-other"
    if isinstance(default, dict):
        return {"encoder.layer.0.attention.self.query": 2}
    if isinstance(default, list):
        return ["query"]
    return "on" if default is None else str(default) + "-other"


def peft_saved(base, folder, **settings) -> peft.PeftModel:
    """peft's adapter on the base, B drawn at random, saved to `folder`; returns the model saved."""
    theirs = transformers.BertModel.from_pretrained(base, attn_implementation="eager").eval()
    settings = {"r": 4, "lora_alpha": 8, "target_modules": ["query", "value"], **settings}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = peft.get_peft_model(theirs, peft.LoraConfig(**settings))
        with torch.no_grad():
            for name, p in model.named_parameters():
                if "lora_B" in name:
                    p.normal_(std=0.05)
        model.save_pretrained(folder)
    return model.eval()


@pytest.mark.parametrize("field", [f.name for f in dataclasses.fields(peft.LoraConfig)])
def test_every_lora_config_field_is_peft_s_meaning_or_refused_by_name(field, tiny_base, batch, tmp_path):
    default = getattr(peft.LoraConfig(), field)
    if field in NEVER_WRITTEN:
        peft_saved(tiny_base, tmp_path)
        assert field not in json.loads((tmp_path / CONFIG_FILE).read_text())
        return
    for i, value in enumerate(EQUAL_TO_PEFT.get(field, [])):
        folder = tmp_path / str(i)
        written_by_peft = field in ("base_model_name_or_path", "revision", "auto_mapping", "peft_version")
        settings = {} if written_by_peft else {field: value}
        peft_saved(tiny_base, folder, **settings)
        saved = json.loads((folder / CONFIG_FILE).read_text())
        (folder / CONFIG_FILE).write_text(json.dumps({**saved, field: value}))  # the file holds the value
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            reference = peft.PeftModel.from_pretrained(
                transformers.BertModel.from_pretrained(tiny_base, attn_implementation="eager"), folder).eval()
        ours = BertModel.from_pretrained(tiny_base, attn_implementation="eager")
        load_adapter(ours, folder)
        with torch.no_grad():
            out, ref = ours.eval()(**batch), reference(**batch)
        torch.testing.assert_close(out.last_hidden_state, ref.last_hidden_state, **TOL)
        torch.testing.assert_close(out.pooler_output, ref.pooler_output, **TOL)
    if field in EQUAL_TO_PEFT:
        return
    value = non_default(default)
    peft_saved(tiny_base, tmp_path)
    saved = json.loads((tmp_path / CONFIG_FILE).read_text())
    (tmp_path / CONFIG_FILE).write_text(json.dumps({**saved, field: value}))
    with pytest.raises(CheckpointError, match=re.escape(field)):
        load_adapter(BertModel.from_pretrained(tiny_base), tmp_path)


@pytest.mark.parametrize("init", ["pissa", "olora", "loftq", "eva", "corda", "mica", "pissa_niter_4"])
def test_inits_that_rewrite_the_base_weights_are_refused_by_name(init, tiny_base, tmp_path):
    peft_saved(tiny_base, tmp_path)
    saved = json.loads((tmp_path / CONFIG_FILE).read_text())
    (tmp_path / CONFIG_FILE).write_text(json.dumps({**saved, "init_lora_weights": init}))
    with pytest.raises(CheckpointError, match=f"init_lora_weights='{init}'"):
        load_adapter(BertModel.from_pretrained(tiny_base), tmp_path)


def test_a_peft_bin_adapter_loads_weights_only_with_peft_s_outputs(tiny_base, batch, tmp_path):
    theirs = peft_saved(tiny_base, tmp_path / "safetensors")
    theirs.save_pretrained(tmp_path / "bin", safe_serialization=False)
    assert {p.name for p in (tmp_path / "bin").iterdir()} >= {CONFIG_FILE, "adapter_model.bin"}
    ours = BertModel.from_pretrained(tiny_base, attn_implementation="eager")
    load_adapter(ours, tmp_path / "bin")
    with torch.no_grad():
        torch.testing.assert_close(ours.eval()(**batch).last_hidden_state, theirs(**batch).last_hidden_state,
                                   **TOL)
    torch.save({"x": torch.nn.Linear(2, 2)}, tmp_path / "bin" / "adapter_model.bin")  # not a state dict
    with pytest.raises(CheckpointError, match="adapter_model.bin: holds Python objects other than tensors"):
        load_adapter(BertModel.from_pretrained(tiny_base), tmp_path / "bin")
    (tmp_path / "bin" / "adapter_model.bin").unlink()
    with pytest.raises(CheckpointError, match="no adapter_model.safetensors \\(nor peft's older "
                                              "adapter_model.bin\\)"):
        load_adapter(BertModel.from_pretrained(tiny_base), tmp_path / "bin")


# ----- against peft: the embedded all-MiniLM-L6-v2 -------------------------------------------------------


@pytest.fixture(scope="module")
def minilm_pair(embedded_model_dir):
    """The embedded checkpoint loaded once by transformers and once by us (copied per test)."""
    theirs = transformers.BertModel.from_pretrained(embedded_model_dir, attn_implementation="eager",
                                                    dtype=torch.float32)
    return theirs, BertModel.from_pretrained(embedded_model_dir, attn_implementation="eager")


@pytest.mark.checkpoint
@pytest.mark.parametrize("targets", [QUERY_VALUE, ALL_LINEAR], ids=["query-value", "all-linear"])
def test_minilm_adapted_matches_peft_outputs_and_gradients_merged_and_unmerged(minilm_pair, targets):
    # Eval mode: dropout off, so the two runs are comparable; gradients flow all the same.
    theirs, ours = (copy.deepcopy(m).eval() for m in minilm_pair)
    tokens = torch.randint(1000, 30000, (3, 12))
    mask = torch.tensor([[1] * 12, [1] * 8 + [0] * 4, [1] * 5 + [0] * 7])
    batch = dict(input_ids=tokens * mask, attention_mask=mask, token_type_ids=torch.zeros_like(tokens))
    their_lora = peft_lora(theirs, 8, 16, targets)
    apply_lora(ours, 8, 16, 0.0, targets)
    randomize_b_and_copy(ours, their_lora)
    compare(ours, their_lora, batch, grad_tol=GRAD_TOL_MINILM)
    compare_merged(ours, their_lora, batch, grad_tol=GRAD_TOL_MINILM)


@pytest.mark.checkpoint
def test_trainable_parameter_counts_agree_with_peft_on_minilm(embedded_model_dir):
    # The counts need the checkpoint's sizes, not its weights: models on the meta device hold no numbers.
    with torch.device("meta"):
        base = BertModel(BertConfig.from_json_file(embedded_model_dir))
        their_base = transformers.BertModel(transformers.BertConfig.from_pretrained(embedded_model_dir))
        counts = {}
        for r in (8, 16):
            for targets in (QUERY_VALUE, ALL_LINEAR):
                ours = copy.deepcopy(base)
                apply_lora(ours, r, 2 * r, 0.0, targets)
                theirs = peft_lora(copy.deepcopy(their_base), r, 2 * r, targets)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    expected = theirs.get_nb_trainable_parameters()  # (trainable, all)
                got = (ours.num_parameters(only_trainable=True), ours.num_parameters())
                assert got == expected, (r, targets)
                counts[r, targets] = got
    assert counts[8, QUERY_VALUE][0] == 6 * 2 * 8 * (384 + 384)  # 6 layers, q and v: r (in + out) each
    assert counts[16, QUERY_VALUE][0] == 2 * counts[8, QUERY_VALUE][0]
