"""The supervisor of one graded child: nothing the child starts outlives it (the grader copies and runs it).

    python sandbox.py [--user NAME] -- COMMAND...

It makes itself a child subreaper (prctl PR_SET_CHILD_SUBREAPER), so that every process the child starts,
double-forked and setsid'd ones too, becomes its own child once its parent dies. It starts COMMAND in a
session of its own, as NAME with no supplementary groups where it runs as root (Gradescope runs the grader
as root), the file descriptors of $MINBERT_GRADING_FDS passed on; waits for it; then kills and reaps every
process left, and only then exits, as COMMAND did (its exit status, or the signal that ended it). SIGTERM
from the grader (a time limit) ends COMMAND's session first. It is copied beside the staging tree and run
by path, so that no process's argv names the grader's checkout; it imports nothing of the project.

One supervisor per child rather than the grader as the subreaper: the grader may grade several trees at
once in one process (the tests do), and a subreaper cannot tell whose orphans it adopted.
"""

import contextlib
import ctypes
import os
import pwd
import resource
import signal
import subprocess
import sys
import time

import psutil

PR_SET_CHILD_SUBREAPER = 36
NPROC = 512  # processes the child's user may hold (a fork bomb stops there); only where the user is its own
SWEEP_S = 10.0  # a tree that keeps forking under SIGKILL for this long is left (it cannot write results)


def sweep() -> None:
    """SIGKILL and reap every child until none is left (an orphan's own orphans arrive meanwhile)."""
    deadline = time.monotonic() + SWEEP_S
    while time.monotonic() < deadline:
        pids = [child.pid for child in psutil.Process().children()]  # every leftover descendant, adopted
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):  # reap those that have ended
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        if not pids:
            return
        time.sleep(0.01)


def oom_score(value: str) -> None:
    """The kernel's OOM killer takes the child first: it inherits 1000; the supervisor goes back to 0."""
    # Lowering it needs privileges the supervisor may not have.
    with contextlib.suppress(OSError), open("/proc/self/oom_score_adj", "w") as f:
        f.write(value)


def limit_processes() -> None:  # in the child, after the user change, before exec
    resource.setrlimit(resource.RLIMIT_NPROC, (NPROC, NPROC))


def main(argv: list[str]) -> int:
    user = argv[argv.index("--user") + 1] if "--user" in argv else None
    command = argv[argv.index("--") + 1:]
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        print("sandbox: prctl(PR_SET_CHILD_SUBREAPER) failed", file=sys.stderr)
        return 70
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a crash re-raised below must not dump core
    drop = dict(user=user, group=pwd.getpwnam(user).pw_gid, extra_groups=[]) if user else {}
    fds = tuple(int(fd) for fd in os.environ.get("MINBERT_GRADING_FDS", "").split(",") if fd)
    oom_score("1000")
    child = subprocess.Popen(command, start_new_session=True, pass_fds=fds, stdin=subprocess.DEVNULL,
                             preexec_fn=limit_processes if user else None, **drop)
    oom_score("0")

    def stop(signum, frame):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)

    signal.signal(signal.SIGTERM, stop)
    while True:  # reap adopted orphans as they end, until the child itself does
        try:
            pid, status = os.wait()
        except ChildProcessError:
            status = 0
            break
        if pid == child.pid:
            break
    stop(None, None)
    sweep()
    if os.WIFSIGNALED(status):  # die of the same signal, so that the grader reads the same status
        if os.WTERMSIG(status) != signal.SIGKILL:
            signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
        os.kill(os.getpid(), os.WTERMSIG(status))
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
