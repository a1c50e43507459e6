"""Python's cyclic garbage collector, kept from walking what is never garbage.

A full (generation 2) collection walks every object the collector tracks, on the one loop every
surface shares. A server at 5,000 pods tracks ~160,000, most of them the modules, classes and
functions it imported and the state it built at start-up; a full pass over them took 100-200 ms
(measured under a burst of Lists, where it held `/healthz`, gRPC health and live watches for as
long: BENCHMARKS.md, "Health under a burst of Lists"). Frozen once the sources have first
synced (gc.freeze: moved to a permanent generation no collection walks), a pass walks only what
was made since. Freed by reference counting, as nearly all of it is, a frozen object still goes
when its last reference does; only a reference cycle among the objects of the start-up is left
uncollected, and the start-up makes none that it drops.
"""

from __future__ import annotations

import gc
from collections.abc import Callable


def freezer() -> Callable[[bool], None]:
    """A readiness callback that freezes what the collector tracks the first time it is told
    ready; later changes of readiness freeze nothing more (what a running server makes is the
    collector's to walk)."""
    frozen = False

    def on_readiness(ready: bool) -> None:
        nonlocal frozen
        if ready and not frozen:
            frozen = True
            gc.freeze()

    return on_readiness
