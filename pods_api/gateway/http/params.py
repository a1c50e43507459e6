"""A call route's parameters, declared once: each is a `Param` (its name as it appears in a URL
or a header, its `Kind`, its documentation), and a route's list of them is what the router
parses, what it checks the query's names against, and what the OpenAPI document says the
route takes (`operation_parameters`). Nothing else states them.

An unknown query parameter is a 400 naming it, never ignored: a typo, or a filter this server
does not have (`namespace`), would otherwise quietly return every pod. The Kubernetes view, as
the API server, ignores unknown ones; its kinds hand the raw text to gateway/kube/listoptions.py,
which reads it as the API server does.

The pods routes' values read as FastAPI reads a typed query parameter (pydantic's reading of
a boolean, word for word in the 400), since the document they are described in has always
promised that.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from pydantic import TypeAdapter, ValidationError
from starlette.datastructures import QueryParams
from starlette.requests import Request

from pods_api.core.api.statuserrors import InvalidArgumentError, quote

T = TypeVar("T")
Schema = dict[str, Any]

# Unknown names listed in one error: enough to fix a request, bounded for a hostile one.
NAMES_SHOWN = 5

# Pydantic's own reading of a boolean, as FastAPI applies it to a `bool` query parameter.
_BOOL = TypeAdapter(bool)


@dataclass(frozen=True, slots=True)
class Kind(Generic[T]):
    """How a parameter's text is read, and how the OpenAPI document shows it."""

    # The value from every value given, in order (at least one); raises ValueError saying why.
    read: Callable[[list[str]], T]
    default: T  # absent (and, for a bad value, what the call is named from)
    # The OpenAPI schema of a parameter of this kind, from its title and documentation.
    schema: Callable[[str, str], Schema]


def _flag(raws: list[str]) -> bool:
    """Repeated: the last, as FastAPI reads a scalar."""
    try:
        return _BOOL.validate_python(raws[-1])
    except ValidationError as exc:
        raise ValueError(exc.errors()[0]["msg"]) from None


def _text(raws: list[str]) -> str:
    return raws[-1]


def _texts(raws: list[str]) -> tuple[str, ...]:
    return tuple(raws)


def _optional(json_type: Schema) -> Callable[[str, str], Schema]:
    """What FastAPI documents of an optional typed parameter."""
    return lambda title, doc: {"anyOf": [json_type, {"type": "null"}], "description": doc, "title": title}


def _typed(json_type: str) -> Callable[[str, str], Schema]:
    """A parameter read by hand elsewhere, documented by its JSON type alone."""
    return lambda title, doc: {"type": json_type}


# The pods routes' kinds, as FastAPI would read and document `bool = False`, `str | None` and
# `list[str] | None`.
FLAG: Kind[bool] = Kind(
    _flag, False, lambda title, doc: {"default": False, "description": doc, "title": title, "type": "boolean"}
)
TEXT: Kind[str | None] = Kind(_text, None, _optional({"type": "string"}))
TEXTS: Kind[tuple[str, ...]] = Kind(_texts, (), _optional({"items": {"type": "string"}, "type": "array"}))
# The Kubernetes view's kinds: the raw text, read by gateway/kube/listoptions.py as the API server
# reads it (Go's booleans, its integers), in its order of errors.
GO_BOOLEAN: Kind[str | None] = Kind(_text, None, _typed("boolean"))
GO_INTEGER: Kind[str | None] = Kind(_text, None, _typed("integer"))
GO_STRING: Kind[str | None] = Kind(_text, None, _typed("string"))


# eq=False: a Param is its own identity, hashed as an object is (by the C code of a dict
# lookup, where a dataclass's hash of its fields would be a Python call per lookup).
@dataclass(frozen=True, slots=True, eq=False)
class Param(Generic[T]):
    """One parameter a call route takes."""

    name: str  # as in the URL (`labelSelector`) or the header (`Last-Event-ID`)
    kind: Kind[T]
    doc: str
    where: Literal["query", "header"] = "query"

    def schema(self) -> Schema:
        """Its OpenAPI parameter object."""
        entry: Schema = {"name": self.name, "in": self.where, "required": False}
        entry["schema"] = self.kind.schema(self.name.title(), self.doc)
        entry["description"] = self.doc
        return entry


class Args(dict[Param[Any], Any]):
    """The values of one request's parameters, by Param: what the endpoint reads, never the
    query itself. A Param the route does not declare is a KeyError: a route reads what it
    takes. A plain dict at run time (its lookups are on every request's path), typed by Param."""

    __slots__ = ()

    if TYPE_CHECKING:

        def __getitem__(self, param: Param[T], /) -> T: ...


_NONE: list[str] = []  # a parameter not given (never changed: kinds only read it)


def parse(request: Request, params: Sequence[Param[Any]]) -> tuple[Args, InvalidArgumentError | None]:
    """Every declared parameter's value (absent: its kind's default; bad: the default too), and
    InvalidArgument naming every bad one at once, as FastAPI's 400 does."""
    # The query read in one pass (none at all without a query string, as most Gets come), rather
    # than a scan of it per parameter.
    given: dict[str, list[str]] = {}
    if request.scope.get("query_string"):
        for name, value in request.query_params.multi_items():
            given.setdefault(name, []).append(value)
    values = Args()
    problems = []
    for param in params:
        if param.where == "header":
            raws = request.headers.getlist(param.name)
        else:
            raws = given.get(param.name, _NONE)
        kind = param.kind
        try:
            values[param] = kind.read(raws) if raws else kind.default
        except ValueError as exc:
            values[param] = kind.default
            problems.append(f'{param.where} parameter "{param.name}": {exc}')
    return values, InvalidArgumentError("; ".join(problems)) if problems else None


def query_names(params: Iterable[Param[Any]]) -> frozenset[str]:
    """The query parameter names a route takes."""
    return frozenset(param.name for param in params if param.where == "query")


def check(query: QueryParams, allowed: frozenset[str]) -> None:
    """InvalidArgument naming the query parameters not in `allowed`."""
    unknown = [name for name in dict.fromkeys(query.keys()) if name not in allowed]
    if not unknown:
        return
    shown = ", ".join(quote(name, 64) for name in unknown[:NAMES_SHOWN])
    more = f" and {len(unknown) - NAMES_SHOWN} more" if len(unknown) > NAMES_SHOWN else ""
    takes = ", ".join(sorted(allowed)) if allowed else "none"
    noun = "parameter" if len(unknown) == 1 else "parameters"
    raise InvalidArgumentError(f"unknown query {noun} {shown}{more} (this path takes: {takes})")


async def no_parameters(request: Request) -> None:
    """A dependency of the FastAPI routes that take no query parameters (probes, /metrics)."""
    if request.query_params:
        check(request.query_params, frozenset())


def operation_parameters(path: Sequence[str], params: Sequence[Param[Any]]) -> list[Schema]:
    """The OpenAPI `parameters` of a route: its path's, then its own, in declared order."""
    entries: list[Schema] = [
        {"name": name, "in": "path", "required": True, "schema": {"title": name.title(), "type": "string"}}
        for name in path
    ]
    return entries + [param.schema() for param in params]
