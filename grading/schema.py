"""The results.json that the grader writes: a JSON Schema for Gradescope's format, and a validator.

Gradescope's specification: https://gradescope-autograders.readthedocs.io/en/latest/specs/ . We write the
subset in results.schema.json (every field named there that we use, with its type); `validate` checks a
dictionary against it without third-party packages (tests also check it with the `jsonschema` package).

Read next: handout.py.
"""

from __future__ import annotations

import json
from pathlib import Path

SCHEMA: dict = json.loads((Path(__file__).parent / "results.schema.json").read_text(encoding="utf-8"))


class SchemaError(ValueError):
    """results.json does not match SCHEMA; the message gives the JSON path of the first problem."""


def validate(value, schema: dict = SCHEMA, where: str = "$") -> None:
    """Check `value` against the subset of JSON Schema used in SCHEMA; raise SchemaError at the first miss."""
    import re

    kind = schema.get("type")
    types = {"object": dict, "array": list, "string": str, "integer": int, "number": (int, float)}
    if kind and (not isinstance(value, types[kind]) or isinstance(value, bool)):
        raise SchemaError(f"{where}: expected {kind}, got {type(value).__name__}")
    if "enum" in schema and value not in schema["enum"]:
        raise SchemaError(f"{where}: {value!r} is not one of {schema['enum']}")
    if "minimum" in schema and value < schema["minimum"]:
        raise SchemaError(f"{where}: {value!r} is below the minimum {schema['minimum']}")
    if "minLength" in schema and len(value) < schema["minLength"]:
        raise SchemaError(f"{where}: shorter than {schema['minLength']}")
    if "pattern" in schema and not re.search(schema["pattern"], value):
        raise SchemaError(f"{where}: {value!r} does not match {schema['pattern']}")
    if kind == "object":
        for key in schema.get("required", []):
            if key not in value:
                raise SchemaError(f"{where}: missing required field {key!r}")
        properties = schema.get("properties", {})
        for key, item in value.items():
            if key in properties:
                validate(item, properties[key], f"{where}.{key}")
            elif schema.get("additionalProperties") is False:
                raise SchemaError(f"{where}: unexpected field {key!r}")
    if kind == "array" and "items" in schema:
        for index, item in enumerate(value):
            validate(item, schema["items"], f"{where}[{index}]")
