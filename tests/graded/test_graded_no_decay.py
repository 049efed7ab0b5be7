"""Graded: uses_weight_decay, which parameters get weight decay (none for biases and LayerNorm parameters,
as in Google's BERT optimizer)."""

from __future__ import annotations

import pytest
from graded_helpers import fail

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
               "unbiased_head.weight": "the weight of a module called 'unbiased_head'"}


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


def check(names, decays: bool) -> None:
    every = [*DECAY, *NO_DECAY]
    if all(answer(name) is (name in NO_DECAY) for name in every):
        fail("uses_weight_decay answers the opposite for every name: True means the parameter IS decayed "
             "(weights), False that it is exempt (biases, LayerNorm parameters)")
    for name in names:
        got = answer(name)
        if got is not decays:
            what = names[name] if isinstance(names, dict) else "a weight matrix"
            fail(f"uses_weight_decay({name!r}) is {got!r}: it is {what}, which "
                 f"{'decays' if decays else 'gets no weight decay'}")


@pytest.mark.points(2)
def test_weights_decay_biases_and_layernorm_parameters_do_not():
    check(DECAY, True)
    check(NO_DECAY, False)


@pytest.mark.points(1)
def test_old_port_names_and_whole_name_parts():
    check(OLD_PORTS, False)
    check(WHOLE_PARTS, True)


@pytest.mark.points(1)
def test_a_bert_model_splits_into_a_decay_and_a_no_decay_group():
    model = BertModel(BertConfig.tiny())
    groups = make_param_groups(model, lr=1e-3, weight_decay=0.01)
    decayed = {n for g in groups if g["weight_decay"] > 0 for n in g["param_names"]}
    wrong = sorted(n for n, _ in model.named_parameters()
                   if (n in decayed) != (not n.endswith("bias") and "LayerNorm" not in n))
    if wrong:
        fail(f"these tiny-BERT parameters landed in the wrong group: {wrong[:4]}: weights decay, biases and "
             "LayerNorm parameters do not")
