"""Graded: uses_weight_decay, which parameters get weight decay (none for biases and LayerNorm parameters,
as in Google's BERT optimizer)."""

from __future__ import annotations

import pytest
from graded_helpers import check_equal, expectation, fail

from minbert.config import BertConfig
from minbert.model import BertModel
from optim.param_groups import make_param_groups, uses_weight_decay

pytestmark = pytest.mark.component("no_decay")

DECAY = ["bert.embeddings.word_embeddings.weight", "bert.encoder.layer.0.attention.self.query.weight",
         "bert.encoder.layer.11.output.dense.weight", "cls.predictions.transform.dense.weight",
         "classifier.weight", "bert.pooler.dense.weight"]
NO_DECAY = {"bert.encoder.layer.0.attention.self.query.bias": "a bias",
            "bert.encoder.layer.3.output.LayerNorm.weight": "a LayerNorm scale",
            "bert.embeddings.LayerNorm.bias": "a LayerNorm shift (and a bias)",
            "cls.predictions.bias": "the masked-LM head's bias",
            "bias": "a bias at the top level"}
OLD_PORTS = {"bert.encoder.layer.0.output.LayerNorm.gamma": "a LayerNorm scale in old ports' names (gamma)",
             "bert.encoder.layer.0.output.LayerNorm.beta": "a LayerNorm shift in old ports' names (beta)",
             "encoder.layer_norm.weight": "a parameter of a module named layer_norm"}
WHOLE_PARTS = {"temperature": "a parameter at the top level, in no module (a learned scale, as CLIP's)",
               "biased.weight": "the weight of a module called 'biased' (not a bias)",
               "unbiased_head.weight": "the weight of a module called 'unbiased_head'",
               "token_normalizer.weight": "the weight of a module called 'token_normalizer' "
                                          "(not a LayerNorm)"}


def answer(name: str):
    """uses_weight_decay(name), or a failure naming the name it crashed on (a stub's NotImplementedError
    passes through)."""
    try:
        return uses_weight_decay(name)
    except NotImplementedError:
        raise
    except Exception as error:  # the student's code: any crash is their mistake, named
        fail(f"uses_weight_decay({name!r}) raised {type(error).__name__}: {error}; a name may have any "
             "number of module parts, none at all for a parameter at the top level")


def check(names: dict[str, str]) -> None:
    """Each name's answer, as the table of names the test knows says (expected_decays)."""
    every = [*DECAY, *NO_DECAY]
    if all(answer(name) is (name in NO_DECAY) for name in every):
        fail("uses_weight_decay answers the opposite for every name: True means the parameter IS decayed "
             "(weights), False that it is exempt (biases, LayerNorm parameters)")
    for name, what in names.items():
        check_equal(answer(name), expected_decays(name), f"uses_weight_decay({name!r}) ({what})", [
            (not expected_decays(name),
             f"it is {what}, which {'decays' if expected_decays(name) else 'gets no weight decay'}")])


@expectation
def expected_decays(name: str) -> bool:
    return name not in NO_DECAY and name not in OLD_PORTS


@pytest.mark.points(2)
def test_weights_decay_biases_and_layernorm_parameters_do_not():
    check({name: "a weight matrix" for name in DECAY})
    check(NO_DECAY)


@pytest.mark.points(1)
def test_old_port_names_and_whole_name_parts():
    check(OLD_PORTS)
    check(WHOLE_PARTS)


@pytest.mark.points(1)
def test_a_bert_model_splits_into_a_decay_and_a_no_decay_group():
    model = BertModel(BertConfig.tiny())
    groups = make_param_groups(model, lr=1e-3, weight_decay=0.01)
    check_equal(sorted(n for g in groups if g["weight_decay"] > 0 for n in g["param_names"]), decayed(model),
                "the tiny BERT's parameters in the decayed group (weights; not biases "
                "nor LayerNorm parameters)")


@expectation
def decayed(model) -> list[str]:
    return sorted(n for n, _ in model.named_parameters() if not n.endswith("bias") and "LayerNorm" not in n)
