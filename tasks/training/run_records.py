"""The files a run folder holds, read back: one reader per format, each with its schema declared here once.

A job reads its own files back: run.json (which job wrote the folder) and config.json (the settings it
started with) before a --resume, inputs.json (what it read) before it trains again, checkpoints/last.pt
(the dict `save_training_state` wrote) to continue, metrics.jsonl to tell a finished run, result.json to
skip a finished seed, and best/heads.json and best/heads.safetensors for --predict. Each of these may
have been edited, cut short, replaced by another JSON value or copied from another job's folder; each
reader checks the path is a regular file, then the document's shape and every field's type and range
(minbert/loading/schema.py), and refuses naming the file and the field, as a FileContentError, which a
job shows as one line. The settings' schema is made from the settings classes themselves: each flag's
type and choices, so that what a flag accepts and what config.json may hold are declared once.

Read next: loop.py (the loop that writes these files).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from pathlib import Path
from typing import Any, Sequence

import torch

from minbert.loading.files import FileContentError, check_file, loads, read_text
from minbert.loading.checkpoint import CheckpointError, read_weights
from minbert.loading.schema import Field, Schema
from tasks.training.settings import flag_fields

_TEXT = Field("string")
_FINGERPRINT = Schema({"path": _TEXT, "bytes": Field("integer", "[0, inf]"), "sha256": _TEXT},
                      required=("path", "bytes", "sha256"))
# run.json: which job and model wrote the folder; the rest is the job's identity (task, dataset, ...).
RUN = Schema({"job": _TEXT, "model": _TEXT, "started": _TEXT, "finished": _TEXT}, ("job",),
             unknown="keep")
# inputs.json: the fingerprints of the data files and of the model folder's files (tasks/data/inputs.py).
INPUTS = Schema({"data": Field("array", items=_FINGERPRINT), "model": Field("array", items=_FINGERPRINT)},
                ("data", "model"))
# metrics.jsonl, one line per epoch: the loop's history (loop.py); a finished run's last line says so.
METRICS_LINE = Schema({"epoch": Field("integer", "[0, inf]"), "epoch_complete": Field("boolean")}, ("epoch",),
                      unknown="keep")
# result.json: one seed's dev metrics, of the last epoch and of the best (seeds.py's run_seeds reads it).
RESULT = Schema({"seed": Field("integer"), "final": Field("object"), "best": Field("object")},
                ("seed", "final", "best"), unknown="keep")
# checkpoints/last.pt: what save_training_state writes (checkpoints.py), TrainState's fields inside.
_COUNT = Field("integer", "[0, inf]")
TRAIN_STATE = Schema({"epoch": _COUNT, "step_in_epoch": _COUNT, "global_step": _COUNT,
                      "best_score": Field("real"), "best_epoch": Field("integer", "[-1, inf]"),
                      "history": Field("array", items=Field("object")), "epoch_losses": Field("object"),
                      "step_losses": Field("object")},
                     ("epoch", "step_in_epoch", "global_step", "best_score", "best_epoch", "history"))
TRAINING_CHECKPOINT = Schema(
    {"model": Field("object", items=Field("tensor")), "optimizer": Field("object"),
     "scheduler": Field("object"), "train_state": TRAIN_STATE,
     "torch_rng": Field("tensor"), "python_rng": Field("any"), "scaler": Field("object")},
    ("model", "optimizer", "scheduler", "train_state", "torch_rng", "python_rng"))

# A settings field's annotation -> its JSON kind (tuples are saved as arrays, paths as strings).
_KINDS = {bool: "boolean", int: "integer", float: "real", str: "string", Path: "string", tuple: "array"}


def settings_schema(*settings: Any, required: Sequence[str] = ()) -> Schema:
    """config.json's (and heads.json's) schema from groups of flags: each flag's kind from its annotation (a
    field the group makes itself carries its type), its choices as the values allowed. Other keys (where the
    data was, ...) are kept."""
    fields = {}
    for group in settings:
        hints = typing.get_type_hints(type(group))
        fields.update({f.name: _flag_field(hints.get(f.name, f.type), f) for f in flag_fields(group)})
    return Schema(fields, tuple(required), unknown="keep")


def _flag_field(annotation: Any, flag: dataclasses.Field) -> Field:
    parts = typing.get_args(annotation) if isinstance(annotation, types.UnionType) else (annotation,)
    kinds = {_KINDS.get(typing.get_origin(p) or p, "any") for p in parts if p is not type(None)}
    kind = kinds.pop() if len(kinds) == 1 else "real" if kinds == {"integer", "real"} else "any"
    return Field(kind, null=type(None) in parts or flag.default is None,
                 allowed=tuple(flag.metadata["choices"] or ()) if kind == "string" else (),
                 why="the flag's choices are")


def read_metrics(path: Path) -> list[dict]:
    """metrics.jsonl: one object per line, each checked; errors name the file and the line."""
    lines = []
    for number, line in enumerate(read_text(path, allow_empty=True).splitlines(), start=1):
        lines.append(loads(line, f"{path}:{number}"))
        if found := METRICS_LINE.problem(lines[-1], f"{path}:{number}", prefix=f"{path}:{number}: "):
            raise FileContentError(found)
    return lines


def check_training_checkpoint(payload: object, path: Path, model: torch.nn.Module) -> dict:
    """The dict inside checkpoints/last.pt: its keys and their types, TrainState's fields, and the model's
    weights, each tensor of the model's shape."""
    if found := TRAINING_CHECKPOINT.problem(payload, str(path), prefix=f"{path}: "):
        raise FileContentError(found)
    check_tensors_fit(payload["model"], model.state_dict(), path, "the model")
    return payload


def check_tensors_fit(state: dict[str, torch.Tensor], expected: dict[str, torch.Tensor], path: Path,
                      what: str = "the model's heads") -> None:
    """Every tensor the model has, of its shape, and no other; refused naming the file, each tensor and both
    shapes."""
    missing, unknown = sorted(set(expected) - set(state)), sorted(set(state) - set(expected))
    wrong = [f"{k} {tuple(v.shape)}, the model's {tuple(expected[k].shape)}" for k, v in state.items()
             if k in expected and v.shape != expected[k].shape]
    if missing or unknown or wrong:
        raise CheckpointError(f"{path}: does not fit {what} (missing {missing}, unknown {unknown}, of "
                              f"another shape {wrong}); written with other settings, or by another job?")


def read_heads(path: Path, expected: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """best/heads.safetensors, read as any weights file (checkpoint.py: truncated, unreadable, a folder in its
    place: named), each tensor the shape of the model's (`expected`)."""
    state = read_weights(check_file(path, CheckpointError))
    check_tensors_fit(state, expected, path)
    return state
