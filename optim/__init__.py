"""The optimizer side of training: AdamW, learning-rate schedules, and BERT's parameter groups.

adamw.py is AdamW as a student reads and writes it; fast_adamw.py's FastAdamW, its subclass, runs the same
update fused (in C on the CPU, compiled by torch.compile elsewhere), tested equal, and is not needed to follow
the lesson.

Read next: adamw.py, then schedules.py, then param_groups.py.
"""

from optim.adamw import AdamW, adamw_update
from optim.param_groups import describe_param_groups, make_param_groups, print_param_groups
from optim.schedules import (
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
