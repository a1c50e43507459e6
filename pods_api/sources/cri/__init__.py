"""The container runtime's CRI as a pod source: its flags (`flags.py`, which the registry
loads) and the source (`source.py`: the CRI API's generated stubs, the kubelet's status rules),
which loads only once `--cri-socket` is given. What both read is here."""

from __future__ import annotations

from pathlib import Path

# The kubelet's generic PLEG relists every second.
DEFAULT_RELIST = 1.0
# How long a new static pod is held back, unserved, waiting for the runtime to show the uid the
# kubelet runs it under (core/store/identity.py, "Held back"). The kubelet starts a new static
# pod's sandbox within a second or two of reading its manifest, but it may read it up to its
# --file-check-frequency (20 s) late, and after an edit it starts the new pod only once the old
# one has terminated, which takes up to the old pod's grace period (30 s by default): 20 + 30,
# and 10 s for the sandbox itself. A pod still unseen then (one the kubelet refused) is served
# under pods-api's own uid.
DEFAULT_STATIC_WAIT = 60.0


def source_name(socket: Path) -> str:
    return f"cri:{socket}"
