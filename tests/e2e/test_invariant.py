"""The invariant, driven at random: whatever the sources do and however watchers behave, at every
quiet point every live watcher's state, rebuilt only from its events, equals the cache (List, with
the watcher's mask); every watcher that was cut off was told so; nothing was delivered twice. A
watcher neither told nor current at a quiet point is a violation (a stream the server ended
without a status leaves its client stale for ever).

One seed is one run against a real `pods-api serve` with two fixture directories:
- source churn: adds, edits, deletes, renames, truncating (non-atomic) writes, many files at
  once, moves between the two sources;
- watchers over gRPC and SSE, masked and unmasked, that read slowly, stall (long enough to be
  cut off), stall past the send timeout (the server gives up a send its client does not take),
  disconnect and resume (SSE `Last-Event-ID`);
- server restarts (SIGTERM, then a new process on the same sockets).

And no resume goes back in time: a watcher that resumes (SSE `Last-Event-ID`, a Kubernetes
watch's `resourceVersion`) is never sent a version of a pod older than one it was given, nor a
pod after its DELETED unless the pod was added again (coalesced events carried an id a
resume replayed skipped versions from).

`pytest --seeds N` runs N seeds (default 2, a few seconds each), `--changes N` drives that many
file changes per seed; every run prints its figures (events, faults, peaks, descriptors and
memory), which RELIABILITY.md records. `--event-log DIR` writes every event each watcher gets to
DIR/seed-N/<watcher>.log. The Kubernetes-view watchers' resourceVersion gaps (revisions a watch
skipped) are counted, and each skipped revision is explained at the next quiet point from the
server's ring: a pod the watcher was later sent newer (coalesced), one it never held, or one it
holds as listed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import grpc
import httpx
import pytest
import yaml
from builders import make_pod
from released import ADDED, DELETED, MODIFIED, SYNCED
from serve import TIMEOUT, Served, start

from pods_api.core.api.codec import pod_from_bytes
from pods_api.core.api.pb import (
    pods_v1alpha1_pb2,
    pods_v1alpha1_pb2_grpc,
    podsapi_v1_pb2,
    podsapi_v1_pb2_grpc,
)

MASK = "status.phase"
# Small, so that a stalled watcher really falls behind and is cut off.
WATCH_BUFFER = 8
STEPS = 24
QUIET_EVERY = 6
PADDING = 12_000
# Short, so that a watcher stalled past it is cut off by the send timeout within a step.
SEND_TIMEOUT = 1.0
# A stall past the send timeout lasts this long: the send under way starts within a fraction
# of a second (a storm fills the stream's window), and is given up SEND_TIMEOUT after that.
LONG_STALL = 2.5 * SEND_TIMEOUT
# The client's flow-control window stays at 64 KiB (no BDP probing): a stalled reader's
# window then fills after a few events, and the server's send really waits.
NO_BDP = [("grpc.http2.bdp_probe", 0)]
# A quiet point compares the watchers with new Lists at most this many times when the server
# moves on from the last ones (a move between the sources is served one scan apart): more
# means the server never settles once the files stop changing, itself a failure.
RELISTS = 10
# A long run restarts the server this often too (steps), not once per seed only.
RESTART_EVERY = 400
# A quiet point waits for the server to serve what the files say while the oracle keeps getting
# events (a server, or this driver, starved of CPU on a loaded box is slow, not stuck: at load
# 16-22 two 10,000-change seeds stopped after 31 and 48 min on a 20 s wait, their oracles still
# getting events every second), and fails after TIMEOUT without one, or after this long in all.
CATCH_UP = 10 * TIMEOUT


class Violation(AssertionError):
    pass


# -- the model of the sources: what the files say ------------------------------------------------


@dataclass
class Sources:
    dirs: tuple[Path, Path]
    rng: random.Random
    files: dict[str, tuple[int, str]] = field(default_factory=dict)  # uid -> (dir index, file name)
    generation: dict[str, int] = field(default_factory=dict)  # uid -> the `gen` label written last
    next_uid: int = 0
    faults: dict[str, int] = field(default_factory=dict)

    def _count(self, kind: str) -> None:
        self.faults[kind] = self.faults.get(kind, 0) + 1

    def _write(self, uid: str, atomic: bool = True) -> None:
        where, name = self.files[uid]
        gen = self.generation[uid] = self.generation.get(uid, 0) + 1
        phase = self.rng.choice(["Running", "Pending", "Succeeded"])
        pod = {"apiVersion": "v1", "kind": "Pod", **make_pod(f"p{uid[4:]}", uid, phase, gen=str(gen))}
        # Bulky, so that a stalled watcher's socket buffers fill after a few events and the
        # server's queue for it does too: it is then cut off, and must be told.
        pod["metadata"]["annotations"] = {"example.com/padding": self.rng.randbytes(PADDING).hex()}
        text = yaml.safe_dump(pod)
        path = self.dirs[where] / name
        if atomic:
            tmp = path.with_name(f".{name}.tmp")
            tmp.write_text(text)
            os.replace(tmp, path)
        else:  # truncate, then write in two parts: a reader may see an empty or half file
            with path.open("w") as out:
                out.write(text[: len(text) // 2])
                out.flush()
                out.write(text[len(text) // 2 :])

    def add(self) -> None:
        uid = f"uid-{self.next_uid:04d}"
        self.next_uid += 1
        self.files[uid] = (self.rng.randrange(2), f"{uid}.yaml")
        self._write(uid)
        self._count("add")

    def storm(self) -> None:
        """Every file rewritten: one burst of events, more than a stalled watcher's buffers hold."""
        for uid in sorted(self.files):
            self._write(uid)
        self._count("storm")

    def step(self) -> None:
        if len(self.files) < 4:
            self.add()
            return
        uid = self.rng.choice(sorted(self.files))
        where, name = self.files[uid]
        op = self.rng.choice(["add", "edit", "delete", "rename", "truncate", "bulk", "move"])
        if op == "add":
            self.add()
            return
        if op == "edit":
            self._write(uid)
        elif op == "truncate":
            self._write(uid, atomic=False)
        elif op == "delete":
            (self.dirs[where] / name).unlink()
            del self.files[uid], self.generation[uid]
        elif op == "rename":
            new = f"r{self.rng.randrange(1000)}-{uid}.yaml"
            os.rename(self.dirs[where] / name, self.dirs[where] / new)
            self.files[uid] = (where, new)
        elif op == "move":  # the same pod, now from the other source
            os.rename(self.dirs[where] / name, self.dirs[1 - where] / name)
            self.files[uid] = (1 - where, name)
        elif op == "bulk":
            for other in self.rng.sample(sorted(self.files), min(8, len(self.files))):
                self._write(other)
        self._count(op)


# -- watchers: state rebuilt only from events ------------------------------------------------------


@dataclass
class Stats:
    events: int = 0
    cut_off: int = 0
    told: dict[str, int] = field(default_factory=dict)
    resumes: int = 0
    reconnects: int = 0
    untold: int = 0  # streams that just ended: no status, no ERROR event


class Watcher:
    """One client. `state` is uid -> what it last received for that pod."""

    def __init__(self, name: str, masked: bool, rng: random.Random, served: Callable[[], Served]) -> None:
        self.name = name
        self.masked = masked
        self.rng = rng
        self.served = served
        self.state: dict[str, Any] = {}
        self.go = asyncio.Event()
        self.go.set()
        self.changed = asyncio.Condition()
        self.stats = Stats()
        self.slow = rng.random() < 0.5
        self.problems: list[str] = []
        self.trace: list[str] = []  # the last things it saw, for a failure's message
        self.log: TextIO | None = None  # every event, with --event-log
        self.up = asyncio.Event()  # the server is there to connect to
        self.disconnect = asyncio.Event()

    def note(self, line: str) -> None:
        """What it saw: kept for a failure's message, and written to its event log if any."""
        self.trace.append(line)
        del self.trace[:-200]
        if self.log is not None:
            self.log.write(f"{time.monotonic():.6f} {line}\n")

    async def _applied(self) -> None:
        self.stats.events += 1
        async with self.changed:
            self.changed.notify_all()

    async def _pace(self) -> None:
        if self.slow:
            await asyncio.sleep(self.rng.random() * 0.002)
        await self.go.wait()

    def told(self, code: str) -> None:
        self.stats.told[code] = self.stats.told.get(code, 0) + 1

    async def run(self) -> None:
        while True:
            await self.up.wait()
            try:
                await self.session()
            except (grpc.aio.AioRpcError, httpx.TransportError, OSError):
                pass  # the server went away mid-connect: told by the transport; reconnect
            except Exception as exc:
                self.problems.append(f"{self.name}: {exc!r}")
                raise
            self.stats.reconnects += 1

    async def session(self) -> None:
        raise NotImplementedError

    async def until(self, predicate: Callable[[], bool]) -> None:
        """Returns once `predicate` holds: it is checked whenever this watcher applies something."""
        async with self.changed:
            await self.changed.wait_for(predicate)

    def holds(self, expected: dict[str, Any]) -> bool:
        """Whether it holds what its List holds."""
        return self.state == expected

    def expected(self, by_grpc: dict[str, Any], by_http: dict[str, Any]) -> dict[str, Any]:
        """What this watcher's state must equal at a quiet point, from the Lists."""
        return by_grpc if isinstance(self, GrpcWatcher) else by_http

    def mismatch(self, expected: dict[str, Any]) -> str:
        return (
            f"{self.name}: neither told nor current at a quiet point (state differs from List):\n"
            f"{_diff(self.state, expected)}\n" + "\n".join(self.trace[-40:])
        )


def _diff(got: dict[str, Any], want: dict[str, Any]) -> str:
    missing = sorted(set(want) - set(got))
    extra = sorted(set(got) - set(want))
    differ = sorted(uid for uid in set(got) & set(want) if got[uid] != want[uid])
    return f"missing {missing}, extra {extra}, different {differ}"


def _finished(pod: bytes) -> bool:
    return pod_from_bytes(pod).get("status", {}).get("phase") in ("Succeeded", "Failed")


def _unfinished(pods: dict[str, bytes]) -> dict[str, bytes]:
    return {uid: pod for uid, pod in pods.items() if not _finished(pod)}


class GrpcWatcher(Watcher):
    """On the kubelet's contract: its watch follows a pod until it finishes (a DELETED, while
    ListPods still lists it), so what it holds is the List less the finished pods."""

    options: list[tuple[str, int]] = NO_BDP

    def holds(self, expected: dict[str, Any]) -> bool:
        return _unfinished(self.state) == _unfinished(expected)

    def _call(self, channel: grpc.aio.Channel, metadata: list[tuple[str, str]]) -> Any:
        return pods_v1alpha1_pb2_grpc.PodsStub(channel).WatchPods(
            pods_v1alpha1_pb2.WatchPodsRequest(), metadata=metadata
        )

    async def session(self) -> None:
        metadata = [("x-kubernetes-fieldmask", MASK)] if self.masked else []
        async with grpc.aio.insecure_channel(self.served().target, options=self.options) as channel:
            call = self._call(channel, metadata)
            snapshot: dict[str, bytes] = {}
            synced = False
            try:
                while True:
                    await self._pace()
                    if self.disconnect.is_set():
                        self.disconnect.clear()
                        call.cancel()
                        return
                    event = await call.read()
                    if event is grpc.aio.EOF:
                        self.stats.untold += 1
                        self.problems.append(f"{self.name}: stream ended without a status")
                        return
                    if event.type == SYNCED:
                        self.state, synced = snapshot, True
                        await self._applied()
                        continue
                    uid = pod_from_bytes(event.pod)["metadata"]["uid"]
                    target = self.state if synced else snapshot
                    self._check_duplicate(event.type, uid, event.pod, target)
                    self.note(f"{pods_v1alpha1_pb2.EventType.Name(event.type)} {uid}")
                    if event.type == DELETED:
                        target.pop(uid, None)
                    else:
                        target[uid] = event.pod
                    if synced:
                        await self._applied()
            except grpc.aio.AioRpcError as exc:
                if exc.code() == grpc.StatusCode.CANCELLED:
                    return
                if exc.code() not in (grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.UNAVAILABLE):
                    self.problems.append(f"{self.name}: ended with {exc.code()}: {exc.details()}")
                self.stats.cut_off += 1
                self.told(exc.code().name)

    def _check_duplicate(self, kind: int, uid: str, pod: bytes, state: dict[str, Any]) -> None:
        if kind == ADDED and uid in state and not _finished(state[uid]):
            self.problems.append(f"{self.name}: ADDED twice for {uid}")
        elif kind == MODIFIED and state.get(uid) == pod:
            self.problems.append(f"{self.name}: a MODIFIED that changed nothing for {uid} (delivered twice)")
        elif kind in (MODIFIED, DELETED) and uid not in state:
            # Never, not even for a finished pod it let go at its DELETED: a watcher behind is
            # told from what it holds (core/store/watch.py), as one that kept up was.
            self.problems.append(f"{self.name}: {kind} for {uid}, which it does not hold")


class LookupWatcher(GrpcWatcher):
    """On our PodLookup's watch, which follows the served pods (a finished pod is a MODIFIED,
    and DELETED only when it goes): what it holds is exactly the List."""

    def holds(self, expected: dict[str, Any]) -> bool:
        return self.state == expected

    def _call(self, channel: grpc.aio.Channel, metadata: list[tuple[str, str]]) -> Any:
        return podsapi_v1_pb2_grpc.PodLookupStub(channel).WatchPods(
            podsapi_v1_pb2.WatchPodsRequest(), metadata=metadata
        )


class NeverBack:
    """What one client was given of each pod, across all its streams: the newest `gen` label (the
    driver writes it one higher with each write) and the gen of the DELETED it was told last. A
    version older than one given, or a pod after its DELETED that was not added again (an ADDED,
    or a gen written after the deleted one: the pod's file came back, its ADDED coalesced before
    the point resumed from), is a resume that went back in time."""

    def __init__(self, name: str, problems: list[str]) -> None:
        self.name, self.problems = name, problems
        self.newest: dict[str, int] = {}
        self.deleted: dict[str, int] = {}
        self.checked = 0

    def given(self, kind: str, pod: dict[str, Any]) -> None:
        uid = pod["metadata"]["uid"]
        label = (pod["metadata"].get("labels") or {}).get("gen")
        if label is None:
            return  # a half-written file's pod (a truncating write): no gen to compare
        gen = int(label)
        self.checked += 1
        if uid in self.deleted and kind != "ADDED" and gen <= self.deleted[uid]:
            self.problems.append(f"{self.name}: {kind} of {uid} gen {gen} after its DELETED (went back)")
        elif gen < self.newest.get(uid, 0):
            self.problems.append(
                f"{self.name}: {kind} of {uid} gen {gen} after gen {self.newest[uid]} (went back)"
            )
        self.newest[uid] = max(gen, self.newest.get(uid, 0))
        if kind == "DELETED":
            self.deleted[uid] = gen
        else:
            self.deleted.pop(uid, None)


class SseWatcher(Watcher):
    """Follows the README's client rule; resumes with Last-Event-ID."""

    last_id: int | None = None

    def __init__(self, name: str, masked: bool, rng: random.Random, served: Callable[[], Served]) -> None:
        super().__init__(name, masked, rng, served)
        self.never_back = NeverBack(name, self.problems)  # a masked one sees no gen: checks nothing

    async def session(self) -> None:
        params = {"watch": "true", **({"fields": MASK} if self.masked else {})}
        headers = {"Last-Event-ID": str(self.last_id)} if self.last_id is not None else {}
        if self.last_id is not None:
            self.stats.resumes += 1
        self.note(f"connect Last-Event-ID={self.last_id}")
        transport = httpx.AsyncHTTPTransport(uds=str(self.served().http_socket))
        async with (
            httpx.AsyncClient(transport=transport, timeout=httpx.Timeout(TIMEOUT, read=None)) as client,
            client.stream("GET", "http://localhost/v1/pods", params=params, headers=headers) as response,
        ):
            if response.status_code != 200:
                return  # e.g. 503 while a restarted server syncs: try again
            seen: set[str] = set()
            fields: dict[str, str] = {}
            async for line in response.aiter_lines():
                if line.startswith(":"):
                    continue
                if line:
                    key, _, value = line.partition(": ")
                    fields[key] = value
                    continue
                fields.pop("retry", None)  # the reconnection delay: no event (WHATWG)
                if not fields:  # the end of a heartbeat comment, or of `retry:`
                    continue
                await self._pace()
                if await self._event(fields, seen):
                    return
                if self.disconnect.is_set():
                    self.disconnect.clear()
                    return
                fields = {}
            self.stats.untold += 1
            self.problems.append(f"{self.name}: stream ended without an ERROR event")

    async def _event(self, fields: dict[str, str], seen: set[str]) -> bool:
        kind, data = fields.get("event"), fields.get("data", "")
        self.note(f"{kind} id={fields.get('id')} {data[:90]}")
        if "id" in fields:
            revision = int(fields["id"])
            # Never back: a resume gets only what came after its id, and a coalesced event's id
            # is its newest version's revision (docs/http-gateway.md).
            if self.last_id is not None and revision < self.last_id and kind != "INITIAL_SYNC_COMPLETE":
                self.problems.append(f"{self.name}: id {revision} after {self.last_id} (went back)")
            self.last_id = revision
        if kind == "ERROR":
            self.stats.cut_off += 1
            self.told(json.loads(data)["error"]["status"])
            return True
        if kind == "INITIAL_SYNC_COMPLETE":
            if not json.loads(data).get("resumed"):
                self.state = {uid: pod for uid, pod in self.state.items() if uid in seen}
            await self._applied()
            return False
        pod = json.loads(data)
        uid = pod["metadata"]["uid"]
        seen.add(uid)
        self.never_back.given(str(kind), pod)
        if kind == "DELETED":
            self.state.pop(uid, None)
        else:
            self.state[uid] = pod
        await self._applied()
        return False


class KubeWatcher(Watcher):
    """A reflector on the Kubernetes view: List `/api/v1/pods`, then watch from its
    resourceVersion, and after every watch that ends (a disconnect, the server going away)
    watch again from the last resourceVersion it saw; List again only on 410 Expired (a
    restarted server's revisions are not the old one's) or another refusal."""

    last_id: int | None = None

    def __init__(self, name: str, masked: bool, rng: random.Random, served: Callable[[], Served]) -> None:
        super().__init__(name, masked, rng, served)
        self.never_back = NeverBack(name, self.problems)
        self.at: int | None = None  # the last resourceVersion of the current watch
        self.first_watch = False  # the current watch is the first after a List
        self.gaps: list[Gap] = []  # not yet explained
        self.delivered: dict[str, int] = {}  # uid -> the newest resourceVersion it was sent at

    def expected(self, by_grpc: dict[str, Any], by_http: dict[str, Any]) -> dict[str, Any]:
        return {uid: _kube_part(pod) for uid, pod in by_http.items()}

    async def session(self) -> None:
        transport = httpx.AsyncHTTPTransport(uds=str(self.served().http_socket))
        async with httpx.AsyncClient(
            transport=transport, timeout=httpx.Timeout(TIMEOUT, read=None)
        ) as client:
            if self.last_id is None:
                reply = await client.get("http://localhost/api/v1/pods")
                if reply.status_code != 200:
                    return  # e.g. 503 while a restarted server syncs: try again
                listed = reply.json()
                self.state = {item["metadata"]["uid"]: _kube_part(item) for item in listed["items"]}
                for item in listed["items"]:
                    self.never_back.given("ADDED", item)
                    self.delivered[item["metadata"]["uid"]] = int(item["metadata"]["resourceVersion"])
                self.last_id = int(listed["metadata"]["resourceVersion"])
                self.note(f"listed at {self.last_id}")
                self.first_watch = True
                await self._applied()
            else:
                self.stats.resumes += 1
                self.first_watch = False
            self.at = self.last_id
            params = {"watch": "1", "resourceVersion": str(self.last_id), "allowWatchBookmarks": "true"}
            self.note(f"watch from {self.last_id}")
            async with client.stream("GET", "http://localhost/api/v1/pods", params=params) as response:
                if response.status_code != 200:
                    self.last_id = None  # refused (e.g. 504 from a restarted server): List again
                    return
                async for line in response.aiter_lines():
                    if not line:
                        continue
                    await self._pace()
                    if self._event(json.loads(line)):
                        return
                    await self._applied()
                    if self.disconnect.is_set():
                        self.disconnect.clear()
                        return

    def _event(self, event: dict[str, Any]) -> bool:
        """Apply one watch event; True when the watch must end (an ERROR: List again)."""
        kind, obj = event["type"], event["object"]
        if kind == "ERROR":
            self.told(str(obj.get("code")))
            self.note(f"ERROR {obj.get('code')} {obj.get('message')}")
            self.last_id = None
            return True
        revision = int(obj["metadata"]["resourceVersion"])
        if self.last_id is not None and revision < self.last_id:
            self.problems.append(f"{self.name}: resourceVersion {revision} after {self.last_id} (went back)")
        self.last_id = revision
        if self.at is not None and revision > self.at + 1:
            self.gaps.append(Gap(self.at, revision, self.first_watch, kind == "BOOKMARK", self.served()))
            self.note(f"gap: resourceVersion {self.at} to {revision}")
        self.at = revision
        if kind == "BOOKMARK":
            return False
        uid = obj["metadata"]["uid"]
        self.delivered[uid] = revision
        self.note(f"{kind} rv={revision} {uid} gen={obj['metadata'].get('labels', {}).get('gen')}")
        self.never_back.given(kind, obj)
        if kind == "DELETED":
            self.state.pop(uid, None)
        else:
            self.state[uid] = _kube_part(obj)
        return False


@dataclass
class Gap:
    """A Kubernetes watch whose resourceVersion went from `after` to `to`, skipping the
    revisions between (the watch contract lets it: a client sees revisions increase)."""

    after: int
    to: int
    first_watch: bool  # in the first watch after a List
    bookmark: bool  # the jump was to a BOOKMARK
    served: Served  # the server it was on: a restarted one counts revisions of its own


# What a skipped revision was, for the watcher that skipped it (`explain`).
SUPERSEDED = "superseded"  # it was sent that pod at a newer revision: coalesced into that one
GONE = "came and went"  # it does not hold the pod, as its List does not
HELD = "held already"  # it holds the pod as listed without a newer event: nothing to show
UNKNOWN = "not in the ring"  # the server's ring no longer holds it, or the server restarted


def explain(gap: Gap, ring: dict[int, str] | None, w: KubeWatcher) -> Counter[str]:
    """What each revision `gap` skipped was, by the server's ring (revision -> uid) and what `w`
    got since; called at a quiet point, when `w` holds what its List holds."""
    reasons: Counter[str] = Counter()
    for revision in range(gap.after + 1, gap.to):
        uid = None if ring is None else ring.get(revision)
        if uid is None:
            reasons[UNKNOWN] += 1
        elif w.delivered.get(uid, 0) > revision:
            reasons[SUPERSEDED] += 1
        elif uid not in w.state:
            reasons[GONE] += 1
        else:
            reasons[HELD] += 1
    return reasons


async def _ring(served: Served, after: int, to: int) -> dict[int, str] | None:
    """The uid of each revision in (after, to) as the server's ring holds it (a watch resumed
    from `after` replays them), or None when it no longer does."""
    transport = httpx.AsyncHTTPTransport(uds=str(served.http_socket))
    uids: dict[int, str] = {}
    params = {"watch": "1", "resourceVersion": str(after)}
    client = httpx.AsyncClient(transport=transport, timeout=TIMEOUT)
    watch = client.stream("GET", "http://localhost/api/v1/pods", params=params)
    with contextlib.suppress(TimeoutError, httpx.HTTPError):
        async with client, asyncio.timeout(TIMEOUT), watch as response:
            async for line in response.aiter_lines():
                event = json.loads(line) if line else None
                if event is None or event["type"] == "BOOKMARK":
                    continue
                if event["type"] == "ERROR":
                    return None  # 410: the ring moved on
                revision = int(event["object"]["metadata"]["resourceVersion"])
                uids[revision] = event["object"]["metadata"]["uid"]
                if revision >= to - 1:
                    break
    return uids


async def explain_gaps(watchers: list[KubeWatcher], served: Served, reasons: Counter[str]) -> None:
    """Every gap the watchers saw since the last call, explained (`explain`) into `reasons`, and
    into each watcher's event log."""
    gaps = [(w, g) for w in watchers for g in w.gaps]
    if not gaps:
        return
    here = [g for _, g in gaps if g.served is served]
    ring = await _ring(served, min(g.after for g in here), max(g.to for g in here)) if here else None
    for w, gap in gaps:
        why = explain(gap, ring if gap.served is served else None, w)
        reasons.update(why)
        reasons["gaps"] += 1
        reasons["in a first watch"] += gap.first_watch
        reasons["to a bookmark"] += gap.bookmark
        w.note(f"gap {gap.after} to {gap.to}: {dict(why)}")
    for w in watchers:
        w.gaps.clear()


def _kube_part(pod: dict[str, Any]) -> Any:
    """What a Kubernetes view pod is compared on with the same pod of `GET /v1/pods` (the view's
    objects add kind, apiVersion and resourceVersion)."""
    return [pod["metadata"].get("labels"), pod["metadata"].get("annotations"), pod.get("status")]


# -- the driver -----------------------------------------------------------------------------------


@dataclass
class Figures:
    seed: int
    steps: int = 0
    quiet_points: int = 0
    restarts: int = 0
    stalls: int = 0
    long_stalls: int = 0
    send_timeouts: int = 0  # watches the server ended for a send their client did not take
    disconnects: int = 0
    superseded: int = 0  # quiet points whose Lists the server moved on from: compared again
    peak_watchers: int = 0
    gaps: Counter[str] = field(default_factory=Counter)  # the Kubernetes watchers' (explain_gaps)
    descriptors: list[int] = field(default_factory=list)
    rss_kib: list[int] = field(default_factory=list)


def _proc_figures(served: Served) -> tuple[int, int]:
    fds = len(os.listdir(f"/proc/{served.proc.pid}/fd"))
    status = Path(f"/proc/{served.proc.pid}/status").read_text()
    rss = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:"))
    return fds, rss


async def _list(served: Served, masked: bool) -> tuple[dict[str, bytes], dict[str, Any], str]:
    """The cache, as List says: over gRPC (bytes) and HTTP (JSON), with or without the mask,
    and the HTTP List's revision."""
    metadata = [("x-kubernetes-fieldmask", MASK)] if masked else []
    async with grpc.aio.insecure_channel(served.target) as channel:
        reply = await pods_v1alpha1_pb2_grpc.PodsStub(channel).ListPods(
            pods_v1alpha1_pb2.ListPodsRequest(), metadata=metadata
        )
    by_grpc = {pod_from_bytes(pod)["metadata"]["uid"]: pod for pod in reply.pods}
    body = await asyncio.to_thread(_http_list, served, masked)
    by_http = {item["metadata"]["uid"]: item for item in body["items"]}
    return by_grpc, by_http, str(body["metadata"].get("resourceVersion"))


def _http_list(served: Served, masked: bool) -> Any:
    """`GET /v1/pods`, read from a thread of its own: a List the driver's loop (busy with every
    watcher) does not read for --send-timeout (1 s here) is one the server drops, rightly (a
    1.2 MB List was, on a loaded box). Dropped all the same, it is asked for again."""
    params = {"fields": MASK} if masked else {}
    for attempt in range(RELISTS):
        transport = httpx.HTTPTransport(uds=str(served.http_socket))  # a client closes its own
        with httpx.Client(transport=transport, timeout=TIMEOUT) as client:
            try:
                return client.get("http://localhost/v1/pods", params=params).json()
            except httpx.RemoteProtocolError:
                if attempt == RELISTS - 1:
                    raise
    raise AssertionError("unreachable")


Lists = dict[bool, tuple[dict[str, Any], dict[str, Any], str]]  # masked -> by gRPC, by HTTP, revision


async def _all_hold(watchers: list[Watcher], lists: Lists, oracle: Watcher, seen: int) -> bool:
    """Whether every watcher comes to hold what its List holds before the server moves on from
    those Lists (the oracle got an event: its count is no longer `seen`)."""
    for w in watchers:
        if not await _holds(w, lists[w.masked], oracle, lambda: oracle.stats.events != seen):
            return False
    return True


async def _holds(
    w: Watcher, lists: tuple[dict[str, Any], dict[str, Any], str], oracle: Watcher, moved: Callable[[], bool]
) -> bool:
    """True once `w` holds what its List holds; False if the server moves on first; a
    Violation if neither happens within TIMEOUT."""
    by_grpc, by_http, revision = lists
    expected = w.expected(by_grpc, by_http)
    equal = asyncio.create_task(w.until(lambda: w.holds(expected)))
    superseded = asyncio.create_task(oracle.until(moved))
    try:
        await asyncio.wait({equal, superseded}, timeout=TIMEOUT, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (equal, superseded):
            task.cancel()
        await asyncio.gather(equal, superseded, return_exceptions=True)
    if w.holds(expected):
        return True
    if moved():
        return False
    differ = set(w.state) ^ set(expected) | {u for u in w.state if w.state[u] != expected.get(u)}
    after = await _events_after(w.served(), getattr(w, "last_id", None), differ)
    raise Violation(f"{w.mismatch(expected)}\nthe HTTP List was at revision {revision}\n{after}")


async def _events_after(served: Served, revision: int | None, uids: set[str]) -> str:
    """For a violation's message: the events the server's ring holds after `revision` for
    these pods (the Kubernetes watch replays them), so that a List older than its watcher's
    events is told from an event that never reached the watcher."""
    if revision is None or not uids:
        return ""
    transport = httpx.AsyncHTTPTransport(uds=str(served.http_socket))
    lines: list[str] = []
    params = {"watch": "1", "resourceVersion": str(revision)}
    client = httpx.AsyncClient(transport=transport, timeout=TIMEOUT)
    watch = client.stream("GET", "http://localhost/api/v1/pods", params=params)
    with contextlib.suppress(TimeoutError, httpx.HTTPError):
        async with client, asyncio.timeout(2), watch as response:
            lines.append(f"resume at {revision}: HTTP {response.status_code}")
            async for line in response.aiter_lines():
                if any(uid in line for uid in uids) or '"ERROR"' in line:
                    lines.append(line[:200])
    return "\n".join(lines)


async def drive(seed: int, tmp_path: Path, changes: int = 0, event_log: Path | None = None) -> Figures:
    rng = random.Random(seed)
    dirs = (tmp_path / "a", tmp_path / "b")
    for d in dirs:
        d.mkdir()
    sources = Sources(dirs, rng)
    for _ in range(6):
        sources.add()
    run_dir = tmp_path / "run"
    args = ("--fixtures", str(dirs[0]), "--fixtures", str(dirs[1]), "--watch-buffer", str(WATCH_BUFFER))
    args += ("--qps", "0", "--heartbeat", "1", "--send-timeout", str(SEND_TIMEOUT))
    server = start(run_dir, *args)
    await asyncio.to_thread(server.wait_ready)
    figures = Figures(seed)
    current = [server]
    watchers: list[Watcher] = []
    for i in range(6):
        kind: type[Watcher] = GrpcWatcher if i % 2 == 0 else SseWatcher
        watchers.append(
            # Each watcher's pace from its own generator: timing then cannot change what the
            # driver's generator gives next, so a seed always drives the same file changes.
            kind(
                f"{kind.__name__}-{i}{'-masked' if i % 3 == 0 else ''}",
                i % 3 == 0,
                random.Random(seed * 100 + i),
                lambda: current[0],
            )
        )
    # Two Kubernetes-view reflectors (the view has no field mask), a slow one and a quick one.
    for i in (6, 7):
        watchers.append(
            KubeWatcher(f"KubeWatcher-{i}", False, random.Random(seed * 100 + i), lambda: current[0])
        )
    # Never stalled nor disconnected: tells the driver when the server has read the files.
    # The oracle follows the served pods, as the files make them: PodLookup's watch.
    oracle = LookupWatcher("oracle", False, random.Random(seed * 100 + 99), lambda: current[0])
    oracle.slow, oracle.options = False, []
    # Stalled past the send timeout once per seed at least: an unmasked gRPC watcher, whose
    # 24 KB events fill its window (a masked one's events are a few bytes).
    long_stalled = next(w for w in watchers if isinstance(w, GrpcWatcher) and not w.masked)
    unmasked = [w for w in watchers if not w.masked]
    everyone = [*watchers, oracle]
    figures.peak_watchers = len(everyone)
    kube = [w for w in watchers if isinstance(w, KubeWatcher)]
    logs = contextlib.ExitStack()
    if event_log is not None:
        (event_log / f"seed-{seed}").mkdir(parents=True, exist_ok=True)
        for w in everyone:
            w.log = logs.enter_context((event_log / f"seed-{seed}" / f"{w.name}.log").open("w"))
    for w in everyone:
        w.up.set()
    tasks = [asyncio.create_task(w.run()) for w in everyone]

    async def quiet_point() -> None:
        for w in watchers:
            w.go.set()
        want = {uid: str(gen) for uid, gen in sources.generation.items()}
        events_then = oracle.stats.events

        def served() -> dict[str, str | None]:
            labels = {uid: pod_from_bytes(pod)["metadata"]["labels"] for uid, pod in oracle.state.items()}
            return {uid: label.get("gen") for uid, label in labels.items()}

        def caught_up() -> bool:
            return served() == want

        # The server has read the files: the oracle watcher saw it. But the files' generations
        # cannot show a move between the two sources (the same pod, the same generation): the
        # server serves it as a DELETED, then an ADDED one scan of the other source later, and
        # a List taken between the two holds neither. So a List is the state to compare with
        # only while the server stays at it: once the oracle (which reads every event) gets an
        # event after a List, the watchers are compared with a new one.
        try:
            await until_progressing(oracle, caught_up, TIMEOUT, CATCH_UP)
        except TimeoutError:
            raise Violation(_behind(oracle, served(), want, oracle.stats.events - events_then)) from None
        for attempt in range(RELISTS):
            figures.superseded += attempt > 0
            seen = oracle.stats.events
            lists = {masked: await _list(current[0], masked) for masked in (False, True)}
            if await _all_hold(everyone, lists, oracle, seen):
                break
        else:
            raise Violation(f"the server never settled: {RELISTS} Lists in a row were superseded")
        await explain_gaps(kube, current[0], figures.gaps)
        figures.quiet_points += 1
        fds, rss = _proc_figures(current[0])
        figures.descriptors.append(fds)
        figures.rss_kib.append(rss)

    async def long_stall(w: Watcher) -> None:
        """The client stops reading past the send timeout, through two storms."""
        w.go.clear()
        figures.long_stalls += 1
        sources.storm()
        sources.storm()
        await asyncio.sleep(LONG_STALL)  # the fault's length, not a synchronisation

    steps = STEPS if not changes else changes // 2  # a step makes 2.5 changes on average
    try:
        await quiet_point()
        restart_at = rng.randrange(QUIET_EVERY, STEPS)
        long_stall_at = rng.randrange(1, QUIET_EVERY)
        step = 0
        while step < steps or (changes and sum(sources.faults.values()) < changes):
            step += 1
            for _ in range(rng.randint(1, 4)):
                sources.step()
            figures.steps += 1
            w = rng.choice(watchers)
            roll = rng.random()
            if step == long_stall_at:
                await long_stall(long_stalled)
            elif roll < 0.02:
                await long_stall(rng.choice(unmasked))
            elif roll < 0.25:
                w.go.clear()  # stall: the server fills its queue and cuts it off
                figures.stalls += 1
                if rng.random() < 0.5:
                    sources.storm()
            elif roll < 0.4:
                w.disconnect.set()
                figures.disconnects += 1
            # Once in the short run; every RESTART_EVERY steps as well in a long one.
            if step == restart_at or (step > STEPS and step % RESTART_EVERY == 0):
                await explain_gaps(kube, current[0], figures.gaps)
                for w in everyone:
                    w.up.clear()
                await asyncio.to_thread(current[0].stop)
                figures.send_timeouts += _send_timeouts(current[0])
                current[0].close()
                current[0] = start(run_dir, *args)
                await asyncio.to_thread(current[0].wait_ready)
                figures.restarts += 1
                for w in everyone:
                    w.up.set()
            if step % QUIET_EVERY == 0:
                await quiet_point()
        problems = [p for w in everyone for p in w.problems]
        if problems:
            kinds = Counter(re.sub(r"[0-9]+", "N", p.split(": ", 1)[1]) for p in problems)
            summary = "; ".join(f"{n} of {kind!r}" for kind, n in kinds.most_common())
            raise Violation(f"{len(problems)} problems ({summary}):\n" + "\n".join(problems[:40]))
    except BaseException:
        _report(figures, sources, everyone)  # the run's figures, whatever it found or stopped it
        found = [p for w in everyone for p in w.problems]
        print(f"problems found before it stopped: {len(found)}\n" + "\n".join(found[:40]))
        raise
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        current[0].stop()
        current[0].close()
        logs.close()
    figures.send_timeouts += _send_timeouts(current[0])
    _report(figures, sources, everyone)
    return figures


async def until_progressing(w: Watcher, predicate: Callable[[], bool], idle: float, most: float) -> None:
    """Returns once `predicate` holds; raises TimeoutError when `w` applies no event for `idle`
    seconds, or when `most` seconds pass."""
    async with asyncio.timeout(most):
        while not predicate():
            seen = w.stats.events
            await asyncio.wait_for(w.until(lambda seen=seen: predicate() or w.stats.events != seen), idle)


def _behind(oracle: Watcher, served: dict[str, str | None], want: dict[str, str], events: int) -> str:
    """A quiet point's message when the server has not served what the files say (no event for
    TIMEOUT, or CATCH_UP in all): which pods differ (by `gen` label), and how many events the
    oracle got meanwhile (many: a server starved of CPU, still serving; none: one that stopped
    reading its files)."""
    missing = sorted(set(want) - set(served))
    extra = sorted(set(served) - set(want))
    both = sorted(set(want) & set(served))
    differ = [(uid, served[uid], want[uid]) for uid in both if served[uid] != want[uid]]
    return (
        f"the server did not serve the files' pods (no event for {TIMEOUT:g} s, or {CATCH_UP:g} s in all; "
        f"the oracle got {events} events meanwhile): missing {missing[:20]}, extra {extra[:20]}, "
        f"{len(differ)} with another gen (uid, served, written) {differ[:20]}\n"
        + "\n".join(oracle.trace[-20:])
    )


def _send_timeouts(served: Served) -> int:
    return sum("whose client took nothing" in line for line in served.lines)


def _report(figures: Figures, sources: Sources, watchers: list[Watcher]) -> None:
    told: dict[str, int] = {}
    for w in watchers:
        for code, n in w.stats.told.items():
            told[code] = told.get(code, 0) + n
    print(
        f"\nseed {figures.seed}: {figures.steps} steps, file changes {dict(sorted(sources.faults.items()))}, "
        f"{sum(w.stats.events for w in watchers)} events applied by {len(watchers)} watchers, "
        f"{figures.quiet_points} quiet points ({figures.superseded} Lists superseded, compared again), "
        f"{figures.restarts} restart(s), {figures.stalls} stalls, "
        f"{figures.long_stalls} stalls past the send timeout "
        f"({figures.send_timeouts} send-timeout log lines, throttled), "
        f"{figures.disconnects} disconnects, {sum(w.stats.resumes for w in watchers)} SSE resumes, "
        f"cut off and told {told}, untold endings {sum(w.stats.untold for w in watchers)}, "
        f"descriptors {_span(figures.descriptors)}, RSS KiB {_span(figures.rss_kib)}; "
        f"{sum(w.never_back.checked for w in watchers if isinstance(w, SseWatcher | KubeWatcher))} "
        "versions checked never back; "
        f"Kubernetes-view resourceVersion gaps {dict(figures.gaps)}; "
        "0 lost, 0 duplicated, 0 mismatches, 0 stale at quiet points"
    )


def _span(values: list[int]) -> str:
    if not values:
        return "-"
    return f"first {values[0]}, min {min(values)}, max {max(values)}, last {values[-1]}"


async def test_a_quiet_point_waits_for_a_slow_server_but_not_for_a_stuck_one() -> None:
    """The wait a quiet point makes for the oracle (`until_progressing`): the server of a loaded
    box serves one event a second for longer than the idle limit, then catches up (waited for);
    one that serves nothing for the idle limit fails it (asyncio.wait_for on the whole wait, as
    the driver had, failed the slow one too)."""
    w = Watcher("oracle", False, random.Random(0), lambda: None)  # type: ignore[arg-type,return-value]
    done = {"events": 0}

    async def slow_server(events: int, every: float) -> None:
        for _ in range(events):
            await asyncio.sleep(every)  # the server's pace, not a synchronisation
            done["events"] += 1
            await w._applied()

    server = asyncio.create_task(slow_server(6, 0.1))
    await until_progressing(w, lambda: done["events"] == 6, idle=0.3, most=5)
    await server
    with pytest.raises(TimeoutError):
        await until_progressing(w, lambda: done["events"] == 7, idle=0.3, most=5)


async def test_watchers_rebuild_the_cache_from_their_events(
    seed: int, tmp_path: Path, pytestconfig: pytest.Config
) -> None:
    log = pytestconfig.getoption("event_log")
    await drive(seed, tmp_path, pytestconfig.getoption("changes"), Path(log) if log else None)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "seed" in metafunc.fixturenames:
        count = metafunc.config.getoption("seeds")
        first = metafunc.config.getoption("first_seed")
        metafunc.parametrize("seed", range(first, first + count))
