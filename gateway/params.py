"""Query parameters: a route takes the ones its handler declares (its `Query` parameters, its
dependencies' included) and no others. An unknown one is a 400 naming it, never ignored: a
typo, or a filter this server does not have (`namespace`), would otherwise quietly return every
pod. The allowed set is read from the route itself, so a parameter added to a handler is
allowed with no second list to keep in step.
"""

from __future__ import annotations

from collections.abc import Iterator

from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from starlette.requests import Request

from pods_api.core.status import InvalidArgument, quote

# Unknown names listed in one error: enough to fix a request, bounded for a hostile one.
NAMES_SHOWN = 5

# Where a route keeps its names once read (routes are not hashable, so no dict can key them).
_ATTRIBUTE = "_pods_api_query_names"


def declared(route: APIRoute) -> frozenset[str]:
    """The query parameter names `route` takes (aliases, as they appear in a URL)."""
    names: frozenset[str] | None = getattr(route, _ATTRIBUTE, None)
    if names is None:
        names = frozenset(_query_names(route.dependant))
        setattr(route, _ATTRIBUTE, names)
    return names


def _query_names(dependant: Dependant) -> Iterator[str]:
    yield from (param.alias for param in dependant.query_params)
    for sub in dependant.dependencies:
        yield from _query_names(sub)


async def known_parameters(request: Request) -> None:
    """A dependency: InvalidArgument for a query parameter the matched route does not declare."""
    route = request.scope.get("route")
    if not isinstance(route, APIRoute) or not request.query_params:
        return
    allowed = declared(route)
    unknown = [name for name in dict.fromkeys(request.query_params.keys()) if name not in allowed]
    if not unknown:
        return
    shown = ", ".join(quote(name, 64) for name in unknown[:NAMES_SHOWN])
    more = f" and {len(unknown) - NAMES_SHOWN} more" if len(unknown) > NAMES_SHOWN else ""
    takes = ", ".join(sorted(allowed)) if allowed else "none"
    noun = "parameter" if len(unknown) == 1 else "parameters"
    raise InvalidArgument(f"unknown query {noun} {shown}{more} (this path takes: {takes})")
