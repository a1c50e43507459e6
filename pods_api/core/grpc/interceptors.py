"""Cross-cutting concerns of the Pods API, read from the call table (core/policy/calls.py): metrics (sees
every outcome) around admission, which is also the one place where a domain error becomes the
call's status: an unparsable request, the call's refusal (rate limit, readiness), and every
`StatusError` a handler raises end in `context.abort` here and nowhere else. Health and
reflection pass through untouched.

One interceptor for both, and one wrapper per method, made the first time the method is called
and reused: two interceptors each built a new handler on every call, and each put an async
generator between every watch frame and the socket. A watch now runs admission and metrics once,
at its start and its end, and its frames go from the stream to `context.write` with nothing
between (docs/perf-notes/2026-11-30-grpc-per-call-and-frame.md).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, NoReturn

import grpc

from pods_api.core.api.statuserrors import Code, Internal, StatusError
from pods_api.core.assembly import Core
from pods_api.core.grpc.requests import Unparsable
from pods_api.core.grpc.service import KUBELET_SERVICES
from pods_api.core.policy.calls import KUBELET_TEXTS, OUR_TEXTS, Method, refusal
from pods_api.core.policy.metrics import Metrics

Behavior = Callable[[Any, grpc.aio.ServicerContext], Any]
Continuation = Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]]
Recorder = Callable[[grpc.aio.ServicerContext, BaseException | None], None]

_GRPC_CODES = {code.value[0]: code for code in grpc.StatusCode}
# Trailing metadata of every List, Get and Lookup while a source has a warning for clients
# (SourceSink.warn), one value per source: as the API server's Warning headers, something a
# client may show (`pods-api check` does) and the kubelet's clients ignore.
WARNING_METADATA = "pods-api-warning"


def warning_metadata(warnings: dict[str, str]) -> tuple[tuple[str, str], ...]:
    """Metadata values are printable ASCII: anything else in a source's text is escaped."""
    return tuple(
        (WARNING_METADATA, f"{source}: {text}".encode("ascii", "backslashreplace").decode("ascii"))
        for source, text in sorted(warnings.items())
    )


async def abort(context: grpc.aio.ServicerContext, error: StatusError) -> NoReturn:
    """The gRPC surface's translation of a domain error: context.abort, typed (it always raises)."""
    await context.abort(_GRPC_CODES[error.code.number], error.message)
    raise AssertionError("context.abort returned")


class PodsInterceptor(grpc.aio.ServerInterceptor):
    """Wraps every handler of a Pods service (any handler registered on one, even around the
    call table: admission refuses a method the table lacks rather than run it unguarded)."""

    def __init__(self, core: Core) -> None:
        self._core = core
        # method -> (the handler grpc found, its wrapper): bounded by the methods registered.
        self._wrapped: dict[str, tuple[grpc.RpcMethodHandler, grpc.RpcMethodHandler]] = {}

    async def intercept_service(
        self, continuation: Continuation, details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        known = self._wrapped.get(details.method)
        if known is not None and known[0] is handler:
            return known[1]
        target = self._core.calls.grpc_method(details.method)
        if handler is None or target is None:
            return handler  # not found, or not a Pods service: nothing to count or admit
        wrapped = _intercept(self._core, details.method, target, handler)
        self._wrapped[details.method] = (handler, wrapped)
        return wrapped


def _intercept(
    core: Core, method: str, target: tuple[str, Method | None], handler: grpc.RpcMethodHandler
) -> grpc.RpcMethodHandler:
    version, call = target
    admit = _admission(core, method, call)
    record = _recorder(core.metrics, version, call)
    deserializer, serializer = handler.request_deserializer, handler.response_serializer
    if handler.unary_unary is not None:
        return grpc.unary_unary_rpc_method_handler(
            _unary(handler.unary_unary, admit, record, core.cache.warnings), deserializer, serializer
        )
    if handler.unary_stream is not None:
        return grpc.unary_stream_rpc_method_handler(
            _stream(handler.unary_stream, admit, record), deserializer, serializer
        )
    return handler  # the Pods API has no client-streaming methods


def _unary(
    behavior: Behavior,
    admit: Callable[[Any], None],
    record: Recorder,
    warnings: dict[str, str],
) -> Behavior:
    async def intercepted(request: Any, context: grpc.aio.ServicerContext) -> Any:
        if warnings:  # the cache's own dict: one truth test per call while there are none
            context.set_trailing_metadata(warning_metadata(warnings))
        try:
            try:
                admit(request)
                response = await behavior(request, context)
            except StatusError as exc:
                await abort(context, exc)
        except BaseException as exc:
            record(context, exc)
            raise
        record(context, None)
        return response

    return intercepted


def _stream(
    behavior: Behavior,
    admit: Callable[[Any], None],
    record: Recorder,
) -> Callable[[Any, grpc.aio.ServicerContext], Awaitable[None]]:
    """A streaming handler as a coroutine that writes its messages itself (grpc.aio's
    reader/writer form): a handler that is one already is awaited; an async generator's
    messages are written here, as grpc itself would."""
    if inspect.isasyncgenfunction(behavior):
        generator = behavior

        async def written(request: Any, context: grpc.aio.ServicerContext) -> None:
            write = context.write
            async for message in generator(request, context):
                await write(message)

        behavior = written

    async def intercepted(request: Any, context: grpc.aio.ServicerContext) -> None:
        try:
            try:
                admit(request)
                await behavior(request, context)
            except StatusError as exc:
                await abort(context, exc)
        except BaseException as exc:
            record(context, exc)
            raise
        record(context, None)

    return intercepted


# -- admission -----------------------------------------------------------------------------------


def _admission(core: Core, method: str, call: Method | None) -> Callable[[Any], None]:
    """Runs each Pods call only if its request parsed and the table's refusal lets it (in
    grpc-go's order: a request that does not parse is refused before any interceptor, so it
    spends no token). On the kubelet's contracts a refusal says what the kubelet says."""
    service = method.lstrip("/").rpartition("/")[0]
    texts = KUBELET_TEXTS if service in KUBELET_SERVICES else OUR_TEXTS

    def admit(request: Any) -> None:
        if isinstance(request, Unparsable):
            raise request.error()
        if call is None:  # a handler registered around the table: refuse rather than run unguarded
            raise Internal(f"{method} is not in the call table")
        refused = refusal(call, core.limiter, core.cache, texts)
        if refused is not None:
            raise refused

    return admit


# -- metrics -------------------------------------------------------------------------------------


def _recorder(metrics: Metrics, version: str, call: Method | None) -> Recorder:
    """Counts one finished call by the code it ended with (a call the table lacks is refused by
    admission and has no counter of its own)."""
    if call is None:
        return lambda context, exc: None
    record, method = metrics.record_request, call.name

    def recorded(context: grpc.aio.ServicerContext, exc: BaseException | None) -> None:
        record(version, method, _outcome(context, exc))

    return recorded


def _outcome(context: grpc.aio.ServicerContext, exc: BaseException | None) -> Code:
    if isinstance(exc, asyncio.CancelledError):
        return Code.CANCELLED
    code = context.code()
    if code is None:
        return Code.OK if exc is None else Code.UNKNOWN
    return Code(code.value[0])
