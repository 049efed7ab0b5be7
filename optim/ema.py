"""Averages of the weights (Polyak & Juditsky 1992), evaluated in place of the weights themselves.

The weights at the end of training wander around a good region with the noise of the last mini-batches;
an exponential moving average of them sits nearer its middle. After every optimizer step each average
moves a little toward the current weights:

    avg <- avg + (1 - d_t) (w - avg),    d_t = min(decay, (1 + t) / (10 + t))

where t counts the updates. The ramp d_t (as in TensorFlow's ExponentialMovingAverage with num_updates)
keeps the first averages from clinging to the initial weights when training is short.

Without a decay (decay=None) the average is the plain mean of the weights after each update so far,
d_t = 1 - 1/t, so the t-th weights enter with weight 1/t. Started late in training, that is checkpoint
averaging (Vaswani et al. 2017 averaged their last 5 or 20 checkpoints) taken at every step, or SWA
(Izmailov et al. 2018) under the run's own learning-rate schedule.

Training itself never sees an average: the job evaluates and saves it (`swapped_in`) and goes on with the
raw weights.

Read next: ../tasks/training/loop.py (--ema and --average-last: evaluation and best/ use the average).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, Sequence

import torch


class WeightAverage:
    """The exponential moving average of `params` (the trainable ones), one float copy per tensor; with
    decay=None their plain mean."""

    def __init__(self, params: Sequence[torch.Tensor], decay: float | None) -> None:
        if decay is not None and not 0.0 < decay < 1.0:
            raise ValueError(f"WeightAverage: decay must be in (0, 1) or None (the plain mean), "
                             f"got {decay!r}")
        self.params = list(params)
        self.decay = decay
        self.updates = 0
        self.averages = [p.detach().clone() for p in self.params]

    def current_decay(self) -> float:
        if self.decay is None:
            return 1.0 - 1.0 / max(self.updates, 1)
        return min(self.decay, (1 + self.updates) / (10 + self.updates))

    @torch.no_grad()
    def update(self) -> None:
        """One step of the average; call it after every optimizer step."""
        self.updates += 1
        weight = 1.0 - self.current_decay()
        for average, param in zip(self.averages, self.params):
            average.lerp_(param.detach(), weight)  # avg + weight * (w - avg)

    @contextmanager
    def swapped_in(self) -> Iterator[None]:
        """Inside the block the model's tensors hold the averages; the raw weights come back after it."""
        raw = [p.detach().clone() for p in self.params]
        with torch.no_grad():
            for param, average in zip(self.params, self.averages):
                param.copy_(average)
        try:
            yield
        finally:
            with torch.no_grad():
                for param, weights in zip(self.params, raw):
                    param.copy_(weights)

    def state_dict(self) -> dict:
        return {"decay": self.decay, "updates": self.updates, "averages": [a.clone() for a in self.averages]}

    def load_state_dict(self, state: dict) -> None:
        if state["decay"] != self.decay:
            raise ValueError(f"WeightAverage: the saved average has decay {state['decay']!r}, this one "
                             f"{self.decay!r}")
        if len(state["averages"]) != len(self.averages):
            raise ValueError(f"WeightAverage: the saved average has {len(state['averages'])} tensors, "
                             f"this model {len(self.averages)}")
        self.updates = state["updates"]
        for average, saved in zip(self.averages, state["averages"]):
            average.copy_(saved)
