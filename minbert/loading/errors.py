"""The errors minbert raises for what a user can fix, one small hierarchy, and the library's error boundary.

`except minbert.MinbertError` catches every fault of a user's files, paths, arguments' targets or environment
that a public call meets; any other exception is a bug of ours. Each class keeps the built-in type it has
always had, so an `except ValueError` or `except OSError` written before still holds:

    MinbertError                         (Exception)
    ├── FileContentError  (ValueError)   a file that is there but does not hold what it must (files.py)
    ├── ConfigError       (ValueError)   a config.json that describes no model we build (pretrained.py)
    ├── CheckpointError   (ValueError)   weights that do not fit or cannot be read (checkpoint_keys.py)
    │   └── ChecksumError                a file whose sha256 is not the pinned one (hub.py)
    ├── DamagedFileError  (ValueError)   a saved file whose sha256 differs from the one recorded (atomic.py)
    ├── FileAccessError   (OSError)      the operating system refused a path (`errno`, `filename` kept),
    │   │                                also of the refusal's own type (PermissionError, ...)
    │   └── MissingFileError (FileNotFoundError)
    │       └── ModelNotFoundError       no checkpoint for a name (hub.py)
    ├── DeviceError       (RuntimeError) a device this PyTorch cannot use (no CUDA, no such GPU)
    └── OutOfMemory       (MemoryError)  more memory than the machine, or the process's limit, holds

`user_faults` wraps each public call, so the operating system's refusal anywhere inside reaches the caller
as a FileAccessError naming the path and the cause, and memory that ran out as an OutOfMemory naming the
limit. A job's boundary (tasks/training/job.py's `user_errors`) reads the same classes.

Read next: files.py (reading a file, every fault named).
"""

from __future__ import annotations

import errno
import functools
import os
import re
from typing import Callable, TypeVar

try:
    import resource
except ImportError:  # Windows: no process limits to name
    resource = None


class MinbertError(Exception):
    """A fault of the user's files, paths, arguments or environment; the message names the path or argument
    and the cause (cut to a readable length where it quotes a long value). Every other exception a minbert
    call raises is a bug."""

    def __str__(self) -> str:
        return shorten(super().__str__())


def shorten(text: str, limit: int = 1000) -> str:
    """`text`, or, past `limit` characters (a message quoting a 10 MB value), its start and end with what was
    left out between them said."""
    if len(text) <= limit:
        return text
    return f"{text[:limit * 2 // 3]} [... {len(text) - limit:,} characters left out ...] {text[-limit // 3:]}"


class FileAccessError(MinbertError, OSError):
    """The operating system refused a path (permissions, a name too long, a symlink loop, a full disk, a
    folder where a file belongs, ...); `errno`, `strerror` and `filename` are the refusal's."""

    def __str__(self) -> str:
        if self.errno is not None and self.filename is not None:
            return shorten(f"{self.filename}: {self.strerror}")  # a path of a megabyte: cut, as any message
        return super().__str__()


class MissingFileError(FileAccessError, FileNotFoundError):
    """A file or folder that is not there; the message names it."""


class DeviceError(MinbertError, RuntimeError):
    """A device this PyTorch cannot use (CUDA on a CPU-only build, a GPU index that does not exist)."""


class OutOfMemory(MinbertError, MemoryError):
    """An allocation the machine's memory, or the process's limit (ulimit -v), could not hold; the message
    names the limit."""


def _size(size: float) -> str:
    return f"{size / 2**30:,.1f} GiB" if size >= 2**30 else f"{size / 2**20:,.1f} MiB"


# What libraries say where they raise no MemoryError: torch's CPU allocator, the dynamic loader mapping a
# library, oneDNN creating a kernel's buffers (only near the process's limit: it says no more).
_ALLOCATION = re.compile(r"can't allocate memory: you tried to allocate (\d+) bytes|failed to map segment")
_NEAR_LIMIT = "could not create a primitive"
# A thread that could not start (Python's, or the Rust thread pool of `tokenizers`, whose panic says so).
_THREAD = re.compile(r"can't start new thread|ThreadPoolBuildError")


def machine_limit(error: BaseException) -> str | None:
    """The limit of the machine or the process that `error` ran into, in words, or None: memory (a
    MemoryError, or a library's allocation failure, `_ALLOCATION`), open files (EMFILE, ENFILE); None for a
    MinbertError, which names what it is itself (a FileAccessError: its errno is read)."""
    if isinstance(error, MinbertError) and not isinstance(error, OSError):
        return None
    cap = resource.getrlimit(resource.RLIMIT_AS)[0] if resource else -1
    capped = cap not in (-1, getattr(resource, "RLIM_INFINITY", -1))
    found = _ALLOCATION.search(str(error)) if isinstance(error, (RuntimeError, ImportError)) else None
    near = capped and _NEAR_LIMIT in str(error) and _used() > 0.8 * cap
    thread = _THREAD.search(str(error))
    if isinstance(error, MemoryError) or found or near or thread:
        size = f" ({_size(int(found.group(1)))} asked for at once)" if found and found.group(1) else ""
        held = f"the process may use {_size(cap)} (ulimit -v), " if capped else ""
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") if hasattr(os, "sysconf") else 0
        what = "a thread could not start (ulimit -u counts threads too)" if thread else f"out of memory{size}"
        return (f"{what}: {held}the machine has {_size(total)}; smaller sizes (a batch, a sequence length, a "
                "model, a LoRA rank, --threads) need less")
    if isinstance(error, OSError) and error.errno in (errno.EMFILE, errno.ENFILE):
        where = f"{error.filename}: " if error.filename else ""
        if error.errno == errno.ENFILE:
            return f"{where}{error.strerror}: the system's table of open files is full"
        files = resource.getrlimit(resource.RLIMIT_NOFILE)[0] if resource else "a limited number of"
        return (f"{where}{error.strerror}: the process may open {files} files at once (ulimit -n); raise "
                "the limit, or close other programs")
    return None


def _used() -> int:
    """The process's address space in bytes (Linux), 0 where unknown."""
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            return int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def os_refusal(error: BaseException) -> OSError | None:
    """The operating system's refusal that `error` is, or None: an OSError itself, or the OSError (ELOOP)
    under the RuntimeError("Symlink loop from ...") that Python 3.11's `Path.resolve` raises in its place."""
    if isinstance(error, OSError):
        return error
    context = error.__context__
    if type(error) is RuntimeError and isinstance(context, OSError) and context.errno == errno.ELOOP:
        return context
    return None


@functools.cache
def _access_class(builtin: type[OSError]) -> type[FileAccessError]:
    """The FileAccessError that is also `builtin` (PermissionError, IsADirectoryError, ...), named as it is, so
    that an `except` clause for the built-in type still catches the refusal."""
    if builtin is OSError:
        return FileAccessError
    if builtin is FileNotFoundError:
        return MissingFileError
    return type(builtin.__name__, (FileAccessError, builtin), {"__module__": __name__})


def access_error(refusal: OSError) -> FileAccessError:
    """`refusal` as a FileAccessError of the same built-in type (MissingFileError for a path that is not
    there), errno and path kept."""
    if isinstance(refusal, FileAccessError):
        return refusal
    kind = _access_class(type(refusal) if type(refusal).__module__ == "builtins" else OSError)
    if refusal.errno is None:  # raised with a message of its own, which already names the path
        return kind(str(refusal))
    return kind(refusal.errno, refusal.strerror, refusal.filename, None, refusal.filename2)


Call = TypeVar("Call", bound=Callable)


def user_faults(function: Call) -> Call:
    """Wrap a public call: the operating system's refusal inside it is raised as a FileAccessError (chained
    to the original); every other exception passes unchanged."""

    @functools.wraps(function)
    def call(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except (OSError, RuntimeError, MemoryError) as error:
            if not isinstance(error, OSError) and (limit := machine_limit(error)):
                raise OutOfMemory(limit) from error
            refusal = os_refusal(error)
            if refusal is None or isinstance(error, MinbertError):
                raise
            raise access_error(refusal) from error

    return call  # type: ignore[return-value]
