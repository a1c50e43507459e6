"""The kubelet's own status messages on its Pods API (v1.37.2: `pkg/kubelet/apis/pods/server.go`,
and its rate limit in `pkg/kubelet/apis/grpc`), which pods-api gives on the kubelet's two gRPC
contracts (`v1alpha1.Pods` and the documented `Pods`): a client written against a real kubelet
that shows, logs or matches them finds the same words here. Our own surfaces (the HTTP gateway,
PodLookup) keep our texts, which say more, except for a watch dropped as the kubelet drops it
(`--watch-overflow drop`), which ends in the kubelet's words everywhere. docs/grpc-api.md lists
where we still differ, and why.
"""

from __future__ import annotations

from pods_api.core.api.statuserrors import ECHO_LIMIT

# FAILED_PRECONDITION on every method until the kubelet's pod sources are ready.
INITIALIZING = "Kubelet is initializing"
# RESOURCE_EXHAUSTED from the token bucket in front of List and Get.
RATE_LIMITED = "rejected by rate limit"
# RESOURCE_EXHAUSTED ending a watch whose channel was closed under it: a full channel (its
# client fell behind), or the kubelet stopping.
CHANNEL_CLOSED = "watch client channel closed"


def pod_not_found(uid: str) -> str:
    """NOT_FOUND of GetPod. The kubelet echoes the UID whole; past ECHO_LIMIT we cut it (and say
    so), so that a 1 MB UID cannot make the status too large for the client's trailer limit."""
    if len(uid) > ECHO_LIMIT:
        uid = f"{uid[:ECHO_LIMIT]}… ({len(uid)} characters)"
    return f"pod with UID {uid} not found"
