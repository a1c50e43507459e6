"""Readiness: the cache is ready once every registered gate has opened.

A gate is one condition: a source's or an overlay's first sync, or a deliberate hold such as
--ready-delay. Listeners hear every change of a gate with whether all are open now; every
surface refuses what needs a synced cache with NOT_SYNCED until then.
"""

from __future__ import annotations

from collections.abc import Callable

# What every surface says while the cache is not ready (gRPC FAILED_PRECONDITION, HTTP 503).
NOT_SYNCED = "pod sources have not finished their initial sync"


class Gate:
    """One condition of readiness: a source's first sync, or a deliberate hold."""

    def __init__(self, readiness: Readiness, name: str) -> None:
        self._readiness = readiness
        self.name = name
        self.open = False

    def set_open(self) -> None:
        if not self.open:
            self.open = True
            self._readiness.changed()


class Readiness:
    """The gates, by name (one each), and who listens to them."""

    def __init__(self) -> None:
        self._gates: list[Gate] = []
        self._listeners: list[Callable[[bool], None]] = []

    def check_new_name(self, name: str) -> None:
        if any(g.name == name for g in self._gates):
            raise ValueError(f"a pod source named {name!r} is already registered")

    def add(self, gate: Gate) -> None:
        self.check_new_name(gate.name)
        self._gates.append(gate)

    def hold(self, name: str) -> Gate:
        """A gate that opens when its holder says so."""
        gate = Gate(self, name)
        self._gates.append(gate)
        return gate

    @property
    def ready(self) -> bool:
        return bool(self._gates) and all(g.open for g in self._gates)

    @property
    def gates(self) -> tuple[Gate, ...]:
        return tuple(self._gates)

    def on_change(self, listener: Callable[[bool], None]) -> None:
        self._listeners.append(listener)

    def changed(self) -> None:
        ready = self.ready
        for listener in self._listeners:
            listener(ready)
