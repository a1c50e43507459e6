"""The CRI source's flags, and the source they ask for: the registry's module for it (see
`pods_api/sources/__init__.py`). The source itself loads only when `--cri-socket` is given."""

from __future__ import annotations

import argparse
import ipaddress
from pathlib import Path

from pods_api.core import argtypes
from pods_api.sources import Source, SourceContext, connected_gauge
from pods_api.sources.cri import DEFAULT_RELIST, DEFAULT_STATIC_WAIT, source_name

SOURCE_FLAGS: tuple[str, ...] = ("--cri-socket PATH",)


def add_flags(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add(
        "--cri-socket",
        type=Path,
        metavar="PATH",
        help="the container runtime's CRI socket (containerd: /run/containerd/containerd.sock); alone, "
        "every pod sandbox is a pod; with other sources, their pods' status comes from the runtime",
    )
    add(
        "--node-ip",
        type=_node_ips,
        default=(),
        metavar="IP[,IP]",
        help="the node's IP (or its IPv4 and IPv6, comma-separated), as the kubelet's --node-ip: CRI "
        "does not report it; the pods' hostIP(s), and the podIP(s) of pods on the host network "
        "(in a DaemonSet: $(HOST_IP) from status.hostIP)",
    )
    add(
        "--cri-relist",
        type=argtypes.positive,
        default=DEFAULT_RELIST,
        metavar="SECONDS",
        help=f"relist the container runtime this often, as the kubelet's PLEG (default {DEFAULT_RELIST:g})",
    )
    add(
        "--static-pod-uid-wait",
        type=argtypes.positive,
        default=DEFAULT_STATIC_WAIT,
        metavar="SECONDS",
        help="with --manifests or --manifest-url: hold a new static pod back until the runtime shows "
        "the uid the kubelet runs it under, at most this long, then serve it under pods-api's own "
        f"uid (default {DEFAULT_STATIC_WAIT:g})",
    )


def _node_ips(text: str) -> tuple[str, ...]:
    """--node-ip: one IP or two of different families, as the kubelet takes them."""
    try:
        ips = [ipaddress.ip_address(part.strip()) for part in text.split(",")]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not an IP address: {exc}") from None
    if len(ips) > 2 or (len(ips) == 2 and ips[0].version == ips[1].version):
        raise argparse.ArgumentTypeError(f"{text!r}: one IP, or one IPv4 and one IPv6")
    return tuple(str(ip) for ip in ips)


def from_args(args: argparse.Namespace, context: SourceContext) -> list[Source]:
    """A CRISource; the registry makes it an overlay when other sources own pods."""
    if args.cri_socket is None:
        return []
    from pods_api.sources.cri.source import CRISource

    return [
        CRISource(
            args.cri_socket,
            node_name=context.node_name,
            relist=args.cri_relist,
            on_error=context.on_error,
            node_ips=args.node_ip,
            on_connected=connected_gauge(context, source_name(args.cri_socket)),
            static_wait=args.static_pod_uid_wait,
        )
    ]
