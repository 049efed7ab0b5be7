"""A run killed with SIGKILL in the middle of an epoch, restarted with --resume, ends exactly as a run that
was never interrupted: the same weights, optimizer moments and schedule (compared with torch.equal: the
resumed run replays the same arithmetic from the restored state, RNG included) and the same dev metrics.
So does a run stopped by Ctrl-C or SIGTERM (a real signal, sent by the process to itself), which saves itself
at the next step boundary and prints the command that continues it (tasks/training/process.py)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tasks.data.sources import SAMPLE_DIR

REPO = Path(__file__).resolve().parents[1]

# Kills its own process (SIGKILL: no cleanup, no finally) when the training loop asks for its 9th loss: with
# --checkpoint-every 2, the last checkpoint is then step 8, the second step of epoch 2.
KILLER = """
import os, signal, sys
from tasks import sentiment
real = sentiment.TaskData.loss
calls = []
def loss(self, model, batch):
    calls.append(1)
    if len(calls) == 9:
        os.kill(os.getpid(), signal.SIGKILL)
    return real(self, model, batch)
sentiment.TaskData.loss = loss
sys.exit(sentiment.main(sys.argv[1:]))
"""


def job_args(model: Path, out: Path) -> list[str]:
    # 24 examples in batches of 4: 6 steps per epoch, 2 epochs; dropout on (the RNG state must resume too).
    return ["--model", str(model), "--data-dir", str(SAMPLE_DIR), "--out", str(out), "--limit", "24",
            "--batch_size", "4", "--epochs", "2", "--max-length", "32", "--checkpoint-every", "2",
            "--keep-checkpoints"]  # the final training states are compared


def run(argv: list[str], expect: int = 0, cwd: Path = REPO) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, *argv], cwd=cwd, env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == expect, result.stderr[-3000:]
    return result


def without_timing(path: Path) -> list[dict]:
    return [{k: v for k, v in json.loads(line).items() if k not in ("elapsed_s", "train_s")}
            for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def straight(tiny_model_dir, tmp_path_factory) -> Path:
    """The run that nothing interrupts."""
    out = tmp_path_factory.mktemp("resume") / "straight"
    run(["-m", "tasks.sentiment", *job_args(tiny_model_dir, out)])
    return out


def test_sigkill_mid_epoch_then_resume_equals_an_uninterrupted_run(straight, tiny_model_dir, tmp_path):
    killed = tmp_path / "killed"
    run(["-c", KILLER, *job_args(tiny_model_dir, killed)], expect=-signal.SIGKILL)
    state = torch.load(killed / "checkpoints" / "last.pt", weights_only=True)["train_state"]
    assert (state["epoch"], state["step_in_epoch"], state["global_step"]) == (1, 2, 8)  # mid-epoch 2
    resumed = run(["-m", "tasks.sentiment", *job_args(tiny_model_dir, killed), "--resume"])
    assert "resuming from" in resumed.stderr
    assert_same_end(straight, killed)


def assert_same_end(straight: Path, killed: Path) -> None:
    """The two runs end with the same training state, metrics and predictions."""
    a = torch.load(straight / "checkpoints" / "last.pt", weights_only=True)
    b = torch.load(killed / "checkpoints" / "last.pt", weights_only=True)
    assert a["train_state"]["global_step"] == b["train_state"]["global_step"] == 12
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    moments = [(x, y) for sa, sb in zip(a["optimizer"]["state"].values(), b["optimizer"]["state"].values())
               for x, y in zip(sa.values(), sb.values()) if isinstance(x, torch.Tensor)]
    assert moments and all(torch.equal(x, y) for x, y in moments)
    assert a["scheduler"] == b["scheduler"]
    assert without_timing(straight / "metrics.jsonl") == without_timing(killed / "metrics.jsonl")
    assert (straight / "predictions" / "sst-dev-output.csv").read_text() == \
        (killed / "predictions" / "sst-dev-output.csv").read_text()


# Sends SIGNAL to its own process (a real signal, delivered by the kernel to the handler the job installed)
# TIMES times when WHAT is called for the N-th time: the training loop's loss, the dev evaluation, or the
# loading of the model (before training). Then it runs tasks.sentiment as `python -m tasks.sentiment ARGS`
# would, so that the job prints the command that continues it.
INTERRUPTER = """
import os, runpy, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal: a suite run in the background
# hands its children an ignored SIGINT, which the job (rightly) keeps ignoring
from tasks.models.course_task import TaskData
from tasks.training import job
what, n, signum, times = sys.argv[1], int(sys.argv[2]), signal.Signals[sys.argv[3]], int(sys.argv[4])
owner = job if what == "load_encoder" else TaskData
real = getattr(owner, what)
calls = []
def hooked(*args, **kwargs):
    calls.append(1)
    if len(calls) == n:
        for _ in range(times):
            os.kill(os.getpid(), signum)
    return real(*args, **kwargs)
setattr(owner, what, hooked)
sys.argv = [sys.argv[0], *sys.argv[5:]]
sys.orig_argv = [sys.executable, "-m", "tasks.sentiment", *sys.argv[1:]]
runpy.run_module("tasks.sentiment", run_name="__main__", alter_sys=True)
"""


def interrupt(out: Path, model: Path, what: str, n: int, signal_name: str, times: int = 1,
              expect: int = 143) -> tuple[str, str]:
    """Run the job with INTERRUPTER; return its last line of stderr and the command that resumes it."""
    result = run(["-c", INTERRUPTER, what, str(n), signal_name, str(times), *job_args(model, out)], expect)
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    command = shlex.join([sys.executable, "-m", "tasks.sentiment", *job_args(model, out), "--resume"])
    return result.stderr.strip().splitlines()[-1], command


@pytest.mark.parametrize("what, n, signal_name, status, stopped_at", [
    ("loss", 9, "SIGTERM", 143, (1, 3, 9)),  # during step 9, the third of epoch 2: step 9 ends, then it stops
    ("evaluate", 1, "SIGINT", 130, (1, 0, 6)),  # during epoch 1's evaluation: it ends, the epoch is saved
])
def test_a_signal_stops_the_run_saved_and_the_printed_command_resumes_it_exactly(
        straight, tiny_model_dir, tmp_path, what, n, signal_name, status, stopped_at):
    out = tmp_path / "stopped"
    line, command = interrupt(out, tiny_model_dir, what, n, signal_name, expect=status)
    step = stopped_at[2]
    assert line == (f"interrupted by {signal_name} at step {step} of 12: the run is saved in "
                    f"{out / 'checkpoints' / 'last.pt'}; continue it with: {command}")
    state = torch.load(out / "checkpoints" / "last.pt", weights_only=True)["train_state"]
    assert (state["epoch"], state["step_in_epoch"], state["global_step"]) == stopped_at
    assert (out / "failed.txt").read_text() == line + "\n"
    resumed = run(shlex.split(command)[1:])  # the command as printed (run() supplies the interpreter)
    assert "resuming from" in resumed.stderr
    assert_same_end(straight, out)


def test_a_default_run_stopped_by_a_signal_prints_a_command_naming_its_folder_that_resumes_it(
        straight, tiny_model_dir, tmp_path):
    """Without --out the run's folder is runs/sentiment/<date-time>: the printed command must name it."""
    args = job_args(tiny_model_dir, tmp_path)
    args = args[:args.index("--out")] + args[args.index("--out") + 2:]
    result = run(["-c", INTERRUPTER, "loss", "9", "SIGTERM", "1", *args], 143, cwd=tmp_path)
    command = result.stderr.strip().splitlines()[-1].partition("continue it with: ")[2]
    folder = next((tmp_path / "runs" / "sentiment").iterdir())
    assert shlex.split(command)[-3:] == ["--out", str(folder.relative_to(tmp_path)), "--resume"]
    assert "resuming from" in run(shlex.split(command)[1:], cwd=tmp_path).stderr  # run as printed, there
    assert_same_end(straight, folder)


def test_a_second_signal_stops_at_once_without_a_traceback(tiny_model_dir, tmp_path):
    out = tmp_path / "stopped"
    line, command = interrupt(out, tiny_model_dir, "loss", 9, "SIGTERM", times=2)
    assert line == (f"stopped at once by SIGTERM; the last checkpoint is {out / 'checkpoints' / 'last.pt'}; "
                    f"continue it with: {command}")
    state = torch.load(out / "checkpoints" / "last.pt", weights_only=True)["train_state"]
    assert state["global_step"] == 8  # --checkpoint-every 2's save before step 9; step 9 was not finished


def test_ctrl_c_before_training_leaves_nothing_and_no_traceback(tiny_model_dir, tmp_path):
    out = tmp_path / "stopped"
    line, _ = interrupt(out, tiny_model_dir, "load_encoder", 1, "SIGINT", expect=130)
    assert line == f"interrupted by SIGINT before training began: nothing was saved ({out} is removed again)"
    assert not out.exists()


# ----- a run knows its inputs: --resume refuses changed ones, and never loops without progress -----------


def folder_state(path: Path) -> dict[str, bytes]:
    """Every file under `path` and its bytes: a refused --resume leaves them exactly so."""
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def stopped_run(tiny_model_dir: Path, tmp_path: Path) -> tuple[list[str], Path, Path, Path]:
    """A sentiment run on a private copy of the demo data and of the model, stopped by --max-steps 1:
    (its arguments without --max-steps, the data folder, the model folder, the run folder)."""
    from tasks import sentiment

    data, model, out = tmp_path / "data", tmp_path / "model", tmp_path / "run"
    shutil.copytree(SAMPLE_DIR, data)
    shutil.copytree(tiny_model_dir, model)
    argv = ["--model", str(model), "--data-dir", str(data), "--out", str(out), "--limit", "16",
            "--batch_size", "8", "--epochs", "1", "--max-length", "32", "--threads", "1"]
    assert sentiment.main([*argv, "--max-steps", "1"]) == 0
    return argv, data, model, out


def refused(argv: list[str], out: Path, capsys) -> str:
    """--resume must end with one line, rc 1, and the run folder byte for byte as it was."""
    from tasks import sentiment

    before = folder_state(out)
    with pytest.raises(SystemExit) as error:
        sentiment.main([*argv, "--resume"])
    assert folder_state(out) == before
    message = str(error.value.code)
    assert message.startswith("error: --resume") and "Traceback" not in capsys.readouterr().err
    return message


@pytest.mark.slow  # two short runs and five refused resumes: about 10 s of CPU
def test_resume_refuses_a_changed_data_or_model_file_naming_it_and_writes_nothing(tiny_model_dir, tmp_path,
                                                                                 capsys):
    from tasks import sentiment

    argv, data, model, out = stopped_run(tiny_model_dir, tmp_path)
    assert [Path(e["path"]).name for e in json.loads((out / "inputs.json").read_text())["data"]] == [
        "ids-sst-train.csv", "ids-sst-dev.csv"]  # the test file may change between a run and its resume
    train, dev = data / "ids-sst-train.csv", data / "ids-sst-dev.csv"
    original = {p: p.read_bytes() for p in (train, dev, model / "config.json")}
    lines = original[train].decode().splitlines(keepends=True)
    edits = [  # (file, new bytes): a label edited, the training file shrunk, the dev file replaced
        (train, "".join(lines[:2] + [lines[2].rsplit("\t", 1)[0] + "\t4\n"] + lines[3:]).encode()),
        (train, "".join(lines[:9]).encode()),
        (dev, original[train]),
        (model / "config.json", original[model / "config.json"].replace(b"0.1", b"0.2", 1)),
    ]
    for path, content in edits:
        path.write_bytes(content)
        assert f"{path} has changed since the run started" in refused(argv, out, capsys)
        path.write_bytes(original[path])
    # the same bytes in a folder moved elsewhere, and a file only touched: the run goes on
    os.utime(train, (1, 1))
    moved = tmp_path / "moved"
    data.rename(moved)
    argv[argv.index(str(data))] = str(moved)
    assert sentiment.main([*argv, "--resume"]) == 0
    assert json.loads((out / "run.json").read_text()).get("finished")


def test_a_resume_that_cannot_make_progress_is_an_error_not_a_loop(tiny_model_dir, tmp_path):
    from tasks.training.checkpoints import check_progress_possible
    from tasks.training.checkpoints import TrainState
    from tasks.training.run_folder import ResumeRefused
    from tasks.training.settings import TrainingSettings

    last = tmp_path / "last.pt"
    training = TrainingSettings(epochs=2)
    check_progress_possible(TrainState(step_in_epoch=2, global_step=2), training, 2, last)  # the epoch's end
    with pytest.raises(ResumeRefused, match="stands at step 3 of epoch 1, but an epoch now has 2 steps"):
        check_progress_possible(TrainState(step_in_epoch=3, global_step=3), training, 2, last)
    with pytest.raises(ResumeRefused, match="stands at step 1 of epoch 3"):  # more steps done than there are
        check_progress_possible(TrainState(epoch=2, step_in_epoch=1, global_step=5), training, 2, last)
    with pytest.raises(ResumeRefused, match="--max-steps 4, but the run has taken 4 steps already"):
        check_progress_possible(TrainState(epoch=1, global_step=4), TrainingSettings(epochs=9, max_steps=4),
                                2, last)
