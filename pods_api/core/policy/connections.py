"""How much of the machine a client may hold: descriptors, connections, and how long a
connection may sit idle or dribble its request. Anyone who can open the socket can open a
thousand connections; these keep that from starving everyone else.

Both sockets get the same rules (flags `--header-timeout`, `--idle-timeout`,
`--max-connections`): a request head (HTTP) or the HTTP/2 handshake (gRPC) must arrive within
the header timeout; a connection with nothing in flight is closed after the idle timeout; at
most max-connections are open per surface, counted below the descriptor
limit (which is raised to its hard limit at start), and one more is closed at once (HTTP answers
it 503 first). An accept that fails for want of descriptors is logged once per LOG_EVERY
seconds, never once per attempt.
"""

from __future__ import annotations

import asyncio
import logging
import resource
from typing import Any

from pods_api.core.policy.throttled_log import ThrottledLog

log = logging.getLogger(__name__)

# A request head takes one round trip on a node-local socket; 10 s is ages for any client and
# still frees a slowloris connection's descriptor quickly.
DEFAULT_HEADER_TIMEOUT = 10.0
# An idle keep-alive connection costs a descriptor; agents that poll reconnect in microseconds
# over a UNIX socket, so a minute of idleness means it is abandoned.
DEFAULT_IDLE_TIMEOUT = 60.0
# A watch stream whose client has taken nothing for this long is ended (gRPC) or given its final
# ERROR event and closed (SSE): by then its watcher is cut off, and the connection, its buffers
# and its place among the open watches must be freed too.
DEFAULT_SEND_TIMEOUT = 30.0
# Descriptors kept back from the connection caps: source files and their watches, the metrics
# listener, grpc's own pipes and epoll, the lock files, logs.
RESERVED_DESCRIPTORS = 128
# However high the descriptor limit: past this many connections per surface a node agent is
# leaking them, and each costs memory as well.
MAX_CONNECTIONS_CEILING = 4096
# The fewest connections per surface a server is started with by default: below it, a few
# agents and a probe would be refused (`ulimit -n 64` made the cap 1).
MIN_CONNECTIONS = 16
# When the soft limit cannot be told from the hard one (RLIM_INFINITY), ask for this many.
NOFILE_WANTED = 1 << 20


def raise_descriptor_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard limit (systemd's default soft limit is 1024);
    returns the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = NOFILE_WANTED if hard == resource.RLIM_INFINITY else hard
    if soft != resource.RLIM_INFINITY and soft < wanted:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            soft = wanted
        except (ValueError, OSError) as exc:  # e.g. above fs.nr_open: keep what we have
            log.warning("could not raise the open-file limit from %d to %d: %s", soft, wanted, exc)
    return int(soft)


class TooFewDescriptors(Exception):
    """The open-file limit leaves too few connections: raise it, or set --max-connections."""


def default_max_connections(descriptors: int) -> int:
    """Per surface (gRPC; HTTP on all its listeners), so that both full still leave
    RESERVED_DESCRIPTORS for everything else. Raises TooFewDescriptors below MIN_CONNECTIONS."""
    connections = min(MAX_CONNECTIONS_CEILING, (descriptors - RESERVED_DESCRIPTORS) // 2)
    if connections < MIN_CONNECTIONS:
        needed = RESERVED_DESCRIPTORS + 2 * MIN_CONNECTIONS
        raise TooFewDescriptors(
            f"the open-file limit is {descriptors}; pods-api needs at least {needed} "
            f"({RESERVED_DESCRIPTORS} for its sources, sockets and logs, and {MIN_CONNECTIONS} "
            "connections on each of its two surfaces): raise it (ulimit -n, systemd's "
            "LimitNOFILE=), or give --max-connections"
        )
    return connections


_ACCEPT_LOG = ThrottledLog(log)


def quiet_accept_errors(loop: asyncio.AbstractEventLoop) -> None:
    """asyncio logs a failed accept (EMFILE: out of descriptors) with a traceback every time it
    retries; under a flood of connections that is megabytes a second. One line per LOG_EVERY."""
    previous = loop.get_exception_handler()

    def handle(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        message = str(context.get("message", ""))
        if "accept" in message:
            error = context.get("exception")
            _ACCEPT_LOG.warning(f"cannot accept a connection: {error or message}")
            return
        if previous is not None:
            previous(loop, context)
        else:
            loop.default_exception_handler(context)

    loop.set_exception_handler(handle)
