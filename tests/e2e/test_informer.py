"""pods_api.client.Informer against real servers: sync, live changes, reconnects that replay
nothing unchanged, each state, and an upstream that never sends INITIAL_SYNC_COMPLETE."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from podfiles import EXAMPLES, REPORT, WEB, WORKER, add_copy, copy_examples, edit, finish, set_phase, uid_of
from serve import TIMEOUT, Served, serving, start

from pods_api.client import (
    Backoff,
    Client,
    EventType,
    Informer,
    InformerEvent,
    NotReady,
    Pod,
    RateLimited,
    State,
    Unreachable,
)
from pods_api.core.api.pb import k8s_core_v1_pb2, k8s_meta_v1_pb2

ADDED, MODIFIED, DELETED, SYNCED = (
    EventType.ADDED,
    EventType.MODIFIED,
    EventType.DELETED,
    EventType.INITIAL_SYNC_COMPLETE,
)
NEW_UID = "9f3e1c55-0000-4a5b-8c7d-112233445566"
# Short retries: the tests wait on events, and a restarted server should be found at once.
FAST = Backoff(initial=0.05, maximum=0.5)


class Recorder:
    """Every event and state change an informer reports, with a way to await one."""

    def __init__(self, informer: Informer) -> None:
        self.events: list[InformerEvent] = []
        self.states: list[State] = []
        self._changed = asyncio.Event()
        informer.add_handler(self._event)
        informer.on_state(self._state)

    def _event(self, event: InformerEvent) -> None:
        self.events.append(event)
        self._changed.set()

    def _state(self, state: State, error: object) -> None:
        self.states.append(state)
        self._changed.set()

    async def until(self, done: Callable[[], bool]) -> None:
        async with asyncio.timeout(TIMEOUT):
            while not done():
                self._changed.clear()
                await self._changed.wait()

    def syncs(self) -> int:
        return sum(e.type is SYNCED for e in self.events)

    def since(self, start: int) -> list[tuple[EventType, str]]:
        """(type, uid) of the events from index `start` up to the next INITIAL_SYNC_COMPLETE."""
        end = next(i for i in range(start, len(self.events)) if self.events[i].type is SYNCED)
        return sorted((e.type, e.pod.uid) for e in self.events[start:end] if e.pod is not None)


async def informing(socket: Path, **options: object) -> AsyncIterator[tuple[Informer, Recorder]]:
    async with Client(socket) as client, Informer(client, backoff=FAST, **options) as informer:  # type: ignore[arg-type]
        yield informer, Recorder(informer)


def server_pods(served: Served) -> dict[str, bytes]:
    async def read() -> dict[str, bytes]:
        async with Client(served.socket) as client:
            return {p.uid: p.raw for p in await client.list()}

    return asyncio.run(read())


async def test_sync_then_live_changes(tmp_path: Path) -> None:
    fixtures = copy_examples(tmp_path / "fixtures")
    with serving(tmp_path / "run", "--fixtures", str(fixtures)) as served:
        async with Client(served.socket) as client, Informer(client, backoff=FAST) as informer:
            rec = Recorder(informer)
            await informer.wait_synced()
            assert informer.state is State.READY
            wire = {p.uid: p.raw for p in await client.list()}
            assert {uid: p.raw for uid, p in informer.pods.items()} == wire
            assert rec.since(0) == sorted((ADDED, uid) for uid in wire)

            edit(fixtures / WEB, set_phase("Pending"))
            await rec.until(lambda: len(rec.events) == len(wire) + 2)
            modified = rec.events[-1]
            assert modified.type is MODIFIED and modified.pod is not None and modified.previous is not None
            assert modified.previous.json()["status"]["phase"] == "Running"
            assert informer.pods[uid_of(fixtures / WEB)].json()["status"]["phase"] == "Pending"

            # A pod that finishes: its MODIFIED, then the kubelet's DELETED, which drops it here
            # though the server still lists it (docs/clients.md, the informer).
            edit(fixtures / WEB, finish())
            await rec.until(lambda: rec.events[-1].type is DELETED)
            assert [e.type for e in rec.events[-2:]] == [MODIFIED, DELETED]
            assert uid_of(fixtures / WEB) not in informer.pods
            assert uid_of(fixtures / WEB) in {p.uid for p in await client.list()}

            report = uid_of(fixtures / REPORT)
            (fixtures / REPORT).unlink()
            await rec.until(lambda: report not in informer.pods)
            assert rec.events[-1].type is DELETED
            assert rec.events[-1].pod is not None and rec.events[-1].pod.uid == report


async def test_reconnect_reconciles_exactly_what_changed(tmp_path: Path) -> None:
    """The server dies; meanwhile one pod changes, one goes, one comes. After the reconnect the
    handlers see exactly those three, and nothing for the pods that did not change."""
    fixtures = copy_examples(tmp_path / "fixtures")
    run = tmp_path / "run"
    served = start(run, "--fixtures", str(fixtures))
    try:
        served.wait_ready()
        async with Client(served.socket) as client, Informer(client, backoff=FAST) as informer:
            rec = Recorder(informer)
            await informer.wait_synced()
            served.proc.kill()
            served.close()
            await rec.until(lambda: informer.state is State.DISCONNECTED)
            assert informer.synced and len(informer.pods) == 5  # the last state stays
            mark = len(rec.events)

            edit(fixtures / WEB, set_phase("Failed"))
            report = uid_of(fixtures / REPORT)
            (fixtures / REPORT).unlink()
            add_copy(fixtures, WORKER, "orders-worker-6d5f7c9b8-new11", NEW_UID)
            served = start(run, "--fixtures", str(fixtures))
            await rec.until(lambda: rec.syncs() == 2)
            assert informer.state is State.READY
            assert rec.since(mark) == sorted(
                [(MODIFIED, uid_of(fixtures / WEB)), (DELETED, report), (ADDED, NEW_UID)]
            )
            wire = {p.uid: p.raw for p in await client.list()}
            assert {uid: p.raw for uid, p in informer.pods.items()} == wire
    finally:
        served.close()


async def test_started_late_then_not_ready_then_ready(tmp_path: Path) -> None:
    run = tmp_path / "run"
    async with Client(run / "pods-api.sock") as client, Informer(client, backoff=FAST) as informer:
        rec = Recorder(informer)
        await rec.until(lambda: informer.last_error is not None)
        assert informer.state is State.DISCONNECTED and isinstance(informer.last_error, Unreachable)
        with serving(run, "--fixtures", str(EXAMPLES), "--ready-delay", "3", ready=False) as served:
            await rec.until(lambda: State.NOT_READY in rec.states)
            assert not informer.synced and isinstance(informer.last_error, NotReady)
            await informer.wait_synced()
            assert informer.state is State.READY and len(informer.pods) == 5
            served.stop()


async def test_rate_limited_state(tmp_path: Path) -> None:
    with serving(tmp_path / "run", "--fixtures", str(EXAMPLES), "--max-watchers", "1") as served:
        async with Client(served.socket) as client:
            holder = client.watch()
            await anext(holder)  # the one watch the server allows
            async with Informer(client, backoff=FAST) as informer:
                rec = Recorder(informer)
                await rec.until(lambda: informer.state is State.RATE_LIMITED)
                assert isinstance(informer.last_error, RateLimited) and not informer.synced
            await holder.aclose()


# -- the snapshot is the watch's own ----------------------------------------------------------


async def test_the_informer_never_lists(tmp_path: Path) -> None:
    """Its snapshot is the watch's ADDED events up to INITIAL_SYNC_COMPLETE: no ListPods spends
    the server's rate limit (nor could a List paper over a watch that does not sync)."""
    with serving(tmp_path / "run", "--fixtures", str(EXAMPLES), "--qps", "0.001", "--burst", "1") as served:
        async with Client(served.socket) as client, Informer(client, backoff=FAST) as informer:
            await informer.wait_synced()
            await client.list()  # the one token: the informer did not spend it


# -- reconciliation, as a property -------------------------------------------------------------

_states = st.dictionaries(st.sampled_from("abcdefgh"), st.integers(1, 3), max_size=8)


def _pod(uid: str, version: int) -> Pod:
    meta = k8s_meta_v1_pb2.ObjectMeta(uid=uid, name=f"v{version}")
    return Pod(k8s_core_v1_pb2.Pod(metadata=meta).SerializeToString())


@given(old=_states, new=_states)
@settings(max_examples=300, deadline=None)
def test_reconcile_emits_exactly_the_differences(old: dict[str, int], new: dict[str, int]) -> None:
    """Whatever the local state and the snapshot: the events turn the one into the other, one
    event per UID whose bytes differ, none for a UID whose bytes are equal."""

    async def make() -> Informer:
        async with Client("/nonexistent.sock") as client:  # never called: reconciling is local
            return Informer(client)

    informer = asyncio.run(make())
    informer._pods = {uid: _pod(uid, v) for uid, v in old.items()}
    events: list[InformerEvent] = []
    informer.add_handler(events.append)
    informer._reconcile({uid: _pod(uid, v) for uid, v in new.items()})

    assert events[-1].type is SYNCED
    state = {uid: _pod(uid, v).raw for uid, v in old.items()}
    for event in events[:-1]:
        assert event.pod is not None
        uid = event.pod.uid
        if event.type is ADDED:
            assert uid not in state
        elif event.type is MODIFIED:
            assert event.previous is not None and event.previous.raw == state[uid] != event.pod.raw
        else:
            assert event.type is DELETED and state.pop(uid) == event.pod.raw
            continue
        state[uid] = event.pod.raw
    assert state == {uid: _pod(uid, v).raw for uid, v in new.items()}
    assert len(events) - 1 == sum(old.get(uid) != new.get(uid) for uid in old.keys() | new.keys())
    assert {uid: p.raw for uid, p in informer.pods.items()} == state
