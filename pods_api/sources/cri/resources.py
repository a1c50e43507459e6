"""The resources a pod's status repeats, as the kubelet v1.37.2 writes them: per container
`resources` and `allocatedResources` (InPlacePodVerticalScaling, GA), and the pod's own
`resources` and `allocatedResources` (InPlacePodLevelResourcesVerticalScaling, Beta and on).
After kubelet_pods.go convertToAPIContainerStatuses (convertContainerStatusResources) and
convertStatusToAPIStatus (getEffectiveAllocatedResources), the CRI conversions of
kuberuntime_container_linux.go (toKubeContainerResources), the cgroup arithmetic of
pkg/kubelet/cm/helpers_linux.go, and k8s.io/component-helpers/resource PodRequests/PodLimits.

Pure functions over (name, quantity) pairs; quantities come out canonical, as Go writes them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from pods_api.core.api.quantity import add_quantities, binary_quantity, canonical_quantity, quantity_value

Resources = tuple[tuple[str, str], ...]

# cm.MinShares: the kernel's least cpu.shares; a request at or below it is shown as allocated.
MIN_SHARES = 2
# cm.SharesPerCPU: cpu.shares per whole cpu.
SHARES_PER_CPU = 1024
# cm.MinMilliCPULimit: the least CFS quota (1 ms of a 100 ms period) as millicpu; a limit at or
# below it is shown as allocated.
MIN_MILLI_CPU_LIMIT = 10
# The resources a pod may set at pod level (resource.IsSupportedPodLevelResource).
POD_LEVEL = ("cpu", "memory")
HUGEPAGES_PREFIX = "hugepages-"


def milli_value(quantity: str) -> int:
    """Go's Quantity.MilliValue: the value in thousandths, rounded up."""
    return math.ceil(quantity_value(quantity) * 1000)


def milli_quantity(milli: int) -> str:
    """resource.NewMilliQuantity(milli, DecimalSI), canonical: 1000 is `1`, 250 is `250m`."""
    return canonical_quantity(f"{milli}m")


def quota_to_milli_cpu(quota: int, period: int) -> int:
    """cm.QuotaToMilliCPU: a CFS quota of -1 is no limit."""
    return 0 if quota == -1 or period <= 0 else quota * 1000 // period


def shares_to_milli_cpu(shares: int) -> int:
    """cm.SharesToMilliCPU, rounding up as it does."""
    return math.ceil(shares * 1000 / SHARES_PER_CPU) if shares >= MIN_SHARES else 0


def container_resources(
    requests: Resources,
    limits: Resources,
    *,
    running: bool,
    cpu_quota: int = 0,
    cpu_period: int = 0,
    cpu_shares: int = 0,
    memory_limit: int = 0,
    old: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A container status's `resources`: the spec's (`{}` when it has none); for a running
    container, limits and the cpu request as the runtime applies them where it says (`old`, the
    same running container's earlier `resources`, where it says nothing). The memory request is
    the spec's: the runtime does not report it and the kubelet fills it from what it asked for."""
    resources: dict[str, dict[str, str]] = {}
    if limits:
        resources["limits"] = dict(limits)
    if requests:
        resources["requests"] = dict(requests)
    if not running:
        return dict(resources)
    kept = (old or {}).get("resources") or {}

    def keep(kind: str, name: str) -> None:
        if name in (kept.get(kind) or {}):
            resources[kind][name] = kept[kind][name]

    def applied_cpu(kind: str, milli: int, floor: int) -> None:
        """The runtime's cpu value where it has one, unless it and the spec's are both at or
        below the kernel's floor (then the spec's stays, as the kubelet keeps it)."""
        if milli <= 0:
            keep(kind, "cpu")
        elif milli > floor or milli_value(resources[kind].get("cpu", "0")) > floor:
            resources[kind]["cpu"] = milli_quantity(milli)

    if "limits" in resources:
        applied_cpu("limits", quota_to_milli_cpu(cpu_quota, cpu_period), MIN_MILLI_CPU_LIMIT)
        if memory_limit > 0:
            resources["limits"]["memory"] = binary_quantity(memory_limit)
        else:
            keep("limits", "memory")
    if "requests" in resources:
        applied_cpu("requests", shares_to_milli_cpu(cpu_shares), MIN_SHARES)
    return dict(resources)


def _add(into: dict[str, str], more: Iterable[tuple[str, str]]) -> None:
    """addResourceList: a name's first quantity gives the sum's format."""
    for name, quantity in more:
        into[name] = add_quantities(into[name], quantity) if name in into else canonical_quantity(quantity)


def _max(into: dict[str, str], more: Mapping[str, str]) -> None:
    """maxResourceList."""
    for name, quantity in more.items():
        if name not in into or quantity_value(quantity) > quantity_value(into[name]):
            into[name] = quantity


def aggregate(
    containers: Iterable[Resources], init_containers: Iterable[tuple[Resources, bool]]
) -> dict[str, str]:
    """aggregateContainerResourcesByFn over the spec: the regular containers and the sidecars
    (init containers flagged True) add up; each other init container counts with the sidecars
    started before it; the pod needs the larger of the two."""
    result: dict[str, str] = {}
    for resources in containers:
        _add(result, resources)
    sidecars: dict[str, str] = {}
    init_peak: dict[str, str] = {}
    for resources, sidecar in init_containers:
        if sidecar:
            _add(result, resources)
            _add(sidecars, resources)
            needed = dict(sidecars)
        else:
            needed = {}
            _add(needed, resources)
            _add(needed, sidecars.items())
        _max(init_peak, needed)
    _max(result, init_peak)
    return result


def _pod_level(resources: Resources) -> list[tuple[str, str]]:
    return [(n, q) for n, q in resources if n in POD_LEVEL or n.startswith(HUGEPAGES_PREFIX)]


def pod_requests(aggregated: Mapping[str, str], requests: Resources, overhead: Resources) -> dict[str, str]:
    """PodRequests: the containers' aggregate, pod-level requests where the pod sets them, plus
    the runtime class's overhead."""
    result = dict(aggregated)
    result.update(canonical(_pod_level(requests)))
    _add(result, overhead)
    return result


def pod_limits(
    aggregated: Mapping[str, str], requests: Resources, limits: Resources, overhead: Resources
) -> dict[str, str]:
    """PodLimits: the containers' aggregate, pod-level limits where the pod sets pod-level
    resources, plus the overhead on each limit that is set."""
    result = dict(aggregated)
    if _pod_level(requests) or _pod_level(limits):
        result.update(canonical(_pod_level(limits)))
    for name, quantity in overhead:
        if name in result and quantity_value(result[name]) != 0:
            result[name] = add_quantities(result[name], quantity)
    return result


def canonical(resources: Iterable[tuple[str, str]]) -> dict[str, str]:
    return {name: canonical_quantity(quantity) for name, quantity in resources}
