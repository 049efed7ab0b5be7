"""--precision fp16: float16 autocast with a dynamic loss scale (torch.amp.GradScaler), run on the CPU, whose
autocast takes float16. The scale grows and backs off as GradScaler's documentation says, with our AdamW; a
planted inf gradient skips exactly that step in the training loop and halves the scale; a tiny model's fp16
training follows fp32 within a stated tolerance; a run stopped by --max-steps and resumed ends with the same
weights and loss scale as one never stopped, and a checkpoint without a loss scale still resumes."""

from __future__ import annotations

import math
import pytest
import torch
from torch import nn

from minbert.config import BertConfig
from minbert.model import BertModel
from optim.adamw import AdamW
from tasks.training.loop import train
from tasks.training.job import build_optimizer
from tasks.training.checkpoints import load_training_state
from tasks.training.run_folder import RunDir
from tasks.training.settings import TrainingSettings

STEPS = 8  # batches of the toy task: one epoch
INIT_SCALE = 2.0 ** 16  # GradScaler's default, which the loop keeps
# At that scale this model's classifier gradient overflows float16 now and then (at the third step: the scale
# backs off once, as it is meant to); a loss 64 times smaller keeps every step clear, so that the only skipped
# step is the planted one. AdamW's update hardly depends on the gradient's size.
LOSS_FACTOR = 1 / 64


class Classifier(nn.Module):
    """A tiny BERT (model.bert, where the loop's optimizer looks) and a two-way head on [CLS]."""

    def __init__(self, dropout: float) -> None:
        super().__init__()
        config = BertConfig.tiny(hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)
        self.bert = BertModel(config, add_pooling_layer=False)
        self.classifier = nn.Linear(config.hidden_size, 2)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.bert(ids, attention_mask=torch.ones_like(ids)).last_hidden_state[:, 0])


class ToyTask:
    """STEPS fixed batches of 4 random sentences of 12 tokens; the label is whether token 5 is even. It keeps
    a copy of the classifier's weight at every loss (the start of every step), and can make one step's
    gradient inf (`overflow_at`, counted in losses from 1) with a hook."""

    name = "toy"

    def __init__(self, model: Classifier, overflow_at: int = 0) -> None:
        generator = torch.Generator().manual_seed(7)
        ids = torch.randint(1, 99, (STEPS, 4, 12), generator=generator)
        self.batches = [(x, (x[:, 5] % 2 == 0).long()) for x in ids]
        self.weights: list[torch.Tensor] = []
        self.overflow_at = overflow_at
        model.classifier.weight.register_hook(self.plant)

    def plant(self, grad: torch.Tensor) -> torch.Tensor:
        return torch.full_like(grad, math.inf) if len(self.weights) == self.overflow_at else grad

    def train_batches(self, epoch: int) -> list:
        return self.batches

    def loss(self, model: nn.Module, batch) -> torch.Tensor:
        self.weights.append(model.classifier.weight.detach().clone())
        ids, labels = batch
        return LOSS_FACTOR * nn.functional.cross_entropy(model(ids), labels)

    def evaluate(self, model: nn.Module) -> dict:
        return {"score": 0.0}


def run(folder, precision: str, overflow_at: int = 0, max_steps: int = 0, resume: bool = False,
        dropout: float = 0.1) -> tuple[Classifier, ToyTask, dict]:
    """Train a fresh seeded Classifier in `folder`; returns it, its task and the run's last checkpoint."""
    torch.manual_seed(0)
    model = Classifier(dropout)
    task = ToyTask(model, overflow_at)
    settings = TrainingSettings(epochs=1, precision=precision, lr=1e-3, head_lr=1e-3, warmup=0.0,
                                max_steps=max_steps, threads=1)
    train(model, [task], lambda m: build_optimizer(m, settings), settings, RunDir(folder), lambda dev: 0.0,
          lambda m, best: (best / "weights.txt").write_text("w"), resume=resume)
    return model, task, torch.load(folder / "checkpoints" / "last.pt", weights_only=True)


def moved(model: Classifier, task: ToyTask) -> list[bool]:
    """Whether each step changed the classifier's weight."""
    after = [*task.weights[1:], model.classifier.weight]
    return [not torch.equal(before, now) for before, now in zip(task.weights, after)]


def test_the_scale_grows_after_growth_interval_good_steps_and_backs_off_on_an_inf_with_our_adamw():
    """GradScaler's documentation: the scale is multiplied by growth_factor (2) after growth_interval steps
    without inf or NaN, and by backoff_factor (0.5) on a step with one, which optimizer.step never sees."""
    torch.manual_seed(0)
    model = Classifier(dropout=0.0)
    optimizer = AdamW(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 4, growth_interval=3)
    ids = torch.randint(1, 99, (4, 12))
    scales, took = [], []
    for step in range(8):
        optimizer.zero_grad()
        with torch.autocast("cpu", dtype=torch.float16):
            loss = model(ids).float().logsumexp(-1).mean()
        scaler.scale(loss).backward()
        if step == 4:
            model.classifier.bias.grad[0] = math.nan
        before = model.classifier.weight.detach().clone()
        scaler.step(optimizer)
        scaler.update()
        scales.append(scaler.get_scale())
        took.append(not torch.equal(before, model.classifier.weight))
    # good, good, good (grow), good, nan (back off, and the growth count restarts), good, good, good (grow)
    assert scales == [16.0, 16.0, 32.0, 32.0, 16.0, 16.0, 16.0, 32.0]
    assert took == [True, True, True, True, False, True, True, True]
    assert optimizer.state[model.classifier.weight]["step"] == 7  # our AdamW counted only the steps taken


def test_a_planted_inf_gradient_skips_exactly_that_step_and_halves_the_scale(tmp_path):
    *clean_run, clean_state = run(tmp_path / "clean", "fp16")
    model, task, state = run(tmp_path / "planted", "fp16", overflow_at=3)
    assert moved(*clean_run) == [True] * STEPS and clean_state["scaler"]["scale"] == INIT_SCALE  # no overflow
    assert moved(model, task) == [True, True, False, True, True, True, True, True]  # step 3 skipped, then on
    assert state["scaler"]["scale"] == INIT_SCALE / 2
    assert state["train_state"]["global_step"] == STEPS  # the skipped step still counts (and the schedule)
    assert state["scheduler"]["last_epoch"] == STEPS
    adam_steps = {int(s["step"]) for s in state["optimizer"]["state"].values()}
    assert adam_steps == {STEPS - 1}


def test_fp16_training_follows_fp32_within_the_stated_tolerance(tmp_path):
    """Same seed, no dropout (its masks need not match across precisions), 8 AdamW steps at lr 1e-3. Each
    autocast matrix product rounds to float16 (a relative step of 2^-11, about 5e-4), so the cross-entropies
    differ by about that much of their size (0.7). AdamW's normalised update moves a weight by about lr a step
    whatever the gradient's size, so where a gradient element near zero changes sign in float16 that weight's
    step flips: after 8 steps a weight can differ by up to about 2 * 8 lr = 1.6e-2. Measured on the CPU:
    cross-entropies within 1.4e-4, weights within 1.0e-3 (about one step's lr). Tolerances: 2e-3 for the
    cross-entropies, 4e-3 for the weights (a quarter of that bound)."""
    fp32, _, state32 = run(tmp_path / "fp32", "fp32", dropout=0.0)
    fp16, _, state16 = run(tmp_path / "fp16", "fp16", dropout=0.0)
    assert state16["scaler"]["scale"] == INIT_SCALE  # no step skipped: the two did the same steps
    losses32, losses16 = (state["train_state"]["epoch_losses"]["toy"] for state in (state32, state16))
    loss_gap = max(abs(a - b) / LOSS_FACTOR for a, b in zip(losses32, losses16, strict=True))
    weight_gap = max((a - b).abs().max().item() for a, b in zip(fp32.parameters(), fp16.parameters()))
    print(f"fp16 against fp32 after {STEPS} steps: cross-entropies within {loss_gap:.1e}, weights within "
          f"{weight_gap:.1e}")
    assert loss_gap < 2e-3
    assert weight_gap < 4e-3


def test_a_resumed_fp16_run_ends_with_the_same_weights_and_scale(tmp_path):
    """Stopped by --max-steps 4 after a planted overflow at step 2 (scale halved), then resumed: the weights
    are equal (torch.equal) and the scale is the halved one, which a resume that lost it would not have."""
    straight, _, straight_state = run(tmp_path / "straight", "fp16", overflow_at=2)
    _, _, stopped = run(tmp_path / "stopped", "fp16", overflow_at=2, max_steps=4)
    assert stopped["train_state"]["global_step"] == 4 and stopped["scaler"]["scale"] == INIT_SCALE / 2
    resumed, _, resumed_state = run(tmp_path / "stopped", "fp16", resume=True)  # no plant after the resume
    assert resumed_state["train_state"]["global_step"] == STEPS
    for (name, a), b in zip(straight.state_dict().items(), resumed.state_dict().values()):
        assert torch.equal(a, b), name
    assert resumed_state["scaler"] == straight_state["scaler"]


def test_a_checkpoint_without_a_loss_scale_still_resumes_with_a_fresh_scale(tmp_path):
    _, _, state = run(tmp_path / "old", "fp16", overflow_at=1, max_steps=2)
    last = tmp_path / "old" / "checkpoints" / "last.pt"
    del state["scaler"]  # as a checkpoint written before fp16 was an option
    torch.save(state, last)
    (last.parent / "checksums.sha256").unlink()  # nor were checksums recorded then
    model = Classifier(0.1)
    optimizer = build_optimizer(model, TrainingSettings(lr=1e-3, head_lr=1e-3))
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    scaler = torch.amp.GradScaler("cpu")
    resumed, _ = load_training_state(last, model, optimizer, scheduler, scaler)
    assert resumed.global_step == 2
    assert scaler.get_scale() == INIT_SCALE


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_other_precisions_write_no_loss_scale(tmp_path, precision):
    _, _, state = run(tmp_path / precision, precision, max_steps=1)
    assert "scaler" not in state
