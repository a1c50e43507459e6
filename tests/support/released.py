"""The kubelet's Pods API event numbers as k8s.io/kubelet released them (pkg/apis/pods/v1alpha1,
v0.36.0 on; the Go tests under tests/go/kubelet build against that module itself). Written out
here, never taken from our generated modules: a test that compares pods-api's frames with our own
pb2 would pass whatever number proto/ held."""

from __future__ import annotations

UNSPECIFIED, ADDED, MODIFIED, DELETED, SYNCED = 0, 1, 2, 3, 4
# Each number's name in the released enum.
NAMES = {
    UNSPECIFIED: "UNSPECIFIED",
    ADDED: "ADDED",
    MODIFIED: "MODIFIED",
    DELETED: "DELETED",
    SYNCED: "INITIAL_SYNC_COMPLETE",
}
