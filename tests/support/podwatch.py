"""A gRPC watch on a running server, read into ADDED/MODIFIED/DELETED/SYNCED steps."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import grpc
from released import ADDED, DELETED, MODIFIED, SYNCED  # noqa: F401  (re-exported: the tests use them with Watch)
from serve import TIMEOUT, Served

from pods_api.core.api.codec import pod_from_bytes
from pods_api.core.api.pb import pods_v1alpha1_pb2 as api
from pods_api.core.api.pb import pods_v1alpha1_pb2_grpc as api_grpc


async def listed(served: Served) -> list[dict[str, Any]]:
    async with grpc.aio.insecure_channel(served.target) as ch:
        response = await api_grpc.PodsStub(ch).ListPods(api.ListPodsRequest())
        return [pod_from_bytes(p) for p in response.pods]


class Watch:
    """A real WatchPods stream; `next(n)` waits for the next n events, `until(want)` for a pod's
    last event to be one `want` accepts; `last(uid)` is the last event seen of a pod."""

    def __init__(self, served: Served) -> None:
        self._channel = grpc.aio.insecure_channel(served.target)
        self._call = api_grpc.PodsStub(self._channel).WatchPods(api.WatchPodsRequest())
        self._last: dict[str, tuple[int, dict[str, Any]]] = {}  # uid -> its last event
        self.seen: list[tuple[int, dict[str, Any]]] = []  # every event read, SYNCED included

    async def _read(self) -> tuple[int, dict[str, Any]]:
        event = await self._call.read()
        pod = pod_from_bytes(event.pod)
        self.seen.append((event.type, pod))
        if event.type != SYNCED:
            self._last[pod["metadata"]["uid"]] = (event.type, pod)
        return event.type, pod

    async def next(self, count: int = 1, within: float = TIMEOUT) -> list[tuple[int, dict[str, Any]]]:
        out = []
        async with asyncio.timeout(within):
            while len(out) < count:
                out.append(await self._read())
        return out

    async def until(self, want: Callable[[int, dict[str, Any]], bool]) -> tuple[int, dict[str, Any]]:
        """The first pod whose last event `want` accepts: one seen already (waiting on another
        pod may have read past it), or the next to arrive."""
        for kind, pod in self._last.values():
            if want(kind, pod):
                return kind, pod
        async with asyncio.timeout(TIMEOUT):
            while True:
                kind, pod = await self._read()
                if kind != SYNCED and want(kind, pod):
                    return kind, pod

    def last(self, uid: str) -> tuple[int, dict[str, Any]] | None:
        return self._last.get(uid)

    async def close(self) -> None:
        self._call.cancel()
        await self._channel.close()
