"""A response body that many callers share: a List assembled once per snapshot and view.

Handed whole to the server, every caller's connection would make its own copy of it (h11 joins
what it frames, and the transport buffers what the client has not read yet): eight callers of a
46 MB PodList held eight copies and more. Sent in slices of itself instead, with the server's
flow control between them, each connection holds about one slice beyond its transport's
high-water mark, and the body itself exists once, however many callers read it.

While it is sent it counts against the surface's List budget (core/policy/inflight.py), and a
send its client takes nothing of for the send timeout drops the connection
(`ConnectionHooks.drop`, gateway/server/hooks.py): a client that asks for a List and never
reads it no longer holds the body for as long as it stays connected (30 of them held 1.1 GB).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping

from starlette.background import BackgroundTask
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from pods_api.core.policy.inflight import BytesInFlight
from pods_api.core.policy.throttled_log import ThrottledLog
from pods_api.gateway.server.hooks import ConnectionHooks, connection_hooks

log = logging.getLogger(__name__)

# What one send hands the connection: large enough that a 46 MB body is ~90 sends (each a loop
# round trip), small enough that a connection's copy of it is noise beside the body.
SLICE = 512 * 1024
# A body up to this size goes whole: its copies per connection are small, and one send is one
# round trip (sliced, a 600 KB List measured at a third of the calls per second). What the
# client leaves unread of it is the connection's to drop (GatewayConnection).
WHOLE = 4 * 1024 * 1024
_DROPPED_LOG = ThrottledLog(log)


class SharedBody(Response):
    """`Response(body)`, for a body kept and shared by every caller; a small one goes whole.
    With `lists`, counted in flight from here until sent: raises ResourceExhausted past its
    budget (before anything is sent, so the surface answers it as any error)."""

    def __init__(
        self,
        content: bytes,
        status_code: int = 200,
        headers: Mapping[str, str] | None = None,
        media_type: str | None = None,
        background: BackgroundTask | None = None,
        *,
        lists: BytesInFlight | None = None,
    ) -> None:
        self._release: Callable[[], None] = _nothing  # (set first: __del__ runs if hold raises)
        if lists is not None:
            self._release = lists.hold(content)
        super().__init__(content, status_code, headers, media_type, background)

    def __del__(self) -> None:
        self._release()  # a response never sent (an error after it was made) lets go too

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            body = self.body
            if len(body) <= WHOLE:
                await super().__call__(scope, receive, send)
                return
            await _sliced(self, send, connection_hooks(scope))
        finally:
            self._release()


async def _sliced(response: SharedBody, send: Send, stall: ConnectionHooks | None) -> None:
    """Each send must be taken within the send timeout (it waits while the connection's
    buffer is full), or the connection is dropped, and with it what it holds of the body."""
    body = response.body
    # Slices as memoryviews: no copy here; the HTTP/1.1 protocol frames (copies) one at a time.
    whole = memoryview(body)
    messages: list[Message] = [
        {"type": "http.response.start", "status": response.status_code, "headers": response.raw_headers}
    ]
    messages += (
        {
            "type": "http.response.body",
            "body": whole[start : start + SLICE],
            "more_body": start + SLICE < len(body),
        }
        for start in range(0, len(body), SLICE)
    )
    for message in messages:
        if stall is None:
            await send(message)
            continue
        try:
            async with asyncio.timeout(stall.send_timeout):
                await send(message)
        except TimeoutError:
            _DROPPED_LOG.warning(
                f"dropped a List response whose client took nothing for {stall.send_timeout:g} s"
            )
            stall.drop()
            return


def _nothing() -> None:
    pass
