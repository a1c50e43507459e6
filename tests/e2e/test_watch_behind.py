"""A v1alpha1 WatchPods client that falls behind is told what the kubelet's rules tell one that
keeps up (docs/grpc-api.md, slow watchers), over the real socket: `pods-api serve --fixtures DIR
--watch-buffer 2 --send-timeout 120`, two clients side by side, one reading and one paused while
60 KB filler changes fill its queue. The two sequences a churn found wrong:

- a finished pod changed twice, then its file removed: nothing to either (the one behind was
  sent a DELETED of a UID it did not hold);
- a finished pod that runs again, then changes: ADDED then MODIFIED to the one reading, ADDED to
  the one behind (it was sent only a MODIFIED, of a UID it did not hold).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import grpc
import httpx
import yaml
from builders import make_pod
from released import ADDED, DELETED, MODIFIED, SYNCED
from serve import TIMEOUT, Served, serving

from pods_api.core.api.codec import pod_from_bytes
from pods_api.core.api.pb import (
    pods_v1alpha1_pb2,
    pods_v1alpha1_pb2_grpc,
    podsapi_v1_pb2,
    podsapi_v1_pb2_grpc,
)

FILLERS = 4  # pods per filler change, 60 KB each: a paused client's HTTP/2 windows fill at once
MAX_ROUNDS = 60
# No BDP probing: the windows stay at their first size, so a paused client fills them soon.
NO_BDP = [("grpc.http2.bdp_probe", 0)]
NAMES = {ADDED: "ADDED", MODIFIED: "MODIFIED", DELETED: "DELETED"}


def write(directory: Path, name: str, body: dict[str, Any]) -> None:
    """Atomically, so the source reads one version."""
    tmp = directory / f".{name}.tmp"
    tmp.write_text(yaml.safe_dump(body))
    os.replace(tmp, directory / f"{name}.yaml")


def pod(name: str, phase: str, **labels: str) -> dict[str, Any]:
    return make_pod(name, f"uid-{name}", phase, typed=True, **labels)


def fillers(round_: int) -> dict[str, Any]:
    items = []
    for i in range(FILLERS):
        filler = pod(f"filler-{i}", "Running")
        filler["metadata"]["annotations"] = {"round": str(round_), "blob": "x" * 60_000}
        items.append(filler)
    return {"apiVersion": "v1", "kind": "PodList", "items": items}


def coalesced(served: Served) -> float:
    transport = httpx.HTTPTransport(uds=str(served.http_socket))
    with httpx.Client(transport=transport, timeout=TIMEOUT) as client:
        for line in client.get("http://localhost/metrics").text.splitlines():
            if line.startswith("pods_api_watch_events_coalesced_total "):
                return float(line.split()[1])
    raise AssertionError("pods_api_watch_events_coalesced_total not in /metrics")


class Client:
    """One WatchPods call and the (type, name) of every event it reads: on v1alpha1.Pods, or
    (`served`) on PodLookup, whose watch follows the served pods (every change of a finished pod
    is a MODIFIED there): how the test knows each change was read as a version of its own."""

    def __init__(self, channel: grpc.aio.Channel, served: bool = False) -> None:
        if served:
            lookup = podsapi_v1_pb2_grpc.PodLookupStub(channel)
            self.call = lookup.WatchPods(podsapi_v1_pb2.WatchPodsRequest())
        else:
            pods = pods_v1alpha1_pb2_grpc.PodsStub(channel)
            self.call = pods.WatchPods(pods_v1alpha1_pb2.WatchPodsRequest())
        self.seen: list[tuple[str, str]] = []

    async def start(self) -> None:
        """Reads the start: a pod each, then INITIAL_SYNC_COMPLETE."""
        async with asyncio.timeout(TIMEOUT):
            while (await self.call.read()).type != SYNCED:
                pass

    async def until(self, kind: int, name: str) -> list[tuple[str, str]]:
        """Reads until that event; what it read on the way, that event included."""
        mark = len(self.seen)
        async with asyncio.timeout(TIMEOUT):
            while True:
                event = await self.call.read()
                assert event is not grpc.aio.EOF, f"the watch ended; read {self.seen}"
                got = (NAMES[event.type], pod_from_bytes(event.pod)["metadata"]["name"])
                self.seen.append(got)
                if got == (NAMES[kind], name):
                    return self.seen[mark:]


def about(events: list[tuple[str, str]], name: str) -> list[str]:
    return [kind for kind, of in events if of == name]


async def test_a_watcher_behind_is_told_what_one_that_kept_up_was(tmp_path: Path) -> None:
    fixtures = tmp_path / "fixtures"
    fixtures.mkdir()
    write(fixtures, "fillers", fillers(0))
    for name in ("done", "again"):
        write(fixtures, name, pod(name, "Running"))
    run = ("--fixtures", str(fixtures), "--watch-buffer", "2", "--send-timeout", "120")
    with serving(tmp_path / "run", *run) as served:
        async with (
            grpc.aio.insecure_channel(served.target, options=NO_BDP) as reading_channel,
            grpc.aio.insecure_channel(served.target, options=NO_BDP) as paused_channel,
            grpc.aio.insecure_channel(served.target) as lookup_channel,
        ):
            reading, paused = Client(reading_channel), Client(paused_channel)
            lookup = Client(lookup_channel, served=True)
            for client in (reading, paused, lookup):
                await client.start()
            # Both finish, and both clients are told so: MODIFIED, then DELETED.
            for name in ("done", "again"):
                write(fixtures, name, pod(name, "Succeeded"))
                for client in (reading, paused):
                    assert about(await client.until(DELETED, name), name) == ["MODIFIED", "DELETED"]
            # The paused one stops reading; filler changes until its queue has overflowed (the
            # others read every change whole, so it is the one that coalesces).
            for round_ in range(1, MAX_ROUNDS):
                write(fixtures, "fillers", fillers(round_))
                for client in (reading, lookup):
                    await client.until(MODIFIED, f"filler-{FILLERS - 1}")
                if await asyncio.to_thread(coalesced, served) > 0:
                    break
            else:
                raise AssertionError(f"the paused watcher's queue never overflowed in {MAX_ROUNDS} changes")
            # A finished pod changed twice, then removed: nothing is told of it.
            write(fixtures, "done", pod("done", "Succeeded", edit="1"))
            await lookup.until(MODIFIED, "done")
            write(fixtures, "done", pod("done", "Succeeded", edit="2"))
            await lookup.until(MODIFIED, "done")
            (fixtures / "done.yaml").unlink()
            await lookup.until(DELETED, "done")
            # A finished pod that runs again, then changes.
            write(fixtures, "again", pod("again", "Running"))
            await reading.until(ADDED, "again")
            write(fixtures, "again", pod("again", "Running", edit="1"))
            await reading.until(MODIFIED, "again")
            write(fixtures, "end", pod("end", "Running"))
            kept_up = await reading.until(ADDED, "end")
            behind = await paused.until(ADDED, "end")
    assert about(reading.seen, "done") == ["MODIFIED", "DELETED"]  # its finish, nothing after
    assert about(behind, "done") == []
    assert about(kept_up, "again") == []  # read above, each as it came: ADDED, then MODIFIED
    assert about(behind, "again") == ["ADDED"]
