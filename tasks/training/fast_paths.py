"""The fast paths a job chooses, each giving the same numbers as the lesson's code it stands in for:
optim/fast_adamw.py's FastAdamW for the lesson's AdamW (build_optimizer, optimizer.py), and for the model it has
built and will train (JobRun.train, job.py, once the encoder is loaded and its heads and adapters are in
place) minbert/fast/dropout.py's dropout with a cheaper random mask on a CPU in place of every nn.Dropout, and
memory.py's freed pages kept for the next step's large gradients. The loop trains the model as it is given.

The student handout leaves these modules out by name (grading/config.py HANDOUT_FAST_PATHS); `shipped` is
the one place that asks whether they are here, so that in a handout every job runs the student's own code.
The benches call the same functions, so that they time the step the jobs run.

Read next: memory.py.
"""

from __future__ import annotations

import functools
import importlib.util

from torch import nn

from optim.adamw import AdamW

FAST_MODULES = ("minbert.fast", "optim.fast_adamw", "tasks.training.memory")


@functools.cache
def shipped() -> bool:
    """Whether the fast paths are here: in this repository yes, in the student handout no."""
    return all(importlib.util.find_spec(name) is not None for name in FAST_MODULES)


def optimizer_class() -> type[AdamW]:
    """FastAdamW where it is shipped (the same numbers, fused), else the lesson's AdamW."""
    if not shipped():
        return AdamW
    from optim.fast_adamw import FastAdamW
    return FastAdamW


def use_fast_paths(model: nn.Module) -> nn.Module:
    """Switch the fast paths on for `model` (and the process) where they are shipped; returns `model`."""
    if shipped():
        from minbert.fast.dropout import use_fast_dropout
        from tasks.training.memory import keep_freed_memory
        use_fast_dropout(model)
        keep_freed_memory()
    return model
