"""YAML as kubectl prints it (go-yaml v2 as sigs.k8s.io/yaml drives it), apart from the rest
of the output so that only `-o yaml` loads PyYAML."""

from __future__ import annotations

import re
from typing import Any

import yaml


class _KubectlDumper(yaml.SafeDumper):
    """PyYAML shaped like go-yaml v2 as sigs.k8s.io/yaml drives it (see `_str`)."""

    def write_double_quoted(self, text: str, split: bool = True) -> None:
        # go-yaml counts characters beyond the BMP unprintable and escapes them (\U0001F600);
        # PyYAML does that only without allow_unicode (which then escapes the BMP's too).
        astral = any(ord(c) > 0xFFFF for c in text)
        self.allow_unicode, allow = not astral and self.allow_unicode, self.allow_unicode
        try:
            super().write_double_quoted(text, split)
        finally:
            self.allow_unicode = allow


# What go-yaml v2 reads as a number that YAML 1.1's PyYAML resolver does not (Go's strconv with
# base prefixes, exponents without a dot), and its y/n booleans.
_GO_NUMBER = re.compile(
    r"[-+]?(0[xX][0-9a-fA-F_]+|0[bB][01_]+|0[oO][0-7_]+|[0-9][0-9_]*"
    r"|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?)"
)
_GO_BOOLS = frozenset({"y", "Y", "n", "N"})
_NOT_GO_TAGS = frozenset({"tag:yaml.org,2002:value", "tag:yaml.org,2002:yaml"})
_YAML_BREAKS = frozenset("\x85\u2028\u2029")


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    """go-yaml writes a string with a newline as a literal block, and double-quotes one that a
    plain scalar would turn into another type; for any other string that cannot be plain (a
    leading `- `, a `: ` inside, ...) its emitter, like PyYAML's, falls back to single quotes."""
    tag: str = dumper.resolve(yaml.ScalarNode, value, (True, False))  # type: ignore[no-untyped-call]
    style: str | None = None
    if _YAML_BREAKS.intersection(value) or any(ord(c) > 0xFFFF for c in value):
        # PyYAML would write the breaks raw, which do not read back; go-yaml escapes the others.
        style = '"'
    elif "\n" in value:
        style = "|"
    elif tag != "tag:yaml.org,2002:str" or value in _GO_BOOLS or _GO_NUMBER.fullmatch(value):
        style = '"'
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_KubectlDumper.add_representer(str, _str)
# PyYAML's YAML 1.1 resolver knows `=` (tag:yaml.org,2002:value) and a lone `!`, `&` or `*`
# (tag:yaml.org,2002:yaml); go-yaml has neither, so it reads them as strings and prints `=`
# plain and the others single-quoted (plain cannot start with an indicator).
_KubectlDumper.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in _NOT_GO_TAGS]
    for first, resolvers in yaml.SafeDumper.yaml_implicit_resolvers.items()
}


def go_yaml(obj: Any) -> str:
    """YAML as kubectl prints it."""
    text: str = yaml.dump(
        obj,
        Dumper=_KubectlDumper,
        default_flow_style=False,
        sort_keys=True,
        allow_unicode=True,
        width=80,  # go-yaml v2's best_width: long plain strings fold at spaces past it
    )
    return text
