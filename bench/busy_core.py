"""The main job's training speed when another process keeps one core busy: --threads against the default.

PyTorch splits every CPU operation over its threads and waits for the slowest, so on a laptop where a
browser, an editor's indexer or a second job holds one core, training with a thread per core can be far
slower than with one thread fewer. The jobs' default `--threads 0` samples the load when they start and
uses only the idle cores (tasks/training/settings.py). This measures what that buys:

    python -m bench.busy_core                    # about 4 minutes on 2 cores
    python -m bench.busy_core --max-steps 60 --precision fp32

Each row is one run of `python -m tasks.multitask` (the embedded model, the first --limit examples of each
task, stopped after --max-steps steps of 32) in its own process; the training time is the loop's own
`train_s` (steps only, no model loading, evaluation or saving). "busy" rows run beside a process that spins
on one core, started a second before the job; the "quiet" row runs alone. Timings of whole runs on a shared
machine are noisy: run it with nothing else going on.

Read next: tasks/training/settings.py.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tasks.training.flags import existing_dir, positive_int
from tasks.training.settings import PRECISIONS

SPIN = "while True:\n    pass\n"


def train_seconds(args, threads: int, busy: bool) -> tuple[float, int]:
    """(train_s, the threads the job said it used) of one short main-job run."""
    with tempfile.TemporaryDirectory() as folder:
        command = [sys.executable, "-m", "tasks.multitask", "--limit", str(args.limit), "--epochs", "1",
                   "--max-steps", str(args.max_steps), "--precision", args.precision, "--threads", str(threads),
                   "--out", str(Path(folder) / "run")]
        if args.data_dir:
            command += ["--data-dir", args.data_dir]
        env = {key: value for key, value in os.environ.items() if key != "OMP_NUM_THREADS"}
        spinner = subprocess.Popen([sys.executable, "-c", SPIN]) if busy else None
        try:
            if spinner:
                time.sleep(1.0)  # the spinner is running before the job looks at the load
            result = subprocess.run(command, env=env, capture_output=True, text=True)
        finally:
            if spinner:
                spinner.kill()
                spinner.wait()
        if result.returncode != 0:
            raise SystemExit(f"error: {' '.join(command)} failed:\n{result.stderr[-2000:]}")
        record = json.loads((Path(folder) / "run" / "metrics.jsonl").read_text().splitlines()[-1])
        said = next(line for line in result.stderr.splitlines() if line.startswith("threads: "))
        return record["train_s"], int(said.split()[1])


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.busy_core", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    parser.add_argument("--limit", type=positive_int, default=1500, help="examples per task (default 1500)")
    parser.add_argument("--max-steps", type=positive_int, default=40, help="steps per run (default 40)")
    parser.add_argument("--precision", choices=PRECISIONS, default="auto", help="the jobs' --precision")
    parser.add_argument("--data-dir", type=existing_dir, default=None, help="the jobs' --data-dir")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    cores = os.cpu_count() or 1
    rows = [("quiet", "default (0)", 0, False), ("busy", f"--threads {cores}", cores, True),
            ("busy", "--threads 1", 1, True), ("busy", "default (0)", 0, True)]
    print(f"| machine | --threads | threads used | train_s ({args.max_steps} steps) | examples / s |")
    print("|---|---|---|---|---|")
    for machine, label, threads, busy in rows:
        seconds, used = train_seconds(args, threads, busy)
        print(f"| {machine} | {label} | {used} | {seconds:.1f} | {args.max_steps * 32 / seconds:.1f} |",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
