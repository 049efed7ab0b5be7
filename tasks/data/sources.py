"""Where the course's data files are: given, $MINBERT_DATA, ./data/cs224n, downloaded, or the demo sample.

`resolve_data_dir` tries, in order: `--data-dir`; `$MINBERT_DATA/cs224n`; `./data/cs224n`; a download of
the course files into `./data/cs224n` (commit and checksums pinned); and, when even that fails, the
synthetic demo set in `data/sample/`, announced loudly on stderr. A place the user named (--data-dir, or
MINBERT_DATA set) that does not exist, or lacks a file, is an error naming it (`data_env`), never a quiet
download or fall-back to the demo set: those are for a user who named no place.

Read next: batching.py (examples to padded batches).
"""

from __future__ import annotations

import hashlib
import os
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Mapping, TextIO

import minbert
from minbert.loading.atomic import atomic_write
from minbert.loading.errors import MinbertError
from tasks.data.examples import not_a_file

# ----------------------------------------------------------------------------------------------------
# Where the data comes from: given, environment, local, downloaded, or the synthetic sample
# ----------------------------------------------------------------------------------------------------

COURSE_REPO = "gpoesia/minbert-default-final-project"
COURSE_COMMIT = "7ac8260577fc12a86c7aaf38918056c30054ef39"  # pinned: files at a branch head can change
COURSE_BASE_URL = f"https://raw.githubusercontent.com/{COURSE_REPO}/{COURSE_COMMIT}/data/"

# Pins from ../shared/data/cs224n/SOURCE.txt: sha256 of the content where known; for the two Quora
# files whose content was never seen, the git blob id (sha1 of b"blob <size>\0" + content), which
# is what git itself records for them at the pinned commit.
COURSE_CHECKSUMS: dict[str, str] = {
    "ids-cfimdb-dev.csv": "sha256:3087f571b66860fe5d035b5a018d08202ad3fd3720e4821c04b2acf6c7ded559",
    "ids-cfimdb-test-student.csv":
        "sha256:7ae611548c9eac879e9ebb406cc9f8ae68ff12f78090e4965af5cbdfa06240f4",
    "ids-cfimdb-train.csv": "sha256:140fc513045a966109faed46a5c7a898767b96714d71bcb9c15f659129fadcea",
    "ids-sst-dev.csv": "sha256:a186ce94577635fbe10beaaddd50f16cccf6c30973221cefdf90deed2a584bfe",
    "ids-sst-test-student.csv": "sha256:bdd5a767faa0c26782117e37767ece154c30d5d04fb8727d09c71e3850a55c7b",
    "ids-sst-train.csv": "sha256:03b2b625c090f94a6afd59f114cde5282e2053aab0b101e87ed695d8a0c5b1df",
    "sts-dev.csv": "sha256:ce3cad6f16062586ac7ba462c28b010a9be10c530fd5074165860d7b7ab4e93d",
    "sts-test-student.csv": "sha256:dee455745b72e9ca3ff74e7c056bd73e34bad5b8d5641045a2c1e7e131866f47",
    "sts-train.csv": "sha256:15d12efc2d656fffb1d61ac1f08ec4227f43925fd16f420c037cbd063699c21b",
    "quora-dev.csv": "sha256:bfa3cc954a9ba300ae776a980141de65f622a3c1b97e3fd905d63245bc36d5ad",
    "quora-train.csv": "gitblob:a3b5546f6a0e65b60a328a5d294d1038f5bed1da",
    "quora-test-student.csv": "gitblob:f257ef00558555afb50819578a58205732b16354",
}

LOCAL_DATA_DIR = Path("data") / "cs224n"  # relative to the working directory, as the course does
# Beside the lesson (minbert/__init__.py): the repository's root, or a student's handout (the rest installed).
SAMPLE_DIR = Path(minbert.__file__).resolve().parents[1] / "data" / "sample"
DOWNLOAD_TIMEOUT_S = 30.0
MAX_DOWNLOAD_BYTES = 256 * 2**20  # the largest course file (quora-train.csv) is about 20 MB

Fetch = Callable[[str, float], bytes]


class DownloadError(MinbertError, OSError):
    """A course file could not be fetched, or what was fetched failed its checksum."""


def urllib_fetch(url: str, timeout: float) -> bytes:
    """GET `url` with the standard library; any network failure becomes a DownloadError."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            data = response.read(MAX_DOWNLOAD_BYTES + 1)
    except (urllib.error.URLError, OSError, ValueError) as error:  # HTTPError is a URLError
        raise DownloadError(f"{url}: {error}") from error
    if len(data) > MAX_DOWNLOAD_BYTES:
        raise DownloadError(f"{url}: larger than {MAX_DOWNLOAD_BYTES} bytes; not a course file")
    return data


def checksum_matches(data: bytes, pin: str) -> bool:
    """Whether `data` matches `pin`: "sha256:<hex>" of the content, or "gitblob:<hex>" (git's sha1)."""
    kind, _, expected = pin.partition(":")
    if kind == "sha256":
        actual = hashlib.sha256(data).hexdigest()
    elif kind == "gitblob":
        actual = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
    else:
        raise ValueError(f"checksum pin {pin!r} has an unknown kind {kind!r} (allowed: sha256, gitblob)")
    return actual == expected.lower()


def download_course_data(dest: str | os.PathLike, files: Iterable[str], *, fetch: Fetch = urllib_fetch,
                         base_url: str | None = None, checksums: Mapping[str, str] | None = None,
                         timeout: float = DOWNLOAD_TIMEOUT_S, log: TextIO | None = None) -> list[Path]:
    """Fetch the course `files` into `dest`, each checked against its pinned checksum (kept if already
    there and right). Every file is fetched and verified before any is written, each atomically, so a
    failure leaves `dest` as it was. `base_url` and `checksums` default to the module's pins, read at call
    time so tests can point them elsewhere. Raises DownloadError.
    """
    dest = Path(dest)
    base_url = COURSE_BASE_URL if base_url is None else base_url
    checksums = COURSE_CHECKSUMS if checksums is None else checksums
    log = sys.stderr if log is None else log
    fetched: dict[str, bytes] = {}
    for name in files:
        if name not in checksums:
            raise DownloadError(f"{name}: not a pinned course file (known: {', '.join(sorted(checksums))})")
        target = dest / name
        if target.is_file() and checksum_matches(target.read_bytes(), checksums[name]):
            continue
        url = base_url.rstrip("/") + "/" + name
        print(f"downloading {url}", file=log)
        data = fetch(url, timeout)
        if not checksum_matches(data, checksums[name]):
            raise DownloadError(f"{url}: checksum mismatch ({len(data)} bytes; expected {checksums[name]}); "
                                "not written")
        fetched[name] = data
    for name, data in fetched.items():
        atomic_write(dest / name, lambda tmp: tmp.write_bytes(data))
    return [dest / name for name in files]


@dataclass(frozen=True)
class DataSource:
    """Where a job's data files are, how they were found, and a sentence saying so for the log.

    kind: "given" (--data-dir), "env" ($MINBERT_DATA/cs224n), "local" (./data/cs224n),
    "downloaded" (fetched just now into ./data/cs224n) or "sample" (the synthetic demo set).
    """

    kind: str
    path: Path
    description: str

    @property
    def is_sample(self) -> bool:
        return self.kind == "sample"


_SAMPLE_BANNER = """\
!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!
!!! WARNING: USING THE SYNTHETIC DEMO DATA in {path}
!!! The course data was not found ({looked}) and could not be downloaded:
!!!   {reason}
!!! The demo set is a few hundred template sentences we wrote ourselves: the job runs end to end,
!!! but its metrics mean nothing. Pass --data-dir, set MINBERT_DATA, or put the course files in
!!! ./data/cs224n for real results.
!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"""


def data_env(env: Mapping[str, str] | None = None) -> Path | None:
    """$MINBERT_DATA, the shared datasets folder; None when it is not set. Set, it must be a folder: a
    mistyped path, or an empty one (MINBERT_DATA= in a script whose variable went unset), is a
    FileNotFoundError naming the variable, not a fall-back to other data."""
    value = (os.environ if env is None else env).get("MINBERT_DATA")
    if value is None:
        return None
    if not value.strip():
        raise FileNotFoundError(f"MINBERT_DATA is set but empty ({value!r}); point it at the shared datasets "
                                "folder, or unset it (unset MINBERT_DATA) to use the other places")
    if not Path(value).is_dir():
        what = "is not a folder" if Path(value).exists() else "does not exist"
        raise FileNotFoundError(f"MINBERT_DATA is set to {value}, which {what}; point it at the shared "
                                "datasets folder, or unset it")
    return Path(value)


def resolve_data_dir(data_dir: str | os.PathLike | None, required_files: Iterable[str], *,
                     env: Mapping[str, str] | None = None,
                     local_dir: str | os.PathLike = LOCAL_DATA_DIR,
                     sample_dir: str | os.PathLike = SAMPLE_DIR, download: bool = True,
                     fetch: Fetch = urllib_fetch, log: TextIO | None = None) -> DataSource:
    """Find a folder holding every file in `required_files`, trying the places in the module docstring.

    An explicit `data_dir` is authoritative: if it (or its `cs224n/` subfolder) lacks a file, that is
    a FileNotFoundError, not a quiet fall-back. The other places are tried in turn; the sample is
    the last resort and is announced with a banner on `log` (stderr by default).
    """
    required = list(required_files)
    env = os.environ if env is None else env
    log = sys.stderr if log is None else log

    def missing(folder: Path) -> list[str]:
        return [name for name in required if not (folder / name).is_file()]

    if data_dir is not None:
        given = Path(data_dir)
        for folder in (given, given / "cs224n"):  # accept the folder above cs224n/ too
            if not missing(folder):
                return DataSource("given", folder, f"course data from --data-dir {folder}")
        if given.exists() and not given.is_dir():
            raise FileNotFoundError(f"--data-dir {given} is a file, not a folder")
        raise FileNotFoundError(_incomplete(f"--data-dir {given}", [given, given / "cs224n"], required))

    looked = []
    shared = data_env(env)  # set to no folder: an error
    if shared is not None:  # set, it is as explicit as --data-dir: no download, no demo data instead
        folder = shared / "cs224n"
        if not missing(folder):
            return DataSource("env", folder, f"course data from $MINBERT_DATA/cs224n ({folder})")
        raise FileNotFoundError(_incomplete(f"MINBERT_DATA={shared}", [folder], required)
                                + "; complete it, or unset MINBERT_DATA to use ./data/cs224n, a download or "
                                "the demo data")
    local = Path(local_dir)
    if not missing(local):
        return DataSource("local", local, f"course data from {local}")
    looked.append(str(local))

    reason = "downloading is switched off"
    if download:
        try:
            download_course_data(local, required, fetch=fetch, log=log)
            return DataSource("downloaded", local, f"course data downloaded from {COURSE_REPO} "
                              f"(commit {COURSE_COMMIT[:10]}, checksums verified) into {local}")
        except OSError as error:  # a DownloadError, or a folder we cannot write to
            reason = f"{type(error).__name__}: {error}"

    sample = Path(sample_dir)
    if missing(sample):
        raise FileNotFoundError(f"no data: {', '.join(missing(sample))} not in {', '.join(looked)}, "
                                f"nor in the sample set {sample}; the download failed ({reason})")
    print(_SAMPLE_BANNER.format(path=sample, looked="; ".join(looked), reason=reason), file=log)
    return DataSource("sample", sample, f"SYNTHETIC DEMO DATA from {sample} (metrics mean nothing; "
                      f"the course data was not found and the download failed: {reason})")


def _incomplete(given: str, folders: list[Path], required: list[str]) -> str:
    """Why a folder the user named does not serve: a data file in it is a folder, or some are missing."""
    for folder in folders:
        wrong = [name for name in required if (folder / name).is_dir()]
        if wrong:
            return f"{given}: {', '.join(wrong)} should be a file, but is a folder"
    odd = [name for name in required if (folders[0] / name).is_symlink() or (folders[0] / name).exists()]
    odd = [name for name in odd if not (folders[0] / name).is_file()]
    if odd:  # there, but not a file: saying "missing" would send the user looking for it
        return f"{given}: {not_a_file(folders[0] / odd[0])}"
    absent = [name for name in required if not (folders[0] / name).is_file()]
    return f"{given}: missing {', '.join(absent)} (looked in {' and '.join(map(str, folders))})"
