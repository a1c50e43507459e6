"""Which Pods API call a request is, what gates it, and counting it: the HTTP twin of the gRPC
interceptors (core/grpc/interceptors.py), in the same order and from the same call table
(core/policy/calls.py): metrics outermost, then the table's refusal (rate limit, readiness).

A route names its call with a dependency (`name_call`); the refusal is one dependency
(`admission`); `call_dependencies` gives a route both. The hot routes (gateway/pods.py) do the
same without FastAPI: `list_call` and `admit`. The gateway's one request layer
(gateway/front.py) counts every named call once, when it is over, with the gRPC code it ended
with (`record_call`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable

from fastapi import Depends
from fastapi.params import Depends as Dependency
from starlette.requests import Request
from starlette.types import Scope

from pods_api.core.api.status import FailedPrecondition
from pods_api.core.assembly import Core
from pods_api.core.policy.calls import HTTP_API_VERSION, refusal
from pods_api.core.policy.metrics import Metrics
from pods_api.gateway import formats
from pods_api.gateway.errors import Code, code_of_number
from pods_api.gateway.params import known_parameters

LIST, GET, WATCH, LOOKUP = "ListPods", "GetPod", "WatchPods", "Lookup"
# Query parameters that make `GET /v1/pods` a Lookup (by an index) rather than a List.
LOOKUP_PARAMETERS = ("containerID", "podIP")
# Where a request carries its call and, for a stream, how the stream ended.
CALL_KEY = "pods_api.call"
OUTCOME_KEY = "pods_api.outcome"
# Set on a watch accepted before the pod sources synced: its stream waits for them.
WAITS_KEY = "pods_api.waits_for_sync"
# Pydantic's true words: the typed `watch` parameter validates, this only names the call early.
_TRUE_WORDS = frozenset({"1", "true", "t", "yes", "y", "on"})


def list_call(request: Request) -> str:
    """Which call a request for the pods collection is: Watch, Lookup or List."""
    if wants_watch(request):
        return WATCH
    return LOOKUP if any(p in request.query_params for p in LOOKUP_PARAMETERS) else LIST


def wants_watch(request: Request) -> bool:
    if request.query_params.get("watch", "").lower() in _TRUE_WORDS:
        return True
    accepted = formats.preferred(request.headers.get("accept"), (formats.JSON, formats.EVENT_STREAM))
    return accepted == formats.EVENT_STREAM


# Dependencies are `async def`: FastAPI runs a plain `def` in a thread pool, and the limiter and
# the cache belong to the event loop.


def call_dependencies(core: Core, call: str | None) -> list[Dependency]:
    """What a route serving `call` (None: List, Watch or Lookup, as the request asks) depends on: its
    name, its query parameters checked, then its refusal. Raises KeyError for a call the table lacks."""
    names = (call,) if call else (LIST, WATCH, LOOKUP)
    missing = [name for name in names if name not in core.calls.by_name]
    if missing:  # at start-up, not per request
        raise KeyError(f"not in the call table: {', '.join(missing)}")
    # The call is named first, so a request refused for its parameters is still counted.
    return [Depends(name_call(call)), Depends(known_parameters), Depends(admission(core))]


def name_call(call: str | None) -> Callable[[Request], Awaitable[str]]:
    """A dependency that marks the request as `call` (None: List, Watch or Lookup, as the request
    asks). It reads the raw request, so a call with invalid parameters is still counted."""

    async def named(request: Request) -> str:
        name = call or list_call(request)
        request.scope[CALL_KEY] = name
        return name

    return named


def admission(core: Core) -> Callable[[Request], Awaitable[None]]:
    """The call table's refusal (rate limit shared with gRPC, readiness), as one dependency."""

    async def admission_dependency(request: Request) -> None:
        admit(core, request.scope)

    return admission_dependency


def admit(core: Core, scope: Scope) -> None:
    """Raises the refusal of the call named in `scope`, if any."""
    call = scope[CALL_KEY]
    refused = refusal(core.calls[call], core.limiter, core.cache)
    if refused is None:
        return
    if call == WATCH and isinstance(refused, FailedPrecondition):
        # An EventSource takes a 503 as final and never reconnects: a watch over SSE is
        # accepted while the sources sync, and gets heartbeats until its snapshot is ready.
        scope[WAITS_KEY] = True
        return
    raise refused


def end_stream(scope: Scope, code: Code) -> None:
    """A stream records how it ended (its response started long before, with 200); the first
    reason wins: a client leaving after its final ERROR event does not change why it ended."""
    scope.setdefault(OUTCOME_KEY, code)


def record_call(metrics: Metrics, scope: Scope, code: Code) -> None:
    """Count the call named in `scope` (if any) as ended with `code`, unless a stream recorded
    how it ended."""
    call = scope.get(CALL_KEY)
    if call is not None:
        metrics.record_request(HTTP_API_VERSION, call, scope.get(OUTCOME_KEY, code))


def response_code(status: int, headers: Iterable[tuple[bytes, bytes]]) -> Code:
    """The gRPC code a response carries: its Grpc-Status header, else OK below 400."""
    for name, value in headers:
        if name.lower() == b"grpc-status":
            return code_of_number(int(value))
    return Code.OK if status < 400 else Code.UNKNOWN
