"""Cross-cutting concerns of the Pods API, one interceptor each, outermost first:
metrics (sees every outcome), rate limit (List and Get), readiness gate (every Pods method).
Health and reflection pass through untouched."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc

from pods_api.core.cache import NOT_SYNCED, PodCache
from pods_api.core.metrics import Metrics, go_code_name
from pods_api.core.ratelimit import TokenBucket

Continuation = Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]]

_PODS_SERVICES = {"v1alpha1.Pods": "v1alpha1", "Pods": "documented"}
_LIMITED_METHODS = frozenset({"ListPods", "GetPod"})


def _pods_method(details: grpc.HandlerCallDetails) -> tuple[str, str] | None:
    """(server_api_version, method) for a Pods API call, None for anything else."""
    service, _, method = details.method.lstrip("/").rpartition("/")
    version = _PODS_SERVICES.get(service)
    return (version, method) if version else None


def _rejecting(handler: grpc.RpcMethodHandler, code: grpc.StatusCode, message: str) -> grpc.RpcMethodHandler:
    async def reject(request: Any, context: grpc.aio.ServicerContext) -> None:
        await context.abort(code, message)

    async def reject_stream(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        await context.abort(code, message)
        yield  # unreachable; makes this an async generator, as grpc.aio wants for a stream

    return _rewrap(handler, lambda behavior: reject_stream if handler.unary_stream else reject)


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
    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics

    async def intercept_service(
        self, continuation: Continuation, details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        target = _pods_method(details)
        if handler is None or target is None:
            return handler
        version, method = target
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


def _outcome(context: grpc.aio.ServicerContext, exc: BaseException | None) -> str:
    if isinstance(exc, asyncio.CancelledError):
        return "Canceled"
    code = context.code()
    if code is None:
        return "OK" if exc is None else "Unknown"
    return go_code_name(code.name)


class _Gate(grpc.aio.ServerInterceptor):
    """An interceptor that may refuse a Pods API call before its handler runs."""

    def refusal(self, method: str) -> tuple[grpc.StatusCode, str] | None:
        raise NotImplementedError

    async def intercept_service(
        self, continuation: Continuation, details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        target = _pods_method(details)
        if handler is None or target is None:
            return handler
        refused = self.refusal(target[1])
        return handler if refused is None else _rejecting(handler, *refused)


class RateLimitInterceptor(_Gate):
    """List and Get share one token bucket (watches are long-lived and capped separately)."""

    def __init__(self, limiter: TokenBucket) -> None:
        self._limiter = limiter

    def refusal(self, method: str) -> tuple[grpc.StatusCode, str] | None:
        if method not in _LIMITED_METHODS or self._limiter.allow():
            return None
        return grpc.StatusCode.RESOURCE_EXHAUSTED, "rate limit exceeded; retry later"


class ReadinessInterceptor(_Gate):
    """Until every pod source has synced, every Pods method fails: never a partial list."""

    def __init__(self, cache: PodCache) -> None:
        self._cache = cache

    def refusal(self, method: str) -> tuple[grpc.StatusCode, str] | None:
        return None if self._cache.ready else (grpc.StatusCode.FAILED_PRECONDITION, NOT_SYNCED)
