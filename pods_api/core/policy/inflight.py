"""The bytes of List responses on their way to clients, budgeted per surface.

A List's body is assembled whole and held until its client has taken it: over HTTP until the
last slice is written (gateway/http/body.py), over gRPC until grpc has sent the message. A client
that asks and never reads holds it as long as it stays connected, and every distinct view (a
selector, a mask) is a body of its own: 30 such clients over 10,000 pods held 1.1 GB.
So each surface counts the bodies it is sending, each once however many clients share it (it
exists once), and refuses a List whose new body would take it past its budget, with
RESOURCE_EXHAUSTED and a hint to retry, rather than let any local user push the server out of
memory. One body alone is always admitted, however large: a node's List must stay possible.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pods_api.core.api.statuserrors import ResourceExhausted

MIB = 1024 * 1024
# Per surface: a 10,000-pod node's whole List is ~33 MB, so three distinct views of it (or any
# number of clients sharing them) at once, and with the other surface's budget and the cache
# itself, a server under such a burst stays within a few hundred MB.
LIST_BYTES_IN_FLIGHT = 96 * MIB
# What a refused client is told to wait: a body that is being read goes in well under a second
# on a node-local socket; one that is not is dropped after the send timeout.
RETRY_AFTER = 1.0


@dataclass(slots=True)
class _Held:
    body: bytes  # kept, so that its id cannot be reused while it counts (grpc copies a message)
    holds: int = 0


class BytesInFlight:
    """The List bodies one surface is sending, by identity: `hold` one for as long as it is sent."""

    def __init__(self, surface: str, budget: int = LIST_BYTES_IN_FLIGHT) -> None:
        self.surface = surface
        self.budget = budget
        self.held = 0  # bytes of the distinct bodies held
        self._bodies: dict[int, _Held] = {}  # by id(body)

    def check(self) -> None:
        """Before assembling a List: refused at once when the budget is spent already, so that a
        burst past it does not assemble the bodies it will refuse."""
        if self.held >= self.budget:
            raise self._refusal(0)

    def hold(self, body: bytes) -> Callable[[], None]:
        """Count `body` in flight; returns what lets it go (once; later calls do nothing).
        Raises ResourceExhausted when it is not in flight yet and would take the surface past
        its budget while others are."""
        key = id(body)
        entry = self._bodies.get(key)
        if entry is None:
            if self.held and self.held + len(body) > self.budget:
                raise self._refusal(len(body))
            entry = self._bodies[key] = _Held(body)
            self.held += len(body)
        entry.holds += 1
        released = False

        def release() -> None:
            nonlocal released
            if released:
                return
            released = True
            entry.holds -= 1
            if not entry.holds:
                del self._bodies[key]
                self.held -= len(entry.body)

        return release

    def _refusal(self, size: int) -> ResourceExhausted:
        this = f", and this one ({size / MIB:.1f} MiB) would pass" if size else ": that is"
        return ResourceExhausted(
            f"{self.held / MIB:.0f} MiB of List responses are on their way to {self.surface} clients"
            f"{this} the budget of {self.budget / MIB:.0f} MiB; retry shortly",
            retry_after=RETRY_AFTER,
        )
