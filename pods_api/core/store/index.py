"""Named indexes over the served pods, kept current by the cache at its write points.

Each index maps keys drawn from a pod's canonical JSON to the UIDs that have them. The cache
calls `update(uid, old, new)` for every change of a served pod, so a lookup never scans pods:
a dict access, or for a container ID prefix a bisection of a sorted list, O(log n).

Shipped indexes (names are the constants below):
  - `namespace/name`: (namespace, name) → pods. Two sources may serve the same name under
    different UIDs, so it can hold several.
  - `containerID`: every `containerID` in status.containerStatuses, initContainerStatuses and
    ephemeralContainerStatuses → the pod and which container (name, list, full ID). Looked up by
    the full `<runtime>://<id>` form, the bare ID, or a unique prefix of at least 12 characters
    (as `docker ps` and `crictl ps` show them).
  - `podIP`: every status.podIPs entry and status.podIP → pods; host-network pods share the
    node's IP, so an IP maps to several pods. IPv6 addresses are compared in canonical form.
"""

from __future__ import annotations

import bisect
import ipaddress
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from pods_api.core.api.statuserrors import InvalidArgumentError
from pods_api.core.store.version import PodVersion

BY_NAME = "namespace/name"
BY_CONTAINER_ID = "containerID"
BY_POD_IP = "podIP"

# Shortest container ID prefix accepted: what `docker ps` and `crictl ps` print (12 hex digits),
# long enough that a prefix is unlikely to be shared on one node.
MIN_PREFIX = 12
# Candidates named in an "ambiguous prefix" error; the rest are counted.
MAX_CANDIDATES_SHOWN = 10


class InvalidLookup(InvalidArgumentError, ValueError):
    """A lookup value that cannot be answered: malformed, too short, or ambiguous. Every surface
    answers it with INVALID_ARGUMENT."""


class AmbiguousPrefix(InvalidLookup):
    def __init__(self, prefix: str, candidates: list[str], more: int) -> None:
        shown = ", ".join(candidates) + (f" and {more} more" if more else "")
        super().__init__(f"container ID prefix {prefix!r} is ambiguous: it matches {shown}")
        self.candidates = candidates


@dataclass(frozen=True, slots=True)
class ContainerRef:
    """Which container of a pod a container ID lookup matched."""

    name: str
    list: str  # containerStatuses, initContainerStatuses or ephemeralContainerStatuses
    container_id: str  # as the pod states it: <runtime>://<id>


@dataclass(frozen=True, slots=True)
class Hit:
    """One pod a lookup found; `container` says which container, for the container-ID index."""

    pod: PodVersion
    container: ContainerRef | None = None


class Index(Protocol):
    name: str

    def update(self, uid: str, old: PodVersion | None, new: PodVersion | None) -> None: ...

    def lookup(self, value: Any) -> list[tuple[str, Any]]:
        """(uid, detail) pairs for `value`, in UID order; raises InvalidLookup on a bad value."""
        ...


class KeyIndex:
    """An index whose keys a function draws from the pod; the detail of each key is kept."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._map: dict[Any, dict[str, Any]] = {}

    def keys(self, pod: PodVersion) -> dict[Any, Any]:
        raise NotImplementedError

    def normalise(self, value: Any) -> Any:
        return value

    def update(self, uid: str, old: PodVersion | None, new: PodVersion | None) -> None:
        before = self.keys(old) if old is not None else {}
        after = self.keys(new) if new is not None else {}
        for key in before.keys() - after.keys():
            self._drop(key, uid)
        for key, detail in after.items():
            self._add(key, uid, detail)

    def lookup(self, value: Any) -> list[tuple[str, Any]]:
        return sorted(self._map.get(self.normalise(value), {}).items())

    def _add(self, key: Any, uid: str, detail: Any) -> None:
        self._map.setdefault(key, {})[uid] = detail

    def _drop(self, key: Any, uid: str) -> None:
        holders = self._map.get(key)
        if holders is not None:
            holders.pop(uid, None)
            if not holders:
                del self._map[key]

    def __len__(self) -> int:
        return len(self._map)


class NameIndex(KeyIndex):
    def __init__(self) -> None:
        super().__init__(BY_NAME)

    def keys(self, pod: PodVersion) -> dict[Any, Any]:
        return {(pod.namespace, pod.name): None}

    def normalise(self, value: Any) -> Any:
        namespace, name = value
        return (namespace, name)


def _canonical_ip(text: str) -> str:
    try:
        return ipaddress.ip_address(text).compressed
    except ValueError:
        return text


class PodIPIndex(KeyIndex):
    def __init__(self) -> None:
        super().__init__(BY_POD_IP)

    def keys(self, pod: PodVersion) -> dict[Any, Any]:
        return {_canonical_ip(ip): None for ip in pod.facts.pod_ips}

    def lookup(self, value: Any) -> list[tuple[str, Any]]:
        holders = self._map.get(value)  # the canonical spelling, as asked nearly always: no parse
        return sorted(holders.items()) if holders is not None else super().lookup(value)

    def normalise(self, value: Any) -> Any:
        try:
            return ipaddress.ip_address(value).compressed
        except ValueError:
            raise InvalidLookup(f"{value!r} is not an IP address") from None


def _split_id(container_id: str) -> tuple[str, str]:
    """('containerd', '<id>') from 'containerd://<id>'; ('', id) from a bare ID."""
    runtime, sep, bare = container_id.partition("://")
    return (runtime, bare) if sep else ("", container_id)


def container_ids(pod: PodVersion) -> Iterator[tuple[str, ContainerRef]]:
    """(bare ID, which container) for every container ID the pod's status names."""
    for name, list_name, full in pod.facts.containers:
        yield _split_id(full)[1], ContainerRef(name, list_name, full)


class ContainerIDIndex(KeyIndex):
    """Bare ID → pods, plus the bare IDs in sorted order for prefix lookups by bisection."""

    def __init__(self) -> None:
        super().__init__(BY_CONTAINER_ID)
        self._sorted: list[str] = []

    def keys(self, pod: PodVersion) -> dict[Any, Any]:
        return dict(container_ids(pod))

    def _add(self, key: Any, uid: str, detail: Any) -> None:
        if key not in self._map:
            bisect.insort(self._sorted, key)
        super()._add(key, uid, detail)

    def _drop(self, key: Any, uid: str) -> None:
        super()._drop(key, uid)
        if key not in self._map:
            at = bisect.bisect_left(self._sorted, key)
            if at < len(self._sorted) and self._sorted[at] == key:
                del self._sorted[at]

    def lookup(self, value: Any) -> list[tuple[str, Any]]:
        runtime, bare = _split_id(str(value).strip())
        if not bare:
            raise InvalidLookup("a container ID must not be empty")
        holders = self._map.get(bare)
        if holders is None:
            holders = self._map.get(self._unique_prefix(bare), {})
        hits = sorted(holders.items())
        if runtime:  # the full form names its runtime: a docker:// ID is not a containerd:// one
            hits = [(uid, ref) for uid, ref in hits if _split_id(ref.container_id)[0] == runtime]
        return hits

    def _unique_prefix(self, prefix: str) -> str:
        """The one ID starting with `prefix`, or "" when none does; raises if several do."""
        if len(prefix) < MIN_PREFIX:
            raise InvalidLookup(
                f"no container has the ID {prefix!r}, and a prefix needs at least {MIN_PREFIX} characters"
            )
        found = list(self._starting_with(prefix, MAX_CANDIDATES_SHOWN + 1))
        if len(found) > 1:
            total = self._count_starting_with(prefix)
            shown = [self._describe(key) for key in found[:MAX_CANDIDATES_SHOWN]]
            raise AmbiguousPrefix(prefix, shown, total - len(shown))
        return found[0] if found else ""

    def _describe(self, key: str) -> str:
        names = sorted({ref.name for ref in self._map[key].values()})
        return f"{key} (container {', '.join(names)})"

    def _starting_with(self, prefix: str, limit: int) -> Iterable[str]:
        at = bisect.bisect_left(self._sorted, prefix)
        for key in self._sorted[at : at + limit]:
            if not key.startswith(prefix):
                return
            yield key

    def _count_starting_with(self, prefix: str) -> int:
        # Every string with this prefix sorts before prefix + the largest code point.
        return bisect.bisect_left(self._sorted, prefix + "\U0010ffff") - bisect.bisect_left(
            self._sorted, prefix
        )


def default_indexes() -> list[Index]:
    return [NameIndex(), ContainerIDIndex(), PodIPIndex()]
