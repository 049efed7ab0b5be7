"""The fast paths a job chooses for the model it has built and will train (JobRun.train, job.py, once the
encoder is loaded and its heads and adapters are in place), each giving the same numbers as without it:
minbert/fast/dropout.py's dropout with a cheaper random mask on a CPU in place of every nn.Dropout, and
memory.py's freed pages kept for the next step's large gradients. The loop trains the model as it is given.
The benches call the same function, so that they time the step the jobs run.

Read next: memory.py.
"""

from __future__ import annotations

from torch import nn

from minbert.fast.dropout import use_fast_dropout
from tasks.training.memory import keep_freed_memory


def use_fast_paths(model: nn.Module) -> nn.Module:
    """Switch the fast paths on for `model` (and the process); returns `model`."""
    use_fast_dropout(model)
    keep_freed_memory()
    return model
