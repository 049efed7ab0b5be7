"""Tests for optim/param_groups.py: which parameters decay, layer-wise learning rates (Sun et al. 2019's
numbers), models that wrap BERT under other names, the printed summary, and argument checks."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from minbert.config import BertConfig
from minbert.heads import BertForPreTraining
from minbert.model import BertModel
from optim.adamw import AdamW
from optim.param_groups import (
    describe_param_groups,
    encoder_layer_index,
    make_param_groups,
    print_param_groups,
    uses_weight_decay,
)


def _by_name(groups: list[dict]) -> dict[str, tuple[float, float]]:
    """name -> (lr, weight_decay), checking that no parameter is in two groups."""
    out: dict[str, tuple[float, float]] = {}
    for group in groups:
        assert len(group["params"]) == len(group["param_names"])
        for name in group["param_names"]:
            assert name not in out, f"{name} is in two groups"
            out[name] = (group["lr"], group["weight_decay"])
    return out


class Classifier(nn.Module):
    """A task model: BERT under `encoder`, a head with its own LayerNorm under another name."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.encoder = BertModel(config)
        self.norm = nn.LayerNorm(config.hidden_size)
        self.classifier = nn.Linear(config.hidden_size, 3)


# ----- weight decay -------------------------------------------------------------------------------

@pytest.mark.parametrize("name, decays", [
    ("embeddings.word_embeddings.weight", True),
    ("embeddings.LayerNorm.weight", False),
    ("embeddings.LayerNorm.bias", False),
    ("encoder.layer.3.attention.self.query.weight", True),
    ("encoder.layer.3.attention.self.query.bias", False),
    ("encoder.layer.3.attention.output.LayerNorm.weight", False),
    ("bert.encoder.layer.0.output.LayerNorm.gamma", False),  # legacy names (pytorch-pretrained-bert)
    ("bert.encoder.layer.0.output.LayerNorm.beta", False),
    ("cls.predictions.bias", False),
    ("cls.predictions.transform.dense.weight", True),
    ("classifier.weight", True),
    ("bias", False),
])
def test_uses_weight_decay_by_name(name: str, decays: bool) -> None:
    assert uses_weight_decay(name) is decays


def test_biases_and_layernorms_get_no_weight_decay_in_bert() -> None:
    model = BertModel(BertConfig.tiny())
    groups = _by_name(make_param_groups(model, lr=1e-3, weight_decay=0.01))
    for name, (_, wd) in groups.items():
        exempt = name.endswith(".bias") or ".LayerNorm." in name
        assert wd == (0.0 if exempt else 0.01), name
    assert set(groups) == {n for n, _ in model.named_parameters()}


def test_legacy_gamma_beta_names_get_no_weight_decay() -> None:
    class OldLayerNorm(nn.Module):  # pytorch-pretrained-bert's BertLayerNorm named its parameters so
        def __init__(self) -> None:
            super().__init__()
            self.gamma = nn.Parameter(torch.ones(4))
            self.beta = nn.Parameter(torch.zeros(4))

    model = nn.Module()
    model.dense = nn.Linear(4, 4)
    model.LayerNorm = OldLayerNorm()
    groups = _by_name(make_param_groups(model, lr=1e-3, weight_decay=0.1))
    assert groups == {"dense.weight": (1e-3, 0.1), "dense.bias": (1e-3, 0.0),
                      "LayerNorm.gamma": (1e-3, 0.0), "LayerNorm.beta": (1e-3, 0.0)}


def test_a_layernorm_module_under_any_name_gets_no_weight_decay() -> None:
    groups = _by_name(make_param_groups(Classifier(BertConfig.tiny()), lr=1e-3, weight_decay=0.1))
    assert groups["norm.weight"] == (1e-3, 0.0)
    assert groups["classifier.weight"] == (1e-3, 0.1)


def test_without_layer_decay_there_are_two_groups() -> None:
    groups = make_param_groups(BertModel(BertConfig.tiny()), lr=2e-5, weight_decay=0.01)
    assert [(g["lr"], g["weight_decay"]) for g in groups] == [(2e-5, 0.01), (2e-5, 0.0)]


# ----- layer-wise learning-rate decay -------------------------------------------------------------

def test_layer_decay_reproduces_sun_et_al_numbers() -> None:
    # Sun et al. 2019: eta = 2e-5, xi = 0.95 over 12 layers: layer 0 gets 1.1376e-5, layer 11 2e-5.
    model = BertModel(BertConfig.tiny(num_hidden_layers=12))
    groups = _by_name(make_param_groups(model, lr=2e-5, layer_decay=0.95))
    lr = {name: lr for name, (lr, _) in groups.items()}
    assert lr["encoder.layer.0.attention.self.query.weight"] == pytest.approx(1.1376e-5, rel=1e-4)  # 4 digits
    assert lr["encoder.layer.0.attention.self.query.weight"] == pytest.approx(2e-5 * 0.95**11, rel=1e-15)
    assert lr["encoder.layer.11.output.dense.weight"] == 2e-5
    for k in range(12):  # each layer xi times the one above
        expected = 2e-5 * 0.95 ** (11 - k)
        assert lr[f"encoder.layer.{k}.output.LayerNorm.bias"] == pytest.approx(expected, rel=1e-15)
    assert lr["embeddings.word_embeddings.weight"] == pytest.approx(2e-5 * 0.95**12, rel=1e-15)
    assert lr["pooler.dense.weight"] == 2e-5


def test_embeddings_base_option_gives_embeddings_the_base_rate() -> None:
    model = BertModel(BertConfig.tiny())
    lr = {n: lr for n, (lr, _) in _by_name(make_param_groups(model, 1e-3, layer_decay=0.5,
                                                             embeddings="base")).items()}
    assert lr["embeddings.word_embeddings.weight"] == 1e-3
    assert lr["embeddings.LayerNorm.weight"] == 1e-3
    assert lr["encoder.layer.0.attention.self.key.weight"] == 0.5e-3


def test_pretraining_model_with_bert_prefix_and_cls_heads() -> None:
    model = BertForPreTraining(BertConfig.tiny())
    groups = _by_name(make_param_groups(model, lr=1e-3, weight_decay=0.01, layer_decay=0.5))
    assert set(groups) == {n for n, _ in model.named_parameters()}  # each tensor once (the tied decoder too)
    assert groups["bert.embeddings.word_embeddings.weight"] == (0.25e-3, 0.01)  # xi^L with L = 2
    assert groups["bert.encoder.layer.0.intermediate.dense.weight"] == (0.5e-3, 0.01)
    assert groups["bert.encoder.layer.1.attention.output.LayerNorm.weight"] == (1e-3, 0.0)
    assert groups["cls.predictions.transform.dense.weight"] == (1e-3, 0.01)
    assert groups["cls.predictions.transform.LayerNorm.weight"] == (1e-3, 0.0)
    assert groups["cls.predictions.bias"] == (1e-3, 0.0)
    assert groups["cls.seq_relationship.weight"] == (1e-3, 0.01)


def test_task_model_wrapping_bert_under_another_attribute() -> None:
    model = Classifier(BertConfig.tiny())
    groups = _by_name(make_param_groups(model, lr=1e-3, layer_decay=0.5))
    assert groups["encoder.encoder.layer.0.output.dense.weight"][0] == 0.5e-3
    assert groups["encoder.embeddings.position_embeddings.weight"][0] == 0.25e-3
    assert groups["classifier.weight"][0] == 1e-3


def test_groups_are_ordered_from_embeddings_to_heads() -> None:
    groups = make_param_groups(BertModel(BertConfig.tiny()), lr=1e-3, layer_decay=0.5)
    assert [g["lr"] for g in groups] == [0.25e-3, 0.25e-3, 0.5e-3, 0.5e-3, 1e-3, 1e-3, 1e-3, 1e-3]
    assert [g["weight_decay"] for g in groups] == [0.01, 0.0] * 4


def test_num_layers_argument() -> None:
    model = BertModel(BertConfig.tiny())  # layers 0 and 1
    lr = {n: lr for n, (lr, _) in _by_name(make_param_groups(model, 1.0, layer_decay=0.5,
                                                             num_layers=4)).items()}
    # With L = 4 the model's layers are taken as the bottom two of four: layer 1 gets 0.5^2.
    assert lr["encoder.layer.1.output.dense.weight"] == 0.25
    with pytest.raises(ValueError, match=r"num_layers=1, but the model has parameters in encoder layer 1"):
        make_param_groups(model, 1.0, layer_decay=0.5, num_layers=1)


def test_frozen_parameters_are_still_grouped() -> None:
    model = BertModel(BertConfig.tiny())
    model.embeddings.requires_grad_(False)
    assert "embeddings.word_embeddings.weight" in _by_name(make_param_groups(model, 1e-3))


def test_encoder_layer_index() -> None:
    assert encoder_layer_index("bert.encoder.layer.11.output.dense.weight") == 11
    assert encoder_layer_index("encoder.layer.0.attention.self.query.bias") == 0
    assert encoder_layer_index("decoder.layer.0.weight") is None
    assert encoder_layer_index("pooler.dense.weight") is None


def test_groups_feed_both_our_adamw_and_torchs() -> None:
    model = BertModel(BertConfig.tiny())
    for optimizer_class in (AdamW, torch.optim.AdamW):
        opt = optimizer_class(make_param_groups(model, lr=1e-3, layer_decay=0.9))
        assert len(opt.param_groups) == 8
        assert all("param_names" in g for g in opt.param_groups)


# ----- the printed summary ------------------------------------------------------------------------

def test_describe_param_groups_shows_lr_decay_counts_and_names(capsys: pytest.CaptureFixture) -> None:
    model = BertModel(BertConfig.tiny())
    groups = make_param_groups(model, lr=2e-5, layer_decay=0.95)
    text = describe_param_groups(groups)
    lines = text.splitlines()
    assert lines[0].split() == ["group", "lr", "decay", "tensors", "numbers", "part"]
    # group 2: layer 0's weights: 6 matrices, 4*32*32 + 2*32*37 numbers, at 2e-5 * 0.95.
    assert "    2  1.9000e-05    0.01        6        6,464  encoder layer 0" in lines
    assert "       encoder.layer.0.attention.self.query.weight" in lines
    assert describe_param_groups(AdamW(groups)) == text  # an optimizer works as well as the groups

    merged = describe_param_groups(make_param_groups(model, lr=2e-5))
    assert "       encoder.layer.*.output.LayerNorm.bias  x2" in merged.splitlines()

    print_param_groups(groups)
    assert capsys.readouterr().out == text + "\n"


def test_describe_groups_without_names() -> None:
    text = describe_param_groups([{"params": [nn.Parameter(torch.zeros(3))], "lr": 0.1, "weight_decay": 0.0}])
    assert "no 'param_names'" in text


# ----- argument checks ----------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, message", [
    (dict(lr=-1.0), "lr must be a number >= 0"),
    (dict(lr=1e-3, weight_decay=-0.1), "weight_decay must be a number >= 0"),
    (dict(lr=1e-3, layer_decay=0.0), r"layer_decay must be in \(0, 1\]"),
    (dict(lr=1e-3, layer_decay=1.5), r"layer_decay must be in \(0, 1\]"),
    (dict(lr=1e-3, embeddings="paper"), r"embeddings must be one of \('decayed', 'base'\), got 'paper'"),
])
def test_invalid_arguments_are_rejected_by_name(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make_param_groups(BertModel(BertConfig.tiny()), **kwargs)


def test_layer_decay_without_encoder_layers_is_rejected() -> None:
    with pytest.raises(ValueError, match="no parameter name contains 'encoder.layer.<i>.'"):
        make_param_groups(nn.Linear(3, 3), lr=1e-3, layer_decay=0.9)
