"""Atomic file writes: a file is either its old self or its complete new self, never half-written.

Every checkpoint, config and output file in minbert goes through here, so a crash (or a full disk)
in the middle of a save never leaves a truncated file where a good one was. A folder whose files belong
together (a run's best/: weights, config.json, vocabulary, heads) is written whole beside the old one
and swapped in with `atomic_directory`, so it never mixes new weights with an old config.

A write that fails because the disk (or the file size limit) is full raises OSError naming the file meant to
be written, not the temporary one, whichever library wrote it: torch.save and safetensors wrap the error
in their own exceptions (see `full_disk_error`).

Read next: ../fast/ (the fast paths).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Callable, Iterator


# The errors of a write that found no room: the disk is full, the user's quota is, or the file would exceed
# the size limit (a file system's, or the process's RLIMIT_FSIZE).
FULL_DISK_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def full_disk_error(error: BaseException, path: str | os.PathLike) -> OSError | None:
    """The OSError(errno, strerror, path) of a write to `path` that failed for lack of room, or None.

    Libraries wrap the operating system's error: torch.save of a file object raises RuntimeError("[enforce
    fail at inline_container.cc:...] unexpected pos ...") with the file's OSError as its context (torch.save
    of a path loses the errno: write checkpoints through a file object); safetensors raises
    SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)").
    """
    number, seen, cause = None, set(), error
    while cause is not None and id(cause) not in seen and number is None:
        seen.add(id(cause))
        if isinstance(cause, OSError) and cause.errno in FULL_DISK_ERRNOS:
            number = cause.errno
        match = re.search(r"\(os error (\d+)\)", str(cause))  # Rust's io::Error, as safetensors shows it
        if number is None and match and int(match.group(1)) in FULL_DISK_ERRNOS:
            number = int(match.group(1))
        cause = cause.__cause__ or cause.__context__
    return None if number is None else OSError(number, os.strerror(number), str(path))


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside `path`; on success it replaces `path` in one rename.

    The temporary file lives in the same directory so that `os.replace` is a rename on one file
    system (atomic on POSIX and Windows). On any error the temporary file is removed and the old
    file, if any, is left untouched; a full disk is an OSError naming `path` (`full_disk_error`).
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
    except BaseException as error:
        with contextlib.suppress(OSError):
            tmp.unlink()
        full = full_disk_error(error, path)
        if full is not None:
            raise full from error
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


@contextlib.contextmanager
def atomic_directory(path: str | os.PathLike) -> Iterator[Path]:
    """Yield an empty folder beside `path` to fill; on success it takes `path`'s place, whole.

    POSIX cannot swap two folders in one step, so the swap is two renames: the old folder aside to
    `.<name>.old`, the new one into place, then the old one deleted. A crash between the two renames
    leaves no `path` but a complete `.<name>.old`: readers find it with `readable_directory`, and the next
    write puts it back first. On any error the new folder is removed and `path` is untouched. One writer
    at a time (the jobs lock their run folder): a writer also clears what a killed writer left. A full disk
    while filling the folder is an OSError naming the file's place in `path`, not in the temporary folder.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    old = path.parent / f".{path.name}.old"
    if old.is_dir() and not path.exists():  # a swap that a crash interrupted: finish it backwards
        os.replace(old, path)
    for stale in path.parent.glob(f".{path.name}.*.tmp"):  # a killed writer's unfinished folder
        shutil.rmtree(stale, ignore_errors=True)
    new = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    try:
        yield new
        if old.exists():  # a swap that completed except for its clean-up
            shutil.rmtree(old)
        if path.exists():
            os.replace(path, old)
        os.replace(new, path)
    except BaseException as error:
        shutil.rmtree(new, ignore_errors=True)
        inside = isinstance(error, OSError) and error.filename and Path(error.filename).is_relative_to(new)
        if inside and error.errno in FULL_DISK_ERRNOS:
            meant = path / Path(error.filename).relative_to(new)
            raise OSError(error.errno, error.strerror, str(meant)) from error
        raise
    shutil.rmtree(old, ignore_errors=True)


def readable_directory(path: str | os.PathLike) -> Path:
    """`path`, or the complete old folder an interrupted `atomic_directory` swap left beside it."""
    path = Path(path)
    old = path.parent / f".{path.name}.old"
    return old if old.is_dir() and not path.exists() else path
