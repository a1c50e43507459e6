"""Query parameters: a route takes the ones its handler declares (its `Query` parameters, its
dependencies' included) and no others. An unknown one is a 400 naming it, never ignored: a
typo, or a filter this server does not have (`namespace`), would otherwise quietly return every
pod. The allowed set is what FastAPI documents of the route (its OpenAPI parameters, from the
public `get_openapi`), so a parameter added to a handler is allowed with no second list to keep
in step, and the OpenAPI document and the check cannot disagree.

The hot routes (gateway/pods.py) read their parameters without FastAPI's dependency machinery;
`check`, `flag` and `flags` give them the same 400s FastAPI would, word for word.
"""

from __future__ import annotations

from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute
from pydantic import TypeAdapter, ValidationError
from starlette.datastructures import QueryParams
from starlette.requests import Request

from pods_api.core.api.status import InvalidArgument, quote

# Unknown names listed in one error: enough to fix a request, bounded for a hostile one.
NAMES_SHOWN = 5

# Pydantic's own reading of a boolean, as FastAPI applies it to a `bool` query parameter.
_BOOL = TypeAdapter(bool)

# Where a route keeps its names once read (routes are not hashable, so no dict can key them).
_ATTRIBUTE = "_pods_api_query_names"


def declared(route: APIRoute) -> frozenset[str]:
    """The query parameter names `route` takes (aliases, as they appear in a URL)."""
    names: frozenset[str] | None = getattr(route, _ATTRIBUTE, None)
    if names is None:
        names = _documented_query_names(route)
        setattr(route, _ATTRIBUTE, names)
    return names


def _documented_query_names(route: APIRoute) -> frozenset[str]:
    """The `in: query` parameters of the route's operations, as its OpenAPI entry lists them
    (its dependencies' included); none for a route left out of the document."""
    operations = get_openapi(title="", version="", routes=[route])["paths"].get(route.path, {})
    return frozenset(
        parameter["name"]
        for operation in operations.values()
        for parameter in operation.get("parameters", ())
        if parameter.get("in") == "query"
    )


async def known_parameters(request: Request) -> None:
    """A dependency: InvalidArgument for a query parameter the matched route does not declare."""
    route = request.scope.get("route")
    if isinstance(route, APIRoute) and request.query_params:
        check(request.query_params, declared(route))


def check(query: QueryParams, allowed: frozenset[str]) -> None:
    """InvalidArgument naming the query parameters not in `allowed`."""
    unknown = [name for name in dict.fromkeys(query.keys()) if name not in allowed]
    if not unknown:
        return
    shown = ", ".join(quote(name, 64) for name in unknown[:NAMES_SHOWN])
    more = f" and {len(unknown) - NAMES_SHOWN} more" if len(unknown) > NAMES_SHOWN else ""
    takes = ", ".join(sorted(allowed)) if allowed else "none"
    noun = "parameter" if len(unknown) == 1 else "parameters"
    raise InvalidArgument(f"unknown query {noun} {shown}{more} (this path takes: {takes})")


def flags(query: QueryParams, *names: str) -> tuple[bool, ...]:
    """Boolean query parameters (absent: False; repeated: the last), read as FastAPI reads a
    `bool` parameter. InvalidArgument names every bad one at once, as FastAPI's 400 does."""
    values, problem = read_flags(query, *names)
    if problem is not None:
        raise problem
    return values


def read_flags(query: QueryParams, *names: str) -> tuple[tuple[bool, ...], InvalidArgument | None]:
    """As `flags`, with a bad one read as False and the error returned rather than raised."""
    values, problems = [], []
    for name in names:
        raw = query.get(name)
        try:
            values.append(False if raw is None else _BOOL.validate_python(raw))
        except ValidationError as exc:
            values.append(False)
            problems.append(f'query parameter "{name}": {exc.errors()[0]["msg"]}')
    return tuple(values), InvalidArgument("; ".join(problems)) if problems else None
