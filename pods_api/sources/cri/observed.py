"""The events a relist shows: what the kubelet records of the same moments, as the runtime dated
them. The kubelet records `Created` ("Created container: NAME") once the runtime created a
container and `Started` ("Started container NAME") once it started it
(pkg/kubelet/kuberuntime/kuberuntime_container.go, reasons from pkg/kubelet/events); the CRI
status holds both times, so each container (each attempt: a restart is a new container) is told
once of each. A restart is then the same event seen again, which the event store counts.

Nothing else is told: a container that exits, is OOM-killed or crashes gives the kubelet no event
of its own (its status says so: `lastState.terminated.reason`), and `BackOff`, `Killing` and
`Failed` are the kubelet's own decisions and errors, which the runtime never sees.

The first relist tells what the runtime still holds (the current container and the last one that
exited, per container), dated when it happened, so a restart of pods-api adds nothing twice.
"""

from __future__ import annotations

from collections.abc import Callable

from pods_api.core.store.observations import NORMAL, Involved, Observation
from pods_api.sources.cri.status import EPHEMERAL, INIT, Container, Sandbox

# The kubelet's reasons (pkg/kubelet/events: CreatedContainer, StartedContainer).
CREATED = "Created"
STARTED = "Started"

# A container's place in its pod, as the kubelet's event names it (its ObjectReference).
_FIELD = {INIT: "spec.initContainers", EPHEMERAL: "spec.ephemeralContainers"}


def field_path(container: Container) -> str:
    return f"{_FIELD.get(container.kind, 'spec.containers')}{{{container.name}}}"


def _event(involved: Involved, reason: str, message: str, at: int) -> Observation:
    return Observation(involved, NORMAL, reason, message, at)


class Observer:
    """Remembers, per container ID the runtime still lists, which of its events were told."""

    def __init__(self) -> None:
        self._told: dict[str, tuple[bool, bool]] = {}  # id -> (created told, started told)

    def changes(
        self,
        sandboxes: dict[str, list[Sandbox]],
        containers: dict[str, list[Container]],
        served: Callable[[str], bool],
    ) -> list[Observation]:
        """What happened since the last relist, oldest first: for pods with a sandbox that
        `served` says are served (a pod not served yet is told once it is)."""
        seen: list[Observation] = []
        told: dict[str, tuple[bool, bool]] = {}
        for uid, items in containers.items():
            pod = sandboxes.get(uid)
            if not pod or not served(uid):
                continue
            for c in items:
                created, started = self._told.get(c.id, (False, False))
                if (created or not c.created_at) and (started or not c.started_at):
                    told[c.id] = (created, started)  # nothing new: the common case, kept cheap
                    continue
                involved = Involved(pod[0].namespace, pod[0].name, uid, field_path(c))
                if not created and c.created_at:
                    seen.append(_event(involved, CREATED, f"Created container: {c.name}", c.created_at))
                if not started and c.started_at:
                    seen.append(_event(involved, STARTED, f"Started container {c.name}", c.started_at))
                told[c.id] = (created or bool(c.created_at), started or bool(c.started_at))
        self._told = told
        return sorted(seen, key=lambda o: o.at)
