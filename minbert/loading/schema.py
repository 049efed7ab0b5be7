"""A file format's schema, declared once as data, and the one function that checks a document against it.

Every JSON file we read declares its document as a `Field`: each field's kind and range, which must be
there, and, for a format of which we implement a part (config.json, sentence-transformers' files), the
values whose meaning we implement (`allowed`: any other is refused by name). An unknown field is refused,
or, where the format's own reader tolerates it (transformers ignores unknown config.json keys), returned
for the caller to report. `read_document` reads a file through files.py and checks it; `check_fields`
checks a dict in hand. Every refusal names the file (or the object) and the field.

Read next: atomic.py (the other direction: writing a file whole or not at all).
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass
from typing import Any

import torch

from minbert.loading.files import FileContentError, read_json

# A field's kind: the Python types json.loads gives for it (torch.load's for a tensor), and its name in words.
KINDS: dict[str, tuple[type | tuple[type, ...], str]] = {
    "integer": (int, "an integer"), "number": ((int, float), "a number"),
    "real": ((int, float), "a number (or infinity)"), "boolean": (bool, "true or false"),
    "string": (str, "a string"), "array": (list, "an array"),
    "object": (dict, "an object"), "tensor": (torch.Tensor, "a tensor"), "any": (object, "anything")}


@dataclass(frozen=True)
class Field:
    """What a value must be: its kind, a range ("[0, 1)", "(0, inf]"), null or not, the values we implement
    (`allowed`, said with `why`), what each item of an array or value of an object must be (`items`), and an
    object's own fields: `fields`, those `required` (`lacks` says why), and a field not among them refused,
    or kept (`unknown="keep"`: returned by check_fields, for the caller to report)."""

    kind: str
    range: str = ""
    null: bool = False
    allowed: tuple = ()
    why: str = "minbert implements"
    items: Field | None = None
    fields: dict[str, Field] | None = None
    required: tuple[str, ...] = ()
    unknown: str = "refuse"
    lacks: str = ""

    def expected(self) -> str:
        """The field in words: "a positive integer", "a number in [0, 1)", "true or false or null"."""
        said = "a positive integer" if (self.kind, self.range) == ("integer", "[1, inf]") else \
            KINDS[self.kind][1] + (f" in {self.range}" if self.range else "")
        return said + (" or null" if self.null else "")

    def problem(self, value: Any, name: str, prefix: str | None = None) -> str | None:
        """Why `value` is not what this field must be, naming it (`name`; an object's fields as
        `prefix` + key, "name." unless given), or None."""
        number = self.kind in ("integer", "number", "real")
        if value is None:
            return None if self.null else f"{name} must be {self.expected()}, got null"
        if not isinstance(value, KINDS[self.kind][0]) or (number and isinstance(value, bool)) or (
                number and (math.isnan(value) or not self._in_range(value))):
            return f"{name} must be {self.expected()}, got {shown(value)}"
        if self.allowed and not any(value == a and type(value) is type(a) for a in self.allowed):
            return f"{name} is {shown(value)}, but {self.why} ({', '.join(map(shown, self.allowed))})"
        entries = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) \
            else ()
        for key, item in entries if self.items else ():
            if isinstance(value, dict) and not isinstance(key, str):  # a Python dict's (JSON's are strings)
                return f"{name}'s keys must be strings, got {shown(key)}"
            if found := self.items.problem(item, f"{name}[{shown(key)}]"):
                return found
        if self.fields is None:
            return None
        prefix = f"{name}." if prefix is None else prefix
        for key, item in value.items():
            if key in self.fields and (found := self.fields[key].problem(item, f"{prefix}{key}")):
                return found
        if missing := [key for key in self.required if key not in value]:
            return f"{name} lacks {', '.join(missing)}{self.lacks}"
        if self.unknown == "refuse" and (unknown := self.unknown_fields(value)):
            return (f"{prefix}unknown field(s) {', '.join(f'{k} = {shown(value[k])}' for k in unknown)}; the "
                    f"fields are {', '.join(sorted(self.fields))}")
        return None

    def unknown_fields(self, values: dict) -> list[str]:
        return sorted(k for k in values if k not in (self.fields or {}))

    def _in_range(self, value: float) -> bool:
        if not self.range:
            return self.kind != "number" or math.isfinite(value)
        left, low, high, right = re.fullmatch(r"([\[(])(\S+), (\S+)([\])])", self.range).groups()
        low, high = float(low), float(high)
        return ((low < value or (left == "[" and value == low))
                and (value < high or (right == "]" and value == high)))


def Schema(fields: dict[str, Field], required: tuple[str, ...] = (), **options: Any) -> Field:
    """An object's schema: a Field of kind "object" with these fields."""
    return Field("object", fields=fields, required=tuple(required), **options)


def shown(value: Any) -> str:
    """A value as a message shows it: strings quoted as Python does, the rest as JSON, cut at 80."""
    if isinstance(value, str):
        return repr(value)[:80]
    try:
        return json.dumps(value)[:80]
    except (TypeError, ValueError):
        return type(value).__name__


def check_fields(values: dict, schema: Field, where: str,
                 error: type[Exception] = FileContentError) -> list[str]:
    """Check the object `values` against `schema`, raising `error` with a message that starts with `where`
    ("path: ", "BertConfig."); returns the fields the schema does not know when it keeps them (sorted)."""
    if found := schema.problem(values, where.rstrip(": ."), prefix=where):
        raise error(found)
    return schema.unknown_fields(values)


def read_document(path: str | os.PathLike, schema: Field, error: type[Exception] = FileContentError):
    """A JSON file (an object, or an array for an "array" schema) checked against `schema`."""
    document = read_json(path, error, list if schema.kind == "array" else dict)
    if found := schema.problem(document, str(path), prefix=f"{path}: "):
        raise error(found)
    return document
