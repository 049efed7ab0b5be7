"""A setting's way from the command line to its use crosses few files, and a new optimizer is one row.

bench/step_path.py's `trace_flag` follows a flag's value through a one-step run of the main job (its
docstring says what counts: the declaring and parsing file, then every file that hands the value on until
the line that uses it); docs/architecture.md quotes the counts. Before this layout --lr crossed 8 files by
the same count (settings.py, flags.py, multitask.py, job.py, loop.py, optimizer.py, param_groups.py,
fast_adamw.py).
"""

from __future__ import annotations

import json

import pytest
import torch

from bench.step_path import FLAG_USES, trace_flag
from tasks import multitask
from tasks.data.sources import SAMPLE_DIR
from tasks.training import settings

# Where each traced flag ends: the file whose line uses the value.
ENDS = {"lr": ("optim/fast_adamw.py", "optim/adamw.py"), "max-grad-norm": ("tasks/training/loop.py",),
        "hidden-dropout-prob": ("minbert/task_heads.py",)}


@pytest.mark.parametrize("flag", sorted(FLAG_USES))
def test_a_flag_crosses_at_most_five_files_from_the_parser_to_its_use(flag, tiny_model_dir):
    files = trace_flag(flag, ["--model", str(tiny_model_dir), "--data-dir", str(SAMPLE_DIR), "--limit", "8",
                              "--max-length", "64", "--batch-size", "4"])
    print(f"--{flag}: {len(files)} files: " + " -> ".join(files))
    assert files[0] == "tasks/training/settings.py" and files[-1] in ENDS[flag], files
    # --lr: the loop builds the optimizer after the first backward (an untouched handout stops in the model,
    # not in the parameter groups), which puts loop.py on its way: docs/architecture.md
    assert len(files) <= (6 if flag == "lr" else 5), files


def test_a_new_optimizer_is_one_row_of_the_table(monkeypatch, tiny_multitask_run, tmp_path):
    """A row added to settings.OPTIMIZERS is a choice of --optimizer, and the job trains with it."""
    monkeypatch.setitem(settings.OPTIMIZERS, "sgd", lambda groups, training: torch.optim.SGD(
        groups, lr=training.lr, momentum=0.9, weight_decay=training.weight_decay))
    assert "{adamw,sgd}" in multitask.build_parser().format_help()
    out = tmp_path / "run"
    assert multitask.main(tiny_multitask_run(out, "--optimizer", "sgd")) == 0  # 2 steps: a stopped run
    assert json.loads((out / "config.json").read_text())["optimizer"] == "sgd"
    state = torch.load(out / "checkpoints" / "last.pt", weights_only=False)["optimizer"]["state"]
    assert state and all("momentum_buffer" in s and "exp_avg" not in s for s in state.values())
