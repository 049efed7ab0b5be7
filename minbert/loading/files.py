"""Reading a file a model folder holds, with every way it can be wrong named: the one place for file faults.

A folder that came from elsewhere may hold a file that is missing, a folder where the file should be, a
file this user may not read, an empty file, bytes that are not UTF-8, text that is not JSON, or JSON that
is not an object. Each is an error naming the file and saying what it expected, raised by the error class
of the file's reader (ConfigError for config.json, CheckpointError for the weights, FileContentError for
the rest), so that a job's one-line error handling (tasks/training/job.py) shows it as one line. In
particular a file that cannot be read for its permissions is never called corrupt: downloading it again
would not help.

Read next: atomic.py (the other direction: writing a file whole or not at all).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from minbert.loading.errors import MinbertError, MissingFileError


class FileContentError(MinbertError, ValueError):
    """A file that exists but cannot be read as what it should hold; the message names the file."""


def check_file(path: str | os.PathLike, error: type[Exception] = FileContentError) -> Path:
    """The path of a regular file this process may read; FileNotFoundError if it is absent, `error` if it
    is a folder or unreadable."""
    path = Path(path)
    if path.is_dir():
        raise error(f"{path} is a folder, not a file")
    if not path.exists():
        raise MissingFileError(f"no such file: {path}")
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


def read_json_object(path: str | os.PathLike, error: type[Exception] = FileContentError) -> dict:
    """A JSON file holding an object (a dict); `error` names the file and what is wrong."""
    path = Path(path)
    text = read_text(path, error)
    try:
        values = json.loads(text)
    except json.JSONDecodeError as failure:
        raise error(f"{path} is not valid JSON (line {failure.lineno}, column {failure.colno}: "
                    f"{failure.msg})") from None
    if not isinstance(values, dict):
        raise error(f"{path}: expected a JSON object ({{...}}), got a JSON {type(values).__name__}")
    return values


def check_output_dir(directory: str | os.PathLike) -> Path:
    """A folder a save may write into (it may not exist yet): refused, naming it, when it or a parent is a
    file, before anything is written."""
    directory = Path(directory)
    for folder in (directory, *directory.parents):
        if folder.exists():
            if not folder.is_dir():
                what = "is a file" if folder == directory else f"lies under {folder}, which is a file"
                raise NotADirectoryError(f"cannot save into {directory}: it {what}, not a folder")
            break
    return directory
