"""Pod sources. Each is small and owns its retries and backoff; all speak one protocol:

    async def run(self, sink: SourceSink) -> None

`run` hands the source's complete state to `sink.replace(pods)` (or deltas to `sink.upsert` /
`sink.delete`), calls `sink.mark_synced()` once its first state is complete, and runs until
cancelled. A source that fails keeps its last good state: it logs, counts, retries, and never
hands over "no pods" for "could not read".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from pods_api.core.cache import SourceSink

# Told (source name, reason) for every input a source rejects; the server counts them.
ErrorCounter = Callable[[str, str], None]


class Source(Protocol):
    name: str

    async def run(self, sink: SourceSink) -> None: ...
