"""What the gateway's HTTP connection (connection.py) offers the response of one request, past
ASGI: how long a send may wait for its client, dropping the connection with what it buffers,
and a stream's last words past flow control. A response that needs one of these asks
`connection_hooks(scope)`; under another ASGI server (a test's) there are none, and it does
without.

The hooks travel in the request scope's `extensions` (the ASGI place for what a server offers
beyond the spec), under one key that only this module reads or writes.
"""

from __future__ import annotations

from typing import Any, Protocol

from starlette.types import Scope

# The scope extension holding a request's ConnectionHooks.
_KEY = "pods_api.connection"


class ConnectionHooks(Protocol):
    @property
    def send_timeout(self) -> float:
        """How long one send may wait for the client to take something (`--send-timeout`)."""
        ...

    def drop(self) -> None:
        """Abort the connection under the response, dropping all it buffers of it; whatever the
        app sends next is dropped, as for a client that left."""
        ...

    def last_words(self, data: bytes) -> bool:
        """End the streaming response with `data` without waiting for the client to make room
        (queued behind what it has not read yet; the connection closes once it is read, or is
        aborted a while later if it never is). False if the response cannot take it any more."""
        ...


def connection_hooks(scope: Scope) -> ConnectionHooks | None:
    """The hooks of the connection serving `scope`; None under an ASGI server without them."""
    hooks: ConnectionHooks | None = scope.get("extensions", {}).get(_KEY)
    return hooks


def offer(scope: dict[str, Any], hooks: ConnectionHooks) -> None:
    """The connection's side: `scope`'s request is served with `hooks`."""
    scope.setdefault("extensions", {})[_KEY] = hooks
