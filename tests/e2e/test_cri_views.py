"""What the CRI source makes of one relist, without a runtime: standalone pods and overlay
statuses, and that an unchanged relist hands over the very same objects (so the cache sends no
MODIFIED and re-encodes nothing)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from fakecri import FakeRuntime, start
from hypothesis import given
from hypothesis import strategies as st
from serve import TIMEOUT

from pods_api.core.store.cache import PodCache
from pods_api.core.store.version import PodVersion
from pods_api.core.store.watch import EventType, WatchHub
from pods_api.sources.cri.pb import cri_runtime_v1_pb2 as cri
from pods_api.sources.cri.source import CRISource, CRIStatusOverlay, RuntimeView, container_from_status
from pods_api.sources.cri.status import INIT, REGULAR, Container, ContainerState, Sandbox

SECOND = 1_000_000_000
UID = "11111111-2222-3333-4444-555555555555"


def view(*containers: Container, ready: bool = True) -> RuntimeView:
    labels = {"io.kubernetes.pod.uid": UID, "io.kubernetes.pod.name": "web", "app": "web"}
    sandbox = Sandbox("sb1", UID, "web", "prod", 0, ready, 100 * SECOND, labels, {}, ("10.0.0.7",))
    return RuntimeView("containerd", {UID: [sandbox]}, {UID: list(containers)} if containers else {})


def ctr(name: str, state: ContainerState, *, kind: str = REGULAR, code: int = 0, at: int = 101) -> Container:
    return Container(
        id=f"{name}-{at}",
        sandbox_id="sb1",
        uid=UID,
        name=name,
        kind=kind,
        state=state,
        created_at=at * SECOND,
        started_at=(at + 1) * SECOND,
        finished_at=(at + 2) * SECOND if state is ContainerState.EXITED else 0,
        exit_code=code,
        reason="Error" if code else ("Completed" if state is ContainerState.EXITED else ""),
        image="docker.io/library/nginx:1.27",
        image_ref="sha256:abc",
        spec_image="nginx:1.27",
        command=("nginx",),
        ports=({"containerPort": 80, "protocol": "TCP"},),
    )


def clock() -> int:
    return 200 * SECOND


def test_standalone_pod_from_a_relist_and_the_same_object_when_nothing_changed() -> None:
    source = CRISource(Path("/run/x.sock"), node_name="node-1", clock=clock)
    relist = view(ctr("init", ContainerState.EXITED, kind=INIT, at=100), ctr("main", ContainerState.RUNNING))
    (pod,) = source.pods(relist)
    assert pod.json["metadata"]["labels"] == {"app": "web"}
    assert pod.json["spec"]["initContainers"] == [
        {
            "name": "init",
            "image": "nginx:1.27",
            "command": ["nginx"],
            "ports": [{"containerPort": 80, "protocol": "TCP"}],
        }
    ]
    assert pod.json["status"]["podIP"] == "10.0.0.7"
    assert pod.json["status"]["phase"] == "Running"
    (again,) = source.pods(
        view(ctr("init", ContainerState.EXITED, kind=INIT, at=100), ctr("main", ContainerState.RUNNING))
    )
    assert again is pod


def owner(restart_policy: str, **status: Any) -> PodVersion:
    return PodVersion.from_json(
        {
            "metadata": {"name": "web", "namespace": "prod", "uid": UID},
            "spec": {
                "restartPolicy": restart_policy,
                "containers": [{"name": "main", "image": "nginx:1.27"}],
                "readinessGates": [{"conditionType": "example.com/lb"}],
            },
            "status": status,
        }
    )


def test_overlay_statuses_follow_the_owners_spec() -> None:
    overlay = CRIStatusOverlay(Path("/run/x.sock"), clock=clock)
    gate = {"type": "example.com/lb", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}
    served = {UID: owner("Never", phase="Running", conditions=[gate])}
    exited = view(ctr("main", ContainerState.EXITED, code=3))
    statuses = overlay.statuses(exited, served.get)
    status = statuses[UID]
    assert status["phase"] == "Failed"  # restartPolicy Never, from the owner's spec
    assert status["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 3
    assert [c["type"] for c in status["conditions"]] == [
        "PodReadyToStartContainers",
        "Initialized",
        "Ready",
        "ContainersReady",
        "PodScheduled",
    ]  # the gate's condition stays the owner's
    assert overlay.statuses(exited, served.get)[UID] is status  # nothing changed: same object


def test_the_overlay_never_makes_a_pod_exist() -> None:
    overlay = CRIStatusOverlay(Path("/run/x.sock"), clock=clock)
    assert overlay.statuses(view(ctr("main", ContainerState.RUNNING)), {}.get) == {}


def test_a_readiness_gate_the_owner_has_not_set_keeps_ready_false() -> None:
    overlay = CRIStatusOverlay(Path("/run/x.sock"), clock=clock)
    served = {UID: owner("Always", phase="Running")}
    status = overlay.statuses(view(ctr("main", ContainerState.RUNNING)), served.get)[UID]
    ready = {c["type"]: c for c in status["conditions"]}["Ready"]
    assert (ready["status"], ready["reason"]) == ("False", "ReadinessGatesNotReady")


def test_a_pod_the_codec_refuses_is_reported_and_keeps_its_last_version() -> None:
    errors: list[str] = []
    source = CRISource(
        Path("/run/x.sock"), node_name="node-1", clock=clock, on_error=lambda _, e: errors.append(e)
    )
    (pod,) = source.pods(view(ctr("main", ContainerState.RUNNING)))
    bad = Container(
        **{
            **{f: getattr(ctr("main", ContainerState.EXITED), f) for f in Container.__slots__},
            "ports": ({"containerPort": "eighty"},),
        }
    )
    assert source.pods(view(bad)) == [pod]
    (error,) = errors
    assert UID in error and "ports" in error


@given(
    annotations=st.dictionaries(
        st.sampled_from(
            [
                "io.kubernetes.container.restartCount",
                "io.kubernetes.container.ports",
                "io.kubernetes.container.type",
                "other",
            ]
        ),
        st.one_of(st.text(max_size=20), st.integers(-5, 5).map(str), st.just('[{"containerPort":80}]')),
    ),
    info=st.one_of(
        st.text(max_size=30),
        st.just('{"config":{"command":["x"],"args":["y"]}}'),
        st.just('{"config":{"command":"x","image":1}}'),
    ),
    state=st.integers(0, 7),
)
def test_whatever_a_runtime_reports_in_annotations_reads_without_raising(
    annotations: dict[str, str], info: str, state: int
) -> None:
    status = cri.ContainerStatus(
        id="c1", state=state, annotations=annotations, labels={"io.kubernetes.container.name": "main"}
    )
    listed = cri.Container(id="c1", pod_sandbox_id="sb1", state=state)
    got = container_from_status(listed, cri.ContainerStatusResponse(status=status, info={"info": info}))
    assert got.name == "main" and got.kind in (REGULAR, INIT, "ephemeral")
    assert isinstance(got.restart_count, int) and all(isinstance(p, dict) for p in got.ports)
    assert got.state in set(ContainerState)
    assert all(isinstance(c, str) for c in got.command + got.args)


async def test_a_container_event_brings_the_change_without_waiting_for_the_period(tmp_path: Path) -> None:
    # A relist period of an hour: only the GetContainerEvents stream can bring the exit.
    runtime = FakeRuntime(2, 3, events=True)
    async with _synced(runtime, tmp_path, relist=3600) as cache:
        async with asyncio.timeout(TIMEOUT):
            await runtime.subscribed.wait()
            watcher = cache.hub.subscribe()
            cid = next(iter(runtime.containers))
            runtime.exit(cid, 3)
            event = await watcher.get()
        assert event.type is EventType.MODIFIED
        (terminated,) = [
            s["state"]["terminated"]
            for s in event.pod.json["status"]["containerStatuses"]
            if "terminated" in s["state"]
        ]
        assert (terminated["exitCode"], terminated["containerID"]) == (3, f"fake://{cid}")


async def test_a_runtime_whose_container_list_is_over_4_mib_is_listed(tmp_path: Path) -> None:
    """grpc's default 4 MiB receive limit refused the ListContainers answer of a big node on
    every relist, so the source never synced; the kubelet's CRI client reads up to 16 MiB."""
    runtime = FakeRuntime(2, 40, events=False)
    for status in runtime.containers.values():
        status.annotations["example.com/blob"] = "z" * 120_000  # 40 of 120 KB: a 4.8 MB list
    async with _synced(runtime, tmp_path) as cache:
        pods = cache.snapshot().pods
        assert sorted(len(p.json["status"]["containerStatuses"]) for p in pods) == [20, 20]


@contextlib.asynccontextmanager
async def _synced(runtime: FakeRuntime, tmp_path: Path, **options: Any) -> AsyncIterator[PodCache]:
    """A CRI source on `runtime`, feeding a cache, once the cache is ready (its first relist)."""
    server = await start(runtime, tmp_path / "cri.sock")
    cache = PodCache(WatchHub(capacity=100, max_watchers=1))
    source = CRISource(tmp_path / "cri.sock", node_name="node-1", **options)
    ready = asyncio.Event()
    cache.on_readiness(lambda now_ready: now_ready and ready.set())
    task = asyncio.get_running_loop().create_task(source.run(cache.source(source.name)))
    try:
        async with asyncio.timeout(TIMEOUT):
            await ready.wait()
        yield cache
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await server.stop(0)
