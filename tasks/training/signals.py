"""Ctrl-C and SIGTERM: a first signal stops training at a step boundary, saved; a second stops at once.

The first SIGINT (Ctrl-C) or SIGTERM (what `kill`, a cluster's scheduler or a container's stop sends)
during training is a request: the loop finishes the step or the evaluation it is in, saves
checkpoints/last.pt, and stops; the job prints one line with the command that continues the run and exits
130 (SIGINT) or 143 (SIGTERM), what a shell reports for a process a signal ended. A second signal stops at
once. Outside training (reading data, loading the model) nothing is lost by stopping, so the first signal
stops at once. Never a traceback: `job.user_errors` installs the handler for the job's lifetime and prints
the line; `claim_run` (run_folder.py) says what the folder holds then. Signals are delivered to a process,
so that state is the process's: whether the loop is running (`signals_deferred`) and which signal asked it
to stop.

Read next: plot.py (the run's picture).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import sys
import threading
from typing import Iterator


SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(KeyboardInterrupt):
    """The job was stopped by a signal. `where`: the step at which the loop saved the run (empty when the
    signal stopped the job at once); `message`: the line for the user, completed by claim_run, which knows
    what the run folder holds."""

    def __init__(self, signum: int, where: str = "") -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum, self.where, self.message = signum, where, ""

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_status(self) -> int:
        return 128 + self.signum  # 130 for SIGINT, 143 for SIGTERM, as a shell reports them


class _Requests:
    """The process's signal state: whether the loop defers a first signal, and the one it deferred."""

    deferring = False
    pending: int | None = None


_STATE = _Requests()


def _on_signal(signum: int, frame) -> None:
    if _STATE.deferring and _STATE.pending is None:
        _STATE.pending = signum
        name = signal.Signals(signum).name
        if os.environ.get("RANK", "0") != "0":  # under torchrun every process gets it; rank 0 says so
            return
        # (a handler can interrupt a write to stderr, which then refuses a second one: the note is a courtesy)
        with contextlib.suppress(RuntimeError, OSError, ValueError):
            print(f"\n{name} received: the run stops after this step (or this evaluation) and saves itself; "
                  f"another {name} stops it at once", file=sys.stderr, flush=True)
        return
    raise Interrupted(signum)


@contextlib.contextmanager
def signals_stop_the_job() -> Iterator[None]:
    """While inside: SIGINT and SIGTERM raise Interrupted (or, in the loop, ask it to stop). Python runs
    signal handlers in the main thread only, so elsewhere this does nothing; a signal the shell told the
    process to ignore (a background job's SIGINT) stays ignored."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.getsignal(s) for s in SIGNALS}
    for s in SIGNALS:
        if previous[s] is not signal.SIG_IGN:
            signal.signal(s, _on_signal)
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler if handler is not None else signal.SIG_DFL)


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """The training loop: a first signal only asks it to stop (`stop_requested`), where it can save the
    run."""
    outer = _STATE.deferring
    _STATE.deferring, _STATE.pending = True, None
    try:
        yield
        late = _STATE.pending  # asked after the loop last looked: it stops now, not never
    finally:
        _STATE.deferring, _STATE.pending = outer, None
    if late is not None:
        raise Interrupted(late)


def stop_requested() -> int | None:
    """The signal that asked the loop to stop, or None."""
    return _STATE.pending


def resume_command() -> str | None:
    """The command line that started this process with --resume added, when the process is a job started
    from a shell (python -m tasks.<job> or pretrain.run); None when a job's `main` was called by other code
    (a test, experiments.study, a notebook), whose command line is not the job's, or by torchrun (whose
    own options come before the job's)."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    job = spec is not None and spec.name.startswith(("tasks.", "pretrain."))
    if not job or "TORCHELASTIC_RUN_ID" in os.environ:
        return None
    argv = list(getattr(sys, "orig_argv", sys.argv))
    return shlex.join(argv if "--resume" in argv else [*argv, "--resume"])
