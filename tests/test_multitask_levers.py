"""SST's R-Drop in the main job, on a tiny model, against the loss written out by hand; the settings a run
records. The losses themselves: test_task_heads.py."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from tasks import multitask
from tasks.data.course import read_split
from tasks.data.sources import SAMPLE_DIR
from minbert.task_heads import classification_loss, symmetric_kl
from tasks.models.course_task import RDrop, TaskData
from tasks.training.job import load_encoder


@pytest.fixture(scope="module")
def tiny_parts(tiny_model_dir):
    """A fresh MultitaskBERT maker (dropout 0.3 everywhere, so that masks matter) and the tokenizer."""
    def make() -> multitask.MultitaskBERT:
        torch.manual_seed(0)
        bert, _, _ = load_encoder(str(tiny_model_dir), "eager")
        return multitask.MultitaskBERT(bert, multitask.TASKS, dropout=0.3)
    return make, load_encoder(str(tiny_model_dir), "eager")[1]


def sst_task(tokenizer, r_drop: float = 0.0) -> TaskData:
    train = read_split(SAMPLE_DIR, "sst", "train").examples[:6]
    return TaskData(replace(multitask.SST, loss=RDrop(r_drop)), tokenizer, train, train, batch_size=6, seed=0,
                    max_length=64)


def capture_head_outputs(model) -> list[torch.Tensor]:
    """Every output of the sentiment head from now on, in call order."""
    outputs: list[torch.Tensor] = []
    model.sentiment.register_forward_hook(lambda module, args, out: outputs.append(out.detach().float()))
    return outputs


def test_sst_without_r_drop_is_the_plain_cross_entropy(tiny_parts):
    make, tokenizer = tiny_parts
    task, model = sst_task(tokenizer), make()
    batch = task.train_batches(0)[0]
    tokens, labels = batch
    torch.manual_seed(1)
    ours = task.loss(model, batch)
    torch.manual_seed(1)
    plain = classification_loss(model.predict("sst", tokens), labels)
    assert ours.item() == plain.item()


def test_r_drop_sends_each_sentence_twice_and_adds_the_symmetric_kl(tiny_parts):
    make, tokenizer = tiny_parts
    model = make().train()
    heads = capture_head_outputs(model)
    tokens, labels = sst_task(tokenizer).train_batches(0)[0]
    b = labels.size(0)
    loss = sst_task(tokenizer, r_drop=0.5).loss(model, (tokens, labels))
    (logits,) = heads  # (2B, K): both passes in one encoder call
    first, second = logits[:b], logits[b:]
    assert logits.shape[0] == 2 * b and not torch.allclose(first, second)  # two dropout masks per sentence
    expected = F.cross_entropy(logits, labels.repeat(2)) + 0.5 * symmetric_kl(first, second)
    assert loss.item() == pytest.approx(expected.item(), rel=1e-5)
    # without dropout the two passes agree and R-Drop adds nothing
    model.eval()
    plain = sst_task(tokenizer).loss(model, (tokens, labels))
    assert sst_task(tokenizer, r_drop=0.5).loss(model, (tokens, labels)).item() == pytest.approx(plain.item(),
                                                                                             rel=1e-5)


def test_a_negative_r_drop_is_refused_by_name(capsys):
    with pytest.raises(SystemExit):
        multitask.build_parser().parse_args(["--r-drop", "-1"])
    assert "--r-drop" in capsys.readouterr().err


def test_the_default_run_records_its_head_and_regulariser_settings(tiny_multitask_run, tmp_path):
    run = tmp_path / "run"
    assert multitask.main(tiny_multitask_run(run)) == 0
    config = json.loads(Path(run / "config.json").read_text())
    expected = {"r_drop": 1.0, "sentiment_pooling": "cls", "task_weights": [["sts", 4.0]],
                "sampling": "proportional", "schedule": "linear"}
    assert {k: config[k] for k in expected} == expected
    # --predict rebuilds the heads from heads.json: it must say how SST's head pools.
    heads = json.loads(Path(run / "best" / "heads.json").read_text())
    assert heads["sentiment_pooling"] == "cls"
