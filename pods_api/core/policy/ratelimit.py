"""Rate limits: the token bucket that List and Get share, as the kubelet's Pods API has it."""

from __future__ import annotations

import time

# The kubelet's defaults for its Pods API: 100 requests a second, bursts of 10.
DEFAULT_QPS = 100.0
DEFAULT_BURST = 10


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
