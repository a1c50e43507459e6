"""The C heap gives freed response buffers back to the system (pods_api/serve/heap.py), in a fresh
interpreter so that nothing else has moved glibc's thresholds."""

from __future__ import annotations

import subprocess
import sys

import pytest

from pods_api.serve import heap

pytestmark = pytest.mark.skipif(heap._LIBC is None, reason="the C library is not glibc")

# A List of thousands of pods freed once (16 MiB), then a burst of 1 MiB buffers (grpc's and
# the HTTP server's copies of responses) freed: how many MiB RSS keeps of the burst.
_BURST = """
import sys
from pods_api.serve import heap
def rss() -> int:
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) // 1024
    raise SystemExit("no VmRSS")

large = bytes(16 << 20)
del large
before = rss()
burst = [b"x" * (1 << 20) for _ in range(24)]  # written: resident
del burst
if sys.argv[1] == "trimmed":
    heap.trim()
print(rss() - before)
"""


def kept_mib(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", _BURST, mode], capture_output=True, text=True, check=True)
    return int(out.stdout)


def test_a_trim_gives_freed_response_buffers_back_to_the_system() -> None:
    assert kept_mib("trimmed") < 4
    # What the trim is for: glibc keeps the burst once a large block has gone.
    assert kept_mib("kept") > 16
