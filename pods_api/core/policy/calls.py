"""The table of Pods API calls: for each, whether the rate limit applies, whether it waits for
readiness, and its metric; and the one refusal function both surfaces use.

A surface cannot serve a call that is not in the table: the gRPC server looks up each method it
registers, and the gateway each route it names (a KeyError at start-up, not a silently unlimited,
ungated or uncounted call). Metrics make one per-call counter from the table.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from pods_api.core.api import kubelet_texts
from pods_api.core.api.statuserrors import FailedPrecondition, ResourceExhausted, StatusError
from pods_api.core.policy.ratelimit import TokenBucket
from pods_api.core.store.cache import PodCache
from pods_api.core.store.readiness import NOT_SYNCED

RATE_LIMITED = "rate limit exceeded; retry later"
# A sync takes seconds; retrying sooner only adds load.
NOT_SYNCED_RETRY_AFTER = 1.0
# The `server_api_version` label of calls over HTTP; gRPC's come from `Calls.services`.
HTTP_API_VERSION = "http"


@dataclass(frozen=True, slots=True)
class Method:
    """One method of the Pods API, the same on every surface."""

    name: str  # the gRPC method name on every Pods service; the HTTP route's name
    limited: bool  # takes a token from the bucket shared by every surface
    gated: bool  # refused until every pod source has synced
    metric: str  # its own counter: kubelet_pod_requests_<metric>_total


@dataclass(frozen=True, slots=True)
class Calls:
    """The calls, and the gRPC services that serve all of them."""

    by_name: Mapping[str, Method]
    # gRPC service -> its `server_api_version` label: the kubelet's contract and the documented one.
    services: Mapping[str, str] = field(default_factory=dict)

    def __getitem__(self, name: str) -> Method:
        return self.by_name[name]

    def __iter__(self) -> Iterator[Method]:
        return iter(self.by_name.values())

    def adding(self, call: Method) -> Calls:
        """This table with one more call (served on every surface that registers it)."""
        return Calls({**self.by_name, call.name: call}, self.services)

    def grpc_method(self, path: str) -> tuple[str, Method | None] | None:
        """For `/service/Method`: (api version label, the call or None when the table lacks it)
        on a Pods service; None for any other service (health, reflection)."""
        service, _, method = path.lstrip("/").rpartition("/")
        version = self.services.get(service)
        if version is None:
            return None
        return version, self.by_name.get(method)


CALLS = Calls(
    {
        # List and Get share one token bucket, as in the kubelet; a watch is long-lived and is
        # capped by --max-watchers instead. Every call waits for readiness: never a partial list.
        "ListPods": Method("ListPods", limited=True, gated=True, metric="list"),
        "GetPod": Method("GetPod", limited=True, gated=True, metric="get"),
        "WatchPods": Method("WatchPods", limited=False, gated=True, metric="watch"),
        # Our extension (podsapi.v1.PodLookup, and the gateway's lookups): an index lookup costs
        # what a Get costs, so it is limited and gated like one.
        "Lookup": Method("Lookup", limited=True, gated=True, metric="lookup"),
        # PodLookup's WatchPods with several events to a message: a watch, counted as one.
        "WatchPodBatches": Method("WatchPodBatches", limited=False, gated=True, metric="watch"),
    },
    # podsapi.v1.PodLookup's ListPods and WatchPods (with selectors) are the same calls as the
    # kubelet's, counted under their own api version label.
    services={"v1alpha1.Pods": "v1alpha1", "Pods": "documented", "podsapi.v1.PodLookup": "podsapi.v1"},
)


@dataclass(frozen=True, slots=True)
class RefusalTexts:
    """What a refusal says: the same refusal, in the words of the contract it is given on."""

    rate_limited: str
    not_synced: str


# Ours: every surface but the kubelet's own gRPC contracts.
OUR_TEXTS = RefusalTexts(RATE_LIMITED, NOT_SYNCED)
# On `v1alpha1.Pods` and `Pods`: the kubelet's words, for clients written against a kubelet.
KUBELET_TEXTS = RefusalTexts(kubelet_texts.RATE_LIMITED, kubelet_texts.INITIALIZING)


def refusal(
    call: Method, limiter: TokenBucket | None, cache: PodCache, texts: RefusalTexts = OUR_TEXTS
) -> StatusError | None:
    """Why `call` may not run now, or None. The rate limit is checked first, as the kubelet's
    interceptor runs before its handler's readiness check: a client hammering a server that is
    not ready yet still spends its tokens."""
    if call.limited and limiter is not None and not limiter.allow():
        return ResourceExhausted(texts.rate_limited, retry_after=limiter.retry_after())
    if call.gated and not cache.ready:
        return FailedPrecondition(texts.not_synced, retry_after=NOT_SYNCED_RETRY_AFTER)
    return None
