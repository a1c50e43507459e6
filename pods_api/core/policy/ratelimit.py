"""Rate limits: the token bucket that List and Get share, as the kubelet's Pods API has it, and
the throttled log line that anything a client can trigger in a loop logs through."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

# The kubelet's defaults for its Pods API: 100 requests a second, bursts of 10.
DEFAULT_QPS = 100.0
DEFAULT_BURST = 10
# At most one log line per this many seconds about one kind of client-caused trouble: enough to
# notice a broken client, too few for one in a loop to fill a disk.
LOG_EVERY = 10.0


class TokenBucket:
    def __init__(self, qps: float, burst: int) -> None:
        if qps <= 0 or burst < 1:
            raise ValueError("a token bucket needs qps > 0 and burst >= 1")
        self.qps = qps
        self.burst = burst
        self._tokens = float(burst)
        self._last = time.monotonic()

    def allow(self) -> bool:
        """Take a token if one is there; never waits."""
        now = time.monotonic()
        self._tokens = min(self.burst, self._tokens + (now - self._last) * self.qps)
        self._last = now
        if self._tokens >= 1:
            self._tokens -= 1
            return True
        return False

    def retry_after(self) -> float:
        """Seconds until the next token."""
        return max(0.0, (1 - self._tokens) / self.qps)


class ThrottledLog:
    """One warning per `every` seconds; the next says how many were left out in between."""

    def __init__(
        self,
        logger: logging.Logger,
        every: float = LOG_EVERY,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._log = logger
        self._every = every
        self._clock = clock
        self._next = 0.0
        self._suppressed = 0

    def warning(self, message: str) -> None:
        now = self._clock()
        if now < self._next:
            self._suppressed += 1
            return
        if self._suppressed:
            message += f" ({self._suppressed} more since the last such line)"
        self._log.warning("%s", message)
        self._next, self._suppressed = now + self._every, 0
