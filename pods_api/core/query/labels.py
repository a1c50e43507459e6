"""Kubernetes label selectors, as apimachinery's `labels.Parse` reads them.

The syntax is the table of the Kubernetes labels documentation: requirements separated by
commas, each `key`, `!key`, `key=value`, `key==value`, `key!=value`, `key in (a,b)`,
`key notin (a,b)`, `key>1`, `key<1`; keys are qualified names (`[DNS subdomain/]name`), values
label values (possibly empty); whitespace separates tokens; `in`/`notin` values are a set. `!=`
and `notin` also match a pod without the label. The string form (`str()`) is the API server's:
requirements in key order, set values sorted, whitespace dropped. Every error is a
SelectorError naming the selector and the 0-based character offset where parsing stopped; a
selector over the limits of core/query/limits.py is one too.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum

from pods_api.core.api.statuserrors import SelectorError
from pods_api.core.query.limits import MAX_VALUES, check_length, check_requirements

# Go's int64, for `>` and `<` values (strconv.ParseInt(v, 10, 64)).
_INT64 = (-(2**63), 2**63 - 1)
_NAME_MAX = 63  # a label key's name part and a label value (validation.LabelValueMaxLength)
_PREFIX_MAX = 253  # a DNS subdomain
_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_GO_INT = re.compile(r"[+-]?[0-9]+")


# ---------------------------------------------------------------------------------------------
# the lexer


class Token(Enum):
    """apimachinery's token kinds (labels.Token)."""

    ERROR = "error"
    END = "end of string"
    CLOSED_PAR = ")"
    COMMA = ","
    DOES_NOT_EXIST = "!"
    DOUBLE_EQUALS = "=="
    EQUALS = "="
    GREATER_THAN = ">"
    IDENTIFIER = "identifier"
    IN = "in"
    LESS_THAN = "<"
    NOT_EQUALS = "!="
    NOT_IN = "notin"
    OPEN_PAR = "("


_LITERALS = {t.value: t for t in Token if t not in (Token.ERROR, Token.END, Token.IDENTIFIER)}
_SPECIAL = frozenset("=!(),><")
_WHITESPACE = frozenset(" \t\r\n")


@dataclass(frozen=True, slots=True)
class Lexeme:
    token: Token
    literal: str
    position: int


def lex(text: str) -> list[Lexeme]:
    """Every token of `text`, ending with END. Like apimachinery's lexer: a run of special
    characters gives its longest leading operator; anything else up to a special character or
    whitespace is one identifier (or the keyword `in`/`notin`)."""
    out: list[Lexeme] = []
    pos, n = 0, len(text)
    while True:
        while pos < n and text[pos] in _WHITESPACE:
            pos += 1
        if pos >= n:
            out.append(Lexeme(Token.END, "", n))
            return out
        start = pos
        if text[pos] in _SPECIAL:
            best: Token | None = None
            end = pos
            while pos < n and text[pos] in _SPECIAL:
                found = _LITERALS.get(text[start : pos + 1])
                if found is None and best is not None:
                    break
                if found is not None:
                    best, end = found, pos + 1
                pos += 1
            pos = end
            out.append(Lexeme(best or Token.ERROR, text[start:end], start))
        else:
            while pos < n and text[pos] not in _SPECIAL and text[pos] not in _WHITESPACE:
                pos += 1
            word = text[start:pos]
            token = _LITERALS.get(word, Token.IDENTIFIER)
            out.append(Lexeme(token if token in (Token.IN, Token.NOT_IN) else Token.IDENTIFIER, word, start))


# ---------------------------------------------------------------------------------------------
# the model


class Op(Enum):
    """apimachinery's selection.Operator values."""

    EXISTS = "exists"
    DOES_NOT_EXIST = "!"
    EQUALS = "="
    DOUBLE_EQUALS = "=="
    NOT_EQUALS = "!="
    IN = "in"
    NOT_IN = "notin"
    GREATER_THAN = "gt"
    LESS_THAN = "lt"


_BINARY_OPS = "in, notin, =, ==, !=, gt, lt"


def _go_int(text: str) -> int | None:
    if not _GO_INT.fullmatch(text):
        return None
    value = int(text)
    return value if _INT64[0] <= value <= _INT64[1] else None


LabelTest = Callable[[Mapping[str, str]], bool]


@dataclass(frozen=True, slots=True)
class Requirement:
    """One requirement on one label. `values` is sorted and unique for in/notin."""

    key: str
    op: Op
    values: tuple[str, ...] = ()
    # The requirement as one function of the labels, made once: a set's membership is one hash
    # lookup (a tuple's was a scan: `in` with 10,000 values held the loop for seconds).
    test: LabelTest = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "test", _test(self.key, self.op, self.values))

    def matches(self, labels: Mapping[str, str]) -> bool:
        return self.test(labels)

    def __str__(self) -> str:
        match self.op:
            case Op.EXISTS:
                return self.key
            case Op.DOES_NOT_EXIST:
                return "!" + self.key
            case Op.IN | Op.NOT_IN:
                return f"{self.key} {self.op.value} ({','.join(self.values)})"
            case Op.GREATER_THAN:
                return f"{self.key}>{self.values[0]}"
            case Op.LESS_THAN:
                return f"{self.key}<{self.values[0]}"
        return f"{self.key}{self.op.value}{self.values[0]}"

    @property
    def canonical(self) -> str:
        """The text with `==` written `=`: the same for requirements that mean the same."""
        if self.op is Op.DOUBLE_EQUALS:
            return f"{self.key}={self.values[0]}"
        return str(self)


def _test(key: str, op: Op, values: tuple[str, ...]) -> LabelTest:
    if op is Op.EXISTS:
        return lambda labels: key in labels
    if op is Op.DOES_NOT_EXIST:
        return lambda labels: key not in labels
    if op in (Op.GREATER_THAN, Op.LESS_THAN):
        want = _go_int(values[0])
        greater = op is Op.GREATER_THAN

        def compare(labels: Mapping[str, str]) -> bool:
            value = labels.get(key)
            have = _go_int(value) if value is not None else None
            if have is None or want is None:
                return False
            return have > want if greater else have < want

        return compare
    members = frozenset(values)  # a missing label (None) is in no set
    if op in (Op.NOT_IN, Op.NOT_EQUALS):
        return lambda labels: labels.get(key) not in members
    return lambda labels: labels.get(key) in members


@dataclass(frozen=True, slots=True)
class LabelSelector:
    requirements: tuple[Requirement, ...] = ()
    tests: tuple[LabelTest, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "tests", tuple(r.test for r in self.requirements))

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(test(labels) for test in self.tests)

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)

    def __bool__(self) -> bool:
        return bool(self.requirements)

    @property
    def key(self) -> str:
        return ",".join(sorted({r.canonical for r in self.requirements}))


def _label_key_problem(key: str) -> str | None:
    """Why `key` is not a label key (content.IsLabelKey), or None."""
    parts = key.split("/")
    if len(parts) > 2:
        return (
            "a label key is an optional DNS subdomain prefix and '/' and a name (e.g. 'example.com/MyName')"
        )
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            return "the prefix part must not be empty"
        if len(prefix) > _PREFIX_MAX:
            return f"the prefix part must be no more than {_PREFIX_MAX} characters"
        if not _SUBDOMAIN.fullmatch(prefix):
            return (
                "the prefix part must be a lowercase DNS subdomain: alphanumerics, '-' and '.', "
                "starting and ending with an alphanumeric"
            )
    if not name:
        return "the name part must not be empty"
    if len(name) > _NAME_MAX:
        return f"the name part must be no more than {_NAME_MAX} characters"
    if not _NAME.fullmatch(name):
        return (
            "the name part must consist of alphanumeric characters, '-', '_' or '.', "
            "and must start and end with an alphanumeric character"
        )
    return None


def _label_value_problem(value: str) -> str | None:
    """Why `value` is not a label value (validation.IsValidLabelValue), or None."""
    if len(value) > _NAME_MAX:
        return f"must be no more than {_NAME_MAX} characters"
    if value and not _NAME.fullmatch(value):
        return (
            "a label value must be empty or consist of alphanumeric characters, '-', '_' or '.', "
            "and must start and end with an alphanumeric character"
        )
    return None


# ---------------------------------------------------------------------------------------------
# the parser


class _LabelParser:
    """apimachinery's recursive descent, with positions. In a value position the keywords
    `in` and `notin` are plain identifiers (so `notin=in` is a valid selector)."""

    def __init__(self, text: str) -> None:
        check_length("label", text)
        self.text = text
        self.items = lex(text)
        self.at = 0
        self.values = 0  # in the sets so far: bounded by MAX_VALUES

    def fail(self, item: Lexeme, problem: str) -> SelectorError:
        return SelectorError("label", self.text, item.position, problem)

    def peek(self, values: bool = True) -> Lexeme:
        return self._as(self.items[self.at], values)

    def take(self, values: bool = True) -> Lexeme:
        item = self.peek(values)
        self.at += 1
        return item

    @staticmethod
    def _as(item: Lexeme, values: bool) -> Lexeme:
        if values and item.token in (Token.IN, Token.NOT_IN):
            return Lexeme(Token.IDENTIFIER, item.literal, item.position)
        return item

    @staticmethod
    def shown(item: Lexeme) -> str:
        return "end of string" if item.token is Token.END else repr(item.literal)

    def parse(self) -> LabelSelector:
        requirements: list[Requirement] = []
        while True:
            item = self.peek()
            if item.token is Token.END:
                break
            if item.token not in (Token.IDENTIFIER, Token.DOES_NOT_EXIST):
                raise self.fail(item, f"found {self.shown(item)}, expected: !, identifier, or end of string")
            check_requirements("label", self.text, len(requirements) + 1, item.position)
            requirements.append(self.requirement())
            after = self.take()
            if after.token is Token.END:
                break
            if after.token is not Token.COMMA:
                raise self.fail(after, f"found {self.shown(after)}, expected: ',' or end of string")
            nxt = self.peek()
            if nxt.token not in (Token.IDENTIFIER, Token.DOES_NOT_EXIST):
                raise self.fail(nxt, f"found {self.shown(nxt)}, expected: identifier after ','")
        return LabelSelector(tuple(sorted(requirements, key=lambda r: (r.key, str(r)))))

    def requirement(self) -> Requirement:
        item = self.take()
        negated = item.token is Token.DOES_NOT_EXIST
        if negated:
            item = self.take()
        if item.token is not Token.IDENTIFIER:
            raise self.fail(item, f"found {self.shown(item)}, expected: identifier")
        key = item.literal
        problem = _label_key_problem(key)
        if problem is not None:
            raise self.fail(item, f"invalid label key {key!r}: {problem}")
        if negated:
            return Requirement(key, Op.DOES_NOT_EXIST)
        if self.peek().token in (Token.END, Token.COMMA):
            return Requirement(key, Op.EXISTS)
        op_item = self.take(values=False)
        op = _OPERATORS.get(op_item.token)
        if op is None:
            raise self.fail(op_item, f"found {self.shown(op_item)}, expected: {_BINARY_OPS}")
        values = self.value_set() if op in (Op.IN, Op.NOT_IN) else [self.exact_value()]
        self.values += len(values)
        if self.values > MAX_VALUES:
            raise self.fail(op_item, f"over {MAX_VALUES} values in the sets of one selector")
        if op in (Op.GREATER_THAN, Op.LESS_THAN) and _go_int(values[0][0]) is None:
            raise self.fail(
                values[0][1], f"for 'gt', 'lt' operators, the value must be an integer, not {values[0][0]!r}"
            )
        for value, where in values:
            problem = _label_value_problem(value)
            if problem is not None:
                raise self.fail(where, f"invalid value {value!r} for label {key!r}: {problem}")
        return Requirement(key, op, tuple(sorted({v for v, _ in values})))

    def exact_value(self) -> tuple[str, Lexeme]:
        item = self.peek()
        if item.token in (Token.END, Token.COMMA):
            return "", item
        item = self.take()
        if item.token is not Token.IDENTIFIER:
            raise self.fail(item, f"found {self.shown(item)}, expected: identifier")
        return item.literal, item

    def value_set(self) -> list[tuple[str, Lexeme]]:
        item = self.take()
        if item.token is not Token.OPEN_PAR:
            raise self.fail(item, f"found {self.shown(item)}, expected: '('")
        first = self.peek()
        if first.token is Token.CLOSED_PAR:  # "()" is the set of the empty string
            self.take()
            return [("", first)]
        if first.token not in (Token.IDENTIFIER, Token.COMMA):
            raise self.fail(first, f"found {self.shown(first)}, expected: ',', ')' or identifier")
        values: list[tuple[str, Lexeme]] = []
        while True:
            item = self.take()
            if item.token is Token.IDENTIFIER:
                values.append((item.literal, item))
                nxt = self.peek()
                if nxt.token is Token.CLOSED_PAR:
                    self.take()
                    return values
                if nxt.token is not Token.COMMA:
                    raise self.fail(nxt, f"found {self.shown(nxt)}, expected: ',' or ')'")
            elif item.token is Token.COMMA:
                # An empty place between commas, or before the first or after the last, is "".
                if not values:
                    values.append(("", item))
                nxt = self.peek()
                if nxt.token is Token.CLOSED_PAR:
                    values.append(("", nxt))
                    self.take()
                    return values
                if nxt.token is Token.COMMA:
                    values.append(("", nxt))
            else:
                raise self.fail(item, f"found {self.shown(item)}, expected: ',', or identifier")


_OPERATORS = {
    Token.IN: Op.IN,
    Token.NOT_IN: Op.NOT_IN,
    Token.EQUALS: Op.EQUALS,
    Token.DOUBLE_EQUALS: Op.DOUBLE_EQUALS,
    Token.NOT_EQUALS: Op.NOT_EQUALS,
    Token.GREATER_THAN: Op.GREATER_THAN,
    Token.LESS_THAN: Op.LESS_THAN,
}


def parse_labels(text: str) -> LabelSelector:
    """A label selector; raises SelectorError. The empty string selects everything."""
    return _LabelParser(text).parse()
