"""A task's weight (its row's, or --task-weights): its loss counts that many times in the gradient; the
logged loss stays unweighted."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace

import pytest
import torch
from torch import nn

from tasks import multitask
from tasks.multitask import name_weights
from tasks.training.job import build_optimizer
from tasks.training.loop import train
from tasks.training.run_folder import RunDir
from tasks.training.settings import TrainingSettings


class ToyTask:
    """One batch per epoch; loss = w * x, so its gradient with respect to w is x (here 1)."""

    def __init__(self, name: str, weight: float = 1.0) -> None:
        self.name, self.weight = name, weight

    def train_batches(self, epoch: int) -> list:
        return [torch.ones(1, 1)]

    def loss(self, model: nn.Module, batch: torch.Tensor) -> torch.Tensor:
        return model.bert(batch).sum()

    def evaluate(self, model: nn.Module) -> dict:
        return {"score": 0.0}


def test_the_weighted_task_gets_its_factor_in_the_gradient_and_its_loss_is_logged_unweighted(tmp_path,
                                                                                            one_weight_model):
    model = one_weight_model()
    gradients = []
    model.bert.weight.register_hook(lambda grad: gradients.append(grad.item()))
    config = TrainingSettings(epochs=1, sampling="round-robin", max_grad_norm=0.0)
    run = RunDir(tmp_path / "run")
    train(model, [ToyTask("a"), ToyTask("b", weight=3.0)], lambda m: build_optimizer(m, config), config, run,
          lambda dev: 0.0,
          lambda m, folder: (folder / "weights.txt").write_text("w"))
    assert gradients == [1.0, 3.0]  # task a's backward, then task b's
    record = json.loads(run.metrics.read_text().splitlines()[-1])
    assert record["train_loss"] == {"a": 1.0, "b": 1.0}


def test_the_flag_reads_name_factor_pairs_and_names_what_is_wrong():
    parse = name_weights(("sst", "para", "sts"))
    assert parse("sts=2") == (("sts", 2.0),)
    assert parse("sst=1.5, sts=0.5") == (("sst", 1.5), ("sts", 0.5))
    for bad, message in [("quora=2", "the names from sst, para, sts"), ("sts", "name=factor"),
                         ("sts=0", "sts's factor must be a number in (0, inf)"),
                         ("sts=two", "sts's factor"), ("sts=1,sts=2", "names a task twice")]:
        with pytest.raises(argparse.ArgumentTypeError, match=message.replace("(", r"\(").replace(")", r"\)")):
            parse(bad)


def test_a_non_positive_weight_is_refused_by_the_row():
    with pytest.raises(ValueError, match="--task-weights: sts's weight must be positive"):
        replace(multitask.TASKS[2], weight=0.0)


def test_the_flag_defaults_to_the_rows_weights_and_names_every_task_it_weighs():
    settings = multitask.build_parser().parse([]).multitask
    rows = multitask.with_settings(multitask.TASKS, settings)
    assert settings.task_weights == (("sts", 4.0),) and [t.weight for t in rows] == [1.0, 1.0, 4.0]
    settings = multitask.build_parser().parse(["--task-weights", "sst=2"]).multitask
    assert [t.weight for t in multitask.with_settings(multitask.TASKS, settings)] == [2.0, 1.0, 1.0]
