"""Saving whole or not at all: every save is written beside its place, flushed to disk, then renamed into it.

`atomic_directory` is the one way a folder is saved (a model, a sentence encoder, an adapter, a tokenizer, a
run's best/ and checkpoints/): written into a sibling `.<name>.<random>.tmp`, fsynced, renamed into place,
so a crash, a full disk or a refused argument half-way leaves the old folder exactly as it was, never new
weights beside old settings. A lone file (run.json, metrics.jsonl, predictions) goes through `atomic_write`.

A save into a folder holding other files keeps them, as `transformers`' save_pretrained does: each old file
the save did not rewrite, and not among what it `replaces`, is carried over as a hard link (a copy where the
file system has none). A run's own folders (best/, checkpoints/) keep nothing of their old selves.

Folders a job must trust later (best/, checkpoints/) record each file's sha256 in `checksums.sha256`
(sha256sum's format); `verify_folder` and `read_verified` check them before --predict or --resume, and a
file whose bytes differ is a DamagedFileError naming it. A folder saved without checksums is read unchecked.
A full disk is an OSError naming the file meant to be written, not the temporary one (`full_disk_error`).

Read next: ../fast/ (the fast paths).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import glob
import hashlib
import os
import re
import secrets
import shutil
from pathlib import Path
from typing import BinaryIO, Callable, Iterable, Iterator, Mapping, TypeVar

from minbert.loading.errors import FileAccessError, MinbertError
from minbert.loading.files import check_file, inside

try:
    import fcntl
except ImportError:  # Windows: no advisory locks; a save still swaps in one step or two renames
    fcntl = None


# The errors of a write that found no room: the disk is full, the user's quota is, or the file would exceed
# the size limit (a file system's, or the process's RLIMIT_FSIZE).
FULL_DISK_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
CHECKSUMS = "checksums.sha256"


class DamagedFileError(MinbertError, ValueError):
    """A file whose bytes differ from the sha256 recorded when it was saved; the message names it."""


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


def _reraise_named(error: BaseException, written: Path, meant: Path) -> None:
    """Raise `error`; a write that found no room as an OSError naming the file's place in `meant` instead of
    in the temporary `written`."""
    where = getattr(error, "filename", None)
    place = meant
    if isinstance(where, (str, os.PathLike)) and Path(where).is_relative_to(written):
        place = meant / Path(where).relative_to(written)
    full = full_disk_error(error, place)
    if full is None:
        raise error
    raise full from error


def write_file(path: str | os.PathLike, write: Callable[[Path], None]) -> Path:
    """`write(path)`, its folder made first; a write that found no room is an OSError naming `path`,
    whichever library wrote it. For files inside a folder that `atomic_directory` is writing."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        write(path)
    except BaseException as error:
        _reraise_named(error, path, path)
    return path


def write_text(path: str | os.PathLike, text: str) -> Path:
    """`text` (UTF-8) into `path`, inside a folder that `atomic_directory` is writing."""
    return write_file(path, lambda p: p.write_text(text, encoding="utf-8"))


class _Hashing:
    """A binary file that hashes what is written through it (torch.save writes its zip in order)."""

    def __init__(self, file: BinaryIO) -> None:
        self.file, self.sha256 = file, hashlib.sha256()

    def write(self, data) -> int:
        self.sha256.update(data)
        return self.file.write(data)

    def flush(self) -> None:
        self.file.flush()


def write_hashed(path: str | os.PathLike, write: Callable[[BinaryIO], None]) -> str:
    """`write(file)` into `path` through a file object that hashes the bytes on their way: returns their
    sha256 without reading the file back. Errors as `write_file`'s."""
    def through(target: Path) -> None:
        with open(target, "wb") as file:
            write(hashing := _Hashing(file))
            digests.append(hashing.sha256.hexdigest())
    digests: list[str] = []
    write_file(path, through)
    return digests[0]


def _sibling(path: Path) -> Path:
    return path.parent / f".{path.name}.{secrets.token_hex(4)}.tmp"


def _fsync(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY)  # a folder too: its fsync makes the names in it durable
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def atomic_write(path: str | os.PathLike, write: Callable[[Path], None]) -> Path:
    """A file that stands alone: `write(tmp)` beside `path`, flushed, renamed into place; on any error the
    temporary file goes and the old file stays."""
    path = Path(path)
    if path.exists() and not path.is_file() and not path.is_dir():
        # a device, pipe or socket: the rename would put a regular file in its place
        raise FileAccessError(errno.EINVAL, "not a regular file (a device, a pipe or a socket); a save "
                              "writes a file", str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _sibling(path)
    try:
        write(tmp)
        _fsync(tmp)
        os.replace(tmp, path)
    except BaseException as error:
        with contextlib.suppress(OSError):
            tmp.unlink()
        _reraise_named(error, tmp, path)
    _fsync(path.parent)
    return path


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Write `text` (UTF-8) to `path` atomically."""
    return atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


@contextlib.contextmanager
def atomic_directory(path: str | os.PathLike, *, keep_others: bool = True,
                     replaces: Iterable[str] = ()) -> Iterator[Path]:
    """Yield an empty folder beside `path` to fill; on success it takes `path`'s place, whole.

    keep_others: carry over the old folder's files not written again (nor named in `replaces`); False for a
    folder that is all ours. The folders are exchanged in one step (renameat2 RENAME_EXCHANGE), so no reader
    finds `path` missing; where the file system cannot, the old one goes aside to `.<name>.old` first, and a
    crash between the two renames leaves it complete for `readable_directory` and the next write to put
    back. The swap holds the parent's lock exclusive, which our readers hold shared (`settled`), so none
    reads two saves at once. On any error `path` is untouched. One writer at a time (the jobs lock their run
    folder); a writer also clears what a killed writer left.
    """
    path = Path(os.path.abspath(path))  # ".." and "." resolved: the sibling must lie beside the folder
    path = path.resolve() if path.is_symlink() else path  # a link to a folder: the save goes where it points
    with contextlib.suppress(FileNotFoundError):
        os.stat(path)  # a symlink loop on the way, a name too long: refused naming `path`, nothing made
    if path.exists() and not path.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, "cannot save a folder over a file", str(path))
    if any(path.is_relative_to(folder) for folder in _BEING_WRITTEN):  # the tokenizer's files in a model's
        path.mkdir(parents=True, exist_ok=True)
        yield path
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    old = path.parent / f".{path.name}.old"
    if _left_aside(old) and not path.exists():  # a swap that a crash interrupted: finish it backwards
        os.replace(old, path)
    for stale in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):  # a killed writer's unfinished folder
        shutil.rmtree(stale, ignore_errors=True)
    new = _sibling(path)
    try:
        new.mkdir()
    except OSError as error:  # named as the folder meant; one we may write in, in one we may not, says why
        why = f" (a save is written beside it in {path.parent}, then renamed in)" if path.exists() else ""
        raise type(error)(error.errno, error.strerror + why, str(path)) from None
    _BEING_WRITTEN.add(new)
    try:
        if path.is_dir():
            shutil.copymode(path, new)  # the folder's permissions stay the user's
        yield new
        _BEING_WRITTEN.discard(new)
        if not path.exists() and not any(new.iterdir()):  # nothing saved where nothing was: nothing made
            new.rmdir()
            return
        if keep_others and path.is_dir():
            _carry_over(path, new, set(replaces))
        _fsync_tree(new)
        if old.exists():  # a swap that completed except for its clean-up
            shutil.rmtree(old)
        inside = Path.cwd().is_relative_to(path)  # a save into the working folder (or one holding it)
        with _parent_locked(path, getattr(fcntl, "LOCK_EX", 0)):  # while no reader reads it (`settled`)
            gone = new if path.exists() and _exchange(new, path) else old  # where the old folder is now
            if gone == old:
                if path.exists():
                    os.replace(path, old)
                os.replace(new, path)
        _fsync(path.parent)
        if inside:  # the old folder is deleted below: the process works on in the new one
            os.chdir(path / Path.cwd().relative_to(gone))
    except BaseException as error:
        _BEING_WRITTEN.discard(new)
        shutil.rmtree(new, ignore_errors=True)
        _reraise_named(error, new, path)
    shutil.rmtree(gone, ignore_errors=True)


_RENAME_EXCHANGE, _AT_FDCWD = 2, -100  # linux/fs.h, linux/fcntl.h


@functools.cache
def _renameat2() -> Callable | None:
    """libc's renameat2 (Linux, glibc 2.28+), or None where there is none (macOS, Windows, an old libc)."""
    try:
        return ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return None


def _exchange(a: Path, b: Path) -> bool:
    """Swap the folders `a` and `b` in one step; False, with nothing done, where the system or the file
    system cannot (ENOSYS: an old kernel; EINVAL, ENOTSUP: a file system without RENAME_EXCHANGE)."""
    renameat2 = _renameat2()
    if renameat2 is None:
        return False
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    number = ctypes.get_errno()
    if number in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
        return False
    raise OSError(number, os.strerror(number), str(b))


def _left_aside(old: Path) -> bool:
    """Whether `old` is a folder a two-rename swap set aside (a link by that name is not ours)."""
    return old.is_dir() and not old.is_symlink()


@contextlib.contextmanager
def _parent_locked(path: str | os.PathLike | None, how: int) -> Iterator[None]:
    """flock on the folder that holds `path`: shared while a reader reads `path`, exclusive while a save swaps
    it in. Where there is no such lock (Windows, a parent this user may not open), nothing is held."""
    try:
        descriptor = os.open(Path(os.path.abspath(Path(path).expanduser())).parent, os.O_RDONLY)
    except (OSError, TypeError, ValueError):  # no path (None: the embedded model), or no such parent
        descriptor = None
    if descriptor is None:  # (outside the except: the caller's errors must not chain to this one)
        yield
        return
    try:
        with contextlib.suppress(OSError, AttributeError):
            fcntl.flock(descriptor, how)
        yield
    finally:
        os.close(descriptor)  # and with it the lock


Read = TypeVar("Read")


def settled(folder: str | os.PathLike | None, read: Callable[..., Read], *args: object) -> Read:
    """`read(*args)` of the folder `folder` names, while no save swaps it: its files all from one save, never
    a config.json of one beside the weights of the next (a save holds the same lock, exclusively, for the
    instant of its swap)."""
    with _parent_locked(folder, getattr(fcntl, "LOCK_SH", 0)):
        return read(*args)


# The temporary folders being filled now: a save into one, or into a folder inside one, is part of that save
# (a model's save writes its tokenizer's files; a run's best/ holds a merged model), so it writes in place.
_BEING_WRITTEN: set[Path] = set()


def _carry_over(source: Path, new: Path, replaces: set[str]) -> None:
    """Every file, link and folder of `source` that `new` lacks, except under the names in `replaces`."""
    for folder, folders, files in os.walk(source):
        here = Path(folder).relative_to(source)
        for name in folders + files:
            item, target = here / name, new / here / name
            if (item.parts[0] in replaces or target.exists() or target.is_symlink()
                    or not target.parent.is_dir()):
                continue  # written again, replaced, or under a name the new save holds as a file
            if (source / item).is_symlink():
                os.symlink(os.readlink(source / item), target)
            elif (source / item).is_dir():
                target.mkdir()
            else:
                link(source / item, target)


def link(source: Path, target: Path) -> None:
    """`target` as a second name of `source`'s bytes (a copy on a file system without hard links)."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def _fsync_tree(folder: Path) -> None:
    """Flush every file under `folder`, then each folder, deepest first, so the renames publish data."""
    for here, _, files in os.walk(folder, topdown=False):
        for name in files:
            if not os.path.islink(os.path.join(here, name)):
                _fsync(Path(here, name))
        _fsync(Path(here))


def readable_directory(path: str | os.PathLike) -> Path:
    """`path`, or the complete old folder an interrupted `atomic_directory` swap left beside it."""
    path = Path(path)
    old = path.parent / f".{path.name}.old"
    return old if _left_aside(old) and not path.exists() else path


# ----- checksums: a saved folder proves it is whole ---------------------------------------------------


def sha256_of(path: str | os.PathLike) -> str:
    with open(path, "rb") as file:
        return hashlib.file_digest(file, "sha256").hexdigest()


def record_checksums(folder: str | os.PathLike, sums: Mapping[str, str] | None = None) -> None:
    """checksums.sha256 in `folder`, being written: `sums` (file name -> sha256), or, None, of every file in
    it, by its path relative to the folder."""
    folder = Path(folder)
    if sums is None:
        files = sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink())
        sums = {p.relative_to(folder).as_posix(): sha256_of(p) for p in files if p.name != CHECKSUMS}
    write_text(folder / CHECKSUMS, "".join(f"{digest}  {name}\n" for name, digest in sums.items()))


def read_checksums(folder: str | os.PathLike) -> dict[str, str]:
    """`folder`'s checksums.sha256 (file name -> sha256); {} for a folder saved before they were recorded."""
    path = Path(folder) / CHECKSUMS
    if not path.is_file():
        return {}
    sums = {}
    for number, line in enumerate(path.read_bytes().decode("utf-8", "replace").splitlines(), start=1):
        match = re.fullmatch(r"([0-9a-f]{64}) [ *](.+)", line)
        name = match and Path(match.group(2))
        if match is None or name.is_absolute() or ".." in name.parts:  # a name outside the folder: not ours
            raise DamagedFileError(f"{path}:{number} is damaged: expected '<sha256>  <file name in the "
                                   f"folder>', got {line[:80]!r}")
        sums[match.group(2)] = match.group(1)
    return sums


def _check(path: Path, digest: str, recorded: str) -> None:
    if digest != recorded:
        raise DamagedFileError(f"{path} is damaged: its sha256 differs from the one recorded when it was "
                               "saved")


def verify_folder(folder: str | os.PathLike) -> None:
    """Every file `folder`'s checksums.sha256 lists, hashed and compared (DamagedFileError names the first
    that differs or is gone)."""
    folder = Path(folder)
    for name, recorded in read_checksums(folder).items():
        file = inside(folder, name, str(folder / CHECKSUMS), DamagedFileError)  # no link out of the folder
        if not file.is_file():
            raise DamagedFileError(f"{file} is missing: {folder / CHECKSUMS} records it as saved")
        _check(file, sha256_of(file), recorded)


def read_verified(path: str | os.PathLike) -> bytes:
    """`path`'s bytes, read once and compared with the sha256 its folder recorded (none recorded: as read)."""
    path = check_file(path)  # a folder or a pipe in the file's place: named, never opened
    data = path.read_bytes()
    recorded = read_checksums(path.parent).get(path.name)
    if recorded is not None:
        _check(path, hashlib.sha256(data).hexdigest(), recorded)
    return data
