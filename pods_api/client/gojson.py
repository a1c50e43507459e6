"""JSON as Go's encoding/json writes it for kubectl's unstructured objects: keys sorted, `<`, `>`,
`&`, U+2028 and U+2029 escaped; indented four spaces (`kubectl get -o json`) or on one line (how
kubectl's jsonpath prints a map or a list)."""

from __future__ import annotations

from typing import Any

# Go's encoding/json escapes these inside strings (HTML safety; U+2028/9 for JavaScript), and
# they can occur nowhere else in JSON text, so a plain replace is exact.
_GO_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def go_json(obj: Any, *, indent: int | None = 4) -> str:
    """JSON as kubectl prints it (indented) or as one line (indent=None), keys sorted."""
    import json  # here: a table, which imports this module for -o json, need not load it

    separators = (",", ":") if indent is None else (",", ": ")
    text = json.dumps(obj, indent=indent, sort_keys=True, ensure_ascii=False, separators=separators)
    for char, escape in _GO_ESCAPES.items():
        if char in text:
            text = text.replace(char, escape)
    return text
