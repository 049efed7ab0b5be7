"""Faults under load: a job killed while it swaps in a new best/, and a disk that fills up while the main
job writes its predictions, a job writes last.pt or best/, or pre-training writes its checkpoint. Each leaves
the last good files whole and says what happened in one line. The full disks are real where a test can make
one without root: /dev/full (ENOSPC) under torch.save, and a file size limit (RLIMIT_FSIZE: EFBIG) under
torch.save and safetensors; elsewhere the exceptions are the ones those libraries raise."""

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

from minbert.loading import atomic
from minbert.loading.atomic import atomic_directory, readable_directory
from pretrain import run as pretrain_run
from tasks import multitask
from tasks.data.sources import SAMPLE_DIR
from tasks.data import course as course_module
from tasks.training import checkpoints as resume_state

REPO = Path(__file__).resolve().parents[1]

# Every epoch scores higher than the one before (so each is saved as best/), and the process kills itself
# (SIGKILL: no clean-up) the second time a best/ is being written, after its weights file and before its
# config.json.
KILL_DURING_SECOND_BEST = """
import os, signal, sys
from pathlib import Path
from minbert.loading import checkpoint
from tasks import multitask
scores = []
def rising(tasks, dev):
    scores.append(1)
    return 0.001 * len(scores)  # below any real score, so the resumed run saves a new best
multitask.overall_score = rising
real_write_text = checkpoint.write_text
configs = []
def write_text(path, text):
    path = Path(path)
    if path.name == "config.json" and path.parent.name.startswith(".best."):
        configs.append(path)
        if len(configs) == 2:
            assert (path.parent / "model.safetensors").is_file()  # the weights are already there
            os.kill(os.getpid(), signal.SIGKILL)
    return real_write_text(path, text)
checkpoint.write_text = write_text
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
    state = torch.load(out / "checkpoints" / "last.pt", weights_only=True)
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
    """On a file system that cannot exchange two folders in one step (atomic.py), the swap's two renames."""
    best = tmp_path / "best"
    with atomic_directory(best) as new:
        (new / "weights").write_text("epoch 1")
    monkeypatch.setattr(atomic, "_renameat2", lambda: None)
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


def test_disk_full_while_writing_predictions_is_one_line_and_leaves_no_half_set(tiny_model_dir, tmp_path,
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
    assert len(written) == 2 and not (out / "predictions").exists()  # written together or not at all
    assert not list(out.glob(".predictions*"))  # no temporary folder either
    assert (out / "best" / "model.safetensors").is_file()  # training's result is kept
    assert (out / "failed.txt").is_file() and "No space left" in (out / "failed.txt").read_text()
    # Training finished, but the job did not: its checkpoints stay, and --resume writes the predictions.
    assert "--resume" in (out / "failed.txt").read_text() and (out / "checkpoints" / "last.pt").is_file()
    monkeypatch.undo()
    assert multitask.main(["--model", str(tiny_model_dir), "--data-dir", str(SAMPLE_DIR), "--out", str(out),
                           "--limit", "16", "--batch_size", "8", "--epochs", "1", "--max-length", "32",
                           "--resume"]) == 0
    assert len(list((out / "predictions").iterdir())) == 6 and not (out / "failed.txt").exists()
    assert "finished" in json.loads((out / "run.json").read_text()) and not (out / "checkpoints").exists()


def test_disk_full_while_pretraining_saves_its_checkpoint(tiny_model_dir, tmp_path, monkeypatch, capsys):
    common = ["--model", str(tiny_model_dir), "--within", "multitask", "--data-dir", str(SAMPLE_DIR),
              "--limit", "20", "--epochs", "2", "--batch-size", "8", "--no-eval-first", "--keep-checkpoints",
              "--out", str(tmp_path / "run")]
    assert pretrain_run.main(common + ["--max-steps", "2"]) == 0
    checkpoints = tmp_path / "run" / "checkpoints"
    before = {p.name: p.read_bytes() for p in checkpoints.iterdir()}
    assert "last.pt" in before
    monkeypatch.setattr(resume_state.torch, "save", lambda state, path, *args, **kwargs: no_space(path))
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


def files_in(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def behind(error: BaseException) -> list[BaseException]:
    """The exceptions an error was raised from or while handling, nearest first."""
    chain, cause = [], error.__context__
    while cause is not None:
        chain.append(cause)
        cause = cause.__cause__ or cause.__context__
    return chain


def sentiment_args(model: Path, out: Path, *extra: str) -> list[str]:
    return ["--model", str(model), "--data-dir", str(SAMPLE_DIR), "--out", str(out), "--limit", "16",
            "--batch_size", "8", "--epochs", "1", "--max-length", "32", "--keep-checkpoints", *extra]


def test_a_full_disk_under_torch_save_is_one_line_naming_last_pt(tiny_model_dir, tmp_path, monkeypatch):
    """torch.save into /dev/full: the kernel's ENOSPC, wrapped by torch's zip writer in RuntimeError("[enforce
    fail at inline_container.cc:...] ..."), becomes the one line, naming last.pt (not its temporary file)."""
    if not Path("/dev/full").is_char_device():
        pytest.skip("no /dev/full")
    from tasks import sentiment

    out = tmp_path / "run"
    assert sentiment.main(sentiment_args(tiny_model_dir, out, "--max-steps", "1")) == 0
    before = {p.name: p.read_bytes() for p in (out / "checkpoints").iterdir()}
    real_save = torch.save

    def into_a_full_disk(obj, file, *args, **kwargs):
        with open("/dev/full", "wb") as full:  # a character device: written to, never replaced
            real_save(obj, full, *args, **kwargs)

    monkeypatch.setattr(resume_state.torch, "save", into_a_full_disk)
    with pytest.raises(SystemExit) as error:
        sentiment.main(sentiment_args(tiny_model_dir, out, "--resume"))
    assert str(error.value.code) == (f"error: cannot write {out / 'checkpoints' / 'last.pt'}: No space left "
                                     "on device; files written before are intact (every write goes to a "
                                     "temporary file first)")
    assert any(isinstance(e, RuntimeError) and "inline_container.cc" in str(e)  # torch.save's own
               for e in behind(error.value))
    assert {p.name: p.read_bytes() for p in (out / "checkpoints").iterdir()} == before  # no half file either
    monkeypatch.undo()
    assert sentiment.main(sentiment_args(tiny_model_dir, out, "--resume")) == 0


# Runs tasks.sentiment with the process's file size limit set to LIMIT bytes and SIGXFSZ ignored, so that the
# kernel fails a write past the limit with EFBIG, as it fails one on a full disk with ENOSPC.
FILE_SIZE_LIMIT = """
import resource, signal, sys
from tasks import sentiment
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
sys.exit(sentiment.main(sys.argv[2:]))
"""


def with_file_size_limit(limit: int, argv: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run([sys.executable, "-c", FILE_SIZE_LIMIT, str(limit), *argv], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)


def test_a_file_too_large_for_last_pt_or_best_is_one_line_naming_it(tiny_model_dir, tmp_path):
    """The tiny model's best/model.safetensors is 4 MB, its last.pt 12 MB: at 8 MB torch.save fails, at 1 MB
    safetensors does (SafetensorError "... I/O error: File too large (os error 27)")."""
    from tasks import sentiment

    out = tmp_path / "run"
    assert sentiment.main(sentiment_args(tiny_model_dir, out, "--max-steps", "1")) == 0
    before = {p.name: p.read_bytes() for p in (out / "checkpoints").iterdir()}
    failed = with_file_size_limit(8 * 2**20, sentiment_args(tiny_model_dir, out, "--resume"))
    assert failed.returncode == 1 and "Traceback" not in failed.stderr, failed.stderr[-3000:]
    assert failed.stderr.strip().splitlines()[-1] == (
        f"error: cannot write {out / 'checkpoints' / 'last.pt'}: File too large; files written before are "
        "intact (every write goes to a temporary file first)")
    assert {p.name: p.read_bytes() for p in (out / "checkpoints").iterdir()} == before
    assert sentiment.main(sentiment_args(tiny_model_dir, out, "--resume")) == 0  # and it goes on from there

    fresh = tmp_path / "fresh"
    failed = with_file_size_limit(2**20, sentiment_args(tiny_model_dir, fresh))
    assert failed.returncode == 1 and "Traceback" not in failed.stderr, failed.stderr[-3000:]
    assert failed.stderr.strip().splitlines()[-1] == (
        f"error: cannot write {fresh / 'best' / 'model.safetensors'}: File too large; files written before "
        "are intact (every write goes to a temporary file first)")
    left = sorted(p.name for p in fresh.iterdir())
    assert left == ["config.json", "failed.txt", "inputs.json", "metrics.jsonl", "run.json"]  # no best/, no .best.*.tmp
    assert "no checkpoint to resume from" in (fresh / "failed.txt").read_text()  # it says so; not --resume


def test_a_full_disk_while_best_is_written_keeps_the_previous_best(tiny_model_dir, tmp_path, monkeypatch):
    """safetensors' own exception for a full disk, SafetensorError("Error while serializing: I/O error: No
    space left on device (os error 28)"), while epoch 2's best/ is written: one line naming best/'s file, the
    previous best/ whole, no half-written folder; --resume then finishes, each epoch once in metrics.jsonl."""
    from safetensors import SafetensorError

    from minbert.loading import checkpoint

    scores = iter([0.1, 0.2, 0.3])  # every epoch a new best
    monkeypatch.setattr(multitask, "overall_score", lambda tasks, dev: next(scores))
    real = checkpoint.save_safetensors
    calls, kept = [], {}
    out = tmp_path / "run"

    def full_on_the_second(state, path, *args, **kwargs):
        calls.append(path)
        if len(calls) == 2:
            kept.update(files_in(out / "best"))
            raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")
        return real(state, path, *args, **kwargs)

    monkeypatch.setattr(checkpoint, "save_safetensors", full_on_the_second)
    argv = ["--model", str(tiny_model_dir), "--data-dir", str(SAMPLE_DIR), "--out", str(out), "--limit", "16",
            "--batch_size", "8", "--epochs", "2", "--max-length", "32"]
    with pytest.raises(SystemExit) as error:
        multitask.main(argv)
    assert str(error.value.code) == (f"error: cannot write {out / 'best' / 'model.safetensors'}: No space "
                                     "left on device; files written before are intact (every write goes to "
                                     "a temporary file first)")
    assert any(isinstance(e, SafetensorError) for e in behind(error.value))
    assert kept and files_in(out / "best") == kept  # epoch 1's, whole
    assert not list(out.glob(".best*"))
    assert "--resume" in (out / "failed.txt").read_text()
    monkeypatch.setattr(checkpoint, "save_safetensors", real)
    assert multitask.main([*argv, "--resume"]) == 0
    epochs = [json.loads(line)["epoch"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert epochs == [1, 2]  # epoch 2 was recorded before the failed save, and again after the resume: once
