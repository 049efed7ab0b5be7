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
    └── DeviceError       (RuntimeError) a device this PyTorch cannot use (no CUDA, no such GPU)

The jobs add DataFileError (tasks/data/examples.py) and DownloadError (tasks/data/sources.py).

`user_faults` is the library's boundary: each public call (from_pretrained, save_pretrained, the tokenizer's,
SentenceEncoder's, the LoRA adapter files') is wrapped in it, so the operating system's refusal anywhere
inside (a name too long, a symlink loop, permissions, a full disk, a folder where a file should be) reaches
the caller as a FileAccessError naming the path and the cause. A job's boundary (tasks/training/job.py's
`user_errors`) reads the same classes.

Read next: files.py (reading a file, every fault named).
"""

from __future__ import annotations

import errno
import functools
from typing import Callable, TypeVar


class MinbertError(Exception):
    """A fault of the user's files, paths, arguments or environment; the message names the path or argument
    and the cause. Every other exception a minbert call raises is a bug."""


class FileAccessError(MinbertError, OSError):
    """The operating system refused a path (permissions, a name too long, a symlink loop, a full disk, a
    folder where a file belongs, ...); `errno`, `strerror` and `filename` are the refusal's."""

    def __str__(self) -> str:
        if self.errno is not None and self.filename is not None:
            return f"{self.filename}: {self.strerror}"
        return super().__str__()


class MissingFileError(FileAccessError, FileNotFoundError):
    """A file or folder that is not there; the message names it."""


class DeviceError(MinbertError, RuntimeError):
    """A device this PyTorch cannot use (CUDA on a CPU-only build, a GPU index that does not exist)."""


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
        except (OSError, RuntimeError) as error:
            refusal = os_refusal(error)
            if refusal is None or isinstance(error, MinbertError):
                raise
            raise access_error(refusal) from error

    return call  # type: ignore[return-value]
