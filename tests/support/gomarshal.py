"""Go's own bytes for a pod: `v1.Pod.Unmarshal` then `v1.Pod.Marshal`, by k8s.io/api itself
(tests/go/kubelet/cmd/remarshal), so that a test can hold any pod's bytes against what Go writes.

    go_remarshal(pods) -> the same pods as Go's Marshal writes them, in order

One Go process per call, however many pods: a test batches its pods (every vector, every example
of a property test) into one call. The `go_remarshal` fixture builds the program once per session
(skipping, saying why, where go is absent); `remarshal(binary, pods)` is the same call for a test
that has the binary already (the real-kubelet lab, over the kubelet's own pods).
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

# Decoding and encoding a few thousand pods is well under a second; a loaded CI machine is slower.
REMARSHAL_TIMEOUT = 120.0


def _delimited(pods: Sequence[bytes]) -> bytes:
    """Each pod preceded by its length as a varint (protobuf's delimited framing)."""
    out = bytearray()
    for pod in pods:
        size = len(pod)
        while size > 0x7F:
            out.append((size & 0x7F) | 0x80)
            size >>= 7
        out.append(size)
        out += pod
    return bytes(out)


def _undelimited(data: bytes) -> list[bytes]:
    pods, at = [], 0
    while at < len(data):
        size, shift = 0, 0
        while True:
            byte = data[at]
            at += 1
            size |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                break
        pods.append(data[at : at + size])
        at += size
    return pods


def remarshal(binary: Path, pods: Sequence[bytes]) -> list[bytes]:
    """Each pod as Go's `v1.Pod.Marshal()` writes it after `v1.Pod.Unmarshal()` read it. A pod Go
    cannot read fails the call, naming its index."""
    done = subprocess.run(
        [str(binary)], input=_delimited(pods), capture_output=True, timeout=REMARSHAL_TIMEOUT
    )
    if done.returncode != 0:
        raise AssertionError(f"Go could not read a pod we sent: {done.stderr.decode(errors='replace')}")
    out = _undelimited(done.stdout)
    assert len(out) == len(pods), f"remarshal wrote {len(out)} pods for {len(pods)}"
    return out


@pytest.fixture(scope="session")
def go_remarshal(go_build: Callable[[str, str], Path]) -> Callable[[Sequence[bytes]], list[bytes]]:
    """go_remarshal(pods) -> Go's bytes of each pod (`remarshal` with the binary built once)."""
    binary = go_build("kubelet", "./cmd/remarshal")
    return lambda pods: remarshal(binary, pods)
