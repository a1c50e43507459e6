"""Starve a server the way a busy node does: pin it to one CPU beside busy loops pinned there
too, so it gets 1/(loops + 1) of that CPU while it runs (W7; tests/e2e/test_starved.py does the
same). The floor is pinned to the same CPU and starved the same way; the two take turns."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator

_PIN = "import os, sys; os.sched_setaffinity(0, {%d}); os.execvp(sys.argv[1], sys.argv[1:])"
_LOOP = "import os\nos.sched_setaffinity(0, {%d})\nwhile True: pass"


@contextlib.contextmanager
def busy_cpu(loops: int) -> Iterator[tuple[str, ...]]:
    """A command prefix that runs a program pinned to one CPU, kept busy by `loops` processes
    (none: the prefix is empty, nothing is starved)."""
    if loops <= 0:
        yield ()
        return
    cpu = min(os.sched_getaffinity(0))
    busy = [subprocess.Popen([sys.executable, "-c", _LOOP % cpu]) for _ in range(loops)]
    try:
        yield (sys.executable, "-c", _PIN % cpu)
    finally:
        for process in busy:
            process.kill()
            process.wait()
