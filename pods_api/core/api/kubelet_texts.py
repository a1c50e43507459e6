"""The kubelet's own status messages on its Pods API (v1.37.2: `pkg/kubelet/apis/pods/server.go`),
which pods-api gives where it behaves as the kubelet: a client written against a real kubelet
that shows, logs or matches them finds the same words here."""

from __future__ import annotations

# RESOURCE_EXHAUSTED ending a watch whose channel was closed under it: a full channel (its
# client fell behind), or the kubelet stopping.
CHANNEL_CLOSED = "watch client channel closed"
