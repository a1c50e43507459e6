"""Cross-cutting concerns of the Pods API, read from the call table (core/calls.py), outermost
first: metrics (sees every outcome), then admission, which is also the one place where a domain
error becomes the call's status: an unparsable request, the call's refusal (rate limit,
readiness), and every `StatusError` a handler raises end in `context.abort` here and nowhere else.
Health and reflection pass through untouched."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, NoReturn

import grpc

from pods_api.core.calls import Call, Calls, refusal
from pods_api.core.grpc.requests import Unparsable
from pods_api.core.metrics import Metrics
from pods_api.core.runtime import Core
from pods_api.core.status import Code, Internal, StatusError

Continuation = Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]]

_GRPC_CODES = {code.value[0]: code for code in grpc.StatusCode}


async def abort(context: grpc.aio.ServicerContext, error: StatusError) -> NoReturn:
    """The gRPC surface's translation of a domain error: context.abort, typed (it always raises)."""
    await context.abort(_GRPC_CODES[error.code.number], error.message)
    raise AssertionError("context.abort returned")


def _rewrap(handler: grpc.RpcMethodHandler, wrap: Callable[[Any], Any]) -> grpc.RpcMethodHandler:
    if handler.unary_unary is not None:
        return grpc.unary_unary_rpc_method_handler(
            wrap(handler.unary_unary), handler.request_deserializer, handler.response_serializer
        )
    if handler.unary_stream is not None:
        return grpc.unary_stream_rpc_method_handler(
            wrap(handler.unary_stream), handler.request_deserializer, handler.response_serializer
        )
    return handler  # the Pods API has no client-streaming methods


class MetricsInterceptor(grpc.aio.ServerInterceptor):
    def __init__(self, metrics: Metrics, calls: Calls) -> None:
        self._metrics = metrics
        self._calls = calls

    async def intercept_service(
        self, continuation: Continuation, details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        target = self._calls.grpc_method(details.method)
        if handler is None or target is None or target[1] is None:
            return handler
        version, method = target[0], target[1].name
        record = self._metrics.record_request

        def unary(behavior: Any) -> Any:
            async def observed(request: Any, context: grpc.aio.ServicerContext) -> Any:
                try:
                    response = await behavior(request, context)
                except BaseException as exc:
                    record(version, method, _outcome(context, exc))
                    raise
                record(version, method, _outcome(context, None))
                return response

            return observed

        def stream(behavior: Any) -> Any:
            async def observed(request: Any, context: grpc.aio.ServicerContext) -> Any:
                try:
                    async for item in behavior(request, context):
                        yield item
                except BaseException as exc:
                    record(version, method, _outcome(context, exc))
                    raise
                record(version, method, _outcome(context, None))

            return observed

        return _rewrap(handler, stream if handler.unary_stream is not None else unary)


def _outcome(context: grpc.aio.ServicerContext, exc: BaseException | None) -> Code:
    if isinstance(exc, asyncio.CancelledError):
        return Code.CANCELLED
    code = context.code()
    if code is None:
        return Code.OK if exc is None else Code.UNKNOWN
    return Code(code.value[0])


class AdmissionInterceptor(grpc.aio.ServerInterceptor):
    """Runs each Pods call only if its request parsed and the table's refusal lets it (in
    grpc-go's order: a request that does not parse is refused before any interceptor, so it
    spends no token); translates every domain error the call raises."""

    def __init__(self, core: Core) -> None:
        self._core = core

    async def intercept_service(
        self, continuation: Continuation, details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        target = self._core.calls.grpc_method(details.method)
        if handler is None or target is None:
            return handler
        call = target[1]
        admit = self._admission(details.method, call)

        def unary(behavior: Any) -> Any:
            async def admitted(request: Any, context: grpc.aio.ServicerContext) -> Any:
                try:
                    admit(request)
                    return await behavior(request, context)
                except StatusError as exc:
                    await abort(context, exc)

            return admitted

        def stream(behavior: Any) -> Any:
            async def admitted(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
                try:
                    admit(request)
                    async for item in behavior(request, context):
                        yield item
                except StatusError as exc:
                    await abort(context, exc)

            return admitted

        return _rewrap(handler, stream if handler.unary_stream is not None else unary)

    def _admission(self, method: str, call: Call | None) -> Callable[[Any], None]:
        core = self._core

        def admit(request: Any) -> None:
            if isinstance(request, Unparsable):
                raise request.error()
            if call is None:  # a handler registered around the table: refuse rather than run unguarded
                raise Internal(f"{method} is not in the call table")
            refused = refusal(call, core.limiter, core.cache)
            if refused is not None:
                raise refused

        return admit
