"""The kubelet's crash-loop back-off, counted again from what the runtime shows.

The kubelet keeps a back-off per container in memory (kuberuntime_manager.go doBackOff, over
client-go's flowcontrol.Backoff, built in kubelet.go): when a container that must restart has
exited, it restarts it at once if it has no back-off yet, or if the container ran more than
10 minutes since the last restart (the entry expired); then the back-off is 10 s. Otherwise it
waits out the back-off counted from the exit, and the next back-off doubles, to at most 5 min.
While it waits the status says `waiting: CrashLoopBackOff` with "back-off 40s restarting
failed container=NAME pod=NAME_NAMESPACE(UID)" (status.py `back_off_message`).

The runtime shows each attempt as a container with the kubelet's restart count annotation, its
creation and its exit: the attempt with count 0 is restarted at once; an attempt that ran
longer than the expiry resets the back-off; every other exit is waited on, with the back-off
after the previous exit. `CrashLoops` follows that from one relist to the next. Where it did
not see the previous exit (pods-api started in the middle of a crash loop), it assumes every
earlier attempt crashed quickly: 10 s doubled per restart since the first. What it cannot see:
a kubelet restart, which forgets the back-offs (the kubelet restarts at once then).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pods_api.sources.cri.status import Container, ContainerState

SECOND = 1_000_000_000
# kubelet.go initialCrashLoopBackOff (ReduceDefaultCrashLoopBackOffDecay is alpha and off).
INITIAL = 10
# v1beta1.MaxContainerBackOff, the cap (KubeletCrashLoopBackOffMax is alpha and off).
MAXIMUM = 300
# The kubelet's HasExpiredFunc: a container that ran this long since the last restart has left
# the crash loop, and its back-off starts again.
EXPIRY = 600 * SECOND


@dataclass(frozen=True, slots=True)
class _Entry:
    restart_count: int  # of the attempt whose exit set `after`
    after: int  # the back-off, in seconds, the kubelet holds after that exit


def _assumed(restart_count: int) -> int:
    """The back-off after the exit of attempt `restart_count`, had every attempt crashed fast."""
    return min(MAXIMUM, INITIAL << min(restart_count, 16))


class CrashLoops:
    """Per pod UID and container: the back-off the kubelet holds, from the exits seen."""

    def __init__(self) -> None:
        self._entries: dict[tuple[str, str, str], _Entry] = {}
        self._shown: dict[str, int] = {}  # exited container id -> the back-off it waits out

    def observe(self, containers: Mapping[str, Iterable[Container]]) -> dict[str, int]:
        """The exited containers (by id) the kubelet waits to restart, with the back-off in
        seconds; `containers` is every runtime container by pod UID, from one relist. Only
        exits cost anything: a node of running containers is a dictionary copy per relist."""
        entries = {key: entry for key, entry in self._entries.items() if key[0] in containers}
        exits = [
            (uid, c) for uid, items in containers.items() for c in items if c.state is ContainerState.EXITED
        ]
        shown: dict[str, int] = {}
        for uid, c in sorted(exits, key=lambda e: (e[1].restart_count, e[1].created_at)):
            key = (uid, c.kind, c.name)
            entry, wait = self._exit(c, entries.get(key))
            if entry is not None:
                entries[key] = entry
            if wait:
                shown[c.id] = wait
        self._entries = entries
        self._shown = shown
        return shown

    def _exit(self, c: Container, entry: _Entry | None) -> tuple[_Entry | None, int]:
        """The entry after this exit, and the back-off it is waited on (0: restarted at once)."""
        if entry is not None and entry.restart_count >= c.restart_count:
            return entry, self._shown.get(c.id, 0)  # seen before
        if c.restart_count == 0 or c.finished_at - c.created_at > EXPIRY:
            return _Entry(c.restart_count, INITIAL), 0
        before = entry.after if entry is not None and entry.restart_count == c.restart_count - 1 else None
        wait = before if before is not None else _assumed(c.restart_count - 1)
        return _Entry(c.restart_count, min(MAXIMUM, wait * 2)), wait
