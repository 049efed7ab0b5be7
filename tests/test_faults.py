"""Faults under load: a job killed while it swaps in a new best/, and a disk that fills up while the main
job writes its predictions or pre-training writes its checkpoint. Each leaves the last good files whole
and says what happened in one line."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from minbert.atomic import atomic_directory, readable_directory
from pretrain import run as pretrain_run
from tasks import multitask
from tasks.data.sources import SAMPLE_DIR
from tasks.data import course as course_module
from tasks.training import run_dir as run_dir_module

REPO = Path(__file__).resolve().parents[1]

# Every epoch scores higher than the one before (so each is saved as best/), and the process kills itself
# (SIGKILL: no clean-up) the second time a best/ is being written, after its weights file and before its
# config.json.
KILL_DURING_SECOND_BEST = """
import os, signal, sys
from pathlib import Path
from minbert import checkpoint
from tasks import multitask
scores = []
def rising(dev):
    scores.append(1)
    return 0.001 * len(scores)  # below any real score, so the resumed run saves a new best
multitask.overall_score = rising
real_write_text = checkpoint.atomic_write_text
configs = []
def write_text(path, text):
    path = Path(path)
    if path.name == "config.json" and path.parent.name.startswith(".best."):
        configs.append(path)
        if len(configs) == 2:
            assert (path.parent / "model.safetensors").is_file()  # the weights are already there
            os.kill(os.getpid(), signal.SIGKILL)
    return real_write_text(path, text)
checkpoint.atomic_write_text = write_text
sys.exit(multitask.main(sys.argv[1:]))
"""


def job_args(model: Path, out: Path) -> list[str]:
    return ["--model", str(model), "--data-dir", str(SAMPLE_DIR), "--out", str(out), "--limit", "16",
            "--batch_size", "8", "--epochs", "3", "--max-length", "32", "--keep-checkpoints"]


def test_a_kill_while_best_is_swapped_in_leaves_the_previous_best_whole(tiny_model_dir, tmp_path):
    out = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    killed = subprocess.run([sys.executable, "-c", KILL_DURING_SECOND_BEST, *job_args(tiny_model_dir, out)],
                            cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    # The kill came in epoch 2's save of best/, before epoch 2's checkpoint: last.pt holds epoch 1's
    # weights, which are exactly what best/ must still hold, together with their own config and heads.
    state = torch.load(out / "checkpoints" / "last.pt", weights_only=False)
    assert state["train_state"]["epoch"] == 1
    best = out / "best"
    weights = load_file(best / "model.safetensors")
    assert weights and all(torch.equal(v, state["model"][f"bert.{k}"]) for k, v in weights.items())
    heads = load_file(best / "heads.safetensors")
    assert all(torch.equal(v, state["model"][k]) for k, v in heads.items())
    assert json.loads((best / "config.json").read_text())["hidden_size"] == 32
    assert json.loads((best / "heads.json").read_text())["job"] == "multitask"
    assert list(tmp_path.glob("run/.best.*.tmp"))  # the half-written new best/ is beside it, unused
    # The run resumes, finishes, and clears the killed writer's folder.
    resumed = subprocess.run([sys.executable, "-m", "tasks.multitask", *job_args(tiny_model_dir, out),
                              "--resume"], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert not list(out.glob(".best.*")) and (best / "config.json").is_file()
    assert (out / "predictions" / "sst-dev-output.csv").is_file()


def test_a_crash_between_the_two_renames_keeps_a_readable_best(tmp_path, monkeypatch):
    best = tmp_path / "best"
    with atomic_directory(best) as new:
        (new / "weights").write_text("epoch 1")
    real_replace = os.replace

    def crash_on_the_second_rename(source, target):
        if Path(source).name.endswith(".tmp"):
            raise KeyboardInterrupt("the process dies here")
        return real_replace(source, target)

    monkeypatch.setattr(os, "replace", crash_on_the_second_rename)
    with pytest.raises(KeyboardInterrupt):
        with atomic_directory(best) as new:
            (new / "weights").write_text("epoch 2")
    monkeypatch.setattr(os, "replace", real_replace)
    assert not best.exists()  # moved aside, and the new one never arrived
    assert (readable_directory(best) / "weights").read_text() == "epoch 1"  # readers still find it
    with atomic_directory(best) as new:  # the next write puts the old one back first, then swaps
        (new / "weights").write_text("epoch 3")
    assert (best / "weights").read_text() == "epoch 3"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best"]


def no_space(path, *args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device", str(path))


def test_disk_full_while_writing_predictions_is_one_line_and_leaves_no_half_file(tiny_model_dir, tmp_path,
                                                                                 monkeypatch, capsys):
    real = course_module.atomic_write_text
    written = []

    def fill_up_after_two(path, text):
        if Path(path).name.endswith("-output.csv"):
            if len(written) == 2:
                no_space(path)
            written.append(Path(path).name)
        return real(path, text)

    monkeypatch.setattr(course_module, "atomic_write_text", fill_up_after_two)
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as error:
        multitask.main(["--model", str(tiny_model_dir), "--data-dir", str(SAMPLE_DIR), "--out", str(out),
                        "--limit", "16", "--batch_size", "8", "--epochs", "1", "--max-length", "32"])
    message = str(error.value.code)
    assert message.startswith("error: cannot write ") and "para-dev-output.csv" in message
    assert "No space left on device; files written before are intact" in message
    assert "\n" not in message and "Traceback" not in capsys.readouterr().err
    files = sorted(p.name for p in (out / "predictions").iterdir())
    assert files == sorted(written)  # the two written whole, nothing half-written, no temporary file
    assert (out / "best" / "model.safetensors").is_file()  # training's result is kept
    assert (out / "failed.txt").is_file() and "No space left" in (out / "failed.txt").read_text()


def test_disk_full_while_pretraining_saves_its_checkpoint(tiny_model_dir, tmp_path, monkeypatch, capsys):
    common = ["--model", str(tiny_model_dir), "--within", "multitask", "--data-dir", str(SAMPLE_DIR),
              "--limit", "20", "--epochs", "2", "--batch-size", "8", "--no-eval-first", "--keep-checkpoints",
              "--out", str(tmp_path / "run")]
    assert pretrain_run.main(common + ["--max-steps", "2"]) == 0
    checkpoints = tmp_path / "run" / "checkpoints"
    before = {p.name: p.read_bytes() for p in checkpoints.iterdir()}
    assert "last.pt" in before
    monkeypatch.setattr(run_dir_module.torch, "save", lambda state, path, *args, **kwargs: no_space(path))
    with pytest.raises(SystemExit) as error:
        pretrain_run.main(common + ["--max-steps", "4", "--resume"])
    message = str(error.value.code)
    assert message.startswith("error: cannot write ") and "last.pt" in message
    assert "No space left on device; files written before are intact" in message
    # the last good checkpoint untouched, under its own name, and no temporary file left
    assert {p.name: p.read_bytes() for p in checkpoints.iterdir()} == before
    monkeypatch.undo()
    assert pretrain_run.main(common + ["--resume"]) == 0  # and the run goes on from it
    assert "resuming from" in capsys.readouterr().err
