"""Progress where no progress bar can be drawn: a plain line every so often, for logs.

tqdm draws its bar only on a terminal (`disable=None`), so under nohup, CI or a cluster's batch system a
long run would print nothing between "model loaded" and the end of an epoch. There, the loop prints
instead, every `every_s` seconds (and at the last step):

    epoch 1/3 step 120/912 (13%) loss 1.2345 38.2 examples/s ETA 5m48s

Read next: loop.py (which prints through this).
"""

from __future__ import annotations

import sys
import time
from typing import Callable, TextIO


def format_duration(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{seconds:02d}s"


class ProgressLines:
    """The progress bar's facts as one line every `every_s` seconds; silent when `enabled` is False."""

    def __init__(self, total: int, desc: str, enabled: bool, every_s: float = 30.0, initial: int = 0,
                 file: TextIO | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.total, self.desc, self.enabled, self.every_s = total, desc, enabled, every_s
        self.initial = self.step = initial  # a resumed epoch starts part-way
        self.examples = 0
        self.file = file
        self.clock = clock
        self.started = self.last_printed = clock()

    def update(self, examples: int, loss: float) -> None:
        """One more step of `examples` examples with this loss; print if it is time."""
        self.step += 1
        self.examples += examples
        now = self.clock()
        if not self.enabled or (now - self.last_printed < self.every_s and self.step < self.total):
            return
        self.last_printed = now
        elapsed = max(now - self.started, 1e-9)
        steps_done = self.step - self.initial
        eta = (self.total - self.step) * elapsed / steps_done
        print(f"{self.desc} step {self.step}/{self.total} ({100 * self.step / max(self.total, 1):.0f}%) "
              f"loss {loss:.4f} {self.examples / elapsed:.1f} examples/s ETA {format_duration(eta)}",
              file=self.file or sys.stderr, flush=True)
