"""Reading a file a model folder holds, with every way it can be wrong named: the one place for file faults.

A file missing, a folder (or pipe, device, socket) in its place, unreadable, empty, not UTF-8, not JSON,
JSON nested deeper than any format we read (`MAX_JSON_DEPTH`, checked before parsing, so never a
RecursionError), or JSON of another shape: each is an error naming the file and what it expected, of the
file's reader's class (ConfigError, CheckpointError, FileContentError), so a job shows it as one line. A
file that cannot be read for its permissions is never called corrupt: downloading it again would not help.

A path that a file of a folder names (modules.json's module paths, a sharded index's file names, a
checksums.sha256 line) is read only inside that folder (`inside`): relative, without '..', and, its links
resolved, still in the folder, as sentence-transformers requires of modules.json.

Read next: schema.py (what the fields of a JSON file must be).
"""

from __future__ import annotations

import itertools
import json
import os
import re
import stat
import sys
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


# Deeper than any JSON file we read (a tokenizer.json nests 5 deep), far shallower than Python's recursion: a
# document nested 100,000 deep is refused by its depth before it is parsed, never a RecursionError later.
MAX_JSON_DEPTH = 100
_NESTING = {"[": 1, "{": 1, "]": -1, "}": -1}


def loads(text: str, where: str, error: type[Exception] = FileContentError):
    """json.loads of `text`, refused as `error` naming `where` (a file, a file and line) when it is not JSON
    or nests deeper than MAX_JSON_DEPTH."""
    if text.count("[") + text.count("{") > MAX_JSON_DEPTH:  # else it cannot be that deep: no scan
        # the brackets outside strings (escaped backslashes, then escaped quotes, taken out first)
        outside = "".join(text.replace("\\\\", "").replace('\\"', "").split('"')[::2])
        depth = max(itertools.accumulate(map(_NESTING.get, re.findall(r"[][{}]", outside))), default=0)
        if depth > MAX_JSON_DEPTH:
            raise error(f"{where}: JSON nested {depth} deep; minbert reads at most {MAX_JSON_DEPTH} levels "
                        "(no file it reads needs more)")
    try:
        values = json.loads(text)
    except json.JSONDecodeError as failure:
        raise error(f"{where} is not valid JSON (line {failure.lineno}, column {failure.colno}: "
                    f"{failure.msg})") from None
    except ValueError:  # an integer longer than Python converts from text (sys.get_int_max_str_digits)
        raise error(f"{where}: holds an integer of more than {sys.get_int_max_str_digits()} digits; no file "
                    "minbert reads needs one") from None
    if re.search(r"\\u[dD][89a-fA-F]", text):  # a "\ud800" escape: half of a pair, or one alone?
        try:
            json.dumps(values, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise error(f"{where}: holds a lone surrogate (a \\uD800-\\uDFFF escape without its other half), "
                        "which is no Unicode text") from None
    return values


def nested_deeper(value: object, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether dicts, lists and tuples nest deeper than `limit` in `value` (what torch.load gave), found
    level by level, without recursion."""
    level = [value]
    for _ in range(limit + 1):
        level = [item for held in level if isinstance(held, (dict, list, tuple))
                 for item in (held.values() if isinstance(held, dict) else held)]
        if not level:
            return False
    return True


def read_json(path: str | os.PathLike, error: type[Exception] = FileContentError, kind: type = dict):
    """A JSON file holding an object (`kind` dict) or an array (list); `error` names the file and what is
    wrong. (schema.py checks the fields.)"""
    path = Path(path)
    values = loads(read_text(path, error), str(path), error)
    if not isinstance(values, kind):
        expected = "a JSON object ({...})" if kind is dict else "a JSON array ([...])"
        raise error(f"{path}: expected {expected}, got {json.dumps(values)[:40]}")
    return values


def read_json_object(path: str | os.PathLike, error: type[Exception] = FileContentError) -> dict:
    """A JSON file holding an object (a dict)."""
    return read_json(path, error, dict)


def inside(folder: str | os.PathLike, name: str | os.PathLike, where: str,
           error: type[Exception] = FileContentError) -> Path:
    """`folder / name`, where `name` is a path that `where` (a file of the folder) names: refused as `error`
    when it is absolute, holds '..', or, its links resolved, leads out of the folder (a Hugging Face cache
    snapshot, models--org--name/snapshots/<commit>/, keeps its files as links into the repository's blobs/,
    which count as inside)."""
    folder, relative = Path(folder), Path(name)
    if relative.is_absolute() or ".." in relative.parts or "\0" in str(name):  # NUL: no path can hold one
        raise error(f"{where}: names the path {str(name)[:200]!r}; expected a relative path without '..' "
                    "components or NUL (a folder's files name only what the folder holds)")
    real = Path(os.path.realpath(folder))  # realpath: a link loop is named by the read that follows
    target = Path(os.path.realpath(folder / relative))
    cache = real.parent.name == "snapshots" and real.parent.parent.name.startswith("models--")
    if not (target.is_relative_to(real) or cache and target.is_relative_to(real.parent.parent / "blobs")):
        raise error(f"{where}: names {str(name)!r}, a link that leads out of {folder} (to {target}); a "
                    "folder's files name only what the folder holds")
    return folder / relative


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
