"""YAML documents to Python values, as PyYAML's safe loader makes them, in about half its time.

PyYAML's C loader (`CSafeLoader`) scans, parses and composes in C, then builds the values in pure
Python, one generator per mapping and sequence, resolving every plain scalar's type with a list
of regular expressions. For a pod manifest that construction and resolution are about half of
the load (BENCHMARKS.md, W6). Here:

  - `Loader.resolve` remembers what each short plain scalar resolved to ("name", "true", "80"
    recur in every manifest): the answer depends on the text alone;
  - `build` walks the composed node tree once, directly, for what manifests are made of:
    mappings, sequences, and str/int/float/bool/null scalars, with each scalar's constructor
    taken from PyYAML itself. Anything else (merge keys `<<`, explicit tags such as `!!binary`
    or `!!set`, a non-scalar key, nesting deeper than `_FAST_DEPTH`) makes it hand the whole
    document to PyYAML's own constructor, so every result and every error is PyYAML's.

tests/unit/sources/test_constructor.py checks against `yaml.load(..., Loader=CSafeLoader)` with hypothesis.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

_TIMESTAMP_TAG = "tag:yaml.org,2002:timestamp"
_STR_TAG = "tag:yaml.org,2002:str"
_MAP_TAG = "tag:yaml.org,2002:map"
_SEQ_TAG = "tag:yaml.org,2002:seq"
# How deep the direct walk goes before handing over: pods nest about 10 levels; deeper input is
# left to PyYAML, so that where PyYAML runs out of stack ("nested too deeply") this does too.
_FAST_DEPTH = 64
# Plain scalars whose resolved tag is remembered: short ones (keys, small values) recur across
# manifests; the bound keeps the memo a few hundred KiB whatever the files hold.
_RESOLVED_MAX = 4096
_RESOLVED_CHARS = 64
_RESOLVED: dict[str, str] = {}  # shared by every source: dict reads and writes are atomic


class Loader(yaml.CSafeLoader):
    """Safe YAML as Kubernetes reads it: an unquoted `2024-05-01T10:00:00Z` stays a string
    (sigs.k8s.io/yaml converts to JSON first), where PyYAML would make it a datetime."""

    def resolve(self, kind: type[Node], value: Any, implicit: tuple[bool, bool]) -> str:
        if kind is ScalarNode and implicit[0]:
            tag = _RESOLVED.get(value)
            if tag is None:
                tag = _resolve(self, kind, value, implicit)
                if len(value) <= _RESOLVED_CHARS and len(_RESOLVED) < _RESOLVED_MAX:
                    _RESOLVED[value] = tag
            return tag
        return _resolve(self, kind, value, implicit)


Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != _TIMESTAMP_TAG]
    for first, resolvers in yaml.CSafeLoader.yaml_implicit_resolvers.items()
}
# The memo in `resolve` holds because a plain scalar's tag depends on its text alone: no path
# resolvers (which would make it depend on where the scalar sits) are registered.
assert not Loader.yaml_path_resolvers

_resolve: Callable[[Loader, type[Node], Any, tuple[bool, bool]], str] = yaml.CSafeLoader.resolve
_Construct = Callable[[Loader, Node], Any]
_SCALARS: dict[str, _Construct] = {
    tag: Loader.yaml_constructors[tag]
    for tag in (
        "tag:yaml.org,2002:null",
        "tag:yaml.org,2002:bool",
        "tag:yaml.org,2002:int",
        "tag:yaml.org,2002:float",
    )
}


_NOT_MADE = object()  # a scalar node not met before (None is a value)


class _Unusual(Exception):
    """The node tree holds something `build` leaves to PyYAML."""


def load_all(text: bytes, aliased: list[Any] | None = None) -> list[Any]:
    """Every document of a YAML stream, as `yaml.load_all(text, Loader=Loader)` gives them;
    raises what it raises (yaml.YAMLError, RecursionError). With `aliased`, the value of every
    alias met as written (`*a`: once per occurrence, aliases within its value not again) is
    appended to it, and a whole document where PyYAML's constructor made it: what the values
    beyond those written come from, for the alias guard (parsing.py)."""
    loader = Loader(text)
    try:
        docs = []
        while loader.check_node():
            node = loader.get_node()
            assert node is not None  # check_node said there is one
            try:
                docs.append(build(loader, node, aliased))
            except (_Unusual, ValueError, TypeError, KeyError, AttributeError):
                # A scalar that does not fit its tag (`!!int yes`): PyYAML's own constructor
                # says so in its own words, which differ between PyYAML releases.
                docs.append(loader.construct_document(node))
                if aliased is not None:
                    aliased.append(docs[-1])  # its aliases were not seen: count it all
        return docs
    finally:
        loader.dispose()


def build(loader: Loader, root: Node, aliased: list[Any] | None = None) -> Any:
    """The value of a document's node tree; raises _Unusual for what it leaves to PyYAML. An
    alias is the same object wherever it appears, as in PyYAML (the alias guard relies on
    seeing it so, and a mapping may hold itself); with `aliased`, each alias's value met as
    written is appended to it."""
    made: dict[Node, Any] = {}
    try:
        return _value(loader, root, made, 0, aliased)
    finally:
        made.clear()  # a mapping that holds itself is a cycle through `made` until then


def _value(loader: Loader, node: Node, made: dict[Node, Any], depth: int, aliased: list[Any] | None) -> Any:
    # A module function, not a closure: a closure that calls itself is a reference cycle, and
    # would leave every node tree to the cyclic garbage collector (measured: 20% of a load).
    if node.__class__ is ScalarNode:
        if aliased is not None:  # scalars are remembered too, to see their aliases
            done = made.get(node, _NOT_MADE)
            if done is not _NOT_MADE:
                aliased.append(done)
                return done
        if node.tag == _STR_TAG:
            value = node.value
        else:
            scalar = _SCALARS.get(node.tag)
            if scalar is None:
                raise _Unusual
            value = scalar(loader, node)
        if aliased is not None:
            made[node] = value
        return value
    done = made.get(node)
    if done is not None:
        if aliased is not None:
            aliased.append(done)
        return done
    if depth > _FAST_DEPTH:
        raise _Unusual
    if node.__class__ is MappingNode and node.tag == _MAP_TAG:
        mapping: dict[Any, Any] = {}
        made[node] = mapping
        for key_node, value_node in node.value:
            if key_node.__class__ is not ScalarNode:
                raise _Unusual  # PyYAML's error if unhashable; `<<` and `=` have tags of their own
            key = _value(loader, key_node, made, depth, aliased)
            mapping[key] = _value(loader, value_node, made, depth + 1, aliased)
        return mapping
    if node.__class__ is SequenceNode and node.tag == _SEQ_TAG:
        sequence: list[Any] = []
        made[node] = sequence
        sequence.extend([_value(loader, item, made, depth + 1, aliased) for item in node.value])
        return sequence
    raise _Unusual
