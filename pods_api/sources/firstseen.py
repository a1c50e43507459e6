"""`kubernetes.io/config.seen`: when a static pod's uid was first seen, stamped after decoding.

The kubelet stamps it in its merge of a config source's pods (pkg/kubelet/config/config.go,
`recordFirstSeenTime`), not in the file reader: a uid new to the source gets the time now; a uid
the source already served keeps its time for as long as it stays served, through every edit
that keeps the uid (`checkAndUpdatePod` copies it over); a uid that leaves and comes back is new.

So decoding (`staticpod.py`, in any worker process) writes `PLACEHOLDER` and keeps no state,
and the source's own process stamps the time with `FirstSeen.stamp`. Every time stamped here is
as wide as the placeholder, so the stamp overwrites the placeholder in the encoded bytes (the
protobuf and the JSON) in place, without encoding the pod again: lengths do not move. Where the
bytes do not hold the placeholder exactly once, the pod is encoded again from its message.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection

from pods_api.core.api.pb import k8s_core_v1_pb2
from pods_api.core.store.version import PodVersion

CONFIG_SEEN = "kubernetes.io/config.seen"

# What decoding writes as config.seen: as wide as every time `stamp_time` gives (Go's
# RFC3339Nano with nine digits of nanoseconds), and no time at all, so it is never mistaken for one.
PLACEHOLDER = "0000-00-00T00:00:00.000000000Z"


def stamp_time(ns: int) -> str:
    """Go's time.RFC3339Nano in UTC, as the kubelet writes config.seen, always with nine digits of
    nanoseconds: Go drops trailing zeros, so a time whose last digit is 0 is moved on by a
    nanosecond or two to keep the width (`PLACEHOLDER`'s) that lets a stamp overwrite in place."""
    seconds, nanos = divmod(ns, 1_000_000_000)
    if nanos % 10 == 0:
        nanos += 1
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{nanos:09d}Z"


class FirstSeen:
    """One source's first-seen times, by uid, for the uids it serves."""

    def __init__(self, clock: Callable[[], int] = time.time_ns) -> None:
        self._clock = clock
        self._seen: dict[str, str] = {}

    def stamp(self, pods: list[PodVersion]) -> list[PodVersion]:
        """The pods, each with its uid's first-seen time in place of `PLACEHOLDER` (a uid not
        seen before is seen now)."""
        now: str | None = None
        out = []
        for pod in pods:
            when = self._seen.get(pod.uid)
            if when is None:
                now = now or stamp_time(self._clock())
                when = self._seen[pod.uid] = now
            out.append(with_seen(pod, when))
        return out

    def retain(self, uids: Collection[str]) -> None:
        """Forget the uids no longer served: if one comes back, it is new."""
        self._seen = {uid: when for uid, when in self._seen.items() if uid in uids}

    def times(self) -> dict[str, str]:
        """Every served uid's first-seen time (a copy)."""
        return dict(self._seen)


_KEY_PB = CONFIG_SEEN.encode()
# The map entry as protobuf writes it: field 1 (the key), field 2 (the value), each with its length.
_PB_ENTRY = b"\x0a%c%s\x12%c" % (len(_KEY_PB), _KEY_PB, len(PLACEHOLDER))
_JSON_ENTRY = b'"%s":"' % _KEY_PB
_HOLDER = PLACEHOLDER.encode()


def with_seen(pod: PodVersion, when: str) -> PodVersion:
    """`pod` (decoded with `PLACEHOLDER` as its config.seen) with `when` instead."""
    value = when.encode()
    if len(value) == len(_HOLDER):
        framed = _overwrite(pod.framed, _PB_ENTRY + _HOLDER, _PB_ENTRY + value)
        json_bytes = pod._json
        if json_bytes is not None:
            json_bytes = _overwrite(json_bytes, _JSON_ENTRY + _HOLDER, _JSON_ENTRY + value)
        if framed is not None and (json_bytes is not None or pod._json is None):
            return PodVersion(framed, json_bytes, pod.uid, pod.name, pod.namespace)
    message = k8s_core_v1_pb2.Pod.FromString(pod.pb)
    message.metadata.annotations[CONFIG_SEEN] = when
    return PodVersion.from_message(message)


def _overwrite(data: bytes, old: bytes, new: bytes) -> bytes | None:
    """`data` with its one `old` replaced by `new`; None unless `old` occurs exactly once."""
    at = data.find(old)
    if at < 0 or data.find(old, at + 1) >= 0:
        return None
    return data[:at] + new + data[at + len(old) :]
