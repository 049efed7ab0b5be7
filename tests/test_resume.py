"""A run killed with SIGKILL in the middle of an epoch, restarted with --resume, ends exactly as a run that
was never interrupted: the same weights, optimizer moments and schedule (compared with torch.equal: the
resumed run replays the same arithmetic from the restored state, RNG included) and the same dev metrics."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import torch

from tasks.data.sources import SAMPLE_DIR

REPO = Path(__file__).resolve().parents[1]

# Kills its own process (SIGKILL: no cleanup, no finally) when the training loop asks for its 9th loss: with
# --checkpoint-every 2, the last checkpoint is then step 8, the second step of epoch 2.
KILLER = """
import os, signal, sys
from tasks import sentiment
real = sentiment.SentimentTask.loss
calls = []
def loss(self, model, batch):
    calls.append(1)
    if len(calls) == 9:
        os.kill(os.getpid(), signal.SIGKILL)
    return real(self, model, batch)
sentiment.SentimentTask.loss = loss
sys.exit(sentiment.main(sys.argv[1:]))
"""


def job_args(model: Path, out: Path) -> list[str]:
    # 24 examples in batches of 4: 6 steps per epoch, 2 epochs; dropout on (the RNG state must resume too).
    return ["--model", str(model), "--data-dir", str(SAMPLE_DIR), "--out", str(out), "--limit", "24",
            "--batch_size", "4", "--epochs", "2", "--max-length", "32", "--checkpoint-every", "2",
            "--keep-checkpoints"]  # the final training states are compared


def run(argv: list[str], expect: int = 0) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, *argv], cwd=REPO, env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == expect, result.stderr[-3000:]
    return result


def without_timing(path: Path) -> list[dict]:
    return [{k: v for k, v in json.loads(line).items() if k not in ("elapsed_s", "train_s")}
            for line in path.read_text().splitlines()]


def test_sigkill_mid_epoch_then_resume_equals_an_uninterrupted_run(tiny_model_dir, tmp_path):
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    run(["-m", "tasks.sentiment", *job_args(tiny_model_dir, straight)])
    run(["-c", KILLER, *job_args(tiny_model_dir, killed)], expect=-signal.SIGKILL)
    state = torch.load(killed / "checkpoints" / "last.pt", weights_only=False)["train_state"]
    assert (state["epoch"], state["step_in_epoch"], state["global_step"]) == (1, 2, 8)  # mid-epoch 2
    resumed = run(["-m", "tasks.sentiment", *job_args(tiny_model_dir, killed), "--resume"])
    assert "resuming from" in resumed.stderr
    a = torch.load(straight / "checkpoints" / "last.pt", weights_only=False)
    b = torch.load(killed / "checkpoints" / "last.pt", weights_only=False)
    assert a["train_state"]["global_step"] == b["train_state"]["global_step"] == 12
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    moments = [(x, y) for sa, sb in zip(a["optimizer"]["state"].values(), b["optimizer"]["state"].values())
               for x, y in zip(sa.values(), sb.values()) if isinstance(x, torch.Tensor)]
    assert moments and all(torch.equal(x, y) for x, y in moments)
    assert a["scheduler"] == b["scheduler"]
    assert without_timing(straight / "metrics.jsonl") == without_timing(killed / "metrics.jsonl")
    assert (straight / "predictions" / "sst-dev-output.csv").read_text() == \
        (killed / "predictions" / "sst-dev-output.csv").read_text()
