"""PodLookup's WatchPodBatches through a real `pods-api serve --fixtures`: the events of
WatchPods, in its order, several to a message; a selector filters it as it filters WatchPods;
it is counted and limited as a watch."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from builders import make_pod
from nodepods import write
from serve import TIMEOUT, Served, serving

from pods_api.client import Client, EventType
from pods_api.core.api.pb import pods_v1alpha1_pb2 as v1alpha1
from pods_api.core.api.pb import podsapi_v1_pb2 as lookup_pb
from pods_api.core.api.pb import podsapi_v1_pb2_grpc as lookup_grpc
from pods_api.core.grpc.lookup_service import BATCH_EVENTS

PODS = BATCH_EVENTS + 44  # a start of more than one message's events
Event = tuple[int, bytes]


def fixture(i: int, **labels: str) -> dict[str, Any]:
    return make_pod(f"p-{i:04d}", f"uid-{i:04d}", typed=True, **labels)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Served, Path]]:
    fixtures = tmp_path / "fixtures"
    fixtures.mkdir()
    for i in range(PODS):
        write(fixtures, fixture(i))
    with serving(tmp_path / "run", "--fixtures", str(fixtures)) as server:
        yield server, fixtures


def stub(server: Served) -> Iterator[lookup_grpc.PodLookupStub]:
    with grpc.insecure_channel(f"unix:{server.run_dir / 'pods-api.sock'}") as channel:
        yield lookup_grpc.PodLookupStub(channel)


class Stream:
    """A watch read event by event; `messages` counts what carried them."""

    def __init__(self, call: Any, batched: bool) -> None:
        self.call, self.batched = call, batched
        self.pending: list[Event] = []
        self.messages = 0

    def next(self) -> Event:
        if not self.pending:
            message = next(self.call)
            self.messages += 1
            events = message.events if self.batched else [message]
            assert events, "a batch is never empty"
            self.pending = [(e.type, e.pod) for e in events]
        return self.pending.pop(0)

    def take(self, count: int) -> list[Event]:
        return [self.next() for _ in range(count)]


def opened(lookup: lookup_grpc.PodLookupStub, **selectors: str) -> tuple[Stream, Stream]:
    request = lookup_pb.WatchPodsRequest(**selectors)
    single = Stream(lookup.WatchPods(request, timeout=TIMEOUT * 4), batched=False)
    batches = Stream(lookup.WatchPodBatches(request, timeout=TIMEOUT * 4), batched=True)
    return single, batches


def test_batches_carry_watchpods_events_in_its_order(served: tuple[Served, Path]) -> None:
    server, fixtures = served
    for lookup in stub(server):
        single, batches = opened(lookup)
        start = single.take(PODS + 1)
        assert start[-1][0] == v1alpha1.INITIAL_SYNC_COMPLETE
        assert batches.take(PODS + 1) == start
        assert 1 < batches.messages < PODS + 1, "the start, several events to a message"
        for i in range(0, 40, 2):
            write(fixtures, fixture(i, v="2"))
        (fixtures / "p-0001.json").unlink()
        live = single.take(21)
        assert sorted(kind for kind, _ in live) == [v1alpha1.MODIFIED] * 20 + [v1alpha1.DELETED]
        assert batches.take(21) == live


def test_a_selector_filters_batches_as_it_filters_watchpods(served: tuple[Served, Path]) -> None:
    server, fixtures = served
    for lookup in stub(server):
        single, batches = opened(lookup, label_selector="app in (p-0003,p-0004)")
        start = single.take(3)
        assert batches.take(3) == start and [k for k, _ in start][-1] == v1alpha1.INITIAL_SYNC_COMPLETE
        write(fixtures, fixture(5, v="2"))  # outside the view: not sent
        write(fixtures, fixture(3, v="2"))
        (event,) = single.take(1)
        assert event[0] == v1alpha1.MODIFIED and batches.take(1) == [event]


def test_batches_are_counted_as_watches(served: tuple[Served, Path]) -> None:
    server, _ = served
    for lookup in stub(server):
        call = lookup.WatchPodBatches(lookup_pb.WatchPodsRequest(), timeout=TIMEOUT)
        next(call)
        call.cancel()
    with httpx.Client(transport=httpx.HTTPTransport(uds=str(server.run_dir / "pods-api-http.sock"))) as http:
        text = http.get("http://localhost/metrics").text
    line = next(
        (
            line
            for line in text.splitlines()
            if line.startswith('kubelet_pod_requests_watch_total{server_api_version="podsapi.v1"')
        ),
        None,
    )
    assert line is not None and float(line.rsplit(" ", 1)[1]) >= 1, text[:2000]


async def test_the_client_reads_batches_as_the_events_of_a_watch(served: tuple[Served, Path]) -> None:
    """`Client.watch(batched=True)`: the same WatchEvents, frames included, as a plain watch."""
    server, fixtures = served
    async with Client(server.run_dir / "pods-api.sock") as client:
        plain, batched = client.watch(), client.watch(batched=True)
        first = [await anext(plain) for _ in range(PODS + 1)]
        assert first[-1].type is EventType.INITIAL_SYNC_COMPLETE
        assert [await anext(batched) for _ in range(PODS + 1)] == first
        write(fixtures, fixture(7, v="3"))
        changed = await asyncio.wait_for(anext(plain), TIMEOUT)
        assert changed.type is EventType.MODIFIED and changed.pod is not None
        assert await asyncio.wait_for(anext(batched), TIMEOUT) == changed
        await plain.aclose()
        await batched.aclose()
