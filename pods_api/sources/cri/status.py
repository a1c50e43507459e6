"""A pod's `status` computed from what the container runtime reports over CRI, by the kubelet
v1.37.2's rules (pkg/kubelet/kubelet_pods.go: convertToAPIContainerStatuses, getPhase,
generateAPIPodStatus; pkg/kubelet/status/generate.go: the conditions), with that release's
feature gates at their defaults. Pure functions over plain values: no I/O, no clock.

What we compute, and where it differs from the kubelet because the kubelet knows more:

- `containerStatuses`, `initContainerStatuses`, `ephemeralContainerStatuses`: per container name,
  the newest runtime container gives `state`, the one before it `lastState`; `restartCount` from
  the annotation `io.kubernetes.container.restartCount`; `containerID` `<runtime>://<id>`;
  `image` and `imageID` as the runtime reports them. As RestartAllContainersOnContainerExits
  (Beta, on) has it, `previous` carries over: the larger restart count, and the previous exit
  as `lastState` once the runtime has removed the container that made it. A container the
  runtime has not created yet is waiting with reason `ContainerCreating` (`PodInitializing`
  when the pod has init containers).
- `CrashLoopBackOff`: an exited container the kubelet waits out a back-off for (`back_offs`,
  counted by sources/cri/backoff.py) and would restart (ShouldContainerBeRestarted) waits with
  the kubelet's reason and message, its exit as `lastState`. The other waiting reasons
  (`ErrImagePull`, ...) are the kubelet's own errors, which the runtime never sees.
- `started` and `ready`: probe results live only in the kubelet. We compute them as the kubelet
  does for a container without probes: a running container is started and ready, any other is
  neither. When `previous` (an older status of the same pod: ours, or the owning source's in the
  overlay) has values for the same running container ID, those are kept instead.
- `resources` and `allocatedResources`, per container and for the pod (sources/cri/resources.py),
  where the spec's resources are known.
- `phase`: getPhase with ContainerRestartRules (Beta, on): a container's own restartPolicy
  before the pod's, its restartPolicyRules (exit codes) not followed. The pod counts as terminal
  (podIsTerminal) when its newest sandbox is stopped and nothing runs in it: the kubelet stops a
  pod's sandbox only once it has finished with the pod.
- `conditions`: PodReadyToStartContainers (the newest sandbox is ready; else PodSandboxNotReady
  with PodSandboxChanged's reason), Initialized, Ready, ContainersReady, PodScheduled, with the
  kubelet's reasons and messages; a condition's `lastTransitionTime` is kept from `previous`
  while its status stays, else it is the runtime's time of the event that changed it
  (`transition_time`). Conditions in `previous` that the kubelet does not own are kept, first,
  as the kubelet keeps them.
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
from pods_api.sources.cri import resources as criresources

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


class ContainerState(enum.IntEnum):
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
    state: ContainerState
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
    cpu_shares: int = 0
    memory_limit: int = 0
    user: tuple[int, int, tuple[int, ...]] | None = None  # uid, gid, supplemental groups


@dataclass(frozen=True, slots=True)
class SpecContainer:
    name: str
    image: str = ""
    sidecar: bool = False  # an init container with restartPolicy Always
    restart_policy: str = ""  # the container's own restartPolicy, "" for the pod's
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
            container.get("restartPolicy") or "",
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
    # The pod as the kubelet's messages name it (format.Pod: NAME_NAMESPACE(UID)).
    name: str = ""
    namespace: str = ""
    uid: str = ""
    # The spec's pod-level resources and its runtime class's overhead, as (name, quantity).
    pod_requests: tuple[tuple[str, str], ...] = ()
    pod_limits: tuple[tuple[str, str], ...] = ()
    overhead: tuple[tuple[str, str], ...] = ()
    # Whether the spec's resources are known (not in standalone, where CRI is all there is): the
    # statuses then repeat them, `{}` for none, as the kubelet does.
    resources_known: bool = True

    @classmethod
    def from_pod(cls, pod: Mapping[str, Any]) -> Shape:
        """From a pod's Kubernetes JSON (the owning source's, in the overlay)."""
        spec = pod.get("spec") or {}
        metadata = pod.get("metadata") or {}
        annotations = metadata.get("annotations") or {}
        resources = spec.get("resources") or {}

        def containers(key: str) -> tuple[SpecContainer, ...]:
            return tuple(SpecContainer.from_spec(c) for c in spec.get(key) or ())

        return cls(
            containers("containers"),
            containers("initContainers"),
            containers("ephemeralContainers"),
            spec.get("restartPolicy") or "Always",
            annotations.get(CONFIG_SOURCE_ANNOTATION, "api") != "api",
            tuple(g.get("conditionType", "") for g in spec.get("readinessGates") or ()),
            bool(metadata.get("deletionTimestamp")),
            bool(spec.get("hostNetwork")),
            int(metadata.get("generation") or 0),
            qos_class(spec),
            metadata.get("name", ""),
            metadata.get("namespace", ""),
            metadata.get("uid", ""),
            tuple(sorted((resources.get("requests") or {}).items())),
            tuple(sorted((resources.get("limits") or {}).items())),
            tuple(sorted((spec.get("overhead") or {}).items())),
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
    if c.state is ContainerState.RUNNING:
        return {"running": {"startedAt": rfc3339(c.started_at)}}, None
    if c.state is ContainerState.CREATED:
        return {"waiting": {}}, None  # created but not started: waiting, with no reason
    if c.state is ContainerState.EXITED:
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


def _applied(
    spec: SpecContainer, c: Container, running: bool, old: Mapping[str, Any] | None, *, resources: bool
) -> dict[str, Any]:
    """What convertToAPIContainerStatuses adds from the spec and the runtime: `volumeMounts`
    (the spec's, a read-only one with its recursiveReadOnly, Disabled unless asked), `user`
    (the runtime's, SupplementalGroupsPolicy) and, where the spec's resources are known
    (`resources`), `resources` (sources/cri/resources.py) and `allocatedResources` (the spec's
    requests). `old`: the earlier status of the same container, only while it runs."""
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
    if resources:
        out["resources"] = criresources.container_resources(
            spec.requests,
            spec.limits,
            running=running,
            cpu_quota=c.cpu_quota,
            cpu_period=c.cpu_period,
            cpu_shares=c.cpu_shares,
            memory_limit=c.memory_limit,
            old=old,
        )
        if spec.requests:
            out["allocatedResources"] = dict(spec.requests)
    return out


def _terminated(old: Mapping[str, Any] | None) -> bool:
    return old is not None and "terminated" in (old.get("state") or {})


# What the kubelet says of a completed init container the runtime no longer has.
GONE_INIT_MESSAGE = (
    "Unable to get init container status from container runtime and pod has been initialized, "
    "treat it as exited normally"
)


def _completed_init(spec: SpecContainer, old: Mapping[str, Any] | None) -> dict[str, Any]:
    """An init container the runtime no longer has, in a pod whose regular containers have
    started: it completed, so it is terminated Completed (exit 0) and ready, not waiting (which
    would show the pod as Pending, Init:0/1)."""
    return {
        "name": spec.name,
        "state": {"terminated": {"exitCode": 0, "reason": "Completed", "message": GONE_INIT_MESSAGE}},
        "lastState": (old or {}).get("lastState") or {},
        "ready": True,
        "restartCount": int((old or {}).get("restartCount", 0)),
        "image": spec.image,
        "imageID": "",
        "started": False,
    }


def _convert(c: Container, runtime: str, old: Mapping[str, Any] | None) -> dict[str, Any]:
    """convertContainerStatus: one runtime container as an API status. With
    RestartAllContainersOnContainerExits (Beta, on in v1.37.2) the old status carries over: the
    larger restart count, and as `lastState` the old container's exit (when this is another
    container) or the old `lastState`, so the previous exit outlives the runtime's removal of
    the container that made it."""
    state, restarts = _state(c, runtime, old)
    cid = container_id(runtime, c.id)
    status: dict[str, Any] = {
        "name": c.name,
        "state": state,
        "lastState": {},
        "restartCount": c.restart_count,
        "image": c.image,
        "imageID": c.image_ref,
        "containerID": cid,
    }
    if old is not None:
        old_state = old.get("state") or {}
        old_count = int(old.get("restartCount", 0))
        status["restartCount"] = max(old_count, c.restart_count)
        if old.get("containerID") != cid and "terminated" in old_state:
            status["lastState"] = {"terminated": old_state["terminated"]}
        elif (old.get("lastState") or {}).get("terminated"):
            status["lastState"] = {"terminated": old["lastState"]["terminated"]}
        if "running" in state and "terminated" in old_state and old_count >= c.restart_count:
            status["restartCount"] = old_count + 1
    if restarts is not None:
        status["restartCount"] = restarts
    return status


def should_restart(spec: SpecContainer, shape: Shape, c: Container) -> bool:
    """ShouldContainerBeRestarted for a container the runtime has, with ContainerRestartRules
    (Beta, on): the container's own restartPolicy before the pod's. Its restartPolicyRules are
    not followed (the exit codes they name)."""
    if shape.deleted or c.state is ContainerState.RUNNING:
        return False
    return c.state is not ContainerState.EXITED or restartable(spec, shape, c.exit_code)


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
    shape: Shape | None = None,
    back_offs: Mapping[str, int] | None = None,
) -> list[dict[str, Any]]:
    """The API statuses of one kind of container (regular, init or ephemeral). `back_offs`:
    the exited containers (by id) the kubelet waits out a back-off for (sources/cri/backoff.py),
    which then wait in CrashLoopBackOff; None for ephemeral containers, never restarted."""
    shape = shape or Shape()
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
        status = _convert(newest, runtime, old)
        if len(history) > 1:
            status["lastState"] = _state(history[1], runtime, None)[0]
        state = status["state"]
        done_init = is_init and state.get("terminated", {}).get("exitCode", -1) == 0
        wait = (back_offs or {}).get(newest.id)
        if wait and not done_init and should_restart(spec, shape, newest):
            if "terminated" in state:
                status["lastState"] = state
            message = back_off_message(wait, spec.name, shape)
            status["state"] = state = {"waiting": {"reason": CRASH_LOOP_BACK_OFF, "message": message}}
        running = "running" in state
        ready = running
        if is_init and not spec.sidecar:
            # An init container that has done its work is ready (kubelet_pods.go
            # convertToAPIContainerStatuses: exited with code 0 and not restartable).
            ready = done_init
        status["ready"] = ready
        status["started"] = running
        same = (
            running
            and old is not None
            and old.get("containerID") == status["containerID"]
            and "running" in (old.get("state") or {})
        )
        status.update(_applied(spec, newest, running, old if same else None, resources=shape.resources_known))
        if same and old is not None:
            # Probe results: only the kubelet has them; keep what was said about this container.
            for key in ("ready", "started"):
                if key in old:
                    status[key] = bool(old[key])
        statuses[spec.name] = status
    ordered = [statuses[s.name] for s in specs]
    return ordered if is_init else sorted(ordered, key=lambda s: s["name"])


# The kubelet's waiting reason for a container it waits to restart (kubecontainer.ErrCrashLoopBackOff).
CRASH_LOOP_BACK_OFF = "CrashLoopBackOff"


def back_off_message(seconds: int, container: str, shape: Shape) -> str:
    """doBackOff's message, the pod as format.Pod writes it, the wait as Go prints a Duration."""
    return (
        f"back-off {go_duration(seconds)} restarting failed container={container} "
        f"pod={shape.name}_{shape.namespace}({shape.uid})"
    )


def go_duration(seconds: int) -> str:
    """Go's time.Duration String() of whole seconds: 10s, 1m20s, 5m0s, 1h0m0s."""
    minutes, secs = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    return f"{minutes}m{secs}s" if minutes else f"{secs}s"


# -- phase ---------------------------------------------------------------------------------------


def _status_of(statuses: Sequence[Mapping[str, Any]], name: str) -> Mapping[str, Any] | None:
    return next((s for s in statuses if s.get("name") == name), None)


def restartable(spec: SpecContainer, shape: Shape, exit_code: int) -> bool:
    """podutil.ContainerShouldRestart without restartPolicyRules: the container's own
    restartPolicy (ContainerRestartRules, Beta and on), else the pod's."""
    policy = spec.restart_policy or shape.restart_policy
    if policy == "Never":
        return False
    return exit_code != 0 if policy == "OnFailure" else True


def get_phase(
    shape: Shape, statuses: Sequence[Mapping[str, Any]], *, terminal: bool, initialized: bool
) -> str:
    """The kubelet's getPhase with ContainerRestartRules (Beta, on): `statuses` holds regular and
    init container statuses together; `terminal` is podIsTerminal, `initialized` is
    HasAnyActiveRegularContainerStarted. A stopped container counts as restartable by its own
    restartPolicy, else the pod's."""
    pending_init = failed_for_good = pending_sidecars = 0
    for spec in shape.init_containers:
        if spec.sidecar:
            continue
        s = _status_of(statuses, spec.name)
        state = (s or {}).get("state") or {}
        if s is None or "running" in state:
            pending_init += 1
        elif "terminated" in state or "waiting" in state:
            ended = state.get("terminated") or (s.get("lastState") or {}).get("terminated")
            if ended is None:
                pending_init += 1
            else:
                code = ended.get("exitCode", 0)
                failed_for_good += code != 0 and not restartable(spec, shape, code)
        else:
            pending_init += 1

    unknown = running = waiting = stopped = succeeded = stopped_for_good = 0
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
        elif "terminated" in state or ("waiting" in state and (s.get("lastState") or {}).get("terminated")):
            stopped += 1
            ended = state.get("terminated") or s["lastState"]["terminated"]
            stopped_for_good += not restartable(spec, shape, ended.get("exitCode", 0))
            succeeded += "terminated" in state and state["terminated"].get("exitCode", 0) == 0
        elif "waiting" in state:
            waiting += 1
        else:
            unknown += 1

    if failed_for_good > 0:
        return "Failed"
    if pending_init > 0 or (pending_sidecars > 0 and not initialized) or waiting > 0:
        return "Pending"
    if running > 0 and unknown == 0:
        return "Running"
    if running == 0 and stopped > 0 and unknown == 0:
        if terminal and not shape.static:
            return "Succeeded" if stopped == succeeded else "Failed"
        if stopped != stopped_for_good:
            return "Running"
        return "Succeeded" if stopped == succeeded else "Failed"
    return "Pending"


# -- conditions ----------------------------------------------------------------------------------

# The kubelet's PodReadyToStartContainers reason and its messages (pkg/kubelet/types/constants.go).
SANDBOX_NOT_READY = "PodSandboxNotReady"
NO_SANDBOX = "no pod sandbox exists"
MULTIPLE_SANDBOXES = "multiple pod sandboxes are ready and need to be reconciled"
SANDBOX_STOPPED = "pod sandbox is not ready"
NETWORK_CHANGED = "network namespace mode changed and sandbox needs to be recreated"
NO_IP = "pod sandbox has no IP address"


def _names(names: Sequence[str]) -> str:
    return "[" + " ".join(names) + "]"  # Go's %s of a []string


def _initialized(
    shape: Shape,
    init: Sequence[Mapping[str, Any]],
    regular: Sequence[Mapping[str, Any]],
    phase: str,
    old: Mapping[str, Any] | None,
) -> tuple[str, str, str]:
    """GeneratePodInitializedCondition: a sidecar counts once started, another init container
    once ready; with RestartAllContainersOnContainerExits (on) a pod once initialized stays so."""
    unknown: list[str] = []
    incomplete: list[str] = []
    for spec in shape.init_containers:
        s = _status_of(init, spec.name)
        if s is None:
            unknown.append(spec.name)
        elif not (s.get("started") if spec.sidecar else s.get("ready")):
            incomplete.append(spec.name)
    if phase == "Succeeded" and not unknown:
        return "True", "PodCompleted", ""
    if any({"running", "terminated"} & (s.get("state") or {}).keys() for s in regular):
        return "True", "", ""
    messages = []
    if unknown:
        messages.append(f"containers with unknown status: {_names(unknown)}")
    if incomplete:
        messages.append(f"containers with incomplete status: {_names(incomplete)}")
    if messages:
        if old is not None and old.get("status") == "True":
            return "True", "", ""
        return "False", "ContainersNotInitialized", ", ".join(messages)
    return "True", "", ""


def _containers_ready(
    shape: Shape, init: Sequence[Mapping[str, Any]], regular: Sequence[Mapping[str, Any]], phase: str
) -> tuple[str, str, str]:
    """GenerateContainersReadyCondition."""
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
        return "False", "ContainersNotReady", ", ".join(messages)
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
    at: str,
    generation: int = 0,
) -> dict[str, Any]:
    """A condition; its lastTransitionTime is the old one while its status stays, else `at`."""
    status, reason, message = value
    old = previous.get(kind)
    since = old.get("lastTransitionTime") if old and old.get("status") == status else None
    condition: dict[str, Any] = {"type": kind, "status": status}
    if generation:
        condition["observedGeneration"] = generation  # PodObservedGenerationTracking, on since 1.34
    condition["lastTransitionTime"] = since or at
    if reason:
        condition["reason"] = reason
    if message:
        condition["message"] = message
    return condition


def transition_time(
    kind: str, status: str, shape: Shape, sandboxes: Sequence[Sandbox], containers: Sequence[Container]
) -> int:
    """When, by the runtime's clock, a kubelet condition took the status it has (0: unknown).
    The kubelet stamps its own clock when it writes the status that changes a condition, just
    after the runtime event that changed it; the runtime dates that event: a sandbox's creation,
    a container's start or exit."""
    if not sandboxes:
        return 0
    first = min(s.created_at for s in sandboxes)
    newest = max(sandboxes, key=lambda s: s.created_at)
    if kind == "PodReadyToStartContainers":
        if status == "True" or newest.ready:
            return newest.created_at
        exits = [c.finished_at for c in containers if c.sandbox_id == newest.id]
        return max(exits, default=0) or newest.created_at
    if kind in ("Ready", "ContainersReady") or (kind == "Initialized" and status == "True"):
        names = {s.name for s in shape.init_containers if kind == "Initialized" or s.sidecar}
        kinds = (INIT,) if kind == "Initialized" else (REGULAR, INIT)
        if kind != "Initialized":
            names |= {s.name for s in shape.containers}
        relevant = [c for c in containers if c.kind in kinds and c.name in names]
        if status == "True":
            times = [c.finished_at if c.state is ContainerState.EXITED else c.started_at for c in relevant]
        else:
            times = [c.finished_at for c in relevant if c.state is ContainerState.EXITED]
        return max(times, default=0) or first
    return first


# -- the whole status ----------------------------------------------------------------------------


def sandbox_changed(shape: Shape, sandboxes: Sequence[Sandbox]) -> str:
    """The kubelet's PodSandboxChanged (kuberuntime/util): why it would need a new sandbox (its
    message), "" when it would not: none, more than one ready, the newest not ready, on another
    network namespace than the spec asks, or off the host network without an IP."""
    if not sandboxes:
        return NO_SANDBOX
    if sum(s.ready for s in sandboxes) > 1:
        return MULTIPLE_SANDBOXES
    newest = max(sandboxes, key=lambda s: s.created_at)
    if not newest.ready:
        return SANDBOX_STOPPED
    if newest.host_network != shape.host_network:
        return NETWORK_CHANGED
    return NO_IP if not newest.host_network and not pod_ips(newest) else ""


def pod_resources(shape: Shape) -> dict[str, Any]:
    """The pod's `resources` and `allocatedResources` as the kubelet writes them for a static
    pod (getEffectiveAllocatedResources: its requests and limits, the containers' aggregated
    under the pod-level ones; `{}` for a BestEffort pod), and its requests as allocated."""

    def aggregate(kind: str) -> dict[str, str]:
        return criresources.aggregate(
            (getattr(c, kind) for c in shape.containers),
            ((getattr(c, kind), c.sidecar) for c in shape.init_containers),
        )

    requests = criresources.pod_requests(aggregate("requests"), shape.pod_requests, shape.overhead)
    limits = criresources.pod_limits(
        aggregate("limits"), shape.pod_requests, shape.pod_limits, shape.overhead
    )
    resources: dict[str, Any] = {}
    if limits:
        resources["limits"] = limits
    if requests:
        resources["requests"] = requests
    out: dict[str, Any] = {"resources": resources}
    if requests:
        out["allocatedResources"] = dict(requests)
    return out


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
    back_offs: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """The pod's status in Kubernetes JSON, from its sandboxes and containers (all of them, of
    every attempt). `previous` is an older status of the same pod; `now` the time to stamp on
    conditions that change when the runtime dates nothing (no sandbox); `node_ips` the node's
    (--node-ip), which CRI does not report: the pod's hostIP(s), and the podIP(s) of a pod on
    the host network; `back_offs` the exited containers the kubelet waits out a crash-loop
    back-off for, in seconds by container id (sources/cri/backoff.py)."""
    previous = previous or {}
    back_offs = back_offs or {}
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
        shape=shape,
        back_offs=back_offs,
    )
    init = container_statuses(
        shape.init_containers,
        of(INIT),
        runtime,
        has_init=has_init,
        is_init=True,
        previous=previous.get("initContainerStatuses") or (),
        deleted=shape.deleted,
        regular_started=any(c.state is not ContainerState.CREATED for c in of(REGULAR)),
        shape=shape,
        back_offs=back_offs,
    )
    ephemeral = container_statuses(
        shape.ephemeral_containers,
        of(EPHEMERAL),
        runtime,
        has_init=has_init,
        is_init=False,
        previous=previous.get("ephemeralContainerStatuses") or (),
        shape=shape,
    )
    running_anything = any(c.state is ContainerState.RUNNING for c in containers)
    terminal = (newest is None or not newest.ready) and not running_anything and bool(containers)
    # HasAnyActiveRegularContainerStarted: a regular container exists in the newest sandbox.
    initialized = newest is not None and any(c.sandbox_id == newest.id for c in of(REGULAR))
    phase = get_phase(shape, [*regular, *init], terminal=terminal, initialized=initialized)

    old_conditions = {c.get("type", ""): c for c in previous.get("conditions") or ()}
    conditions = [c for c in previous.get("conditions") or () if c.get("type") not in KUBELET_CONDITIONS]
    # GeneratePodReadyToStartContainersCondition: false while the kubelet would make a new sandbox.
    why = sandbox_changed(shape, sandboxes)
    sandbox_ready = ("False", SANDBOX_NOT_READY, why) if why else ("True", "", "")
    containers_ready = _containers_ready(shape, init, regular, phase)
    ready = containers_ready
    if ready[0] == "True" and shape.readiness_gates:
        ready = _readiness_gates(shape, conditions)
    for kind, value in (
        ("PodReadyToStartContainers", sandbox_ready),
        ("Initialized", _initialized(shape, init, regular, phase, old_conditions.get("Initialized"))),
        ("Ready", ready),
        ("ContainersReady", containers_ready),
        ("PodScheduled", ("True", "", "")),
    ):
        at = transition_time(kind, value[0], shape, sandboxes, containers)
        stamp = rfc3339(at) if at else now
        conditions.append(_condition(kind, value, old_conditions, stamp, shape.generation))

    status: dict[str, Any] = {"phase": phase, "conditions": conditions}
    if shape.generation:
        status["observedGeneration"] = shape.generation
    if shape.qos:
        status["qosClass"] = shape.qos
    if shape.resources_known:
        status.update(pod_resources(shape))
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
