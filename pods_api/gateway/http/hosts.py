"""DNS-rebinding defence for the loopback TCP listener.

A web page can make a browser send requests to 127.0.0.1 under a hostname the attacker controls
(rebinding its DNS to 127.0.0.1); the browser then treats our answers as that site's and lets
the page read them. The `Host` header still carries the attacker's name, so over TCP only loopback
names are served. The UNIX socket is out of a browser's reach and is not checked.
"""

from __future__ import annotations

import ipaddress

from starlette.responses import Response
from starlette.types import Scope

from pods_api.core.api.statuserrors import quote
from pods_api.gateway.http.errors import Code, error_response


def is_loopback_host(host: str) -> bool:
    """`localhost`, `127.x.x.x` or `[::1]`, each with an optional port."""
    host = host.strip().lower()
    if host.startswith("["):
        address, closed, rest = host[1:].partition("]")
        if not closed or not _is_port_suffix(rest):
            return False
        return _is_loopback_ip(address, version=6)
    name, _, port = host.partition(":")
    if port and not port.isdigit():
        return False
    return name == "localhost" or _is_loopback_ip(name, version=4)


def _is_port_suffix(rest: str) -> bool:
    return rest == "" or (rest.startswith(":") and rest[1:].isdigit())


def _is_loopback_ip(text: str, *, version: int) -> bool:
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return False
    return address.version == version and address.is_loopback


def arrived_over_tcp(scope: Scope) -> bool:
    """ASGI gives a UNIX socket's server as (path, None), or no server at all."""
    server = scope.get("server")
    return server is not None and server[1] is not None


def host_refusal(scope: Scope) -> Response | None:
    """403 PERMISSION_DENIED for a TCP request whose Host is not a loopback name or address; None
    for any other request (gateway/app.py asks first, for every request)."""
    if not arrived_over_tcp(scope):
        return None
    hosts = [value.decode("latin-1") for name, value in scope["headers"] if name == b"host"]
    if len(hosts) == 1 and is_loopback_host(hosts[0]):
        return None
    shown = hosts[0] if len(hosts) == 1 else f"{len(hosts)} Host headers"
    return error_response(
        Code.PERMISSION_DENIED,
        f"Host {quote(shown)} is not a loopback name or address; connect as localhost, 127.0.0.1 or [::1]",
    )
