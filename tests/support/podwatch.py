"""A gRPC watch on a running server, read into ADDED/MODIFIED/DELETED/SYNCED steps."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
from serve import TIMEOUT, Served

from pods_api.core.api.codec import pod_from_bytes
from pods_api.core.api.pb import pods_v1alpha1_pb2 as api
from pods_api.core.api.pb import pods_v1alpha1_pb2_grpc as api_grpc

ADDED, MODIFIED, DELETED, SYNCED = 0, 1, 2, 3


async def listed(served: Served) -> list[dict[str, Any]]:
    async with grpc.aio.insecure_channel(served.target) as ch:
        response = await api_grpc.PodsStub(ch).ListPods(api.ListPodsRequest())
        return [pod_from_bytes(p) for p in response.pods]


class Watch:
    """A real WatchPods stream; `next(n)` waits for the next n events."""

    def __init__(self, served: Served) -> None:
        self._channel = grpc.aio.insecure_channel(served.target)
        self._call = api_grpc.PodsStub(self._channel).WatchPods(api.WatchPodsRequest())

    async def next(self, count: int = 1, within: float = TIMEOUT) -> list[tuple[int, dict[str, Any]]]:
        out = []
        async with asyncio.timeout(within):
            while len(out) < count:
                event = await self._call.read()
                out.append((event.type, pod_from_bytes(event.pod)))
        return out

    async def close(self) -> None:
        self._call.cancel()
        await self._channel.close()
