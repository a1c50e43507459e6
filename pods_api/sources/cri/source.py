"""`--cri-socket PATH`: pods as the node's container runtime sees them, over CRI (runtime.v1).

It only reads: Version, ListPodSandbox, ListContainers, PodSandboxStatus, ContainerStatus and
GetContainerEvents; it never creates, stops or removes anything.

Like the kubelet's generic PLEG it relists every `--cri-relist` seconds (1): two list calls,
then a status call only for a sandbox or container that is new or whose state changed (a
container's exit code and times are fixed once it has exited). Where the runtime offers
GetContainerEvents (containerd 1.7+, CRI-O with evented PLEG), each event starts a relist at
once, so a container's exit reaches watchers without waiting for the period. A pod's JSON is
rebuilt only when its runtime inputs changed, and the cache sends MODIFIED only when the bytes
differ.

Standalone (`--cri-socket` and no other source): every pod sandbox becomes a pod, grouped by
the pod UID label the kubelet puts on it (the sandboxes of every attempt make one pod):
metadata from the sandbox's labels, annotations and metadata; `spec.containers` (and init and
ephemeral containers, by the kubelet's container type annotation) from the containers' names,
images, commands and ports annotation; `status` by pods_api/sources/cri/status.py. What CRI does not carry
is absent: the restart policy (the Kubernetes default, Always, is assumed for the phase until
the kubelet stops the sandbox), resources, volumes, probes.

Overlay (`--cri-socket` with other sources): `CRIStatusOverlay` writes to the cache's overlay
sink one status per pod UID the cache already serves, computed with the owner's spec; the
identity policy (core/store/identity.py) merges it with the owner's status by its precedence table.

Ready after the first complete relist. A runtime that cannot be reached or fails a call keeps
the last pods served, counts a source error, and is reconnected with jittered exponential
backoff.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import random
import stat
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

import grpc
import orjson

from pods_api.core.api.codec import CodecError
from pods_api.core.store.cache import SourceSink
from pods_api.core.store.identity import CONFIG_SOURCE, SANDBOX_READY, STATIC_CONFIG_SOURCES
from pods_api.core.store.observations import Observation
from pods_api.core.store.version import PodVersion
from pods_api.sources import ErrorCounter
from pods_api.sources.cri import DEFAULT_RELIST, DEFAULT_STATIC_WAIT, source_name
from pods_api.sources.cri import status as cristatus
from pods_api.sources.cri.backoff import CrashLoops
from pods_api.sources.cri.observed import Observer
from pods_api.sources.cri.pb import cri_runtime_v1_pb2 as cri
from pods_api.sources.cri.pb import cri_runtime_v1_pb2_grpc as cri_grpc
from pods_api.sources.cri.status import Container, ContainerState, Sandbox, Shape, SpecContainer
from pods_api.sources.staleness import ConnectedGauge, Staleness, WarnedSink, after_missed

log = logging.getLogger(__name__)

# One CRI call; the kubelet's default --runtime-request-timeout is 2 minutes, but a node agent
# should notice a hung runtime far sooner, and a healthy one answers in milliseconds.
CALL_TIMEOUT = 10.0
# The largest answer read from the runtime: the kubelet's CRI client allows 16 MiB (grpc's
# default is 4 MiB), and a node whose ListContainers is past 4 MiB (~5,000 containers) must not
# be one that this source can never list while the kubelet can.
MAX_ANSWER_BYTES = 16 * 1024 * 1024
# Reconnecting: the first retry, doubling per failure up to the cap.
FIRST_RETRY = 0.5
MAX_RETRY = 10.0
# Status calls in flight at once after a relist: a node starting 100 pods at once should not
# open 300 concurrent streams on the runtime's socket.
STATUS_CONCURRENCY = 16


@dataclass
class RuntimeView:
    """What one relist learned: the runtime's name and everything, grouped by pod UID."""

    runtime: str
    sandboxes: dict[str, list[Sandbox]] = field(default_factory=dict)
    containers: dict[str, list[Container]] = field(default_factory=dict)
    # The exited containers the kubelet waits out a crash-loop back-off for: id -> seconds.
    back_offs: dict[str, int] = field(default_factory=dict)

    @property
    def uids(self) -> set[str]:
        return set(self.sandboxes) | set(self.containers)


class RuntimeReader:
    """Relists a runtime over one channel, re-asking a status only when its state changed."""

    def __init__(self, stub: cri_grpc.RuntimeServiceStub, runtime: str) -> None:
        self._stub = stub
        self.runtime = runtime
        self._sandboxes: dict[str, tuple[int, Sandbox]] = {}  # id -> (state seen in the list, it)
        self._containers: dict[str, tuple[int, Container]] = {}
        self._limit = asyncio.Semaphore(STATUS_CONCURRENCY)

    async def relist(self) -> RuntimeView:
        sandboxes = (await self._stub.ListPodSandbox(cri.ListPodSandboxRequest(), timeout=CALL_TIMEOUT)).items
        listed = (
            await self._stub.ListContainers(cri.ListContainersRequest(), timeout=CALL_TIMEOUT)
        ).containers
        await asyncio.gather(
            *(self._sandbox(s) for s in sandboxes if self._sandboxes.get(s.id, (None,))[0] != s.state),
            *(self._container(c) for c in listed if self._containers.get(c.id, (None,))[0] != c.state),
        )
        live_sandboxes = {s.id for s in sandboxes}
        live_containers = {c.id for c in listed}
        self._sandboxes = {k: v for k, v in self._sandboxes.items() if k in live_sandboxes}
        self._containers = {k: v for k, v in self._containers.items() if k in live_containers}
        view = RuntimeView(self.runtime)
        sandbox_uids = {}
        for _, sandbox in self._sandboxes.values():
            view.sandboxes.setdefault(sandbox.uid, []).append(sandbox)
            sandbox_uids[sandbox.id] = sandbox.uid
        for _, c in self._containers.values():
            uid = c.uid or sandbox_uids.get(c.sandbox_id, "")
            if uid:
                view.containers.setdefault(uid, []).append(c)
        return view

    async def _sandbox(self, listed: cri.PodSandbox) -> None:
        request = cri.PodSandboxStatusRequest(pod_sandbox_id=listed.id)
        try:
            async with self._limit:
                status = (await self._stub.PodSandboxStatus(request, timeout=CALL_TIMEOUT)).status
        except grpc.aio.AioRpcError as exc:
            if exc.code() == grpc.StatusCode.NOT_FOUND:
                return  # removed since the list: the next relist will not see it either
            raise
        self._sandboxes[listed.id] = (listed.state, sandbox_from_status(status))

    async def _container(self, listed: cri.Container) -> None:
        request = cri.ContainerStatusRequest(container_id=listed.id, verbose=True)
        try:
            async with self._limit:
                response = await self._stub.ContainerStatus(request, timeout=CALL_TIMEOUT)
        except grpc.aio.AioRpcError as exc:
            if exc.code() == grpc.StatusCode.NOT_FOUND:
                return
            raise
        container = container_from_status(listed, response)
        if container.state is ContainerState.EXITED:
            # Files on the node's disk: read in a thread, once per exit (the state is final).
            message = await asyncio.to_thread(termination_message, response.status)
            if message:
                joined = f"{container.message}: {message}" if container.message else message
                container = dataclasses.replace(container, message=joined)
        self._containers[listed.id] = (listed.state, container)


def sandbox_from_status(status: cri.PodSandboxStatus) -> Sandbox:
    labels = dict(status.labels)
    network = status.network
    ips = tuple(ip for ip in (network.ip, *(a.ip for a in network.additional_ips)) if ip)
    return Sandbox(
        id=status.id,
        uid=labels.get(cristatus.POD_UID_LABEL) or status.metadata.uid,
        name=labels.get(cristatus.POD_NAME_LABEL) or status.metadata.name,
        namespace=labels.get(cristatus.POD_NAMESPACE_LABEL) or status.metadata.namespace,
        attempt=status.metadata.attempt,
        ready=status.state == cri.SANDBOX_READY,
        created_at=status.created_at,
        labels=labels,
        annotations=dict(status.annotations),
        ips=ips,
        host_network=status.linux.namespaces.options.network == cri.NODE,
    )


def container_from_status(listed: cri.Container, response: cri.ContainerStatusResponse) -> Container:
    status = response.status
    labels = dict(status.labels) or dict(listed.labels)
    annotations = dict(status.annotations) or dict(listed.annotations)
    config = _verbose_config(response.info)
    image = config.get("image")
    image = image if isinstance(image, dict) else {}
    try:
        restarts = int(annotations.get(cristatus.RESTART_COUNT_ANNOTATION, "0"))
    except ValueError:
        restarts = 0  # as the kubelet: a malformed count reads as 0
    try:
        ports_json = orjson.loads(annotations.get(cristatus.CONTAINER_PORTS_ANNOTATION, "[]"))
    except orjson.JSONDecodeError:
        ports_json = []  # as the kubelet: an annotation that does not decode is logged and ignored
    ports = tuple(p for p in ports_json if isinstance(p, dict)) if isinstance(ports_json, list) else ()
    kind = annotations.get(cristatus.CONTAINER_TYPE_ANNOTATION, cristatus.REGULAR)
    return Container(
        id=status.id,
        sandbox_id=listed.pod_sandbox_id,
        uid=labels.get(cristatus.POD_UID_LABEL, ""),
        name=labels.get(cristatus.CONTAINER_NAME_LABEL) or status.metadata.name,
        kind=kind if kind in (cristatus.INIT, cristatus.EPHEMERAL) else cristatus.REGULAR,
        state=ContainerState(status.state)
        if status.state in ContainerState._value2member_map_
        else ContainerState.UNKNOWN,
        created_at=status.created_at,
        started_at=status.started_at,
        finished_at=status.finished_at,
        exit_code=status.exit_code,
        reason=status.reason,
        message=status.message,
        image=status.image.image,
        image_ref=status.image_ref,
        restart_count=restarts,
        spec_image=status.image.user_specified_image
        or image.get("user_specified_image")
        or image.get("image", ""),
        command=_strings(config.get("command")),
        args=_strings(config.get("args")),
        ports=ports,
        cpu_quota=status.resources.linux.cpu_quota,
        cpu_period=status.resources.linux.cpu_period,
        cpu_shares=status.resources.linux.cpu_shares,
        memory_limit=status.resources.linux.memory_limit_in_bytes,
        user=_user(status),
    )


def _user(status: cri.ContainerStatus) -> tuple[int, int, tuple[int, ...]] | None:
    if not status.HasField("user") or not status.user.HasField("linux"):
        return None
    linux = status.user.linux
    return linux.uid, linux.gid, tuple(linux.supplemental_groups)


# The kubelet's bounds on a termination message (pkg/kubelet/container: MaxContainerTermination-
# MessageLength, ...LogLength and ...LogLines): a message is a few lines, never a log.
MAX_MESSAGE_BYTES = 4 * 1024
MAX_LOG_MESSAGE_BYTES = 2 * 1024
MAX_LOG_MESSAGE_LINES = 80
# How much of a container log's end is read to find those lines: 80 lines of CRI log framing
# (a timestamp, the stream and a tag per line) around 2 KiB of text fit with room to spare.
LOG_TAIL_BYTES = 64 * 1024
TERMINATION_MESSAGE_PATH_ANNOTATION = "io.kubernetes.container.terminationMessagePath"
TERMINATION_MESSAGE_POLICY_ANNOTATION = "io.kubernetes.container.terminationMessagePolicy"


def termination_message(status: cri.ContainerStatus) -> str:
    """An exited container's termination message as the kubelet reads it
    (kuberuntime_container.go getTerminationMessage, readLastStringFromContainerLogs): the end
    of the file mounted at its terminationMessagePath (the kubelet's annotation), at most 4 KiB;
    with FallbackToLogsOnError, a failed container that wrote none gets the last 80 lines of
    its log, at most 2 KiB. "" when there is none (or the files are not visible here)."""
    annotations = status.annotations
    path = annotations.get(TERMINATION_MESSAGE_PATH_ANNOTATION, "")
    fallback = (
        annotations.get(TERMINATION_MESSAGE_POLICY_ANNOTATION) == "FallbackToLogsOnError"
        and status.exit_code != 0
        and status.reason != "ContainerCannotRun"
    )
    message = ""
    mount = next((m for m in status.mounts if path and m.container_path == path), None)
    if mount is not None:
        try:
            message = _tail(mount.host_path, MAX_MESSAGE_BYTES)[0].decode(errors="replace")
        except FileNotFoundError:
            pass
        except OSError as exc:
            return f"Error on reading termination log {mount.host_path}: {exc}"
    if not message and fallback and status.log_path:
        try:
            data, whole = _tail(status.log_path, LOG_TAIL_BYTES)
            return _log_message(data if whole else data.partition(b"\n")[2])
        except OSError:
            return ""
    return message


def _tail(path: str, limit: int) -> tuple[bytes, bool]:
    """The last `limit` bytes of a regular file (never a FIFO or device: opened non-blocking and
    checked before reading), and whether that is the whole file."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(f"{path} is not a regular file")
        start = max(0, info.st_size - limit)
        os.lseek(fd, start, os.SEEK_SET)
        return os.read(fd, limit), start == 0
    finally:
        os.close(fd)


def _log_message(data: bytes) -> str:
    """The text of the last log lines in CRI's log format (`<time> <stream> <P|F> <text>`, P for
    a partial line continued by the next), bounded as the kubelet bounds it."""
    lines: list[bytes] = []
    partial = b""
    for raw in data.split(b"\n"):
        parts = raw.split(b" ", 3)
        if len(parts) < 3:
            continue
        text = parts[3] if len(parts) == 4 else b""
        if parts[2] == b"P":
            partial += text
            continue
        lines.append(partial + text + b"\n")
        partial = b""
    joined = b"".join(lines[-MAX_LOG_MESSAGE_LINES:])
    return joined[-MAX_LOG_MESSAGE_BYTES:].decode(errors="replace")


def _strings(value: Any) -> tuple[str, ...]:
    return tuple(value) if isinstance(value, list) and all(isinstance(v, str) for v in value) else ()


def _verbose_config(info: Mapping[str, str]) -> dict[str, Any]:
    """The container's CRI config from a verbose status, where the runtime puts it there
    (containerd: info["info"].config); {} elsewhere."""
    try:
        parsed = orjson.loads(info.get("info", "{}"))
    except orjson.JSONDecodeError:
        return {}
    config = parsed.get("config") if isinstance(parsed, dict) else None
    return config if isinstance(config, dict) else {}


# -- standalone pods -------------------------------------------------------------------------------


def standalone_pod(
    uid: str,
    sandboxes: Sequence[Sandbox],
    containers: Sequence[Container],
    runtime: str,
    *,
    node_name: str,
    previous: Mapping[str, Any] | None,
    now: str,
    node_ips: Sequence[str] = (),
    back_offs: Iterable[tuple[str, int]] = (),
) -> dict[str, Any]:
    """A pod in Kubernetes JSON from nothing but what the runtime reports; `sandboxes` holds at
    least one."""
    newest = max(sandboxes, key=lambda s: s.created_at)
    first_seen: dict[tuple[str, str], Container] = {}
    latest: dict[tuple[str, str], Container] = {}
    for c in sorted(containers, key=lambda c: c.created_at):
        first_seen.setdefault((c.kind, c.name), c)
        latest[(c.kind, c.name)] = c

    def specs(kind: str) -> list[dict[str, Any]]:
        out = []
        for key, c in first_seen.items():
            if key[0] != kind:
                continue
            newest_c = latest[key]
            spec: dict[str, Any] = {"name": c.name, "image": newest_c.spec_image or newest_c.image}
            if newest_c.command:
                spec["command"] = list(newest_c.command)
            if newest_c.args:
                spec["args"] = list(newest_c.args)
            if newest_c.ports:
                spec["ports"] = [dict(p) for p in newest_c.ports]
            out.append(spec)
        return out if kind == cristatus.INIT else sorted(out, key=lambda s: s["name"])

    spec: dict[str, Any] = {"containers": specs(cristatus.REGULAR)}
    if init := specs(cristatus.INIT):
        spec["initContainers"] = init
    if ephemeral := specs(cristatus.EPHEMERAL):
        spec["ephemeralContainers"] = ephemeral
    spec["nodeName"] = node_name
    if newest.host_network:
        spec["hostNetwork"] = True

    def shape_of(items: list[dict[str, Any]]) -> tuple[SpecContainer, ...]:
        return tuple(SpecContainer(s["name"], s["image"]) for s in items)

    annotations = dict(newest.annotations)
    shape = Shape(
        containers=shape_of(spec["containers"]),
        init_containers=shape_of(spec.get("initContainers", [])),
        ephemeral_containers=shape_of(spec.get("ephemeralContainers", [])),
        static=annotations.get(cristatus.CONFIG_SOURCE_ANNOTATION, "api") != "api",
        host_network=newest.host_network,
        name=newest.name,
        namespace=newest.namespace,
        uid=uid,
        resources_known=False,
    )
    metadata: dict[str, Any] = {"name": newest.name, "namespace": newest.namespace, "uid": uid}
    labels = {k: v for k, v in newest.labels.items() if k not in cristatus.KUBELET_POD_LABELS}
    if labels:
        metadata["labels"] = labels
    if annotations:
        metadata["annotations"] = annotations
    metadata["creationTimestamp"] = cristatus.rfc3339(min(s.created_at for s in sandboxes))
    status = cristatus.pod_status(
        shape,
        sandboxes,
        containers,
        runtime,
        previous=previous,
        now=now,
        node_ips=node_ips,
        back_offs=dict(back_offs),
    )
    return {"metadata": metadata, "spec": spec, "status": status}


# -- following the runtime ----------------------------------------------------------------------


class _RuntimeSink(WarnedSink, Protocol):
    def mark_synced(self) -> None: ...

    def observe(self, seen: Observation) -> None: ...


class StatusSink(WarnedSink, Protocol):
    """Where the overlay writes (the cache's overlay sink): statuses for pods others own."""

    def replace(self, statuses: Mapping[str, Mapping[str, Any]]) -> None: ...

    def report_static(self, pods: Iterable[PodVersion]) -> None: ...

    def expect_static(self, wait: float) -> None: ...

    def pod(self, uid: str) -> PodVersion | None: ...

    def mark_synced(self) -> None: ...

    def observe(self, seen: Observation) -> None: ...


S = TypeVar("S", bound=_RuntimeSink)


class _RuntimeFollower(Generic[S]):
    """Relist on the period (and at each container event), hand each view to `publish`;
    reconnect with backoff when the runtime fails, keeping what was last published."""

    def __init__(
        self,
        socket: Path,
        *,
        relist: float = DEFAULT_RELIST,
        follow_events: bool = True,
        on_error: ErrorCounter | None = None,
        clock: Callable[[], int] = time.time_ns,
        node_ips: Sequence[str] = (),
        on_connected: ConnectedGauge | None = None,
        stale_after: float | None = None,
    ) -> None:
        """`stale_after`: its resync, by default two relists (the second given a call's deadline)."""
        self.socket = socket
        self.name = source_name(socket)
        self._relist = relist
        self._follow_events = follow_events
        self._on_error = on_error
        self._clock = clock
        self._node_ips = tuple(node_ips)
        self._on_connected = on_connected
        self._stale_after = after_missed(relist, CALL_TIMEOUT) if stale_after is None else stale_after
        self._staleness = Staleness(self.name, stale_after=self._stale_after, on_connected=on_connected)
        self._staleness.upstream = f"the runtime at {socket}"
        # Across reconnections: a container already told of is not told again.
        self._observer = Observer()
        # Across relists: the kubelet's crash-loop back-offs, counted from the exits seen.
        self._crash_loops = CrashLoops()

    def publish(self, sink: S, view: RuntimeView) -> None:
        raise NotImplementedError

    def serves(self, sink: S) -> Callable[[str], bool]:
        """Whether the pod of this UID is served (its containers' events are then told)."""
        return lambda uid: True

    def idle(self, sink: S) -> None:
        """After a failed session, before the retry: nothing by default."""

    def tell(self, sink: S, view: RuntimeView) -> None:
        """The events this relist shows (sources/cri/observed.py), after its pods or statuses."""
        for seen in self._observer.changes(view.sandboxes, view.containers, self.serves(sink)):
            sink.observe(seen)

    async def run(self, sink: S) -> None:
        with self._staleness.running(sink):
            await self._run(sink)

    async def _run(self, sink: S) -> None:
        failures = 0
        while True:
            try:
                await self._session(sink)
            except grpc.aio.AioRpcError as exc:
                failures += 1
                reason = f"{exc.code().name}: {exc.details()}"
                self._report(f"{self.name}: runtime call failed ({reason}); keeping the last state served")
                self._staleness.failed(f"runtime call failed ({reason})")
                self.idle(sink)
            delay = min(MAX_RETRY, FIRST_RETRY * 2.0 ** max(0, failures - 1)) * random.uniform(0.5, 1.0)
            await asyncio.sleep(delay)

    def _report(self, message: str) -> None:
        log.warning("%s", message)
        if self._on_error is not None:
            self._on_error(self.name, message)

    async def _session(self, sink: S) -> None:
        """One connection: relist until a call fails (raises AioRpcError)."""
        options = [("grpc.max_receive_message_length", MAX_ANSWER_BYTES)]
        async with grpc.aio.insecure_channel(f"unix:{self.socket}", options=options) as channel:
            stub = cri_grpc.RuntimeServiceStub(channel)  # type: ignore[no-untyped-call]
            version = await stub.Version(cri.VersionRequest(version="v1"), timeout=CALL_TIMEOUT)
            log.info(
                "%s: %s %s (CRI %s)",
                self.name,
                version.runtime_name,
                version.runtime_version,
                version.runtime_api_version,
            )
            reader = RuntimeReader(stub, version.runtime_name)
            wake = asyncio.Event()
            events = None
            if self._follow_events:
                events = asyncio.get_running_loop().create_task(_follow_events(stub, wake, self.name))
            try:
                while True:
                    wake.clear()
                    view = await reader.relist()
                    view.back_offs = self._crash_loops.observe(view.containers)
                    self.publish(sink, view)
                    self.tell(sink, view)
                    sink.mark_synced()
                    self._staleness.current()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(wake.wait(), self._relist)
            finally:
                if events is not None:
                    events.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await events


def _back_offs(view: RuntimeView, containers: Sequence[Container]) -> tuple[tuple[str, int], ...]:
    """The back-offs of one pod's containers, comparable as inputs."""
    return tuple(sorted((c.id, view.back_offs[c.id]) for c in containers if c.id in view.back_offs))


def _inputs(sandboxes: Sequence[Sandbox], containers: Sequence[Container]) -> tuple[Any, ...]:
    return (tuple(sorted(sandboxes, key=lambda s: s.id)), tuple(sorted(containers, key=lambda c: c.id)))


class CRISource(_RuntimeFollower[SourceSink]):
    """Standalone: every pod sandbox on the node is a pod."""

    def __init__(
        self, socket: Path, *, node_name: str, static_wait: float = DEFAULT_STATIC_WAIT, **options: Any
    ) -> None:
        super().__init__(socket, **options)
        self._node = node_name
        self._static_wait = static_wait
        # Per pod UID: the inputs it was built from and what was built, so an unchanged pod is
        # neither rebuilt nor re-encoded.
        self._built: dict[str, tuple[Any, PodVersion]] = {}

    def as_overlay(self) -> CRIStatusOverlay:
        """The same runtime as a status overlay, for when other sources own the pods."""
        return CRIStatusOverlay(
            self.socket,
            relist=self._relist,
            follow_events=self._follow_events,
            on_error=self._on_error,
            clock=self._clock,
            node_ips=self._node_ips,
            on_connected=self._on_connected,
            stale_after=self._stale_after,
            static_wait=self._static_wait,
        )

    def publish(self, sink: SourceSink, view: RuntimeView) -> None:
        sink.replace(self.pods(view))

    def pods(self, view: RuntimeView) -> list[PodVersion]:
        now = cristatus.rfc3339(self._clock())
        built: dict[str, tuple[Any, PodVersion]] = {}
        for uid in sorted(view.sandboxes):
            sandboxes = view.sandboxes[uid]
            # Containers whose sandbox is gone are left for the kubelet's GC: no pod for them.
            containers = view.containers.get(uid, [])
            back_offs = _back_offs(view, containers)
            inputs = (*_inputs(sandboxes, containers), back_offs)
            old = self._built.get(uid)
            if old is not None and old[0] == inputs:
                built[uid] = old
                continue
            previous = old[1].json.get("status") if old else None
            pod = standalone_pod(
                uid,
                sandboxes,
                containers,
                view.runtime,
                node_name=self._node,
                node_ips=self._node_ips,
                previous=previous,
                now=now,
                back_offs=back_offs,
            )
            try:
                built[uid] = (inputs, PodVersion.from_json(pod))
            except CodecError as exc:
                # Something a runtime label or annotation holds that no Pod can (a ports
                # annotation of the wrong shape): say where, and keep what this pod was.
                self._report(f"{self.name}: pod {uid}: {exc}")
                if old is not None:
                    built[uid] = old
        self._built = built
        return [version for _, version in built.values()]


class CRIStatusOverlay(_RuntimeFollower[StatusSink]):
    """Overlay: the status of pods other sources own, matched by the pod UID label the kubelet
    puts on sandboxes and containers. A runtime pod no source owns is not served; an owned pod
    the runtime has no sandbox for keeps its owner's status. Which of our fields win over the
    owner's is the identity policy's precedence table (core/store/identity.py)."""

    def __init__(self, socket: Path, *, static_wait: float = DEFAULT_STATIC_WAIT, **options: Any) -> None:
        super().__init__(socket, **options)
        self._static_wait = static_wait
        # Per UID: the inputs (spec shape, readiness gate conditions, runtime objects) and the
        # status computed from them.
        self._computed: dict[str, tuple[Any, dict[str, Any]]] = {}
        # The static pods last reported, by (uid, namespace, name, config source): the same
        # objects again while nothing changed.
        self._static: dict[tuple[str, str, str, str, bool], PodVersion] = {}

    def serves(self, sink: StatusSink) -> Callable[[str], bool]:
        return lambda uid: sink.pod(uid) is not None

    async def run(self, sink: StatusSink) -> None:
        # A static pod the runtime has not shown yet is held back from the start.
        sink.expect_static(self._static_wait)
        await super().run(sink)

    def idle(self, sink: StatusSink) -> None:
        # The last report again: the cache then serves the pods held back for the whole wait,
        # whether or not the runtime answers.
        sink.report_static(list(self._static.values()))

    def publish(self, sink: StatusSink, view: RuntimeView) -> None:
        # Which uid each static pod runs under first: its status is then computed for that uid.
        sink.report_static(self.static_pods(view))
        sink.replace(self.statuses(view, sink.pod))

    def static_pods(self, view: RuntimeView) -> list[PodVersion]:
        """The uid the kubelet runs each static pod under now, as a pod of nothing else; see
        `current_static_sandboxes`."""
        pods: list[tuple[tuple[str, str, str, str, bool], PodVersion]] = []
        for sandbox in current_static_sandboxes(view):
            source = sandbox.annotations[CONFIG_SOURCE]
            key = (sandbox.uid, sandbox.namespace, sandbox.name, source, sandbox.ready)
            pod = self._static.get(key)
            if pod is None:
                meta = {
                    "name": sandbox.name,
                    "namespace": sandbox.namespace,
                    "uid": sandbox.uid,
                    "annotations": {CONFIG_SOURCE: source},
                }
                # Whether the sandbox is ready: the cache keeps an edited pod's old content
                # while the kubelet still runs it (core/store/identity.py, "Held back").
                ready = {"type": SANDBOX_READY, "status": "True" if sandbox.ready else "False"}
                pod = PodVersion.from_json({"metadata": meta, "status": {"conditions": [ready]}})
            pods.append((key, pod))
        self._static = dict(pods)
        return [pod for _, pod in pods]

    def statuses(
        self, view: RuntimeView, served: Callable[[str], PodVersion | None]
    ) -> dict[str, dict[str, Any]]:
        now = cristatus.rfc3339(self._clock())
        computed: dict[str, tuple[Any, dict[str, Any]]] = {}
        for uid in sorted(view.sandboxes):
            pod = served(uid)
            if pod is None:
                continue
            shape = Shape.from_pod(pod.json)
            # Readiness gates' conditions are set by others (controllers, via the owner).
            gates = tuple(
                c
                for c in (pod.json.get("status") or {}).get("conditions") or ()
                if c.get("type") in shape.readiness_gates
            )
            containers = view.containers.get(uid, [])
            back_offs = _back_offs(view, containers)
            inputs = (shape, orjson.dumps(gates), *_inputs(view.sandboxes[uid], containers), back_offs)
            old = self._computed.get(uid)
            if old is not None and old[0] == inputs:
                computed[uid] = old
                continue
            previous = dict(old[1]) if old else {}
            previous["conditions"] = [*gates, *previous.get("conditions", ())]
            status = cristatus.pod_status(
                shape,
                view.sandboxes[uid],
                containers,
                view.runtime,
                previous=previous,
                now=now,
                node_ips=self._node_ips,
                back_offs=dict(back_offs),
            )
            # Only what the runtime tells: other sources' conditions stay theirs.
            status["conditions"] = [
                c for c in status["conditions"] if c["type"] in cristatus.KUBELET_CONDITIONS
            ]
            computed[uid] = (inputs, status)
        self._computed = computed
        return {uid: status for uid, (_, status) in computed.items()}


def current_static_sandboxes(view: RuntimeView) -> list[Sandbox]:
    """Per static pod (namespace, name and config source, from the kubelet's labels and its
    `kubernetes.io/config.source` annotation, which it copies from the pod to the sandbox), the
    sandbox of the pod the kubelet runs now: a ready one before one it has stopped (after an
    edit it stops the old pod's before starting the new pod's), then the newest."""
    current: dict[tuple[str, str, str], Sandbox] = {}
    for sandboxes in view.sandboxes.values():
        for sandbox in sandboxes:
            source = sandbox.annotations.get(CONFIG_SOURCE)
            if source not in STATIC_CONFIG_SOURCES or not sandbox.uid:
                continue
            key = (sandbox.namespace, sandbox.name, source)
            held = current.get(key)
            if held is None or (sandbox.ready, sandbox.created_at) > (held.ready, held.created_at):
                current[key] = sandbox
    return [current[key] for key in sorted(current)]


async def _follow_events(stub: cri_grpc.RuntimeServiceStub, wake: asyncio.Event, name: str) -> None:
    """Set `wake` on every container event; return if the runtime has no event stream."""
    try:
        async for _event in stub.GetContainerEvents(cri.GetEventsRequest()):
            wake.set()
    except grpc.aio.AioRpcError as exc:
        if exc.code() == grpc.StatusCode.UNIMPLEMENTED:
            log.info("%s: the runtime has no GetContainerEvents; relisting on the period only", name)
        else:
            log.info("%s: container event stream ended (%s); relisting on the period", name, exc.code().name)
        return
    log.info("%s: container event stream ended; relisting on the period", name)
