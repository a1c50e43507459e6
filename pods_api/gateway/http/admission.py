"""Which Pods API call a request is, what gates it, and counting it: the HTTP twin of the gRPC
interceptors (core/grpc/interceptors.py), in the same order and from the same call table
(core/policy/calls.py): metrics outermost, then the table's refusal (rate limit, readiness).

A request's `Call` is a value: named once from the raw request by its route
(gateway/http/router.py's `CallRoute.call`), handed to the endpoint and to the stream it may start,
and read back by the router when the request is over, to count it with the code it ended with.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from starlette.requests import Request

from pods_api.core.api.statuserrors import FailedPrecondition
from pods_api.core.assembly import Core
from pods_api.core.policy.calls import HTTP_API_VERSION, refusal
from pods_api.core.policy.metrics import Metrics
from pods_api.gateway.http.errors import Code, code_of_number
from pods_api.gateway.http.formats import Format
from pods_api.gateway.http.params import Args

LIST, GET, WATCH, LOOKUP = "ListPods", "GetPod", "WatchPods", "Lookup"


@dataclass(slots=True)
class Call:
    """One request's call: which it is and what its route read to decide that, then how it
    ended when that is not what its response's status says (a stream's end; an error whose
    gRPC code the status does not carry)."""

    name: str
    # The form of a pods answer, when naming the call ranked Accept already (None: not read).
    fmt: Format | None = None
    # A watch accepted before the pod sources synced: its stream waits for them.
    waits_for_sync: bool = False
    outcome: Code | None = None

    def end(self, code: Code) -> None:
        """How the call ended; the first reason wins: a client leaving after its final ERROR
        event does not change why its stream ended."""
        if self.outcome is None:
            self.outcome = code


def named(name: str) -> Callable[[Request, Args], Call]:
    """The call of a route that serves one call whatever the request."""

    def call(request: Request, args: Args) -> Call:
        return Call(name)

    return call


def admit(core: Core, call: Call, *, unsynced_watch_waits: bool = False) -> None:
    """Raises the call table's refusal of `call` (rate limit shared with gRPC, readiness), if any."""
    refused = refusal(core.calls[call.name], core.limiter, core.cache)
    if refused is None:
        return
    if unsynced_watch_waits and call.name == WATCH and isinstance(refused, FailedPrecondition):
        # An EventSource takes a 503 as final and never reconnects: a watch over SSE is
        # accepted while the sources sync, and gets heartbeats until its snapshot is ready.
        call.waits_for_sync = True
        return
    raise refused


def record_call(metrics: Metrics, call: Call, code: Code) -> None:
    """Count `call` as ended with `code`, unless it recorded how it ended."""
    metrics.record_request(HTTP_API_VERSION, call.name, call.outcome or code)


def response_code(status: int, headers: Iterable[tuple[bytes, bytes]]) -> Code:
    """The gRPC code a response carries: its Grpc-Status header, else OK below 400."""
    for name, value in headers:
        if name.lower() == b"grpc-status":
            return code_of_number(int(value))
    return Code.OK if status < 400 else Code.UNKNOWN
