"""A source that cannot move on says so: every source with an upstream, against that upstream for
real (an HTTP server for the manifest URL and the kubelet's /pods, a Pods API server for the
bridge, a CRI runtime on its socket), through a real PodCache. The upstream first serves, then
fails, answers garbage or answers without syncing; past the source's resync (short here) the
source is stale: `pods_api_source_connected` 0 (its `on_connected`), a warning for clients
(`PodCache.warnings`, which gRPC carries and `pods-api check` prints), its last good pods still
served; applying something again clears it. The --apiserver source's own case is in
test_apiserver.py; the whole path through `pods-api serve` and `pods-api check` in
tests/e2e/test_hostile.py."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from builders import make_pod, pod
from fakecri import FakeRuntime, start
from kubelet_server import KubeletServer
from servers import ManifestServer
from sourceharness import Harness, Said, by_name, harness_fixture, said_fixture  # noqa: F401

from pods_api.core.api.codec import pod_to_bytes
from pods_api.core.store.cache import PodCache
from pods_api.core.store.watch import EventType, WatchHub
from pods_api.sources import Source
from pods_api.sources.cri.source import CRISource
from pods_api.sources.kubelet_pods import KubeletPodsSource
from pods_api.sources.kubelet_socket import KubeletSocketSource
from pods_api.sources.poller import FETCH_DEADLINE
from pods_api.sources.staleness import Staleness, after_missed
from pods_api.sources.url import DEFAULT_INTERVAL, ManifestURLSource

# Every poll and relist this often; stale once nothing was applied for STALE_AFTER.
PERIOD = 0.05
STALE_AFTER = 0.5


class Gauge:
    """What a source tells `pods_api_source_connected`, in order."""

    def __init__(self) -> None:
        self.told: list[bool] = []

    def __call__(self, connected: bool) -> None:
        self.told.append(connected)

    @property
    def value(self) -> bool | None:
        return self.told[-1] if self.told else None


async def stale(harness: Harness, said: Said, source: Source) -> str:
    """The source's warning, once it has said it is stale."""
    await said.line(harness, f"pod source {source.name}: stale: ")
    return harness.cache.warnings[source.name]


async def current(harness: Harness, said: Said, source: Source) -> None:
    await said.line(harness, f"pod source {source.name}: current again")
    assert source.name not in harness.cache.warnings


def pod_list(*pods: dict[str, Any]) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": list(pods)})


@pytest.fixture
async def http() -> AsyncIterator[ManifestServer]:
    s = ManifestServer()
    s.start()
    yield s
    s.stop()


def test_a_polled_sources_resync_is_two_polls_the_second_given_its_deadline() -> None:
    assert after_missed(DEFAULT_INTERVAL, FETCH_DEADLINE) == 2 * DEFAULT_INTERVAL + FETCH_DEADLINE


async def test_a_stale_warning_is_one_line_short_enough_for_every_clients_metadata_limit() -> None:
    """It rides on every List's trailing metadata: a YAML error's lines, or a huge one, would make
    the warning itself what a client cannot take (8 KiB of metadata in all)."""
    cache = PodCache(WatchHub(capacity=10, max_watchers=1))
    sink = cache.source("url:x")
    tracker = Staleness("url:x", stale_after=0.0)
    with tracker.running(sink):
        tracker.current()
        tracker.failed("not valid YAML:\n  in line 1\n    ^\n" + "x" * 20_000)
    warning = cache.warnings["url:x"]
    assert "\n" not in warning and "not valid YAML: in line 1 ^ xxx" in warning
    assert len(warning) < 1024 and warning.endswith(f"… ({20_000 + 28} characters)")


# -- --manifest-url ------------------------------------------------------------------------------


async def test_a_manifest_url_answering_garbage_past_its_resync_is_stale_until_it_answers_again(
    http: ManifestServer, harness: Harness, said: Said
) -> None:
    http.serve(pod_list(pod("web")))
    gauge = Gauge()
    source = ManifestURLSource(
        http.url,
        node_name="node-1",
        interval=PERIOD,
        on_error=harness.on_error,
        on_connected=gauge,
        stale_after=STALE_AFTER,
    )
    await harness.start(source)
    assert gauge.told == [True] and source.name not in harness.cache.warnings

    http.serve("kind: [not, a, pod")
    warning = await stale(harness, said, source)
    assert warning.startswith(f"stale: nothing applied from {http.url} since ")
    assert f"(its resync is {STALE_AFTER:g} s): " in warning and "not valid YAML" in warning
    assert gauge.value is False
    assert sorted(by_name(harness.cache.snapshot().pods)) == ["web-node-1"]  # the last good pods

    http.serve(pod_list(pod("web"), pod("db")))
    event = await harness.event()
    assert (event.type, event.pod.name) == (EventType.ADDED, "db-node-1")
    await current(harness, said, source)
    assert gauge.value is True


async def test_a_manifest_url_that_is_down_is_stale_and_each_retry_says_the_latest_reason(
    http: ManifestServer, harness: Harness, said: Said
) -> None:
    http.serve(pod_list(pod("web")))
    source = ManifestURLSource(
        http.url, node_name="node-1", interval=PERIOD, on_error=harness.on_error, stale_after=STALE_AFTER
    )
    await harness.start(source)
    http.serve("", status=503)
    assert "HTTP 503" in await stale(harness, said, source)
    http.stop()
    await harness.error("fetch failed")  # the warning is renewed with each failure
    assert "fetch failed" in harness.cache.warnings[source.name]
    assert sorted(by_name(harness.cache.snapshot().pods)) == ["web-node-1"]
    http.start()
    http.serve(pod_list(pod("web")))
    await current(harness, said, source)


# -- --kubelet-pods-url ----------------------------------------------------------------------------


async def test_the_kubelets_pods_failing_past_its_resync_is_stale_until_a_poll_succeeds(
    http: ManifestServer, harness: Harness, said: Said
) -> None:
    web = make_pod("web", "uid-web")
    http.serve(pod_list(web))
    gauge = Gauge()
    source = KubeletPodsSource(
        http.url, interval=PERIOD, on_error=harness.on_error, on_connected=gauge, stale_after=STALE_AFTER
    )
    await harness.start(source)
    assert gauge.told == [True]

    http.stop()  # the kubelet is down: every retry is refused
    warning = await stale(harness, said, source)
    assert warning.startswith(f"stale: nothing applied from {http.url} since ") and "fetch failed" in warning
    assert gauge.value is False
    assert harness.cache.get("uid-web") is not None

    http.serve(pod_list(web, make_pod("db", "uid-db")))
    http.start()
    event = await harness.event()
    assert (event.type, event.pod.uid) == (EventType.ADDED, "uid-db")
    await current(harness, said, source)
    assert gauge.value is True


async def test_the_kubelets_pods_refusing_the_token_is_stale_saying_not_allowed(
    http: ManifestServer, harness: Harness, said: Said
) -> None:
    http.serve(pod_list(make_pod("web", "uid-web")))
    source = KubeletPodsSource(http.url, interval=PERIOD, on_error=harness.on_error, stale_after=STALE_AFTER)
    await harness.start(source)
    http.serve("", status=403)
    assert "not allowed (HTTP 403 Forbidden)" in await stale(harness, said, source)
    assert harness.cache.get("uid-web") is not None


# -- --kubelet-socket (the bridge) -----------------------------------------------------------------


@pytest.fixture
async def kubelet(tmp_path: Path) -> AsyncIterator[KubeletServer]:
    server = KubeletServer(tmp_path / "kubelet.sock", {"uid-web": pod_to_bytes(make_pod("web", "uid-web"))})
    await server.start()
    yield server
    await server.stop()


async def test_a_bridge_whose_kubelet_is_gone_past_its_resync_is_stale_until_it_syncs_again(
    kubelet: KubeletServer, harness: Harness, said: Said
) -> None:
    gauge = Gauge()
    source = KubeletSocketSource(
        kubelet.path, on_error=harness.on_error, on_connected=gauge, stale_after=STALE_AFTER
    )
    await harness.start(source)
    assert gauge.told == [True]

    await kubelet.stop()  # every retry fails
    warning = await stale(harness, said, source)
    assert warning.startswith(f"stale: nothing applied from {kubelet.path} since ")
    assert "upstream disconnected" in warning and gauge.value is False
    assert harness.cache.get("uid-web") is not None

    kubelet.pods["uid-db"] = pod_to_bytes(make_pod("db", "uid-db"))
    await kubelet.start()
    event = await harness.event()
    assert (event.type, event.pod.uid) == (EventType.ADDED, "uid-db")
    await current(harness, said, source)
    assert gauge.value is True


async def test_a_bridge_reconnected_to_a_kubelet_that_never_syncs_is_stale(
    kubelet: KubeletServer, harness: Harness, said: Said
) -> None:
    """Connected, its watch open, yet nothing applied: no failure comes to say so, the resync does."""
    gauge = Gauge()
    source = KubeletSocketSource(
        kubelet.path, on_error=harness.on_error, on_connected=gauge, stale_after=STALE_AFTER
    )
    await harness.start(source)
    await kubelet.stop()
    kubelet.hold_sync = True
    await kubelet.start()
    assert "stale: " in await stale(harness, said, source)
    assert gauge.value is False and harness.cache.get("uid-web") is not None

    kubelet.hold_sync = False
    await kubelet.stop()  # ends the held watch; the next one syncs
    await kubelet.start()
    await current(harness, said, source)
    assert gauge.value is True


async def test_a_synced_bridge_is_current_however_quiet_its_kubelet_is(
    kubelet: KubeletServer, harness: Harness, said: Said
) -> None:
    source = KubeletSocketSource(kubelet.path, on_error=harness.on_error, stale_after=PERIOD)
    await harness.start(source)
    kubelet.put("uid-db", pod_to_bytes(make_pod("db", "uid-db")))
    await harness.event()
    # Many resyncs later, a change still arrives and no warning was ever raised.
    for _ in range(5):
        kubelet.put("uid-db", pod_to_bytes(make_pod("db", "uid-db", phase="Succeeded")))
        await harness.event()
        kubelet.put("uid-db", pod_to_bytes(make_pod("db", "uid-db")))
        await harness.event()
    assert source.name not in harness.cache.warnings


# -- --cri-socket ----------------------------------------------------------------------------------


@pytest.fixture
def runtime() -> FakeRuntime:
    return FakeRuntime(2, 2, events=False)


def _cri(socket: Path, harness: Harness, gauge: Gauge | None = None) -> CRISource:
    """Relisting every PERIOD (no event stream to wake it), stale past STALE_AFTER."""
    return CRISource(
        socket,
        node_name="node-1",
        relist=PERIOD,
        follow_events=False,
        on_error=harness.on_error,
        on_connected=gauge,
        stale_after=STALE_AFTER,
    )


async def test_a_runtime_failing_every_relist_past_its_resync_is_stale_until_a_relist_succeeds(
    runtime: FakeRuntime, harness: Harness, said: Said, tmp_path: Path
) -> None:
    server = await start(runtime, tmp_path / "cri.sock")
    try:
        gauge = Gauge()
        source = _cri(tmp_path / "cri.sock", harness, gauge)
        pods = sorted(by_name((await harness.start(source)).pods))
        assert len(pods) == 2 and gauge.told == [True]

        runtime.failing = grpc.StatusCode.INTERNAL
        warning = await stale(harness, said, source)
        assert warning.startswith(
            f"stale: nothing applied from the runtime at {tmp_path / 'cri.sock'} since "
        )
        assert "runtime call failed (INTERNAL: the runtime is failing" in warning
        assert gauge.value is False
        assert sorted(by_name(harness.cache.snapshot().pods)) == pods

        runtime.failing = None
        await current(harness, said, source)
        assert gauge.value is True
    finally:
        await server.stop(0)


async def test_a_runtime_that_is_gone_is_stale_until_it_is_back(
    runtime: FakeRuntime, harness: Harness, said: Said, tmp_path: Path
) -> None:
    socket = tmp_path / "cri.sock"
    server = await start(runtime, socket)
    source = _cri(socket, harness)
    pods = sorted(by_name((await harness.start(source)).pods))
    await server.stop(0)
    try:
        assert "UNAVAILABLE" in await stale(harness, said, source)
        assert sorted(by_name(harness.cache.snapshot().pods)) == pods
        server = await start(runtime, socket)
        await current(harness, said, source)
    finally:
        await server.stop(0)


async def test_the_runtime_as_a_status_overlay_is_stale_too(
    runtime: FakeRuntime, harness: Harness, said: Said, tmp_path: Path
) -> None:
    """Beside a source that owns the pods, the runtime gives their status: old statuses are as
    stale as old pods, and say so under the overlay's name."""
    server = await start(runtime, tmp_path / "cri.sock")
    try:
        gauge = Gauge()
        overlay = _cri(tmp_path / "cri.sock", harness, gauge).as_overlay()
        harness.tasks.append(asyncio.create_task(overlay.run(harness.cache.overlay(overlay.name))))
        await harness.synced()
        assert gauge.told == [True]

        runtime.failing = grpc.StatusCode.UNAVAILABLE
        assert "runtime call failed (UNAVAILABLE" in await stale(harness, said, overlay)
        assert gauge.value is False

        runtime.failing = None
        await current(harness, said, overlay)
        assert gauge.value is True
    finally:
        await server.stop(0)
