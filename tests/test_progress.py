"""Plain progress lines (tasks/training/loop.py) with a fake clock: when they print and what they say, and
where an epoch's progress ends (--max-steps)."""

from __future__ import annotations

import io

import torch

from tasks.training.job import build_optimizer
from tasks.training.loop import ProgressLines, format_duration, train
from tasks.training.run_folder import RunDir
from tasks.training.settings import TrainingSettings


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_line_every_interval_and_at_the_last_step_with_rate_and_eta():
    clock, out = Clock(), io.StringIO()
    lines = ProgressLines(total=10, desc="epoch 1/2", enabled=True, every_s=30.0, file=out, clock=clock)
    for _ in range(3):  # 3 steps of 8 examples in 20 s: not yet time
        clock.now += 20 / 3
        lines.update(8, loss=1.0)
    assert out.getvalue() == ""
    clock.now = 40.0  # step 4 at 40 s: 32 examples in 40 s, 6 steps left at 10 s each
    lines.update(8, loss=0.5)
    assert out.getvalue() == "epoch 1/2 step 4/10 (40%) loss 0.5000 0.8 examples/s ETA 1m00s\n"
    for _ in range(6):  # the last step always prints
        clock.now += 1.0
        lines.update(8, loss=0.25)
    assert out.getvalue().splitlines()[-1].startswith("epoch 1/2 step 10/10 (100%) loss 0.2500")
    assert len(out.getvalue().splitlines()) == 2


def test_a_resumed_epoch_counts_its_rate_from_the_resume():
    clock, out = Clock(), io.StringIO()
    lines = ProgressLines(total=100, desc="epoch 2/3", enabled=True, every_s=0.0, initial=90, file=out,
                          clock=clock)
    clock.now = 5.0
    lines.update(4, loss=2.0)  # step 91 after 5 s: 9 steps left at 5 s each
    assert out.getvalue() == "epoch 2/3 step 91/100 (91%) loss 2.0000 0.8 examples/s ETA 0m45s\n"


def test_disabled_prints_nothing_and_durations_read_as_minutes_or_hours():
    out = io.StringIO()
    lines = ProgressLines(total=1, desc="x", enabled=False, file=out)
    lines.update(1, loss=0.0)
    assert out.getvalue() == ""
    assert format_duration(59.6) == "1m00s" and format_duration(3725) == "1h02m"


class FourBatches:
    name = "a"

    def train_batches(self, epoch: int) -> list:
        return [torch.ones(1, 1)] * 4

    def loss(self, model, batch: torch.Tensor) -> torch.Tensor:
        return model.bert(batch).sum()

    def evaluate(self, model) -> dict:
        return {"score": 0.5}


def test_the_progress_of_an_epoch_that_max_steps_cuts_ends_at_the_stop(tmp_path, one_weight_model, capsys):
    """2 of an epoch's 4 steps: the bar's total, and so its ETA, is 2 (the last step always prints)."""
    training = TrainingSettings(epochs=2, max_steps=2)
    train(one_weight_model(), [FourBatches()], lambda m: build_optimizer(m, training), training,
          RunDir(tmp_path / "run"), lambda dev: dev["a"]["score"], lambda m, folder: None)
    assert "epoch 1/2 (--max-steps) step 2/2 (100%)" in capsys.readouterr().err
