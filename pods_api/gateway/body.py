"""A response body that many callers share: a List assembled once per snapshot and view.

Handed whole to the server, every caller's connection would make its own copy of it (h11 joins
what it frames, and the transport buffers what the client has not read yet): eight callers of a
46 MB PodList held eight copies and more. Sent in slices of itself instead, with the server's
flow control between them, each connection holds about one slice beyond its transport's
high-water mark, and the body itself exists once, however many callers read it.
"""

from __future__ import annotations

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

# What one send hands the connection: large enough that a 46 MB body is ~90 sends (each a loop
# round trip), small enough that a connection's copy of it is noise beside the body.
SLICE = 512 * 1024
# A body up to this size goes whole: its copies per connection are small, and one send is one
# round trip (sliced, a 600 KB List measured at a third of the calls per second).
WHOLE = 4 * 1024 * 1024


class SharedBody(Response):
    """`Response(body)`, for a body kept and shared by every caller; a small one goes whole."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = self.body
        if len(body) <= WHOLE:
            await super().__call__(scope, receive, send)
            return
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        # Slices as memoryviews: no copy here; the HTTP/1.1 protocol frames (copies) one at a time.
        whole = memoryview(body)
        for start in range(0, len(body), SLICE):
            end = start + SLICE
            await send({"type": "http.response.body", "body": whole[start:end], "more_body": end < len(body)})
