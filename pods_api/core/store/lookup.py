"""A Lookup: the pods one container ID, one pod IP, or one namespace and name names, answered
from the cache's indexes (core/store/index.py) for every surface, never by a scan.

What a surface hands over is what its client typed; what comes back is the hits in UID order
(a pod with the container that matched, for a container ID), an empty list when nothing matches.
A request naming no key or several, and a value an index cannot answer (a malformed IP, a
container ID prefix shorter than 12 characters or shared by several containers), is an
InvalidArgument whose message starts with the parameter it is about.
"""

from __future__ import annotations

from dataclasses import dataclass

from pods_api.core.api.statuserrors import InvalidArgumentError
from pods_api.core.query.view import View
from pods_api.core.store.cache import PodCache
from pods_api.core.store.index import BY_CONTAINER_ID, BY_NAME, BY_POD_IP, Hit, InvalidLookup

# The parameter names of a lookup, as HTTP query parameters and in error messages (gRPC's
# LookupRequest fields have these JSON names too).
CONTAINER_ID = "containerID"
POD_IP = "podIP"
NAME = "name"


@dataclass(frozen=True, slots=True)
class LookupKey:
    """What one lookup asks for; exactly one of the three is set (see `key`)."""

    container_id: str | None = None
    pod_ip: str | None = None
    name: tuple[str, str] | None = None  # (namespace, name)

    def key(self) -> tuple[str, str, object]:
        """(parameter, index, value) of the one key given; InvalidArgument for none or several."""
        given = [
            (param, index, value)
            for param, index, value in (
                (CONTAINER_ID, BY_CONTAINER_ID, self.container_id),
                (POD_IP, BY_POD_IP, self.pod_ip),
                (NAME, BY_NAME, self.name),
            )
            if value is not None
        ]
        if len(given) != 1:
            names = ", ".join(param for param, _, _ in given) or "none"
            raise InvalidArgumentError(
                f"a lookup takes exactly one of {CONTAINER_ID}, {POD_IP} or namespace and {NAME}; got {names}"
            )
        return given[0]


def find(cache: PodCache, key: LookupKey, view: View = View.EVERYTHING) -> list[Hit]:
    """The pods `key` names that are in `view` (its selector; its mask is the surface's to
    apply), in UID order."""
    param, index, value = key.key()
    try:
        hits = cache.by_index(index, value)
    except InvalidLookup as exc:
        raise InvalidLookup(f"{param}: {exc}") from None
    if view.selector is None:
        return hits
    return [hit for hit in hits if view.shows(hit.pod)]
