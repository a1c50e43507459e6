"""What pods-api's extension (podsapi.v1.PodLookup, proto/podsapi_v1.proto) adds to `Client`:
`lookup` (the pods a container ID, a pod IP, or a namespace and name names, and which container
matched) and label and field selectors on `list` and `watch`. Only pods-api serves it: on a
kubelet's socket those calls raise `Unimplemented`.

This module holds the request and the answer's types; `Client` makes the calls.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from pods_api.client.pod import Pod
from pods_api.core.api.pb import podsapi_v1_pb2 as lookup_pb

SERVICE = "/podsapi.v1.PodLookup/"


class ContainerKind(Enum):
    """Which of the pod's lists the matched container is in."""

    CONTAINER = lookup_pb.CONTAINER  # spec.containers, status.containerStatuses
    INIT_CONTAINER = lookup_pb.INIT_CONTAINER  # spec.initContainers, status.initContainerStatuses
    EPHEMERAL_CONTAINER = lookup_pb.EPHEMERAL_CONTAINER  # spec.ephemeralContainers, ...


@dataclass(frozen=True, slots=True)
class MatchedContainer:
    name: str
    kind: ContainerKind
    container_id: str  # as the pod's status states it: <runtime>://<id>


@dataclass(frozen=True, slots=True)
class Match:
    """One pod a lookup found; `container` is set for a container ID lookup only."""

    pod: Pod
    container: MatchedContainer | None = None


def lookup_request(
    container_id: str | None,
    pod_ip: str | None,
    namespace: str | None,
    name: str | None,
    label_selector: str,
    field_selector: str,
) -> lookup_pb.LookupRequest:
    """The request for exactly one key; ValueError for none or several (a oneof would quietly
    keep the last one set)."""
    if sum(key is not None for key in (container_id, pod_ip, name)) != 1 or (namespace is None) != (
        name is None
    ):
        raise ValueError("lookup takes exactly one of container_id, pod_ip, or namespace with name")
    request = lookup_pb.LookupRequest(label_selector=label_selector, field_selector=field_selector)
    if container_id is not None:
        request.container_id = container_id
    elif pod_ip is not None:
        request.pod_ip = pod_ip
    else:
        request.name.CopyFrom(lookup_pb.PodName(namespace=namespace, name=name))
    return request


def matched_container(match: lookup_pb.Match) -> MatchedContainer | None:
    if not match.HasField("container"):
        return None
    c = match.container
    return MatchedContainer(c.name, ContainerKind(c.kind), c.container_id)
