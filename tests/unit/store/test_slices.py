"""Responses assembled in slices (core/store/slices.py): the same bytes as one join, and no more
than a slice of work, selection included, between two turns of the loop, which is what lets
`/healthz`, gRPC health and live watches answer while Lists are made."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest
from builders import make_pod

from pods_api.core.query.view import View, parse_view
from pods_api.core.store.slices import OFF_LOOP, SLICE, joined
from pods_api.core.store.version import PodVersion


@pytest.mark.parametrize("count", [0, 1, 2, SLICE, SLICE * 3 + 1])
@pytest.mark.parametrize("size", [10, OFF_LOOP // 64], ids=["small", "off-the-loop"])
async def test_a_joined_body_is_head_items_and_tail_joined_once(count: int, size: int) -> None:
    parts = [bytes([65 + i % 26]) * size for i in range(count)]
    body = await joined(parts, lambda part: part, b",", b"[head]", b"[tail]")
    assert body == b"[head]" + b",".join(parts) + b"[tail]"
    assert all(len(part) == size for part in parts), "the items themselves are left as they were"


class CountingSelector:
    """A selector that counts the pods it is asked about (the `Selects` shape of
    core/query/view.py), and passes every other one."""

    key = "counting"

    def __init__(self) -> None:
        self.asked = 0

    def matches(self, pod: Any) -> bool:
        self.asked += 1
        return self.asked % 2 == 0


async def test_a_views_selection_is_made_slice_by_slice_with_the_body() -> None:
    """A List's selection used to be made in one go before its first slice: 5,000 pods with a
    selector of its own held the loop for ~250 ms, ten at once for seconds."""
    pods = [PodVersion.from_json(make_pod(f"p-{i}", f"uid-{i:05d}")) for i in range(SLICE * 8)]
    selector = CountingSelector()
    view = View(None, selector)
    seen: list[int] = []

    async def turns() -> None:
        while True:
            seen.append(selector.asked)
            await asyncio.sleep(0)

    ticker = asyncio.create_task(turns())
    await asyncio.sleep(0)
    body = await joined(view.select(pods), lambda pod: pod.json_bytes, b",")
    ticker.cancel()
    assert body == b",".join(p.json_bytes for p in pods[1::2])
    steps = [later - earlier for earlier, later in itertools.pairwise(seen)]
    assert selector.asked == len(pods) and max(steps) <= 2 * SLICE, steps


async def test_a_selector_reads_each_version_once_however_many_views_ask() -> None:
    """What a selector reads of a version is decoded on the first and kept: ten Lists, each a
    view of its own, no longer decode 5,000 pods' JSON each."""
    version = PodVersion.from_json(make_pod("web", "uid-1"))
    kept = version.selectable
    for i in range(10):
        assert parse_view(None, f"app!=none-{i}").shows(version)
    assert version.selectable is kept
