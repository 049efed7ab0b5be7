"""What a job read: the size and sha256 of every data file and of the model folder's files, so that a run
folder knows its inputs and a resumed run can tell when one changed.

A run resumed on other data is not the run it continues (a shrunk training file leaves the saved position
past the epoch's end; a replaced dev file makes the best epoch a comparison across two dev sets). So every
reader records the bytes it decodes (`record_input`, through examples.py's `decode_data_file`;
`record_file` for archives), in reading order; the run folder saves the list in inputs.json, and
`--resume` compares file by file in that order (so a moved data folder still resumes) and refuses naming
the first that differs. Files that may change between a run and its resume (the test files, --predict's
inputs) are read under `not_recorded()`. `start_job` empties the list (job.py's `user_errors`).

Read next: course.py (the course's readers, which record through decode_data_file).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path
from typing import Iterator

# The files of a model folder that decide what a run starts from (those present are fingerprinted).
MODEL_FILES = ("config.json", "model.safetensors", "pytorch_model.bin", "vocab.txt", "tokenizer.json",
               "tokenizer_config.json")

_recorded: list[dict] = []
_seen: set[str] = set()
_paused = 0


def fingerprint(path: str | os.PathLike, data: bytes | None = None) -> dict:
    """{"path", "bytes", "sha256"} of a file (its `data` when the caller has read it already)."""
    digest = hashlib.sha256()
    if data is None:
        size = 0
        with open(path, "rb") as file:
            for block in iter(lambda: file.read(1 << 20), b""):
                digest.update(block)
                size += len(block)
    else:
        digest.update(data)
        size = len(data)
    return {"path": str(Path(path).absolute()), "bytes": size, "sha256": digest.hexdigest()}


def start_job() -> None:
    """Forget what an earlier job in this process read."""
    _recorded.clear()
    _seen.clear()


def record_input(path: str | os.PathLike, data: bytes) -> None:
    """A data file the job read (once: a second read of the same file is not a new input)."""
    key = str(Path(path).resolve())
    if _paused or key in _seen:
        return
    _seen.add(key)
    _recorded.append(fingerprint(path, data))


def record_file(path: str | os.PathLike) -> None:
    """A data file read by other means than decode_data_file (a tar archive)."""
    key = str(Path(path).resolve())
    if _paused or key in _seen or not Path(path).is_file():
        return
    _seen.add(key)
    _recorded.append(fingerprint(path))  # read in blocks: an archive need not fit in memory


@contextlib.contextmanager
def not_recorded() -> Iterator[None]:
    """Reads inside do not count as the run's inputs (a test file, a --predict file)."""
    global _paused
    _paused += 1
    try:
        yield
    finally:
        _paused -= 1


def recorded() -> list[dict]:
    """The data files read so far, in order."""
    return list(_recorded)


def model_fingerprint(model_dir: str | os.PathLike) -> list[dict]:
    """The fingerprints of the model folder's files that decide what the run starts from."""
    folder = Path(model_dir)
    return [fingerprint(folder / name) for name in MODEL_FILES if (folder / name).is_file()]


def first_change(saved: list[dict], now: list[dict], what: str, by_name: bool = False) -> str | None:
    """How `now` differs from `saved` (the same kind of list, in reading order; `by_name`: paired by file
    name, as a model folder's files are), naming the first file that differs; None when every file has the
    same size and sha256. `what`: "data file", "model file"."""
    if by_name:
        names = [Path(e["path"]).name for e in now]
        saved = sorted(saved, key=lambda e: names.index(Path(e["path"]).name)
                       if Path(e["path"]).name in names else len(names))
    for before, after in zip(saved, now):
        if (before["bytes"], before["sha256"]) != (after["bytes"], after["sha256"]):
            moved = "" if before["path"] == after["path"] else f" (read from {before['path']} then)"
            return (f"the {what} {after['path']} has changed since the run started{moved}: "
                    f"{before['bytes']} bytes then, {after['bytes']} now (sha256 {before['sha256'][:12]}... "
                    f"then, {after['sha256'][:12]}... now)")
    if len(saved) != len(now):
        extra = now[len(saved):] or saved[len(now):]
        said = "reads" if len(now) > len(saved) else "no longer reads"
        return f"this command {said} the {what}(s) {', '.join(e['path'] for e in extra)}"
    return None
