"""kubectl's pod printer: the columns and STATUS rules of `kubectl get pods`, one implementation for
the CLI's table and the Kubernetes Table view (core/api/table.py).

The rules are the API server's (`pkg/printers/internalversion`, `printPod`), which kubectl prints
unchanged; ages are apimachinery's `duration.HumanDuration`. Everything here is a pure function of
a pod in Kubernetes JSON (as `pod_from_bytes` gives it, Go's zero values included or left out, or
its message read by JSON names, core/api/messageview.py) and of `now`, so that tests and both
surfaces agree to the character.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

__all__ = [
    "POD_COLUMNS",
    "TAB_MIN_WIDTH",
    "TAB_PADDING",
    "Column",
    "Fields",
    "PodRow",
    "PrintedPod",
    "column_width",
    "human_duration",
    "pod_row",
    "pod_text_table",
    "printed_pod",
    "render_text_table",
]


class Fields(Protocol):
    """What the printer reads a pod (and each object in it) through: a Kubernetes JSON dict, or
    a protobuf message seen by its JSON names (core/api/messageview.py)."""

    def get(self, key: str, default: Any = None, /) -> Any: ...

    def __getitem__(self, key: str, /) -> Any: ...


Pod = Mapping[str, Any] | Fields


@dataclass(frozen=True, slots=True)
class Column:
    """A `meta.k8s.io/v1` TableColumnDefinition. priority 0 is shown by default, 1 with -o wide."""

    name: str
    type: str
    description: str
    format: str = ""
    priority: int = 0

    def to_json(self) -> dict[str, Any]:
        # Go's TableColumnDefinition has no omitempty: every key is always present.
        return {
            "name": self.name,
            "type": self.type,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        }


# The API server's pod columns, descriptions included: they are the SwaggerDoc of the fields
# they show (Go doc comments, paragraphs joined by "\n\n"), so kubectl and dashboards that key
# on them see what a real cluster sends.
POD_COLUMNS: tuple[Column, ...] = (
    Column(
        "Name",
        "string",
        "Name must be unique within a namespace. Is required when creating resources, although some "
        "resources may allow a client to request the generation of an appropriate name automatically. "
        "Name is primarily intended for creation idempotence and configuration definition. Cannot be "
        "updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names",
        format="name",
    ),
    Column("Ready", "string", "The aggregate readiness state of this pod for accepting traffic."),
    Column("Status", "string", "The aggregate status of the containers in this pod."),
    Column(
        "Restarts",
        "string",
        "The number of times the containers in this pod have been restarted and when the last "
        "container in this pod has restarted.",
    ),
    Column(
        "Age",
        "string",
        "CreationTimestamp is a timestamp representing the server time when this object was created. "
        "It is not guaranteed to be set in happens-before order across separate operations. Clients "
        "may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the "
        "system. Read-only. Null for lists. More info: "
        "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata",
    ),
    Column(
        "IP",
        "string",
        "podIP address allocated to the pod. Routable at least within the cluster. Empty if not yet "
        "allocated.",
        priority=1,
    ),
    Column(
        "Node",
        "string",
        "NodeName indicates in which node this pod is scheduled. If empty, this pod is a candidate for "
        "scheduling by the scheduler defined in schedulerName. Once this field is set, the kubelet for "
        "this node becomes responsible for the lifecycle of this pod. This field should not be used to "
        "express a desire for the pod to be scheduled on a specific node. "
        "https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/#nodename",
        priority=1,
    ),
    Column(
        "Nominated Node",
        "string",
        "nominatedNodeName is set only when this pod preempts other pods on the node, but it cannot be "
        "scheduled right away as preemption victims receive their graceful termination periods. This "
        "field does not guarantee that the pod will be scheduled on this node. Scheduler may decide to "
        "place the pod elsewhere if other nodes become available sooner. Scheduler may also decide to "
        "give the resources on this node to a higher priority pod that is created after preemption. As "
        "a result, this field may be different than PodSpec.nodeName when the pod is scheduled.",
        priority=1,
    ),
    Column(
        "Readiness Gates",
        "string",
        "If specified, all readiness gates will be evaluated for pod readiness. A pod is ready when all "
        "its containers are ready AND all conditions specified in the readiness gates have status "
        'equal to "True" More info: '
        "https://git.k8s.io/enhancements/keps/sig-network/580-pod-readiness-gates",
        priority=1,
    ),
)

# Table row conditions the API server attaches to finished pods (kubectl greys them out, and
# `--show-all=false` era filters keyed on them).
_SUCCEEDED = {
    "type": "Completed",
    "status": "True",
    "reason": "Succeeded",
    "message": "The pod has completed successfully.",
}
_FAILED = {"type": "Completed", "status": "True", "reason": "Failed", "message": "The pod failed."}

# The node controller's reason for pods on a node that stopped reporting (NodeUnreachablePodReason).
_NODE_LOST = "NodeLost"

# Every field pod_row reads (metadata.name, namespace and uid are kept by any mask): a client
# that asks for only these (`pods-api get pods`) gets and decodes a third of each pod and prints
# the same rows (a test holds the two equal for any pod).
_STATUS_FIELDS = ("name", "ready", "restartCount", "started", "state", "lastState.terminated.finishedAt")
POD_FIELDS = ",".join(
    (
        "metadata.creationTimestamp",
        "metadata.deletionTimestamp",
        "spec.containers.name",
        "spec.initContainers.name",
        "spec.initContainers.restartPolicy",
        "spec.nodeName",
        "spec.readinessGates",
        "status.phase",
        "status.reason",
        "status.conditions.type",
        "status.conditions.status",
        "status.conditions.reason",
        "status.podIPs",
        "status.nominatedNodeName",
        *(f"status.containerStatuses.{f}" for f in _STATUS_FIELDS),
        *(f"status.initContainerStatuses.{f}" for f in _STATUS_FIELDS),
    )
)


@dataclass(frozen=True, slots=True)
class PodRow:
    """One pod as `kubectl get pods -o wide` shows it, cell by cell."""

    namespace: str
    name: str
    ready: str
    status: str
    restarts: str
    age: str
    ip: str
    node: str
    nominated_node: str
    readiness_gates: str
    conditions: tuple[Mapping[str, str], ...] = ()

    def cells(self, *, wide: bool = False) -> list[str]:
        """The cells of POD_COLUMNS, the priority-1 ones only if wide."""
        short = [self.name, self.ready, self.status, self.restarts, self.age]
        if not wide:
            return short
        return [*short, self.ip, self.node, self.nominated_node, self.readiness_gates]


# Go's zero time.Time, as a sentinel that every real time is after.
_ZERO = datetime.min.replace(tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class PrintedPod:
    """A pod's row without the time it is printed at: its AGE and the "(5m ago)" of RESTARTS
    are the two cells that change with the clock, so a pod printed again and again (a Table per
    second) is read once per version and its row made from this."""

    namespace: str
    name: str
    ready: str
    status: str
    restarts: int
    last_restart: datetime  # _ZERO when no container has terminated
    created: datetime  # _ZERO when the pod has no creationTimestamp
    ip: str
    node: str
    nominated_node: str
    readiness_gates: str
    conditions: tuple[Mapping[str, str], ...] = ()

    def restarts_cell(self, now: datetime) -> str:
        if self.restarts and self.last_restart != _ZERO:
            return f"{self.restarts} ({_since(self.last_restart, now)} ago)"
        return str(self.restarts)

    def age(self, now: datetime) -> str:
        return _since(self.created, now)

    def row(self, now: datetime) -> PodRow:
        return PodRow(
            self.namespace,
            self.name,
            self.ready,
            self.status,
            self.restarts_cell(now),
            self.age(now),
            self.ip,
            self.node,
            self.nominated_node,
            self.readiness_gates,
            self.conditions,
        )


def _time(value: Any) -> datetime:
    """An RFC 3339 timestamp from the JSON (or the datetime a message view gives for it,
    core/api/messageview.py); absent or null is Go's zero time."""
    if not value:
        return _ZERO
    if isinstance(value, datetime):
        return value
    return datetime.fromisoformat(str(value))


def human_duration(seconds: float) -> str:
    """apimachinery's duration.HumanDuration: ~2-3 significant figures, for humans.

    Up to 2 s in the future counts as now (clock skew); further is "<invalid>".
    """
    whole = int(seconds)  # Go's int(d.Seconds()): truncated toward zero
    if whole < -1:
        return "<invalid>"
    if whole < 0:
        return "0s"
    if whole < 60 * 2:
        return f"{whole}s"
    minutes = whole // 60
    if minutes < 10:
        s = whole % 60
        return f"{minutes}m" if s == 0 else f"{minutes}m{s}s"
    if minutes < 60 * 3:
        return f"{minutes}m"
    hours = whole // 3600
    if hours < 8:
        m = minutes % 60
        return f"{hours}h" if m == 0 else f"{hours}h{m}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        h = hours % 24
        return f"{hours // 24}d" if h == 0 else f"{hours // 24}d{h}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        dy = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if dy == 0 else f"{hours // 24 // 365}y{dy}d"
    return f"{hours // 24 // 365}y"


def _since(value: datetime, now: datetime) -> str:
    """kubectl's translateTimestampSince: "<unknown>" for a zero time."""
    if value == _ZERO:
        return "<unknown>"
    return human_duration((now - value).total_seconds())


def _restartable(container: Fields | None) -> bool:
    """A sidecar: an init container with restartPolicy Always."""
    return container is not None and container.get("restartPolicy") == "Always"


def _condition_true(conditions: Iterable[Fields], kind: str) -> bool:
    """Any condition of that type says True (the API server's hasPodReadyCondition)."""
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)


def _initialized(conditions: Sequence[Fields]) -> bool:
    """The first Initialized condition says True (later duplicates are not looked at)."""
    for c in conditions:
        if c.get("type") == "Initialized":
            return bool(c.get("status") == "True")
    return False


def _terminated_reason(terminated: Fields, prefix: str) -> str:
    """A terminated container's reason, else `Signal:N`, else `ExitCode:N`."""
    if terminated.get("reason"):
        return f"{prefix}{terminated['reason']}"
    if terminated.get("signal"):
        return f"{prefix}Signal:{terminated['signal']}"
    return f"{prefix}ExitCode:{terminated.get('exitCode') or 0}"


def _last_termination(status: Fields) -> datetime:
    terminated = (status.get("lastState") or {}).get("terminated")
    return _time(terminated.get("finishedAt")) if terminated is not None else _ZERO


def pod_row(pod: Pod, now: datetime) -> PodRow:
    """The row kubectl prints for pod at time now (an aware datetime)."""
    return printed_pod(pod).row(now)


def printed_pod(pod: Pod) -> PrintedPod:
    """What pod's row shows, but for the cells that change with the time it is printed."""
    metadata = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    conditions: list[Fields] = status.get("conditions") or []
    init_specs: list[Fields] = spec.get("initContainers") or []
    phase = status.get("phase") or ""

    reason = status.get("reason") or phase
    for c in conditions:
        if c.get("type") == "PodScheduled" and c.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"

    init_by_name = {c.get("name"): c for c in init_specs}
    total = len(spec.get("containers") or []) + sum(1 for c in init_specs if _restartable(c))
    ready = 0
    restarts = 0
    last_restart = _ZERO
    sidecar_restarts = 0
    sidecar_last_restart = _ZERO

    initializing = False
    for i, cs in enumerate(status.get("initContainerStatuses") or []):
        count = cs.get("restartCount") or 0
        finished = _last_termination(cs)
        restarts += count
        last_restart = max(last_restart, finished)
        sidecar = _restartable(init_by_name.get(cs.get("name")))
        if sidecar:
            sidecar_restarts += count
            sidecar_last_restart = max(sidecar_last_restart, finished)
        state = cs.get("state") or {}
        terminated = state.get("terminated")
        waiting = state.get("waiting")
        if terminated is not None and not terminated.get("exitCode"):
            continue
        if sidecar and cs.get("started"):
            ready += 1 if cs.get("ready") else 0
            continue
        initializing = True
        if terminated is not None:
            reason = _terminated_reason(terminated, "Init:")
        elif waiting is not None and waiting.get("reason") and waiting["reason"] != "PodInitializing":
            reason = f"Init:{waiting['reason']}"
        else:
            reason = f"Init:{i}/{len(init_specs)}"
        break

    if not initializing or _initialized(conditions):
        restarts, last_restart = sidecar_restarts, sidecar_last_restart
        running = False
        # Backwards, as the API server does: the first container's state wins the STATUS column.
        for cs in reversed(status.get("containerStatuses") or []):
            restarts += cs.get("restartCount") or 0
            last_restart = max(last_restart, _last_termination(cs))
            state = cs.get("state") or {}
            waiting = state.get("waiting")
            terminated = state.get("terminated")
            if waiting is not None and waiting.get("reason"):
                reason = waiting["reason"]
            elif terminated is not None:
                reason = _terminated_reason(terminated, "")
            elif cs.get("ready") and state.get("running") is not None:
                running = True
                ready += 1
        # A container still running after another completed: the pod is not "Completed".
        if reason == "Completed" and running:
            reason = "Running" if _condition_true(conditions, "Ready") else "NotReady"

    if metadata.get("deletionTimestamp"):
        if status.get("reason") == _NODE_LOST:
            reason = "Unknown"
        elif phase not in ("Succeeded", "Failed"):
            reason = "Terminating"

    gates = spec.get("readinessGates") or []
    gates_cell = "<none>"
    if gates:
        by_type: dict[str, Fields] = {}
        for c in conditions:
            by_type.setdefault(c.get("type", ""), c)  # the first condition of a type counts
        passed = sum(1 for g in gates if by_type.get(g.get("conditionType", ""), {}).get("status") == "True")
        gates_cell = f"{passed}/{len(gates)}"

    ips = status.get("podIPs") or []
    row_conditions: tuple[Mapping[str, str], ...] = ()
    if phase == "Succeeded":
        row_conditions = (_SUCCEEDED,)
    elif phase == "Failed":
        row_conditions = (_FAILED,)
    return PrintedPod(
        namespace=metadata.get("namespace") or "",
        name=metadata.get("name") or "",
        ready=f"{ready}/{total}",
        status=reason,
        restarts=restarts,
        last_restart=last_restart,
        created=_time(metadata.get("creationTimestamp")),
        ip=(ips[0].get("ip") if ips else "") or "<none>",
        node=spec.get("nodeName") or "<none>",
        nominated_node=status.get("nominatedNodeName") or "<none>",
        readiness_gates=gates_cell,
        conditions=row_conditions,
    )


# kubectl's tabwriter (its printers' `tabwriter.NewWriter(out, 6, 4, 3, ' ', 0)`): a cell is at
# least 6 wide and 3 wider than the widest in its column; the last cell of a line is unpadded.
# Every table the CLI prints lays its columns out by these (client/jsonpath.py, client/output.py).
TAB_MIN_WIDTH, TAB_PADDING = 6, 3


def column_width(cells: Iterable[str]) -> int:
    """The width kubectl's tabwriter gives a column of these cells."""
    return max(TAB_MIN_WIDTH, max((len(c) for c in cells), default=0) + TAB_PADDING)


def render_text_table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """Columns the way kubectl's tabwriter lays them out (one block: every line has every
    column): left-aligned, the last column unpadded; headers upper-cased."""
    lines = [[h.upper() for h in headers], *([str(c) for c in row] for row in rows)]
    widths = [column_width(line[i] for line in lines) for i in range(len(headers) - 1)]
    out = []
    for line in lines:
        padded = [cell.ljust(width) for cell, width in zip(line, widths, strict=False)]
        out.append("".join(padded) + line[-1])
    return "\n".join(out) + "\n"


def pod_text_table(
    pods: Iterable[Pod], now: datetime, *, wide: bool = False, with_namespace: bool = False
) -> str:
    """`kubectl get pods [-A] [-o wide]` as text, rows in the order given."""
    headers = [c.name for c in POD_COLUMNS if wide or c.priority == 0]
    rows = []
    for pod in pods:
        row = pod_row(pod, now)
        rows.append([row.namespace, *row.cells(wide=wide)] if with_namespace else row.cells(wide=wide))
    if with_namespace:
        headers = ["Namespace", *headers]
    return render_text_table(headers, rows)
