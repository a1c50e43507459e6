"""A pod's `status` computed from what the container runtime reports over CRI, by the kubelet's
rules (pkg/kubelet/kubelet_pods.go: convertToAPIContainerStatuses, getPhase; pkg/kubelet/status/
generate.go: the conditions). Pure functions over plain values: no I/O, no clock except `now`.

What we compute, and where it differs from the kubelet because the kubelet knows more:

- `containerStatuses`, `initContainerStatuses`, `ephemeralContainerStatuses`: per container name,
  the newest runtime container gives `state`, the one before it `lastState`; `restartCount` from
  the annotation `io.kubernetes.container.restartCount`; `containerID` `<runtime>://<id>`;
  `image` and `imageID` as the runtime reports them. A container the runtime has not created yet
  is waiting with reason `ContainerCreating` (`PodInitializing` when the pod has init
  containers). The kubelet's own waiting reasons (`CrashLoopBackOff`, `ErrImagePull`, ...) live
  only in the kubelet: between restarts we show the runtime's truth, the terminated container.
- `started` and `ready`: probe results live only in the kubelet. We compute them as the kubelet
  does for a container without probes: a running container is started and ready, any other is
  neither. When `previous` (an older status of the same pod: ours, or the owning source's in the
  overlay) has values for the same running container ID, those are kept instead.
- `phase`: getPhase, without the alpha ContainerRestartRules gate. The pod counts as terminal
  (podIsTerminal) when its newest sandbox is stopped and nothing runs in it: the kubelet stops a
  pod's sandbox only once it has finished with the pod.
- `conditions`: PodReadyToStartContainers (the newest sandbox is ready), Initialized, Ready,
  ContainersReady, PodScheduled, with the kubelet's reasons and messages; a condition's
  `lastTransitionTime` is kept from `previous` while its status stays, else `now`. Conditions
  in `previous` that the kubelet does not own are kept, first, as the kubelet keeps them.
- `podIP`/`podIPs` from the newest sandbox's network status while it is ready; for pods on the
  host network, and `hostIP`/`hostIPs` for every pod, the node's IPs as --node-ip gives them
  (the runtime does not report them; without the flag they are absent).
- `startTime`: kept from `previous`, else the creation time of the pod's oldest sandbox.
"""

from __future__ import annotations

import enum
import ipaddress
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from pods_api.core.api.quantity import QuantityError, quantity_value

# The kubelet's labels and annotations on sandboxes and containers (kuberuntime/labels.go).
POD_UID_LABEL = "io.kubernetes.pod.uid"
POD_NAME_LABEL = "io.kubernetes.pod.name"
POD_NAMESPACE_LABEL = "io.kubernetes.pod.namespace"
CONTAINER_NAME_LABEL = "io.kubernetes.container.name"
RESTART_COUNT_ANNOTATION = "io.kubernetes.container.restartCount"
CONTAINER_TYPE_ANNOTATION = "io.kubernetes.container.type"
CONTAINER_PORTS_ANNOTATION = "io.kubernetes.container.ports"
KUBELET_POD_LABELS = frozenset({POD_UID_LABEL, POD_NAME_LABEL, POD_NAMESPACE_LABEL})
# Where the kubelet says which source a pod came from; anything but "api" is a static pod.
CONFIG_SOURCE_ANNOTATION = "kubernetes.io/config.source"

# The container types of the type annotation.
REGULAR, INIT, EPHEMERAL = "container", "init", "ephemeral"
# Conditions the kubelet owns and regenerates; any other condition in `previous` is kept.
KUBELET_CONDITIONS = ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")


class State(enum.IntEnum):
    """CRI's ContainerState, same numbers."""

    CREATED = 0
    RUNNING = 1
    EXITED = 2
    UNKNOWN = 3


@dataclass(frozen=True, slots=True)
class Sandbox:
    id: str
    uid: str
    name: str
    namespace: str
    attempt: int
    ready: bool
    created_at: int  # nanoseconds since the epoch
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    ips: tuple[str, ...] = ()
    host_network: bool = False


@dataclass(frozen=True, slots=True)
class Container:
    id: str
    sandbox_id: str
    uid: str  # the pod's, from the container's label (the sandbox's when it has none)
    name: str
    kind: str  # REGULAR, INIT or EPHEMERAL
    state: State
    created_at: int
    started_at: int = 0
    finished_at: int = 0
    exit_code: int = 0
    reason: str = ""
    message: str = ""
    image: str = ""
    image_ref: str = ""
    restart_count: int = 0
    spec_image: str = ""  # the image as the kubelet asked for it, when the runtime says
    command: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    ports: tuple[Mapping[str, Any], ...] = ()
    # What the runtime applies (ContainerStatus.resources.linux): 0 where it says nothing.
    cpu_quota: int = 0
    cpu_period: int = 0
    memory_limit: int = 0
    user: tuple[int, int, tuple[int, ...]] | None = None  # uid, gid, supplemental groups


@dataclass(frozen=True, slots=True)
class SpecContainer:
    name: str
    image: str = ""
    sidecar: bool = False  # an init container with restartPolicy Always
    # The spec's resources as (name, quantity) pairs, and its volume mounts as
    # (name, mountPath, readOnly, recursiveReadOnly): what the status repeats.
    requests: tuple[tuple[str, str], ...] = ()
    limits: tuple[tuple[str, str], ...] = ()
    mounts: tuple[tuple[str, str, bool, str], ...] = ()

    @classmethod
    def from_spec(cls, container: Mapping[str, Any]) -> SpecContainer:
        resources = container.get("resources") or {}
        return cls(
            container.get("name", ""),
            container.get("image", ""),
            container.get("restartPolicy") == "Always",
            tuple(sorted((resources.get("requests") or {}).items())),
            tuple(sorted((resources.get("limits") or {}).items())),
            tuple(
                (
                    m.get("name", ""),
                    m.get("mountPath", ""),
                    bool(m.get("readOnly")),
                    m.get("recursiveReadOnly", ""),
                )
                for m in container.get("volumeMounts") or ()
            ),
        )


@dataclass(frozen=True, slots=True)
class Shape:
    """What status computation needs of a pod's spec."""

    containers: tuple[SpecContainer, ...] = ()
    init_containers: tuple[SpecContainer, ...] = ()
    ephemeral_containers: tuple[SpecContainer, ...] = ()
    restart_policy: str = "Always"
    static: bool = False
    readiness_gates: tuple[str, ...] = ()
    deleted: bool = False
    host_network: bool = False
    generation: int = 0  # metadata.generation: the conditions' observedGeneration
    qos: str = ""  # the spec's QoS class; "" where the spec's resources are not known

    @classmethod
    def from_pod(cls, pod: Mapping[str, Any]) -> Shape:
        """From a pod's Kubernetes JSON (the owning source's, in the overlay)."""
        spec = pod.get("spec") or {}
        annotations = (pod.get("metadata") or {}).get("annotations") or {}

        def containers(key: str) -> tuple[SpecContainer, ...]:
            return tuple(SpecContainer.from_spec(c) for c in spec.get(key) or ())

        return cls(
            containers("containers"),
            containers("initContainers"),
            containers("ephemeralContainers"),
            spec.get("restartPolicy") or "Always",
            annotations.get(CONFIG_SOURCE_ANNOTATION, "api") != "api",
            tuple(g.get("conditionType", "") for g in spec.get("readinessGates") or ()),
            bool((pod.get("metadata") or {}).get("deletionTimestamp")),
            bool(spec.get("hostNetwork")),
            int((pod.get("metadata") or {}).get("generation") or 0),
            qos_class(spec),
        )


# The resources QoS is computed over (qos.isSupportedQoSComputeResource).
QOS_RESOURCES = ("cpu", "memory")


def qos_class(spec: Mapping[str, Any]) -> str:
    """The kubelet's QoS class of a pod spec (pkg/apis/core/helper/qos ComputePodQOS, as v1's
    GetPodQOS): Guaranteed when every container (init ones too) limits cpu and memory and the
    summed requests equal the summed limits, BestEffort when nothing requests or limits either,
    else Burstable. Only positive quantities count."""
    requests: dict[str, Decimal] = {}
    limits: dict[str, Decimal] = {}
    guaranteed = True
    for container in [*(spec.get("containers") or ()), *(spec.get("initContainers") or ())]:
        resources = container.get("resources") or {}
        for kind, into in (("requests", requests), ("limits", limits)):
            found = set()
            for name, quantity in (resources.get(kind) or {}).items():
                value = _positive(quantity) if name in QOS_RESOURCES else None
                if value is not None:
                    into[name] = into.get(name, Decimal(0)) + value
                    found.add(name)
            if kind == "limits" and not found.issuperset(QOS_RESOURCES):
                guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    matched = all(limits.get(name) == value for name, value in requests.items())
    return "Guaranteed" if guaranteed and matched and len(requests) == len(limits) else "Burstable"


def _positive(quantity: Any) -> Decimal | None:
    try:
        value = quantity_value(str(quantity))
    except QuantityError:
        return None
    return value if value > 0 else None


def rfc3339(ns: int) -> str:
    """metav1.Time as Kubernetes JSON writes it: UTC, whole seconds."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ns // 1_000_000_000))


def container_id(runtime: str, cid: str) -> str:
    return f"{runtime}://{cid}"


# -- container statuses ---------------------------------------------------------------------------


def _state(c: Container, runtime: str, old: Mapping[str, Any] | None) -> tuple[dict[str, Any], int | None]:
    """A runtime container's state as the API shows it, and a restart count that overrides the
    annotation's (only for a running container the runtime lost)."""
    if c.state is State.RUNNING:
        return {"running": {"startedAt": rfc3339(c.started_at)}}, None
    if c.state is State.CREATED:
        return {"waiting": {}}, None  # created but not started: waiting, with no reason
    if c.state is State.EXITED:
        terminated: dict[str, Any] = {"exitCode": c.exit_code}
        if c.reason:
            terminated["reason"] = c.reason
        if c.message:
            terminated["message"] = c.message
        terminated["startedAt"] = rfc3339(c.started_at) if c.started_at else None
        terminated["finishedAt"] = rfc3339(c.finished_at) if c.finished_at else None
        terminated["containerID"] = container_id(runtime, c.id)
        return {"terminated": {k: v for k, v in terminated.items() if v is not None}}, None
    if old is not None and "running" in (old.get("state") or {}):
        # As the kubelet: a container that was running and is now unknown has ended somehow.
        lost = {
            "exitCode": 137,
            "reason": "ContainerStatusUnknown",
            "message": "The container could not be located when the pod was terminated",
        }
        return {"terminated": lost}, int(old.get("restartCount", 0)) + 1
    return {"waiting": {}}, None


# What the kubelet says of a running container the runtime no longer has (kubelet_pods.go
# convertToAPIContainerStatuses), words and spacing as it writes them.
LOST_MESSAGE = (
    "The container could not be located when the pod was deleted.  The container used to be Running"
)
# The exit code it gives such a container: that of a container killed by SIGKILL.
LOST_EXIT_CODE = 137


def _vanished(
    spec: SpecContainer, old: Mapping[str, Any] | None, default_reason: str, *, deleted: bool
) -> dict[str, Any]:
    """A container the runtime has none of (never created, or removed): the kubelet keeps an
    earlier terminated status as it was; a container that was running has ended somehow, so it
    waits with a lastState of ContainerStatusUnknown (exit 137) and, unless the pod is being
    deleted, one restart more; otherwise it waits, keeping the count and lastState it had."""
    if old is not None and "terminated" in (old.get("state") or {}):
        return dict(old)
    status: dict[str, Any] = {
        "name": spec.name,
        "state": {"waiting": {"reason": default_reason}},
        "ready": False,
        "restartCount": int(old.get("restartCount", 0)) if old else 0,
        "image": spec.image,
        "imageID": "",
        "started": False,
    }
    if old and old.get("lastState"):
        status["lastState"] = old["lastState"]
    if (
        old is not None
        and "running" in (old.get("state") or {})
        and not (old.get("lastState") or {}).get("terminated")
    ):
        lost = {"exitCode": LOST_EXIT_CODE, "reason": "ContainerStatusUnknown", "message": LOST_MESSAGE}
        status["lastState"] = {"terminated": lost}
        status["restartCount"] += 0 if deleted else 1
    return status


def _applied(spec: SpecContainer, c: Container, running: bool) -> dict[str, Any]:
    """What convertToAPIContainerStatuses adds from the spec and the runtime: `volumeMounts`
    (the spec's, a read-only one with its recursiveReadOnly, Disabled unless asked), `user`
    (the runtime's, SupplementalGroupsPolicy), and for a running container `resources`: the
    spec's requests, its limits as the runtime applies them (cpu from the CFS quota, memory
    from the cgroup limit) where the runtime says, else the spec's (InPlacePodVerticalScaling)."""
    out: dict[str, Any] = {}
    if spec.mounts:
        mounts = []
        for name, path, read_only, recursive in spec.mounts:
            mount: dict[str, Any] = {"name": name, "mountPath": path}
            if read_only:
                mount["readOnly"] = True
                mount["recursiveReadOnly"] = (
                    "Enabled" if recursive in ("Enabled", "IfPossible") else "Disabled"
                )
            mounts.append(mount)
        out["volumeMounts"] = mounts
    if c.user is not None:
        uid, gid, groups = c.user
        linux: dict[str, Any] = {"uid": uid, "gid": gid}
        if groups:
            linux["supplementalGroups"] = list(groups)
        out["user"] = {"linux": linux}
    if running and (spec.requests or spec.limits):
        limits = dict(spec.limits)
        if c.cpu_quota > 0 and c.cpu_period > 0:
            limits["cpu"] = f"{c.cpu_quota * 1000 // c.cpu_period}m"
        if c.memory_limit > 0 and "memory" in limits:
            limits["memory"] = str(c.memory_limit)
        resources: dict[str, Any] = {}
        if limits:
            resources["limits"] = limits
        if spec.requests:
            resources["requests"] = dict(spec.requests)
        out["resources"] = resources
    return out


def _terminated(old: Mapping[str, Any] | None) -> bool:
    return old is not None and "terminated" in (old.get("state") or {})


def _completed_init(spec: SpecContainer, old: Mapping[str, Any] | None) -> dict[str, Any]:
    """An init container the runtime no longer has, in a pod whose regular containers have
    started: it completed, so it is terminated Completed (exit 0) and ready, not waiting (which
    would show the pod as Pending, Init:0/1)."""
    return {
        "name": spec.name,
        "state": {"terminated": {"exitCode": 0, "reason": "Completed"}},
        "lastState": (old or {}).get("lastState") or {},
        "ready": True,
        "restartCount": int((old or {}).get("restartCount", 0)),
        "image": spec.image,
        "imageID": "",
        "started": False,
    }


def container_statuses(
    specs: Sequence[SpecContainer],
    runtime_containers: Iterable[Container],
    runtime: str,
    *,
    has_init: bool,
    is_init: bool,
    previous: Sequence[Mapping[str, Any]] = (),
    deleted: bool = False,
    regular_started: bool = False,
) -> list[dict[str, Any]]:
    """The API statuses of one kind of container (regular, init or ephemeral)."""
    old_by_name = {s.get("name"): s for s in previous}
    by_name: dict[str, list[Container]] = {}
    for c in runtime_containers:
        by_name.setdefault(c.name, []).append(c)
    default_reason = "PodInitializing" if has_init else "ContainerCreating"
    statuses: dict[str, dict[str, Any]] = {}
    for spec in specs:
        old = old_by_name.get(spec.name)
        history = sorted(by_name.get(spec.name, ()), key=lambda c: c.created_at, reverse=True)
        if not history:
            if is_init and not spec.sidecar and regular_started and not _terminated(old):
                # Gone (garbage collected) after it completed: the regular containers only
                # start once every init container has succeeded.
                statuses[spec.name] = _completed_init(spec, old)
                continue
            statuses[spec.name] = _vanished(spec, old, default_reason, deleted=deleted)
            continue
        newest = history[0]
        state, restarts = _state(newest, runtime, old)
        cid = container_id(runtime, newest.id)
        running = "running" in state
        ready = running
        if is_init and not spec.sidecar:
            # An init container that has done its work is ready (kubelet_pods.go
            # convertToAPIContainerStatuses: exited with code 0 and not restartable).
            ready = state.get("terminated", {}).get("exitCode", -1) == 0
        status = {
            "name": spec.name,
            "state": state,
            "lastState": _state(history[1], runtime, None)[0] if len(history) > 1 else {},
            "ready": ready,
            "restartCount": newest.restart_count if restarts is None else restarts,
            "image": newest.image or spec.image,
            "imageID": newest.image_ref,
            "containerID": cid,
            "started": running,
            **_applied(spec, newest, running),
        }
        if (
            running
            and old is not None
            and old.get("containerID") == cid
            and "running" in (old.get("state") or {})
        ):
            # Probe results: only the kubelet has them; keep what was said about this container.
            for key in ("ready", "started"):
                if key in old:
                    status[key] = bool(old[key])
        statuses[spec.name] = status
    ordered = [statuses[s.name] for s in specs]
    return ordered if is_init else sorted(ordered, key=lambda s: s["name"])


# -- phase ---------------------------------------------------------------------------------------


def _status_of(statuses: Sequence[Mapping[str, Any]], name: str) -> Mapping[str, Any] | None:
    return next((s for s in statuses if s.get("name") == name), None)


def get_phase(
    shape: Shape, statuses: Sequence[Mapping[str, Any]], *, terminal: bool, initialized: bool
) -> str:
    """The kubelet's getPhase: `statuses` holds regular and init container statuses together;
    `terminal` is podIsTerminal, `initialized` is "a regular container has run"."""
    pending_init = failed_init = pending_sidecars = 0
    for spec in shape.init_containers:
        if spec.sidecar:
            continue
        s = _status_of(statuses, spec.name)
        state = (s or {}).get("state") or {}
        if s is None or "running" in state:
            pending_init += 1
        elif "terminated" in state:
            failed_init += state["terminated"].get("exitCode", 0) != 0
        elif "waiting" in state:
            last = (s.get("lastState") or {}).get("terminated")
            if last is None:
                pending_init += 1
            else:
                failed_init += last.get("exitCode", 0) != 0
        else:
            pending_init += 1

    unknown = running = waiting = stopped = succeeded = 0
    for spec in shape.init_containers:
        if not spec.sidecar:
            continue
        s = _status_of(statuses, spec.name)
        state = (s or {}).get("state") or {}
        if s is None:
            unknown += 1
        elif "running" in state:
            pending_sidecars += not s.get("started")
            running += 1
        elif "terminated" in state:
            pass  # a stopped sidecar does not count towards the phase
        elif "waiting" in state:
            if not (s.get("lastState") or {}).get("terminated"):
                pending_sidecars += 1
                waiting += 1
        else:
            pending_sidecars += 1
            unknown += 1

    for spec in shape.containers:
        s = _status_of(statuses, spec.name)
        state = (s or {}).get("state") or {}
        if s is None:
            unknown += 1
        elif "running" in state:
            running += 1
        elif "terminated" in state:
            stopped += 1
            succeeded += state["terminated"].get("exitCode", 0) == 0
        elif "waiting" in state:
            if (s.get("lastState") or {}).get("terminated"):
                stopped += 1
            else:
                waiting += 1
        else:
            unknown += 1

    if failed_init > 0 and shape.restart_policy == "Never":
        return "Failed"
    if pending_init > 0 or (pending_sidecars > 0 and not initialized) or waiting > 0:
        return "Pending"
    if running > 0 and unknown == 0:
        return "Running"
    if running == 0 and stopped > 0 and unknown == 0:
        if terminal and not shape.static:
            return "Succeeded" if stopped == succeeded else "Failed"
        if shape.restart_policy == "Always":
            return "Running"
        if stopped == succeeded:
            return "Succeeded"
        if shape.restart_policy == "Never":
            return "Failed"
        return "Running"
    return "Pending"


# -- conditions ----------------------------------------------------------------------------------


def _names(names: Sequence[str]) -> str:
    return "[" + " ".join(names) + "]"  # Go's %s of a []string


def _initialized(
    shape: Shape, init: Sequence[Mapping[str, Any]], regular: Sequence[Mapping[str, Any]], phase: str
) -> tuple[str, str, str]:
    if not shape.init_containers:
        return "True", "", ""
    unknown: list[str] = []
    incomplete: list[str] = []
    for spec in shape.init_containers:
        s = _status_of(init, spec.name)
        if s is None:
            unknown.append(spec.name)
            continue
        terminated = ((s.get("state") or {}).get("terminated")) or None
        done = (
            bool(s.get("started"))
            if spec.sidecar
            else (terminated is not None and not terminated.get("exitCode"))
        )
        if not done:
            incomplete.append(spec.name)
    if phase == "Succeeded" and not unknown:
        return "True", "PodCompleted", ""
    if any(
        {"running", "terminated"} & (s.get("state") or {}).keys()
        or (s.get("lastState") or {}).get("terminated")
        for s in regular
    ):
        return "True", "", ""
    incomplete += unknown
    if incomplete:
        return "False", "ContainersNotInitialized", f"containers with incomplete status: {_names(incomplete)}"
    return "True", "", ""


def _containers_ready(
    shape: Shape, init: Sequence[Mapping[str, Any]], regular: Sequence[Mapping[str, Any]], phase: str
) -> tuple[str, str, str]:
    unknown: list[str] = []
    unready: list[str] = []
    checks = [(s, init) for s in shape.init_containers if s.sidecar] + [
        (s, regular) for s in shape.containers
    ]
    for spec, statuses in checks:
        s = _status_of(statuses, spec.name)
        if s is None:
            unknown.append(spec.name)
        elif not s.get("ready"):
            unready.append(spec.name)
    if phase == "Succeeded" and not unknown:
        return "False", "PodCompleted", ""
    if phase == "Failed":  # status/generate.go: its containers may still be terminating
        return "False", "PodFailed", ""
    messages = []
    if unknown:
        messages.append(f"containers with unknown status: {_names(unknown)}")
    if unready:
        messages.append(f"containers with unready status: {_names(unready)}")
    if messages:
        return "False", "ContainersNotReady", "; ".join(messages)
    return "True", "", ""


def _readiness_gates(shape: Shape, conditions: Sequence[Mapping[str, Any]]) -> tuple[str, str, str]:
    have = {c.get("type"): c.get("status") for c in conditions}
    problems = []
    for gate in shape.readiness_gates:
        if gate not in have:
            problems.append(f'corresponding condition of pod readiness gate "{gate}" does not exist.')
        elif have[gate] != "True":
            problems.append(f'the status of pod readiness gate "{gate}" is not "True", but {have[gate]}')
    if problems:
        return "False", "ReadinessGatesNotReady", ", ".join(problems)
    return "True", "", ""


def _condition(
    kind: str,
    value: tuple[str, str, str],
    previous: Mapping[str, Mapping[str, Any]],
    now: str,
    generation: int = 0,
) -> dict[str, Any]:
    status, reason, message = value
    old = previous.get(kind)
    since = old.get("lastTransitionTime") if old and old.get("status") == status else None
    condition: dict[str, Any] = {"type": kind, "status": status}
    if generation:
        condition["observedGeneration"] = generation  # PodObservedGenerationTracking, on since 1.34
    condition["lastTransitionTime"] = since or now
    if reason:
        condition["reason"] = reason
    if message:
        condition["message"] = message
    return condition


# -- the whole status ----------------------------------------------------------------------------


def sandbox_changed(shape: Shape, sandboxes: Sequence[Sandbox]) -> bool:
    """The kubelet's PodSandboxChanged (kuberuntime_manager.go): whether it would need a new
    sandbox: none, more than one ready, the newest not ready, on another network namespace
    than the spec asks, or off the host network without an IP."""
    if not sandboxes:
        return True
    if sum(s.ready for s in sandboxes) > 1:
        return True
    newest = max(sandboxes, key=lambda s: s.created_at)
    if not newest.ready or newest.host_network != shape.host_network:
        return True
    return not newest.host_network and not pod_ips(newest)


def pod_ips(sandbox: Sandbox | None) -> list[str]:
    """The newest sandbox's IPs while it is ready: IPv4 first, then IPv6, one of each, as the
    kubelet sorts them for an IPv4 node."""
    if sandbox is None or not sandbox.ready:
        return []
    parsed = []
    for ip in sandbox.ips:
        try:
            parsed.append(ipaddress.ip_address(ip))
        except ValueError:
            continue
    v4 = next((str(ip) for ip in parsed if ip.version == 4), None)
    v6 = next((str(ip) for ip in parsed if ip.version == 6), None)
    return [ip for ip in (v4, v6) if ip]


def pod_status(
    shape: Shape,
    sandboxes: Sequence[Sandbox],
    containers: Sequence[Container],
    runtime: str,
    *,
    previous: Mapping[str, Any] | None = None,
    now: str,
    node_ips: Sequence[str] = (),
) -> dict[str, Any]:
    """The pod's status in Kubernetes JSON, from its sandboxes and containers (all of them, of
    every attempt). `previous` is an older status of the same pod; `now` the time to stamp on
    conditions that change; `node_ips` the node's (--node-ip), which CRI does not report: the
    pod's hostIP(s), and the podIP(s) of a pod on the host network."""
    previous = previous or {}
    newest = max(sandboxes, key=lambda s: s.created_at, default=None)
    has_init = bool(shape.init_containers)

    def of(kind: str) -> list[Container]:
        return [c for c in containers if c.kind == kind]

    regular = container_statuses(
        shape.containers,
        of(REGULAR),
        runtime,
        has_init=has_init,
        is_init=False,
        previous=previous.get("containerStatuses") or (),
        deleted=shape.deleted,
    )
    init = container_statuses(
        shape.init_containers,
        of(INIT),
        runtime,
        has_init=has_init,
        is_init=True,
        previous=previous.get("initContainerStatuses") or (),
        deleted=shape.deleted,
        regular_started=any(c.state is not State.CREATED for c in of(REGULAR)),
    )
    ephemeral = container_statuses(
        shape.ephemeral_containers,
        of(EPHEMERAL),
        runtime,
        has_init=has_init,
        is_init=False,
        previous=previous.get("ephemeralContainerStatuses") or (),
    )
    running_anything = any(c.state is State.RUNNING for c in containers)
    terminal = (newest is None or not newest.ready) and not running_anything and bool(containers)
    initialized = any(c.state is State.RUNNING for c in of(REGULAR))
    phase = get_phase(shape, [*regular, *init], terminal=terminal, initialized=initialized)

    old_conditions = {c.get("type", ""): c for c in previous.get("conditions") or ()}
    conditions = [c for c in previous.get("conditions") or () if c.get("type") not in KUBELET_CONDITIONS]
    # GeneratePodReadyToStartContainersCondition: false while the kubelet would make a new sandbox.
    sandbox_ready = ("False", "", "") if sandbox_changed(shape, sandboxes) else ("True", "", "")
    containers_ready = _containers_ready(shape, init, regular, phase)
    ready = containers_ready
    if ready[0] == "True" and shape.readiness_gates:
        ready = _readiness_gates(shape, conditions)
    for kind, value in (
        ("PodReadyToStartContainers", sandbox_ready),
        ("Initialized", _initialized(shape, init, regular, phase)),
        ("Ready", ready),
        ("ContainersReady", containers_ready),
        ("PodScheduled", ("True", "", "")),
    ):
        conditions.append(_condition(kind, value, old_conditions, now, shape.generation))

    status: dict[str, Any] = {"phase": phase, "conditions": conditions}
    if shape.generation:
        status["observedGeneration"] = shape.generation
    if shape.qos:
        status["qosClass"] = shape.qos
    if node_ips:
        status["hostIP"] = node_ips[0]
        status["hostIPs"] = [{"ip": ip} for ip in node_ips]
    # generateAPIPodStatus: a pod on the host network has the node's IPs.
    ips = list(node_ips) if newest is not None and newest.host_network else pod_ips(newest)
    if ips:
        status["podIP"] = ips[0]
        status["podIPs"] = [{"ip": ip} for ip in ips]
    start = previous.get("startTime")
    if not start and sandboxes:
        start = rfc3339(min(s.created_at for s in sandboxes))
    if start:
        status["startTime"] = start
    if init:
        status["initContainerStatuses"] = init
    if regular:
        status["containerStatuses"] = regular
    if ephemeral:
        status["ephemeralContainerStatuses"] = ephemeral
    return status
