"""What a source says about its inputs: the pods of several inputs combined, a second claim to
a uid (or a name) dropped with a problem naming both, and each problem logged and counted once.

    unique_pods(groups, by_name=...) -> pods, problems   drop a second claim to a uid (or name)
    Reporter                                             logs and counts each problem once
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from pods_api.core.store.version import PodVersion
from pods_api.sources import ErrorCounter

log = logging.getLogger(__name__)


def unique_pods(
    groups: Iterable[tuple[str, list[PodVersion]]], *, by_name: bool, last_wins: bool = False
) -> tuple[list[PodVersion], list[str]]:
    """All pods of (origin, pods) groups, in order, keeping the first claim to each uid (and, when
    `by_name`, to each namespace/name, as the kubelet does for static pods), or with `last_wins`
    the last (the kubelet's file source: a store keyed by namespace/name, filled in file name
    order); problems name both."""
    pods: list[PodVersion] = []
    problems: list[str] = []
    uids: dict[str, str] = {}
    names: dict[tuple[str, str], str] = {}
    ordered = list(groups)
    if last_wins:
        ordered = [(origin, group[::-1]) for origin, group in reversed(ordered)]
    for origin, group in ordered:
        for pod in group:
            key = (pod.namespace, pod.name)
            first = uids.get(pod.uid) or (names.get(key) if by_name else None)
            if first is not None:
                what = f"uid {pod.uid}" if pod.uid in uids else f"name {pod.namespace}/{pod.name}"
                problems.append(
                    f"{origin}: pod {pod.namespace}/{pod.name} ignored: {what} is already served from {first}"
                )
                continue
            uids[pod.uid] = names[key] = origin
            pods.append(pod)
    return (pods[::-1] if last_wins else pods), problems


class Reporter:
    """Logs each distinct problem once while it lasts (not on every resync) and counts it once.

    A source hands over every problem it currently sees with `report(errors, warnings)`; the
    ones it did not report last time are logged and, for errors, passed to `on_error`.
    """

    def __init__(self, source: str, on_error: ErrorCounter | None) -> None:
        self._source = source
        self._on_error = on_error
        self._errors: set[str] = set()
        self._warnings: set[str] = set()

    def report(self, errors: Iterable[str], warnings: Iterable[str] = ()) -> None:
        errors, warnings = set(errors), set(warnings)
        for message in sorted(errors - self._errors):
            log.error("pod source %s: %s", self._source, message)
            self._count(message)
        for message in sorted(warnings - self._warnings):
            log.warning("pod source %s: %s", self._source, message)
        for message in sorted(self._errors - errors):
            log.info("pod source %s: resolved: %s", self._source, message)
        self._errors, self._warnings = errors, warnings

    def attempt_failed(self, message: str) -> None:
        """A fetch that failed: every attempt counts, but an unchanged reason is logged once."""
        if message in self._errors:
            self._count(message)
        self.report([message], self._warnings)

    def _count(self, message: str) -> None:
        if self._on_error is not None:
            self._on_error(self._source, message)
