"""Fine-tuning jobs on one BertModel, each run as `python -m tasks.<job>`.

The jobs (multitask.py, the main job; sentiment.py, classify.py, hierarchical.py, tag.py) sit at the top of
this package; what they share sits in four subpackages below them: data/ (readers, examples, batches),
models/ (task heads and task-specific models), training/ (the one loop and its machinery) and evaluation/
(entity-level scoring). docs/architecture.md draws them.

Imports point down: jobs use the subpackages; models/ and training/ use data/ and evaluation/ where they
need to; nothing here imports pre-training (pretrain/ builds on training/, not the other way round).

Read next: multitask.py (the main job), then training/loop.py.
"""

import signal
import sys


def _interrupted_outside_the_run(number: int, frame: object) -> None:
    print(f"interrupted by {signal.Signals(number).name} outside the run (while the job imports torch, or "
          "after it ended): nothing was being written", file=sys.stderr)
    raise SystemExit(128 + number)


def stop_in_one_line_outside_the_run() -> None:
    """Under `python -m <package>.<job>` (runpy says "-m" in argv[0] while it imports the packages): a Ctrl-C
    while the job still imports torch ends it in one line, exit 130, not a traceback of the import machinery.
    The run's own handling (training/process.py) takes over once the run begins. A SIGINT that the parent
    ignores (a background job, nohup) stays ignored."""
    if sys.argv[:1] == ["-m"] and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _interrupted_outside_the_run)


stop_in_one_line_outside_the_run()
