"""Check a judge object against ``docs/judge-schema.json`` without the ``jsonschema`` package.

The schema uses a small part of JSON Schema (``type`` with null, ``required``, ``properties``, ``items``,
``enum``, ``const``, ``uniqueItems``, ``propertyNames``, ``additionalProperties``): this checks exactly
that part, so a loop's machine needs nothing beyond cudalab (``jsonschema``, where installed, checks the
rest in the tests). ``python -m cudalab.judging.schema SCHEMA OBJECT.json...`` prints each problem and
exits 1 if there is any.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["problems", "schema_path", "named_fields"]

_TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}


def schema_path() -> Path:
    """The committed schema (beside the docs of a checkout)."""
    return Path(__file__).resolve().parents[2] / "docs" / "judge-schema.json"


def _is(value: Any, kind: str) -> bool:
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, _TYPES[kind])


def problems(value: Any, schema: dict[str, Any], where: str = "$") -> list[str]:
    """Every way ``value`` breaks ``schema`` (empty: it validates)."""
    out: list[str] = []
    kinds = schema.get("type")
    if kinds is not None:
        kinds = [kinds] if isinstance(kinds, str) else kinds
        if not any(_is(value, k) for k in kinds):
            return [f"{where}: {type(value).__name__} is not {'|'.join(kinds)}"]
    if "const" in schema and value != schema["const"]:
        out.append(f"{where}: {value!r} is not {schema['const']!r}")
    if "enum" in schema and value not in schema["enum"]:
        out.append(f"{where}: {value!r} not one of {schema['enum']}")
    if isinstance(value, dict):
        for key in schema.get("required", ()):
            if key not in value:
                out.append(f"{where}: missing {key!r}")
        props = schema.get("properties", {})
        for key, sub in value.items():
            if key in props:
                out += problems(sub, props[key], f"{where}.{key}")
            elif isinstance(schema.get("additionalProperties"), dict):
                out += problems(sub, schema["additionalProperties"], f"{where}.{key}")
            if "propertyNames" in schema:
                out += problems(key, schema["propertyNames"], f"{where} key {key!r}")
    if isinstance(value, list):
        for i, item in enumerate(value):
            out += problems(item, schema.get("items", {}), f"{where}[{i}]")
        if schema.get("uniqueItems") and len({json.dumps(v, sort_keys=True) for v in value}) != len(value):
            out.append(f"{where}: items repeat")
    return out


def named_fields(schema: dict[str, Any], where: str = "") -> list[str]:
    """Every field the schema requires, as dotted paths (``checks.scan.ptx``): what a test asks to be produced."""
    out = []
    props = schema.get("properties", {})
    for key in schema.get("required", ()):
        path = f"{where}.{key}" if where else key
        out.append(path)
        sub = props.get(key, {})
        if "object" in ([sub.get("type")] if isinstance(sub.get("type"), str) else sub.get("type", [])):
            out += named_fields(sub, path)
    return out


def main(argv: list[str]) -> int:
    """``SCHEMA OBJECT.json...``: print each object's problems; 1 if any."""
    if len(argv) < 2:
        print("usage: python -m cudalab.judging.schema SCHEMA.json OBJECT.json...", file=sys.stderr)
        return 2
    schema = json.loads(Path(argv[0]).read_text())
    bad = 0
    for name in argv[1:]:
        found = problems(json.loads(Path(name).read_text()), schema)
        print(f"{name}: {'valid' if not found else '; '.join(found)}")
        bad += bool(found)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
