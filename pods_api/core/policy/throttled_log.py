"""The throttled log line that anything a client can trigger in a loop logs through."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

# At most one log line per this many seconds about one kind of client-caused trouble: enough to
# notice a broken client, too few for one in a loop to fill a disk.
LOG_EVERY = 10.0


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
