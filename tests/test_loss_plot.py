"""The run's loss_and_dev.png: every step's loss at its place on the epoch axis, a moving average over the
steps, and an x axis ticked at whole epochs."""

from __future__ import annotations

import matplotlib
import matplotlib.pyplot as plt
import pytest
import torch
from torch import nn

from tasks.training.job import build_optimizer
from tasks.training.loop import moving_average, place_step_losses, plot_history, train
from tasks.training.checkpoints import TrainState
from tasks.training.run_folder import RunDir
from tasks.training.settings import TrainingSettings

matplotlib.use("Agg")


class ToyTask:
    """`batches` batches per epoch; loss = w * x with x the batch's value."""

    def __init__(self, name: str, batches: int) -> None:
        self.name, self.batches = name, batches

    def train_batches(self, epoch: int) -> list:
        return [torch.full((1, 1), float(i + 1)) for i in range(self.batches)]

    def loss(self, model: nn.Module, batch: torch.Tensor) -> torch.Tensor:
        return model.bert(batch).sum()

    def evaluate(self, model: nn.Module) -> dict:
        return {"score": 0.5}


def test_each_step_loss_sits_at_its_place_in_the_epoch_and_a_part_epoch_is_replaced():
    steps = [[("a", None)], [("b", None)], [("a", None)], [("a", None)]]
    state = TrainState(epoch=1, step_in_epoch=2, step_losses={"a": [[1.0, 9.0]]})
    place_step_losses(state, steps, {"a": [1.0], "b": [2.0]})  # stopped after 2 of 4 steps (--max-steps)
    assert state.step_losses == {"a": [[1.0, 9.0], [1.25, 1.0]], "b": [[1.5, 2.0]]}
    state.step_in_epoch = 4  # resumed and finished: the epoch's losses replace the part recorded before
    place_step_losses(state, steps, {"a": [1.0, 3.0, 4.0], "b": [2.0]})
    assert state.step_losses == {"a": [[1.0, 9.0], [1.25, 1.0], [1.75, 3.0], [2.0, 4.0]], "b": [[1.5, 2.0]]}


def test_the_moving_average_is_debiased_and_smooths_over_a_twentieth_of_the_points():
    assert moving_average([2.0] * 100) == pytest.approx([2.0] * 100)  # no pull towards 0 at the start
    assert moving_average([1.0, 5.0]) == [1.0, 5.0]  # too few points to smooth
    noisy = [1.0 if i % 2 else 3.0 for i in range(200)]
    assert max(moving_average(noisy)[100:]) - min(moving_average(noisy)[100:]) < 0.3


def test_the_loop_records_every_step_and_the_plot_ticks_whole_epochs(tmp_path, one_weight_model,
                                                                       monkeypatch):
    run = RunDir(tmp_path / "run")
    model, training = one_weight_model(), TrainingSettings(epochs=3, lr=1e-3)
    state = train(model, [ToyTask("a", 4)], lambda m: build_optimizer(m, training), training, run,
                  lambda dev: dev["a"]["score"], lambda m, folder: (folder / "w.txt").write_text("w"))
    places = [x for x, _ in state.step_losses["a"]]
    assert places == pytest.approx([0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0, 2.25, 2.5, 2.75, 3.0])
    assert run.plot.is_file()

    drawn = []
    monkeypatch.setattr(plt, "close", drawn.append)
    plot_history(state.history, tmp_path / "again.png", state.step_losses)
    loss_axes, dev_axes = drawn[0].axes
    for axes in (loss_axes, dev_axes):
        ticks = [t for t in axes.get_xticks() if axes.get_xlim()[0] <= t <= axes.get_xlim()[1]]
        assert ticks == [0, 1, 2, 3]
    # the steps (faint), their moving average and the epoch means
    assert len(loss_axes.lines) == 3
    monkeypatch.undo()
    plt.close(drawn[0])


def test_each_evaluation_is_drawn_at_its_own_step(tmp_path, monkeypatch):
    """A --max-steps stop after 2 of epoch 1's 4 steps is drawn at 0.5, not beside epoch 1's mark."""
    history = [{"epoch": 1, "global_step": step, "epoch_complete": step == 4, "train_loss": {"a": 1.0},
                "dev": {"a": {"score": 0.5}}, "overall": 0.5} for step in (2, 4)]
    drawn = []
    monkeypatch.setattr(plt, "close", drawn.append)
    plot_history(history, tmp_path / "plot.png", steps_per_epoch=4)
    loss_axes, dev_axes = drawn[0].axes
    assert [list(line.get_xdata()) for line in dev_axes.lines] == [[0.5, 1.0]] * 2  # a's score, overall
    assert list(loss_axes.lines[0].get_xdata()) == [0.5, 1.0]  # the epoch means: at the same places
    monkeypatch.undo()
    plt.close(drawn[0])
