"""A file format's schema, declared once as data, and the one function that checks a document against it.

Every JSON file we read, ours or foreign, declares its fields in a `Schema`: each field's type and range
(`Field`), which fields must be there, and, for a format of which we implement a part (transformers'
config.json, sentence-transformers' files), the values whose meaning we implement (`Field.allowed`, an
allow-list: any other value is refused naming the field and the value). A field the schema does not
know is refused, or, where the format's own reader tolerates it (transformers ignores unknown keys in
config.json), kept aside and returned, so that the caller can report it. `read_document` reads a file
through files.py (a path that is not a regular file, unreadable, empty, not UTF-8, not JSON: each named)
and checks it; `check_fields` checks a dict already in hand (BertConfig's own fields, the dict inside a
training checkpoint). Every refusal names the file (or the object) and the field.

Read next: atomic.py (the other direction: writing a file whole or not at all).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from typing import Any

import torch

from minbert.loading.files import FileContentError, read_json

# A field's kind -> the Python types json.loads gives for it (torch.load's for the last two).
KINDS: dict[str, type | tuple[type, ...]] = {
    "integer": int, "number": (int, float), "real": (int, float), "boolean": bool, "string": str,
    "array": list, "object": dict, "tuple": tuple, "tensor": torch.Tensor, "any": object}
_NAMES = {"integer": "an integer", "number": "a number", "real": "a number (or infinity)",
          "boolean": "true or false", "string": "a string", "array": "an array", "object": "an object",
          "tuple": "a tuple", "tensor": "a tensor", "any": "anything"}


@dataclass(frozen=True)
class Field:
    """What one field must be: its kind, an inclusive range (`above`: `low` itself excluded; `below`:
    `high` excluded), null allowed or not, the values we implement (`allowed`, said with `why`), and
    what each item of an array or value of an object must be (`items`: a Field, or a Schema for objects)."""

    kind: str
    low: float | None = None
    high: float | None = None
    above: bool = False
    below: bool = False
    null: bool = False
    allowed: tuple = ()
    why: str = ""
    items: Field | Schema | None = None

    def expected(self) -> str:
        """The field's schema in words: "a positive integer", "a number in [0, 1)", "true or false"."""
        if self.kind == "integer" and self.low == 1 and self.high is None:
            text = "a positive integer"
        elif self.kind in ("number", "real") and self.low == 0 and self.above and self.high is None:
            text = "a positive number"
        elif self.low is not None or self.high is not None:
            low = "-inf" if self.low is None else f"{self.low:g}"
            high = "inf" if self.high is None else f"{self.high:g}"
            text = f"{_NAMES[self.kind]} in {'(' if self.above else '['}{low}, {high}{')' if self.below else ']'}"
        else:
            text = _NAMES[self.kind]
        if isinstance(self.items, Field):
            text += f" of {self.items.expected().removeprefix('a ').removeprefix('an ')} values"
        return text + (" or null" if self.null else "")

    def problem(self, value: Any, name: str) -> str | None:
        """Why `value` is not what this field must be (naming `name`, the field), or None."""
        if value is None:
            return None if self.null else f"{name} must be {self.expected()}, got null"
        kind = KINDS[self.kind]
        number = self.kind in ("integer", "number", "real")
        if not isinstance(value, kind) or (isinstance(value, bool) and self.kind != "boolean" and number) or (
                number and (math.isnan(value) or (self.kind == "number" and math.isinf(value)))):
            return f"{name} must be {self.expected()}, got {shown(value)}"
        if number and ((self.low is not None and (value < self.low or (self.above and value == self.low)))
                       or (self.high is not None and (value > self.high or (self.below and value == self.high)))):
            return f"{name} must be {self.expected()}, got {shown(value)}"
        if self.allowed and not any(value == a and type(value) is type(a) for a in self.allowed):
            return f"{name} is {shown(value)}, but {self.why or 'minbert implements'} ({', '.join(map(shown, self.allowed))})"
        if isinstance(self.items, Schema) and isinstance(value, dict):
            return self.items.problem(value, f"{name}.")
        if self.items is not None:
            entries = value.items() if isinstance(value, dict) else enumerate(value)
            for key, item in entries:
                if isinstance(self.items, Schema):
                    found = (f"{name}[{key}] must be an object, got {shown(item)}" if not isinstance(item, dict)
                             else self.items.problem(item, f"{name}[{key}]."))
                else:
                    found = self.items.problem(item, f"{name}[{shown(key)}]")
                if found:
                    return found
        return None


@dataclass(frozen=True)
class Schema:
    """A JSON object's fields. `required`: the fields that must be there (`lacks` says why, after the
    list); `unknown`: "refuse" a field not in `fields`, or "keep" it (returned by `check_fields`)."""

    fields: dict[str, Field]
    required: tuple[str, ...] = ()
    unknown: str = "refuse"
    lacks: str = ""
    kind: str = "object"  # the document itself: an "object", or an "array" of `entry` objects
    entry: Schema | None = field(default=None, repr=False)

    def problem(self, values: dict, where: str) -> str | None:
        """The first thing wrong with `values` (a field's value, the missing fields, an unknown field),
        its message starting with `where` ("path: ", "BertConfig."), or None."""
        for key, value in values.items():
            if key in self.fields:
                found = self.fields[key].problem(value, f"{where}{key}")
                if found:
                    return found
        missing = [k for k in self.required if k not in values]
        if missing:
            return f"{where.rstrip(': .')} lacks {', '.join(missing)}{self.lacks}"
        unknown = self.unknown_fields(values)
        if unknown and self.unknown == "refuse":
            said = ", ".join(f"{k} = {shown(values[k])}" for k in unknown)
            return f"{where}unknown field(s) {said}; the fields are {', '.join(sorted(self.fields))}"
        return None

    def unknown_fields(self, values: dict) -> list[str]:
        return sorted(k for k in values if k not in self.fields)


def shown(value: Any) -> str:
    """A value as a message shows it: strings quoted as Python does, the rest as JSON, cut at 80."""
    if isinstance(value, str):
        return repr(value)[:80]
    try:
        return json.dumps(value)[:80]
    except (TypeError, ValueError):
        return type(value).__name__


def check_fields(values: dict, schema: Schema, where: str, error: type[Exception] = FileContentError) -> list[str]:
    """Check `values` against `schema`, raising `error` with a message that starts with `where`; returns
    the fields the schema does not know when it keeps them (sorted)."""
    found = schema.problem(values, where)
    if found:
        raise error(found)
    return schema.unknown_fields(values)


def read_document(path: str | os.PathLike, schema: Schema, error: type[Exception] = FileContentError):
    """A JSON file checked against `schema`: the document (a dict, or a list for an array schema)."""
    document = read_json(path, error, list if schema.kind == "array" else dict)
    if schema.kind == "array":
        for i, entry in enumerate(document):
            if not isinstance(entry, dict):
                raise error(f"{path}: entry {i} must be an object, got {shown(entry)}")
            check_fields(entry, schema.entry, f"{path}: entry {i}: ", error)
    else:
        check_fields(document, schema, f"{path}: ", error)
    return document
