"""Atomic file writes: a file is either its old self or its complete new self, never half-written.

Every checkpoint, config and output file in minbert goes through here, so a crash (or a full disk)
in the middle of a save never leaves a truncated file where a good one was.

Read next: config.py.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Callable, Iterator


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside `path`; on success it replaces `path` in one rename.

    The temporary file lives in the same directory so that `os.replace` is a rename on one file
    system (atomic on POSIX and Windows). On any error the temporary file is removed and the old
    file, if any, is left untouched.
    """
    path = Path(path)
    directory = path.parent
    if not directory.exists():
        directory.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        with open(tmp, "rb+") as handle:  # data on disk before the rename makes it visible
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def atomic_write(path: str | os.PathLike, write: Callable[[Path], None]) -> Path:
    """Call `write(tmp_path)` to produce the file, then move it into place atomically."""
    with atomic_path(path) as tmp:
        write(tmp)
    return Path(path)


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Write `text` (UTF-8) to `path` atomically."""
    return atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write `data` to `path` atomically."""
    return atomic_write(path, lambda tmp: tmp.write_bytes(data))
