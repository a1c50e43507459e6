"""`-o jsonpath=TEMPLATE` and `-o custom-columns=SPEC`, in kubectl's dialect (client-go's
util/jsonpath, as `kubectl get` runs it: missing keys print nothing).

A template is text with `{...}` actions: `.field`, `['key']`, `[i]`, `[a:b]`, `[*]`, `[a,b]`,
`..`, `$`/`@`, filters `[?(@.x=="y")]` (`==`, `!=`, `<`, `>`, `<=`, `>=`, or existence), quoted
strings (`{"\\n"}`), booleans and numbers, and `{range ...}...{end}` (nested too). An action's results print
space-separated; a map or list prints as compact JSON, a string raw, a number as Go prints it.

A slice's step must be positive (kubectl's negative steps are refused, naming them). Where
kubectl's own order is random (the values of a map under `*` or `..`), ours is the keys' order.
"""

from __future__ import annotations

import re
import typing
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from pods_api.client.gojson import go_json
from pods_api.core.api.printer import TAB_MIN_WIDTH, TAB_PADDING

_SLICE = re.compile(r"^(-?\d*)(:-?\d*)?(:-?\d*)?$")
_DICT_KEY = re.compile(r"^'([^']*)'$")
_FILTER = re.compile(r"^([^!<>=]+)([!<>=]+)(.+?)$")
# kubectl's custom-columns accepts `a.b`, `.a.b`, `{a.b}` and `{.a.b}` for one path.
_RELAXED = re.compile(r"^\{\.?([^{}]+)\}$|^\.?([^{}]+)$")
_TERMINATORS = set(" \t\r\n.,[]$@{}")
_OPERATORS = ("==", "!=", "<", ">", "<=", ">=")


class JSONPathError(ValueError):
    """A template kubectl would refuse, or that uses what this module does not implement."""


# --- the parse tree: a list of steps per action -----------------------------------------------


@dataclass(frozen=True)
class Child:
    name: str


@dataclass(frozen=True)
class Wildcard:
    pass


@dataclass(frozen=True)
class Recursive:
    pass


@dataclass(frozen=True)
class Slice:
    start: int | None
    stop: int | None
    index: bool  # `[i]`: one element, its stop derived from its start
    step: int = 1


@dataclass(frozen=True)
class Union:
    branches: tuple[tuple[Step, ...], ...]


@dataclass(frozen=True)
class Filter:
    left: tuple[Step, ...]
    operator: str  # one of _OPERATORS, or "exists"
    right: tuple[Step, ...]


@dataclass(frozen=True)
class Literal:
    value: str | bool | int | float


Step = Child | Wildcard | Recursive | Slice | Union | Filter | Literal


@dataclass(frozen=True)
class Action:
    steps: tuple[Step, ...]


@dataclass
class Range:
    steps: tuple[Step, ...]
    offset: int  # where its `{range` starts, to name an unclosed one
    body: list[Node] = field(default_factory=list)


Node = str | Action | Range
Kind = typing.Literal["action", "range", "end"]  # what one `{...}` is


# --- parsing ----------------------------------------------------------------------------------


def _actions(template: str) -> Iterator[str | tuple[str, int]]:
    """Text between actions, and each action's inside (with where it starts)."""
    pos = 0
    while pos < len(template):
        start = template.find("{", pos)
        if start < 0:
            yield template[pos:]
            return
        if start > pos:
            yield template[pos:start]
        end = _action_end(template, start + 1)
        yield template[start + 1 : end], start
        pos = end + 1


def _action_end(text: str, pos: int) -> int:
    quote = ""
    while pos < len(text):
        char = text[pos]
        if char in "\r\n":
            break
        if quote:
            if char == "\\":
                pos += 1
            elif char == quote:
                quote = ""
        elif char in "\"'":
            quote = char
        elif char == "}":
            return pos
        pos += 1
    raise JSONPathError(f"unclosed action at offset {pos}")


_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|x[0-9a-fA-F]{2}|[0-7]{3}|.)", re.S)
_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f", "v": "\v"}


def _unquote(text: str) -> str:
    """A quoted string's value, with Go's escapes (either quote, as client-go allows)."""
    quote, body = text[0], text[1:-1]

    def escape(match: re.Match[str]) -> str:
        code = match.group(1)
        if code[0] in "uUx":
            return chr(int(code[1:], 16))
        if code[0] in "01234567" and len(code) == 3:
            return chr(int(code, 8))
        if code in _SIMPLE_ESCAPES:
            return _SIMPLE_ESCAPES[code]
        if code in ("\\", quote):
            return code
        raise JSONPathError(f"unquote string {text} error invalid syntax")

    return _ESCAPE.sub(escape, body)


def _steps(text: str) -> tuple[Kind, tuple[Step, ...]]:
    """One action's steps, and whether it is a plain action, opens a `range` or is its `end`."""
    steps: list[Step] = []
    kind: Kind = "action"
    pos = 0
    while pos < len(text):
        char = text[pos]
        if text.startswith("[?(", pos):
            pos = _filter(text, pos, steps)
        elif text.startswith("..", pos):
            if steps and isinstance(steps[-1], Recursive):
                raise JSONPathError("invalid multiple recursive descent")
            steps.append(Recursive())
            pos += 2
            if pos < len(text) and _word(text[pos]):
                pos = _field(text, pos, steps)
        elif char in " @$":
            pos += 1
        elif char == "[":
            end = text.find("]", pos)
            if end < 0:
                raise JSONPathError("unterminated array")
            steps.extend(_bracket(text[pos + 1 : end]))
            pos = end + 1
        elif char in "\"'":
            end = _string_end(text, pos)
            steps.append(Literal(_unquote(text[pos : end + 1])))
            pos = end + 1
        elif char == ".":
            pos = _field(text, pos + 1, steps)
        elif char in "+-" or char.isdigit():
            end = pos + 1
            while end < len(text) and (text[end] == "." or text[end].isdigit()):
                end += 1
            steps.append(Literal(_number(text[pos:end])))
            pos = end
        elif _word(char):
            end = pos
            while end < len(text) and text[end] not in _TERMINATORS:
                end += 1
            word, pos = text[pos:end], end
            if word == "range" and not steps and kind == "action":
                kind = "range"
            elif word == "end" and not steps and kind == "action" and not text[pos:].strip():
                return "end", ()
            elif word in ("true", "false"):
                steps.append(Literal(word == "true"))
            else:
                raise JSONPathError(f"unrecognized identifier {word}")
        else:
            raise JSONPathError(f"unrecognized character in action: {char!r}")
    return kind, tuple(steps)


def _word(char: str) -> bool:
    return char == "_" or char.isalpha() or char.isdigit()


def _string_end(text: str, pos: int) -> int:
    quote, end = text[pos], pos + 1
    while end < len(text):
        if text[end] == "\\":
            end += 2
            continue
        if text[end] == quote:
            return end
        end += 1
    raise JSONPathError("unterminated quoted string")


def _number(text: str) -> int | float:
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        raise JSONPathError(f"cannot parse number {text}") from None


def _field(text: str, pos: int, steps: list[Step]) -> int:
    name: list[str] = []
    while pos < len(text) and text[pos] not in _TERMINATORS:
        if text[pos] == "\\" and pos + 1 < len(text):
            pos += 1  # an escaped terminator (`\.`) is part of the name
        name.append(text[pos])
        pos += 1
    value = "".join(name)
    steps.append(Wildcard() if value == "*" else Child(value))
    return pos


def _bracket(inside: str) -> list[Step]:
    if inside == "*":
        inside = ":"
    parts = inside.split(",")
    if len(parts) > 1:
        branches = tuple(_steps("[" + part.strip(" ") + "]")[1] for part in parts)
        return [Union(branches)]
    key = _DICT_KEY.match(inside)
    if key:
        return list(_steps("." + key.group(1))[1])
    match = _SLICE.match(inside)
    if not match:
        raise JSONPathError(f"invalid array index {inside}")
    start, stop, step = match.groups()
    every = int(step[1:]) if step and step[1:] else 1
    if every <= 0:
        raise JSONPathError(f"step must be > 0 ([{inside}])")
    first = int(start) if start else None
    if stop is None:
        return [Slice(first or 0, None, index=True)]
    return [Slice(first, int(stop[1:]) if stop[1:] else None, index=False, step=every)]


def _filter(text: str, pos: int, steps: list[Step]) -> int:
    start, end, quote = pos + 3, pos + 3, ""
    while True:
        if end >= len(text) or text[end] == "\n":
            raise JSONPathError("unterminated filter")
        char = text[end]
        if quote:
            if char == quote and text[end - 1] != "\\":
                quote = ""
        elif char in "\"'":
            quote = char
        elif char == ")":
            break
        end += 1
    if end + 1 >= len(text) or text[end + 1] != "]":
        raise JSONPathError("unclosed array expect ]")
    inside = text[start:end]
    match = _FILTER.match(inside)
    if match is None:
        steps.append(Filter(_steps(inside)[1], "exists", ()))
    else:
        left, operator, right = match.groups()
        if operator not in _OPERATORS:
            raise JSONPathError(f"unrecognized filter operator {operator}")
        steps.append(Filter(_steps(left)[1], operator, _steps(right)[1]))
    return end + 2


def parse(template: str) -> list[Node]:
    """The template's nodes: text, actions, and `range` blocks with their bodies."""
    nodes: list[Node] = []
    ranges: list[Range] = []  # the open ones, innermost last
    for part in _actions(template):
        body = ranges[-1].body if ranges else nodes
        if isinstance(part, str):
            body.append(part)
            continue
        kind, steps = _steps(part[0])
        if kind == "end":
            if not ranges:
                raise JSONPathError("not in range, nothing to end")
            ranges.pop()
        elif kind == "range":
            ranges.append(Range(steps, part[1]))
            body.append(ranges[-1])
        else:
            body.append(Action(steps))
    if ranges:
        # client-go runs an unclosed range's body once more over the enclosing object: refused.
        raise JSONPathError(f"the range at offset {ranges[-1].offset} has no {{end}}")
    return nodes


# --- evaluation --------------------------------------------------------------------------------


def _children(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [value[k] for k in sorted(value)]  # Go's order is random: the keys' is one of them
    if isinstance(value, list):
        return list(value)
    if isinstance(value, str):
        return list(value.encode())  # Go indexes a string's bytes
    return []


def _recursive(values: list[Any]) -> list[Any]:
    out: list[Any] = []
    for value in values:
        if value is None:
            continue
        children = _children(value)
        if children:
            out.append(value)
            out.extend(_recursive(children))
    return out


def _slice(values: list[Any], step: Slice) -> list[Any]:
    out: list[Any] = []
    for value in values:
        if value is None:
            continue
        if not isinstance(value, list):
            raise JSONPathError(f"{_go_type(value)} is not array or slice")
        length = len(value)
        start = step.start or 0
        start += length if start < 0 else 0
        if step.index:  # `[-1]` is the last one: the stop follows the start once it is counted
            stop = start + 1
        else:
            stop = length if step.stop is None else step.stop
            stop += length if stop < 0 else 0
        if stop != start:
            if start >= length or start < 0:
                raise JSONPathError(f"array index out of bounds: index {start}, length {length}")
            if stop > length:
                raise JSONPathError(f"array index out of bounds: index {stop - 1}, length {length}")
        if stop < start:
            raise JSONPathError(f"starting index {start} is greater than ending index {stop}")
        out.extend(value[start : stop : step.step])
    return out


def _go_type(value: Any) -> str:
    if isinstance(value, dict):
        return "map[string]interface {}"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return "float64"
    return "string"


def _comparable(left: Any, right: Any) -> bool:
    """Whether Go's template comparison takes the pair: both strings, integers or floats."""
    for kind in (str, float):
        if isinstance(left, kind) and isinstance(right, kind):
            return True
    integers = [isinstance(v, int) and not isinstance(v, bool) for v in (left, right)]
    return all(integers)


_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    ">": lambda a, b: a > b,
    "<=": lambda a, b: a <= b,
    ">=": lambda a, b: a >= b,
}


def _compare(left: Any, operator: str, right: Any) -> bool:
    if _comparable(left, right):
        return _COMPARE[operator](left, right)
    both_bool = isinstance(left, bool) and isinstance(right, bool)
    if both_bool and operator in ("==", "!="):
        return _COMPARE[operator](left, right)
    scalars = (str, int, float)
    if both_bool or not (isinstance(left, scalars) and isinstance(right, scalars)):
        raise JSONPathError("invalid type for comparison")
    raise JSONPathError("incompatible types for comparison")


def _filter_values(values: list[Any], step: Filter) -> list[Any]:
    out: list[Any] = []
    for value in values:
        if not isinstance(value, list):
            raise JSONPathError(f"{_go_type(value)} is not array or slice and cannot be filtered")
        for item in value:
            lefts = evaluate([item], step.left)
            if step.operator == "exists":
                if lefts:
                    out.append(item)
                continue
            rights = evaluate([item], step.right)
            if not lefts or not rights:
                continue  # a missing key matches nothing, as `kubectl get` allows missing keys
            if len(lefts) != 1 or len(rights) != 1:
                raise JSONPathError("can only compare one element at a time")
            if _compare(lefts[0], step.operator, rights[0]):
                out.append(item)
    return out


def evaluate(values: list[Any], steps: Sequence[Step]) -> list[Any]:
    """An action's results over `values`, as client-go walks them (missing keys: no result)."""
    for step in steps:
        if isinstance(step, Literal):
            # A string is text, there even for no input; a number or boolean is one per input.
            values = [step.value] if isinstance(step.value, str) else [step.value for _ in values]
        elif isinstance(step, Child):
            values = [v[step.name] for v in values if isinstance(v, dict) and step.name in v]
        elif isinstance(step, Wildcard):
            values = [c for v in values if v is not None for c in _children(v)]
        elif isinstance(step, Recursive):
            values = _recursive(values)
        elif isinstance(step, Slice):
            values = _slice(values, step)
        elif isinstance(step, Union):
            values = [r for branch in step.branches for r in evaluate(values, branch)]
        else:
            values = _filter_values(values, step)
    return values


# --- printing ------------------------------------------------------------------------------------


# Go's `%v` (strconv's shortest 'g') writes an exponent from 1e6 on, whatever the digits.
_EXPONENT_FROM = 6


def go_float(value: float) -> str:
    """A float64 as Go's `%v` prints it: shortest digits, an exponent from 1e6 or below 1e-4."""
    if value != value or value in (float("inf"), float("-inf")):
        return {"nan": "NaN", "inf": "+Inf", "-inf": "-Inf"}[repr(value)]
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    assert isinstance(exponent, int)
    text = "".join(map(str, digits))
    point = len(text) + exponent  # where the decimal point falls in `text`
    head = "-" if sign else ""
    if value == 0:
        return head + "0"
    if point - 1 < -4 or point - 1 >= _EXPONENT_FROM:
        mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
        return f"{head}{mantissa}e{point - 1:+03d}"
    if point <= 0:
        return f"{head}0.{'0' * -point}{text}"
    if point >= len(text):
        return head + text + "0" * (point - len(text))
    return f"{head}{text[:point]}.{text[point:]}"


def jsonpath_text(value: Any) -> str:
    """One result as kubectl's jsonpath printer writes it."""
    if isinstance(value, dict | list):
        return go_json(value, indent=None)
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return go_float(value)
    return str(value)


def _execute(nodes: Sequence[Node], root: Any, out: list[str]) -> None:
    for node in nodes:
        if isinstance(node, str):
            out.append(node)
        elif isinstance(node, Action):
            out.append(" ".join(jsonpath_text(v) for v in evaluate([root], node.steps)))
        else:
            for item in evaluate([root], node.steps):
                _execute(node.body, item, out)


@dataclass(frozen=True)
class JSONPathPrinter:
    """`-o jsonpath=TEMPLATE`: the template applied once to what kubectl would print."""

    template: str
    nodes: tuple[Node, ...]

    @classmethod
    def parse(cls, template: str) -> JSONPathPrinter:
        return cls(template, tuple(parse(template)))

    def render(self, obj: Any) -> str:
        out: list[str] = []
        _execute(self.nodes, obj, out)
        return "".join(out)


# --- custom columns -------------------------------------------------------------------------------


def relaxed_path(expression: str) -> str:
    """kubectl's relaxed path: `a.b`, `.a.b`, `{a.b}` and `{.a.b}` all mean `{.a.b}`."""
    match = _RELAXED.match(expression)
    if match is None:
        raise JSONPathError(
            "unexpected path string, expected a 'name1.name2' or '.name1.name2' or '{name1.name2}' "
            "or '{.name1.name2}'"
        )
    return "{." + (match.group(1) or match.group(2)) + "}"


def go_value(value: Any) -> str:
    """A value as Go's `%v` prints it (maps as `map[k:v]`, keys sorted; lists as `[a b]`)."""
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{go_value(value[k])}" for k in sorted(value)) + "]"
    if isinstance(value, list):
        return "[" + " ".join(go_value(v) for v in value) + "]"
    return jsonpath_text(value)


@dataclass(frozen=True)
class CustomColumnsPrinter:
    """`-o custom-columns=HEADER:PATH,...`: one row per pod, `<none>` where a path finds nothing."""

    headers: tuple[str, ...]
    paths: tuple[tuple[Step, ...], ...]

    @classmethod
    def parse(cls, spec: str) -> CustomColumnsPrinter:
        if not spec:
            raise JSONPathError("custom-columns format specified but no custom columns given")
        headers, paths = [], []
        for part in spec.split(","):
            header, colon, expression = part.partition(":")
            if not colon:
                raise JSONPathError(
                    f"unexpected custom-columns spec: {part}, expected <header>:<json-path-expr>"
                )
            nodes = parse(relaxed_path(expression))
            if len(nodes) != 1 or not isinstance(nodes[0], Action):
                raise JSONPathError(f"a custom column is one path, not a template: {expression}")
            headers.append(header)
            paths.append(nodes[0].steps)
        return cls(tuple(headers), tuple(paths))

    def cell(self, obj: Any, steps: tuple[Step, ...]) -> str:
        values = evaluate([obj], steps)
        return ",".join(go_value(v) for v in values) if values else "<none>"

    def render(self, objects: Sequence[Any]) -> str:
        rows = [list(self.headers), *([self.cell(o, s) for s in self.paths] for o in objects)]
        # kubectl writes each row tab-separated into a tabwriter, so a tab or a newline inside a
        # value starts a cell or a line there too.
        return tabwrite("".join("\t".join(row) + "\n" for row in rows))


def tabwrite(text: str) -> str:
    """text laid out as kubectl's tabwriter (Go's text/tabwriter, remembering widths) does it: a
    tab ends a cell; each column block (consecutive lines with a cell in that column) is as wide
    as its widest cell, and never narrower than that column was in an earlier block."""
    rows = re.split("[\n\f]", text)
    lines = [re.split("[\t\v]", row) for row in rows]
    out: list[str] = []
    widths: list[int] = []  # the enclosing blocks' widths, column by column
    remembered: list[int] = []

    def write(first: int, last: int) -> None:
        for number in range(first, last):
            cells = (c.ljust(widths[j]) if j < len(widths) else c for j, c in enumerate(lines[number]))
            out.append("".join(cells) + ("\n" if number + 1 < len(lines) else ""))

    def layout(first: int, last: int) -> None:
        column = len(widths)
        at = first
        while at < last:
            if column >= len(lines[at]) - 1:  # the last cell of a line is in no column
                at += 1
                continue
            write(first, at)
            start = at
            width = TAB_MIN_WIDTH
            while at < last and column < len(lines[at]) - 1:
                width = max(width, len(lines[at][column]) + TAB_PADDING)
                at += 1
            remembered.extend(widths[len(remembered) :])
            if len(remembered) == column:
                remembered.append(width)
            width = remembered[column] = max(width, remembered[column])
            widths.append(width)
            layout(start, at)
            widths.pop()
            first = at
        write(first, last)

    layout(0, len(lines))
    return "".join(out)


Printer = JSONPathPrinter | CustomColumnsPrinter


def output_printer(value: str) -> Printer | None:
    """The printer `-o` names, or None for the fixed formats; a bad template raises JSONPathError."""
    kind, equals, argument = value.partition("=")
    if kind == "jsonpath" and equals and not argument:
        raise JSONPathError("template format specified but no template given")
    if kind == "jsonpath" and equals:
        return JSONPathPrinter.parse(argument)
    if kind == "jsonpath-file" and equals:
        try:
            with open(argument, encoding="utf-8") as file:
                return JSONPathPrinter.parse(file.read())
        except OSError as error:
            raise JSONPathError(f"cannot read {argument}: {error.strerror}") from None
    if kind == "custom-columns" and equals:
        return CustomColumnsPrinter.parse(argument)
    if kind in ("jsonpath", "jsonpath-file", "custom-columns", "go-template", "go-template-file"):
        raise JSONPathError(f"-o {kind} needs a value: -o {kind}=...")
    return None
