"""The gateway's HTTP/1.1 connections: uvicorn's h11 protocol, with what a socket that any agent
can open needs (core/policy/connections.py says why each limit and what value):

- a request head must arrive within the header timeout, on a new connection and on every
  keep-alive request after the first (uvicorn's keep-alive timeout only covers idleness, and a
  client dribbling a header byte every few seconds resets it);
- at most `max_connections` open at once: one more is answered 503 and closed at once, so the
  descriptor limit is never reached;
- a streaming response (a watch) whose client has read nothing for the send timeout can still end
  with its last words (`ConnectionHooks.last_words`, hooks.py): the final ERROR event is queued
  behind what the client has not read, past flow control, and the connection is closed once it
  is read, or aborted LINGER seconds later if it never is;
- a response whose client takes nothing for the send timeout is dropped with its connection,
  and what the connection still buffers of it with it: a large List's slice that waits that
  long (`ConnectionHooks.drop`, for gateway/http/body.py), or a complete response left unread
  in the buffer (one that goes whole), so a client that asks and never reads holds nothing for long;
- the writes of one loop iteration leave in one system call (`JoinedWrites`): a response's head
  and body, or the SSE frames queued for one watcher, instead of one each;
- a request whose body turns out malformed (a bad chunk) while the app is answering it ends
  that connection quietly, instead of uvicorn answering 400 under the app's feet and logging
  "Exception in ASGI application";
- an upgrade request (`kubectl exec`, `attach`, `port-forward`: WebSocket, then SPDY) is
  answered as plain HTTP, where the Kubernetes view refuses it saying what serves it instead,
  without uvicorn's "Unsupported upgrade request." warning for each: nothing here upgrades, and
  the client was told why (the process serves with `ws="none"`).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any, ClassVar

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol, RequestResponseCycle

from pods_api.core.policy.connections import (
    DEFAULT_HEADER_TIMEOUT,
    DEFAULT_SEND_TIMEOUT,
    MAX_CONNECTIONS_CEILING,
)
from pods_api.core.policy.throttled_log import ThrottledLog
from pods_api.gateway.http.errors import Code, error_body
from pods_api.gateway.server.hooks import offer

log = logging.getLogger(__name__)

# A connection over the cap gets this much of an answer before it is closed: a client that
# reads it knows to retry later rather than suspect the network.
_RETRY_AFTER = 1
_FULL_BODY = error_body(Code.UNAVAILABLE, "too many open connections; retry later", 503)
FULL_RESPONSE = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
    b"grpc-status: %d\r\nretry-after: %d\r\nconnection: close\r\ncontent-length: %d\r\n\r\n%s"
    % (Code.UNAVAILABLE.number, _RETRY_AFTER, len(_FULL_BODY), _FULL_BODY)
)
# How long last words wait to be read before the connection is dropped: as long again as the
# client was given to read anything at all.
LINGER = 30.0
_FULL_LOG = ThrottledLog(log)
_SLOW_LOG = ThrottledLog(log)
_UNREAD_LOG = ThrottledLog(log)


@dataclass(frozen=True, slots=True)
class _CycleHooks:
    """The ConnectionHooks (hooks.py) of one request-response cycle of a connection."""

    connection: GatewayConnection
    cycle: RequestResponseCycle

    @property
    def send_timeout(self) -> float:
        return self.connection.send_timeout

    def drop(self) -> None:
        self.connection._drop(self.cycle)

    def last_words(self, data: bytes) -> bool:
        return self.connection._last_words(self.cycle, data)


# Writes up to this size wait for the rest of their loop iteration, to leave with what follows
# (a response head with its body); a bigger one goes at once, since joining would copy it.
JOIN_LIMIT = 64 * 1024


class JoinedWrites:
    """The connection's transport, with the writes made in one loop iteration joined into one.

    uvicorn writes a response's head and its body separately, and each write is a system call
    that wakes the client: for a Get, half of the server's CPU. Held bytes go out at the end of
    the response (`flush`), on the next write that would not join, or at the start of the next
    loop iteration, so nothing waits on a client or a timer."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self.transport = transport
        self._loop = loop
        self._held: list[bytes] = []
        self._size = 0

    def write(self, data: bytes) -> None:
        if not data:
            return
        if self._size + len(data) > JOIN_LIMIT:
            self.flush()
            self.transport.write(data)
            return
        if not self._held:
            self._loop.call_soon(self.flush)
        self._held.append(data)
        self._size += len(data)

    def flush(self) -> None:
        if not self._held:
            return
        held, self._held, self._size = self._held, [], 0
        self.transport.write(held[0] if len(held) == 1 else b"".join(held))

    def close(self) -> None:
        self.flush()
        self.transport.close()

    def abort(self) -> None:
        self._held, self._size = [], 0
        # Closing with nothing left to write, the connection ends by itself: nothing to abort.
        # (asyncio's transport, closed with bytes still buffered, lets go of its loop once they
        # are written, and its abort() then fails on the None loop.)
        if self.transport.is_closing() and not self.transport.get_write_buffer_size():
            return
        self.transport.abort()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.transport, name)


class GatewayConnection(H11Protocol):
    """Configure with `configured(header_timeout, max_connections, send_timeout)`; uvicorn
    builds one per connection with its own arguments."""

    header_timeout: ClassVar[float] = DEFAULT_HEADER_TIMEOUT
    max_connections: ClassVar[int] = MAX_CONNECTIONS_CEILING
    send_timeout: ClassVar[float] = DEFAULT_SEND_TIMEOUT

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None
        self._head_cycle: object = None
        self._unread_timer: asyncio.TimerHandle | None = None

    @classmethod
    def configured(
        cls, header_timeout: float, max_connections: int, send_timeout: float = DEFAULT_SEND_TIMEOUT
    ) -> type[GatewayConnection]:
        attributes = {
            "header_timeout": header_timeout,
            "max_connections": max_connections,
            "send_timeout": send_timeout,
        }
        return type(cls.__name__, (cls,), attributes)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if len(self.connections) >= self.max_connections:
            _FULL_LOG.warning(f"refused an HTTP connection: {self.max_connections} are open (the cap)")
            self.transport = transport  # connection_lost runs on it
            transport.write(FULL_RESPONSE)
            transport.close()
            return
        super().connection_made(JoinedWrites(transport, self.loop))  # type: ignore[arg-type]
        self._await_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_waiting()
        if self._unread_timer is not None:
            self._unread_timer.cancel()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._head_timer is None and (self.cycle is None or self.cycle.response_complete):
            self._await_head()  # the next request on a keep-alive connection has begun
        super().data_received(data)
        if self._head_timer is not None and self.cycle is not self._head_cycle:
            self._stop_waiting()  # its head is complete: the app has it

    def on_response_complete(self) -> None:
        self.transport.flush()  # type: ignore[attr-defined]
        if self._unread_timer is None:
            self._watch_unread(self.transport.get_write_buffer_size())
        super().on_response_complete()

    def _watch_unread(self, before: int) -> None:
        """What the client has not read of a complete response must shrink every send timeout,
        or the connection is dropped: a client that stops reading holds nothing for long."""
        self._unread_timer = None
        if not before or self.transport.is_closing():  # a closing one ends by itself (LINGER)
            return
        self._unread_timer = self.loop.call_later(self.send_timeout, self._check_unread, before)

    def _check_unread(self, before: int) -> None:
        now = self.transport.get_write_buffer_size()
        if now and now >= before and not self.transport.is_closing():
            seconds = self.send_timeout
            _UNREAD_LOG.warning(
                f"dropped an HTTP connection whose client took nothing of a response for {seconds:g} s"
            )
            self.transport.abort()
            return
        self._watch_unread(now)

    def handle_events(self) -> None:
        before = self.cycle
        super().handle_events()
        cycle = self.cycle
        if cycle is not None and cycle is not before:  # a request just began; its app has not run
            offer(cycle.scope, _CycleHooks(self, cycle))  # type: ignore[arg-type]

    def _last_words(self, cycle: RequestResponseCycle, data: bytes) -> bool:
        """End `cycle`'s streaming response with `data`, without waiting for the client to make
        room; False if the response cannot take it any more."""
        if cycle is not self.cycle or not cycle.response_started or cycle.response_complete:
            return False
        if self.transport.is_closing():
            return False
        self.transport.write(self.conn.send(h11.Data(data=data)) + self.conn.send(h11.EndOfMessage()))
        cycle.response_complete = True
        cycle.keep_alive = False
        self.transport.close()  # after the buffered bytes are written
        self.loop.call_later(LINGER, self.transport.abort)
        return True

    def _drop(self, cycle: RequestResponseCycle) -> None:
        """Abort the connection under `cycle`'s response, dropping what it buffers; whatever
        the app sends next is dropped, as for a client that left."""
        cycle.disconnected = True
        cycle.keep_alive = False
        cycle.message_event.set()
        self.transport.abort()

    def send_400_response(self, msg: str) -> None:
        cycle = self.cycle
        if cycle is None or cycle.response_complete:
            super().send_400_response(msg)  # a bad request head: nothing else answers it
            return
        # The app is answering this request; its body is broken. Whatever the app sends next
        # is dropped (as for a client that left), and the connection ends.
        if not cycle.response_started:
            super().send_400_response(msg)
        else:
            self.transport.close()
        cycle.disconnected = True
        cycle.message_event.set()

    def _unsupported_upgrade_warning(self) -> None:
        """The request goes on as plain HTTP and its answer says why (see the docstring)."""
        log.debug("answered an upgrade request as plain HTTP")

    def _await_head(self) -> None:
        self._stop_waiting()
        self._head_cycle = self.cycle
        self._head_timer = self.loop.call_later(self.header_timeout, self._head_too_slow)

    def _stop_waiting(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_too_slow(self) -> None:
        self._head_timer = None
        if not self.transport.is_closing():
            _SLOW_LOG.warning(
                f"closed an HTTP connection that sent no request head within {self.header_timeout:g} s"
            )
            self.transport.close()
