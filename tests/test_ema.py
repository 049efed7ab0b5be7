"""--ema and --average-last (optim/ema.py): the averages by hand, evaluated and saved as best/, kept by
--resume."""

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


def test_without_a_decay_the_average_is_the_plain_mean_of_the_updates():
    w = torch.tensor([5.0, -5.0])  # the weights before the first update never enter the mean
    average = WeightAverage([w], decay=None)
    seen = []
    for new in ([1.0, 0.0], [2.0, 4.0], [6.0, 2.0], [3.0, 3.0]):
        w.copy_(torch.tensor(new))
        average.update()
        seen.append(new)
        torch.testing.assert_close(average.averages[0], torch.tensor(seen).mean(dim=0))


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
    """Pulls w toward 0 (loss w^2); records the weight each step starts from and each evaluation sees."""

    name = "toy"

    def __init__(self) -> None:
        self.seen: list[float] = []
        self.before_step: list[float] = []  # the weight each step starts from

    def train_batches(self, epoch: int) -> list:
        return [torch.ones(1, 1)] * 5

    def loss(self, model: nn.Module, batch: torch.Tensor) -> torch.Tensor:
        self.before_step.append(model.bert.weight.item())
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


def test_average_last_evaluates_the_mean_of_the_weights_after_the_last_steps(tmp_path, one_weight_model):
    model, task = one_weight_model(), ToyTask()
    saved = []
    # 2 epochs of 5 steps; --average-last 0.4: the weights after steps 7, 8, 9 and 10
    config = TrainConfig(epochs=2, lr=0.05, warmup=0.0, schedule="constant", max_grad_norm=0.0,
                         average_last=0.4)

    def save_best(m, folder):
        saved.append(m.bert.weight.item())
        (folder / "w.txt").write_text("w")

    train(model, [task], config, RunDir(tmp_path / "run"), lambda dev: dev["toy"]["score"], save_best)
    after_step = task.before_step[1:] + [model.bert.weight.item()]  # after_step[k - 1]: after step k
    assert task.seen[0] == after_step[4]  # epoch 1 ends before the window: the raw weight
    assert task.seen[1] == pytest.approx(sum(after_step[6:]) / 4, rel=1e-6)  # the mean of steps 7..10
    assert task.seen[1] > model.bert.weight.item() > 0  # it lags behind the raw weight on the way to 0
    assert saved == task.seen  # best/ holds what was evaluated (each epoch better than the last)


def test_average_last_resumes_mid_window_to_the_same_average(tmp_path, one_weight_model):
    def config(max_steps: int) -> TrainConfig:
        return TrainConfig(epochs=2, lr=0.05, warmup=0.0, schedule="constant", max_grad_norm=0.0,
                           average_last=0.6, max_steps=max_steps)

    def score(dev):
        return dev["toy"]["score"]

    def save_best(m, folder):
        (folder / "w.txt").write_text("w")

    straight = ToyTask()
    train(one_weight_model(), [straight], config(0), RunDir(tmp_path / "straight"), score, save_best)
    stopped, resumed = ToyTask(), ToyTask()
    run = RunDir(tmp_path / "stopped")
    train(one_weight_model(), [stopped], config(7), run, score, save_best)  # 3 of the 6 averaged steps
    train(one_weight_model(), [resumed], config(0), run, score, save_best, resume=True)
    assert resumed.seen[-1] == straight.seen[-1]


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
    with pytest.raises(SystemExit, match="saved with --ema 0.99, this run asks for none"):
        load_training_state(path, model, optimizer, scheduler, None)
    with pytest.raises(SystemExit, match="saved with --ema 0.99, this run asks for --average-last"):
        load_training_state(path, model, optimizer, scheduler, WeightAverage(params, decay=None))
    with pytest.raises(SystemExit, match="saved with --ema 0.99, this run asks for --ema 0.9;"):
        load_training_state(path, model, optimizer, scheduler, WeightAverage(params, decay=0.9))
    save_training_state(path, model, optimizer, scheduler, TrainState())
    with pytest.raises(SystemExit, match="saved without a weight average, this run asks for --ema 0.99"):
        load_training_state(path, model, optimizer, scheduler, again)


def test_a_decay_outside_0_1_is_refused():
    with pytest.raises(ValueError, match="decay must be in"):
        WeightAverage([torch.zeros(1)], decay=1.0)
    with pytest.raises(ValueError, match="--ema"):
        TrainConfig(ema=1.0)


def test_average_last_outside_0_1_or_beside_ema_is_refused():
    for bad in (-0.1, 1.5):
        with pytest.raises(ValueError, match="--average-last must be in"):
            TrainConfig(average_last=bad)
    with pytest.raises(ValueError, match="pick one"):
        TrainConfig(ema=0.99, average_last=0.3)
    with pytest.raises(ValueError, match="decay must be in"):
        WeightAverage([torch.zeros(1)], decay=0.0)


def test_the_average_last_flag_reaches_the_config():
    import argparse

    from tasks.training.config import add_train_arguments, train_config_from_args
    parser = argparse.ArgumentParser()
    add_train_arguments(parser)
    config = train_config_from_args(parser.parse_args(["--average-last", "0.33"]), freeze_encoder=False)
    assert config.average_last == 0.33
    with pytest.raises(SystemExit):
        parser.parse_args(["--average-last", "2"])
