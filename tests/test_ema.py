"""--ema (optim/ema.py): the moving average by hand, evaluated and saved as best/, kept by --resume."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from optim.adamw import AdamW
from optim.ema import WeightAverage
from tasks.training.config import TrainConfig
from tasks.training.loop import train
from tasks.training.run_dir import RunDir, TrainState, load_training_state, save_training_state


def test_the_average_follows_the_formula_with_its_ramp():
    w = torch.tensor([0.0, 10.0])
    average = WeightAverage([w], decay=0.9)
    expected = w.clone()
    for t, new in enumerate([[1.0, 0.0], [2.0, 4.0], [3.0, 3.0]], start=1):
        w.copy_(torch.tensor(new))
        average.update()
        d = min(0.9, (1 + t) / (10 + t))  # 2/11, 3/12, 4/13: the ramp, below 0.9
        expected = d * expected + (1 - d) * w
        torch.testing.assert_close(average.averages[0], expected)
    for _ in range(200):
        average.update()
    assert average.current_decay() == 0.9  # the ramp has passed the decay


def test_swapped_in_shows_the_average_and_gives_the_raw_weights_back_even_after_an_error():
    w = nn.Parameter(torch.tensor([1.0, 2.0]))
    average = WeightAverage([w], decay=0.5)
    average.averages[0].fill_(7.0)
    with pytest.raises(RuntimeError):
        with average.swapped_in():
            assert w.tolist() == [7.0, 7.0]
            raise RuntimeError("evaluation failed")
    assert w.tolist() == [1.0, 2.0]


class ToyTask:
    """Pulls w toward 0 (loss w^2); evaluation records the weight it sees."""

    name = "toy"

    def __init__(self) -> None:
        self.seen: list[float] = []

    def train_batches(self, epoch: int) -> list:
        return [torch.ones(1, 1)] * 5

    def loss(self, model: nn.Module, batch: torch.Tensor) -> torch.Tensor:
        return model.bert(batch).pow(2).sum()

    def evaluate(self, model: nn.Module) -> dict:
        self.seen.append(model.bert.weight.item())
        return {"score": -abs(model.bert.weight.item())}


def test_evaluation_and_best_see_the_average_and_training_goes_on_with_the_raw_weights(tmp_path,
                                                                                      one_weight_model):
    finals, seen, saved = [], [], []
    for ema in (0.0, 0.9):
        model, task = one_weight_model(), ToyTask()
        config = TrainConfig(epochs=2, lr=0.05, warmup=0.0, schedule="constant", max_grad_norm=0.0, ema=ema)

        def save_best(m, folder):
            saved.append(m.bert.weight.item())
            (folder / "w.txt").write_text("w")

        run = RunDir(tmp_path / f"run-{ema}")
        train(model, [task], config, run, lambda dev: dev["toy"]["score"], save_best)
        finals.append(model.bert.weight.item())
        seen.append(task.seen[-1])
    assert finals[0] == finals[1]  # the average never feeds back into training
    assert seen[0] == finals[0]  # without --ema, evaluation sees the raw weight
    assert seen[1] > finals[1] > 0  # with it, the average, which lags behind on the way to 0
    assert saved[-1] == seen[1]  # and best/ holds what was evaluated


def test_the_average_is_saved_and_restored_with_the_training_state(tmp_path, one_weight_model):
    model = one_weight_model()
    params = list(model.parameters())
    optimizer = AdamW(params, lr=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    average = WeightAverage(params, decay=0.99)
    average.averages[0].fill_(0.25)
    average.updates = 17
    path = tmp_path / "last.pt"
    save_training_state(path, model, optimizer, scheduler, TrainState(), average=average)

    again = WeightAverage(params, decay=0.99)
    load_training_state(path, model, optimizer, scheduler, again)
    assert again.updates == 17 and again.averages[0].item() == 0.25
    with pytest.raises(SystemExit, match="saved with --ema"):
        load_training_state(path, model, optimizer, scheduler, None)
    save_training_state(path, model, optimizer, scheduler, TrainState())
    with pytest.raises(SystemExit, match="saved without --ema"):
        load_training_state(path, model, optimizer, scheduler, again)


def test_a_decay_outside_0_1_is_refused():
    with pytest.raises(ValueError, match="decay must be in"):
        WeightAverage([torch.zeros(1)], decay=1.0)
    with pytest.raises(ValueError, match="--ema"):
        TrainConfig(ema=1.0)
