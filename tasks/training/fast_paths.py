"""The fast paths the training loop switches on before its first step, each giving the same numbers as
without it: minbert/fast/dropout.py's dropout with a cheaper random mask on a CPU, and memory.py's freed pages
kept for the next step's large gradients. The benches call the same function, so that they time the step the
jobs run.

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
