"""Which of our modules a job loads: at its first training step, and when it ends.

    .venv/bin/python tests/job_modules.py                          the main job on 8 rows per split, 1 epoch
    .venv/bin/python tests/job_modules.py tasks.multitask --limit 8 --epochs 1 --lora 4   any job, any flags

A job imports what its flags use, so these lists are what a run of it needed. The job runs in a child
process (nothing else loaded) with `--out` in a temporary folder, on the course data ($MINBERT_DATA, else
../shared/data beside the checkout); the child reads `sys.modules` at the first `backward` (the first
training step: everything the loop set up is loaded, nothing the epoch's end loads yet) and at exit.
Counted: the modules of minbert, optim, tasks, pretrain and grading, package `__init__`s apart.
tests/test_architecture.py checks the main job's lists against docs/architecture.md and against the modules
that only a flag may load.

Read next: test_architecture.py.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OURS = ("minbert", "optim", "tasks", "pretrain", "grading")
DEFAULT = ("tasks.multitask", "--limit", "8", "--epochs", "1", "--threads", "1")

# Runs in the child: argv[1] is the job's module, the rest its flags.
CHILD = f"""
import atexit, runpy, sys, torch
def ours():
    return sorted(m for m in sys.modules if m.split(".")[0] in {OURS!r})
first_step = []
backward = torch.Tensor.backward
def recorded(self, *args, **kwargs):
    if not first_step:
        first_step.append(ours())
    return backward(self, *args, **kwargs)
torch.Tensor.backward = recorded
atexit.register(lambda: print("LOADED", repr({{"first step": first_step[0] if first_step else None,
                                              "end": ours()}}), file=sys.__stdout__))
module, sys.argv = sys.argv[1], sys.argv[1:]
runpy.run_module(module, run_name="__main__")
"""


def data_dir() -> Path:
    return Path(os.environ.get("MINBERT_DATA", ROOT.parent / "shared" / "data"))


def modules_loaded(job: str, flags: list[str], out: Path) -> dict[str, list[str] | None]:
    """{"first step": ..., "end": ...}: the module names of ours `python -m job *flags --out out` had loaded
    at its first training step (None: it trained nothing) and at its end."""
    done = subprocess.run([sys.executable, "-c", CHILD, job, *flags, "--out", str(out)], cwd=ROOT,
                          capture_output=True, text=True, env={**os.environ, "MINBERT_DATA": str(data_dir())})
    if done.returncode != 0:
        raise RuntimeError(f"{job} {' '.join(flags)} failed:\n{done.stderr[-3000:]}")
    line = next(line for line in done.stdout.splitlines() if line.startswith("LOADED "))
    return ast.literal_eval(line.removeprefix("LOADED "))


def is_package(name: str) -> bool:
    return (ROOT.joinpath(*name.split(".")) / "__init__.py").is_file()


def main(argv: list[str]) -> int:
    job, *flags = argv or DEFAULT
    with tempfile.TemporaryDirectory() as out:
        loaded = modules_loaded(job, flags, Path(out) / "run")
    for moment, names in loaded.items():
        names = names or []
        files = [n for n in names if not is_package(n)]
        print(f"{moment}: {len(names)} modules, {len(files)} without package __init__s")
        print("    " + " ".join(files))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
