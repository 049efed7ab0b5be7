"""Reading a file a model folder holds, with every way it can be wrong named: the one place for file faults.

A folder that came from elsewhere may hold a file that is missing, a folder (or a named pipe, a device, a
socket) where the file should be, a file this user may not read, an empty file, bytes that are not UTF-8,
text that is not JSON, or JSON of another shape (an array where an object belongs). Each is an error naming
the file and saying what it expected, raised by the error class of the file's reader (ConfigError for
config.json, CheckpointError for the weights, FileContentError for the rest), so that a job's one-line error
handling (tasks/training/job.py) shows it as one line. In particular a file that cannot be read for its
permissions is never called corrupt: downloading it again would not help.

Read next: schema.py (what the fields of a JSON file must be).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from minbert.loading.errors import MinbertError, MissingFileError


class FileContentError(MinbertError, ValueError):
    """A file that exists but cannot be read as what it should hold; the message names the file."""


def check_file(path: str | os.PathLike, error: type[Exception] = FileContentError) -> Path:
    """The path of a regular file this process may read; FileNotFoundError if it is absent, `error` if it
    is a folder, anything else that is not a regular file, or unreadable."""
    path = Path(path)
    try:
        mode = os.stat(path).st_mode  # before open: opening a named pipe would wait for a writer for ever
    except FileNotFoundError:
        raise MissingFileError(f"no such file: {path}") from None
    except OSError as failure:  # a name too long, a symlink loop, a parent that is a file
        raise error(f"{path}: cannot read it: {failure.strerror or failure}") from None
    if stat.S_ISDIR(mode):
        raise error(f"{path} is a folder, not a file")
    if not stat.S_ISREG(mode):
        raise error(f"{path} is not a regular file (a named pipe, a device or a socket); put the file itself "
                    "there")
    try:
        with open(path, "rb"):
            pass
    except PermissionError:
        raise error(f"{path}: cannot read it: permission denied (the file is there; check its permissions "
                    "or owner)") from None
    except OSError as failure:
        raise error(f"{path}: cannot read it: {failure.strerror or failure}") from None
    return path


def read_text(path: str | os.PathLike, error: type[Exception] = FileContentError, *,
              allow_empty: bool = False) -> str:
    """A UTF-8 text file's text; `error` names the file and, for bytes that are not UTF-8, the line."""
    path = check_file(path, error)
    data = path.read_bytes()
    if not data and not allow_empty:
        raise error(f"{path} is empty")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as failure:
        line = data[:failure.start].count(b"\n") + 1
        raise error(f"{path}:{line}: not UTF-8 (byte {data[failure.start]:#04x} at byte offset "
                    f"{failure.start}); save it as UTF-8") from None


def read_json(path: str | os.PathLike, error: type[Exception] = FileContentError, kind: type = dict):
    """A JSON file holding an object (`kind` dict) or an array (list); `error` names the file and what is
    wrong. (schema.py checks the fields.)"""
    path = Path(path)
    text = read_text(path, error)
    try:
        values = json.loads(text)
    except json.JSONDecodeError as failure:
        raise error(f"{path} is not valid JSON (line {failure.lineno}, column {failure.colno}: "
                    f"{failure.msg})") from None
    if not isinstance(values, kind):
        expected = "a JSON object ({...})" if kind is dict else "a JSON array ([...])"
        raise error(f"{path}: expected {expected}, got {json.dumps(values)[:40]}")
    return values


def read_json_object(path: str | os.PathLike, error: type[Exception] = FileContentError) -> dict:
    """A JSON file holding an object (a dict)."""
    return read_json(path, error, dict)


def check_output_dir(directory: str | os.PathLike) -> Path:
    """A folder a save may write into (it may not exist yet): refused, naming it, when it or a parent is a
    file, before anything is written; a TypeError for anything but a path."""
    if not isinstance(directory, (str, os.PathLike)):
        raise TypeError(f"the directory to save into must be a path (str or os.PathLike), got "
                        f"{type(directory).__name__} {directory!r}"[:200])
    directory = Path(directory)
    for folder in (directory, *directory.parents):
        if folder.exists():
            if not folder.is_dir():
                what = "is a file" if folder == directory else f"lies under {folder}, which is a file"
                raise NotADirectoryError(f"cannot save into {directory}: it {what}, not a folder")
            break
    return directory
