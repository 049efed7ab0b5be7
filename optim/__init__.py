"""The optimizer side of training: AdamW, learning-rate schedules, and BERT's parameter groups.

adamw.py is AdamW as a student reads and writes it; the repository's optim.fast_adamw, its subclass, runs
the same update fused (in C on the CPU, compiled by torch.compile elsewhere), tested equal; a student's
handout leaves it out.

Read next: adamw.py, then schedules.py, then param_groups.py.
"""

import pkgutil

__path__ = pkgutil.extend_path(__path__, __name__)  # as minbert/__init__.py: the installed part's optim/ too

from optim.adamw import AdamW, adamw_update  # noqa: E402 (after __path__, which may find the installed part)
from optim.param_groups import describe_param_groups, make_param_groups, print_param_groups  # noqa: E402
from optim.schedules import (  # noqa: E402
    SCHEDULES,
    constant_warmup,
    cosine_warmup,
    exponential_decay,
    linear_warmup_decay,
    slanted_triangular,
)

__all__ = [
    "AdamW", "adamw_update",
    "make_param_groups", "describe_param_groups", "print_param_groups",
    "SCHEDULES", "linear_warmup_decay", "constant_warmup", "cosine_warmup", "slanted_triangular",
    "exponential_decay",
]
