"""What the node itself observed happen to its pods' containers, kept as the kubelet's event
recorder keeps events: one record per (pod, container, type, reason, message), an occurrence
that repeats it counted on the same record (its count, first and last time), so a container
restarted four times is one `Started` seen four times, as `kubectl describe` shows the kubelet's.

Sources observe (the CRI source: `_Sink.observe`); surfaces read (`all`). Bounded:
the least recently seen record goes first. Records are plain facts, not Kubernetes JSON; the
Kubernetes view renders them as core/v1 Events.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass

# Records kept: client-go's event correlator keeps 4,096 per recorder (a whole node's kubelet);
# a record is a few hundred bytes, so at most about 1 MiB.
MAX_EVENTS = 4096

NORMAL = "Normal"
WARNING = "Warning"


@dataclass(frozen=True, slots=True)
class Involved:
    """The container an event is about, by the UID of the pod it is served as."""

    namespace: str
    pod: str
    uid: str
    field_path: str  # spec.containers{NAME}, spec.initContainers{NAME}, ...


@dataclass(frozen=True, slots=True)
class Observation:
    """One occurrence: at `at` (ns since the epoch, the runtime's time of it)."""

    involved: Involved
    type: str  # NORMAL or WARNING
    reason: str
    message: str
    at: int


@dataclass(slots=True)
class NodeEvent:
    involved: Involved
    type: str
    reason: str
    message: str
    first: int  # ns since the epoch
    last: int
    count: int
    serial: int  # unique in this process and later than any of an earlier run's (its name)
    version: int  # changes with each occurrence counted (its resourceVersion)


Key = tuple[Involved, str, str, str]


class NodeEvents:
    """Bounded, aggregated, in the order last seen. Not thread-safe: sinks call it on the loop."""

    def __init__(self, size: int = MAX_EVENTS) -> None:
        self._size = size
        self._events: OrderedDict[Key, NodeEvent] = OrderedDict()
        # Starts at the wall clock in ns, as the cache's revisions do: names and versions of this
        # run sort after a previous run's.
        self._next = time.time_ns()

    def _tick(self) -> int:
        self._next += 1
        return self._next

    def record(self, seen: Observation) -> None:
        key = (seen.involved, seen.type, seen.reason, seen.message)
        event = self._events.get(key)
        if event is None:
            serial = self._tick()
            event = NodeEvent(*key, first=seen.at, last=seen.at, count=1, serial=serial, version=serial)
            self._events[key] = event
            if len(self._events) > self._size:
                self._events.popitem(last=False)
            return
        event.first, event.last = min(event.first, seen.at), max(event.last, seen.at)
        event.count += 1
        event.version = self._tick()
        self._events.move_to_end(key)

    def all(self) -> Iterator[NodeEvent]:
        return iter(list(self._events.values()))

    def __len__(self) -> int:
        return len(self._events)
