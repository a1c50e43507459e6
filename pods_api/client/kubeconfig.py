"""`pods-api kubeconfig`: a kubeconfig for the Kubernetes view on `--http-listen`, one that
every Kubernetes client tried accepts as it is: kubectl (and so client-go's clientcmd), the
`kubernetes` Python client, lightkube, kr8s and `@kubernetes/client-node`.

The server is plain HTTP on loopback, so there is no certificate to verify. The cluster still
says `insecure-skip-tls-verify: true`: client-node 1.x refuses an `http://` server unless it is
set ("HTTP protocol is not allowed when skipTLSVerify is not set or false"), and it changes
nothing for the others, which speak no TLS to an `http://` server either. No credentials: the
view takes none.
"""

from __future__ import annotations

import argparse
import ipaddress
import sys
from typing import Any

from pods_api.client.exitcodes import Exit

# The names of the cluster, user and context: one of each, for this node's view.
NAME = "pods-api"


def kubeconfig(server: str, name: str = NAME) -> dict[str, Any]:
    cluster = {"server": server, "insecure-skip-tls-verify": True}
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": cluster}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
        "users": [{"name": name, "user": {}}],
        "current-context": name,
        "preferences": {},
    }


def server_url(listen: str) -> str:
    """`HOST:PORT` as `--http-listen` takes it, as the URL a client uses: loopback only, since
    that is all the listener binds."""
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{listen!r} is not HOST:PORT (as --http-listen takes it)")
    host = host.strip("[]")
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise ValueError(f"{host!r} is not a loopback address: --http-listen serves loopback only")
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


def add_command(commands: Any) -> None:
    command = commands.add_parser(
        "kubeconfig",
        help="print a kubeconfig for the Kubernetes view on --http-listen",
        description="Print a kubeconfig that kubectl, client-go, the Python client, lightkube, kr8s "
        "and @kubernetes/client-node accept for `pods-api serve --http-listen HOST:PORT`.",
    )
    command.add_argument(
        "--http-listen",
        default="127.0.0.1:8080",
        metavar="HOST:PORT",
        help="the server's --http-listen (default 127.0.0.1:8080)",
    )
    command.add_argument("--name", default=NAME, help=f"the cluster, user and context name (default {NAME})")
    command.set_defaults(run=_run)


async def _run(args: argparse.Namespace) -> int:
    try:
        url = server_url(args.http_listen)
    except ValueError as exc:
        print(f"pods-api kubeconfig: {exc}", file=sys.stderr)
        return Exit.USAGE
    import yaml  # here: the probes' commands (check, get) load no YAML

    sys.stdout.write(yaml.safe_dump(kubeconfig(url, args.name), sort_keys=False))
    return Exit.OK
