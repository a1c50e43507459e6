"""Process wiring: one asyncio loop runs the sources, the gRPC server and the HTTP gateway, all
on one shared core (cache, rate limiter, metrics)."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from pathlib import Path
from typing import Any

import grpc
from prometheus_client import start_http_server

from pods_api.core.assembly import Core, build_core
from pods_api.core.config import BRIDGE_SOCKET, DEFAULT_SOCKET, Config
from pods_api.core.grpc.server import create_server
from pods_api.core.policy import connections as limits
from pods_api.core.policy.metrics import event_type_label
from pods_api.core.store.cache import OverlaySink, SourceSink
from pods_api.gateway.app import create_app
from pods_api.gateway.server.runner import GatewayServer, gateway_server
from pods_api.serve import collector, heap, sockets
from pods_api.sources import Source, SourceContext, StatusOverlay, configures_static_pods, registry
from pods_api.sources.supervisor import supervise

log = logging.getLogger(__name__)

# SIGTERM to exit: kubelet and systemd give 30 s, but a node agent should be gone at once; 2 s
# lets open watches hear UNAVAILABLE and in-flight Lists finish.
SHUTDOWN_GRACE = 1.5


class StartupError(Exception):
    """Something the user must fix before the server can start: one line, no traceback, and
    `exit_code` (1; 2 for a configuration that can never be served safely, as a bad flag)."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def build_sources(config: Config, core: Core) -> list[Source]:
    def count(source: str, reason: str) -> None:
        core.metrics.source_errors.labels(source).inc()

    def connected(source: str, up: bool) -> None:
        core.metrics.source_connected.labels(source).set(up)

    def unknown(source: str, number: int) -> None:
        core.metrics.upstream_unknown_events.labels(source, event_type_label(number)).inc()

    context = SourceContext(
        config.node_name, on_error=count, on_connected=connected, on_unknown_event=unknown
    )
    return config.sources(context)


async def serve(config: Config) -> None:
    """Run until SIGTERM or SIGINT. Raises StartupError for what a user must fix."""
    loop = asyncio.get_running_loop()
    limits.quiet_accept_errors(loop)
    descriptors = limits.raise_descriptor_limit()
    if config.max_connections is None:
        try:
            config.max_connections = limits.default_max_connections(descriptors)
        except limits.TooFewDescriptors as exc:
            raise StartupError(str(exc)) from None
    core = build_core(config)
    # Decoding every pod at start-up leaves the heap full of holes: give them back once synced.
    core.cache.on_readiness(lambda ready: heap.trim() if ready else None)
    core.cache.on_readiness(collector.freezer())
    sources = build_sources(config, core)
    if not sources:
        raise StartupError("no pod source configured")
    sources, overlays = registry.split_overlays(sources)
    sinks = [
        (source, core.cache.source(source.name, configures_static_pods=configures_static_pods(source)))
        for source in sources
    ]
    overlay_runs = [(overlay, core.cache.overlay(overlay.name)) for overlay in overlays]
    if config.ready_delay > 0:
        hold = core.cache.hold("ready-delay")
        loop.call_later(config.ready_delay, hold.set_open)

    claims: list[sockets.Claim] = []
    grpc_server: grpc.aio.Server | None = None
    try:
        grpc_server = await _start_grpc(core, claims)
        http = await _start_gateway(core, claims)
        metrics_http = _start_metrics(core)
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(_run_source(s, sink, core), name=s.name) for s, sink in sinks]
            tasks += [group.create_task(_run_overlay(o, sink, core), name=o.name) for o, sink in overlay_runs]
            tasks.append(group.create_task(heap.keep_trimmed(), name="heap trim"))
            log.info("%s", serving_line(config))
            await stop.wait()
            log.info("shutting down")
            await _shutdown(core, grpc_server, http, tasks)
        if metrics_http is not None:
            metrics_http.shutdown()
    except BaseException:
        if grpc_server is not None:
            await grpc_server.stop(None)  # not left to the garbage collector after the loop closes
        raise
    finally:
        for claimed in claims:
            claimed.release()  # removes only the socket files we bound


async def _run_source(source: Source, sink: SourceSink, core: Core) -> None:
    """A source under supervision: its failures restart it, and never end the server."""
    await supervise(source, sink, on_restart=lambda name: core.metrics.source_restarts.labels(name).inc())


async def _run_overlay(overlay: StatusOverlay, sink: OverlaySink, core: Core) -> None:
    """A status overlay under the same supervision as a source."""
    await supervise(overlay, sink, on_restart=lambda name: core.metrics.source_restarts.labels(name).inc())


def _claim(path: Path, config: Config, claims: list[sockets.Claim]) -> sockets.Claim:
    try:
        claimed = sockets.claim(path, config.socket_group)
    except sockets.SocketInUse as exc:
        raise StartupError(str(exc)) from None
    except sockets.UnsafeDirectory as exc:
        raise StartupError(str(exc), exit_code=2) from None
    except PermissionError as exc:
        raise StartupError(_not_permitted(path, exc)) from None
    claims.append(claimed)
    return claimed


# Said of the default paths at start, so that serving there is never a surprise.
_DEFAULT_PATH_NOTE = ": the default, where node agents look for the Pods API (--run-dir DIR serves elsewhere)"


def serving_line(config: Config) -> str:
    """The start-up line: both sockets (and the TCP listener), and whether they are the defaults."""
    also = f", also http://{config.http_listen}" if config.http_listen else ""
    default = _DEFAULT_PATH_NOTE if config.socket in (DEFAULT_SOCKET, BRIDGE_SOCKET) else ""
    return (
        f"serving the Pods API on {config.socket} (gRPC) and {config.http_socket_path} (HTTP{also}){default}"
    )


def _not_permitted(path: Path, exc: PermissionError) -> str:
    """What a user who may not create the socket's directory or files is to do: the default
    paths are root's, and a newcomer meets them first (`pods-api serve --fixtures ...`)."""
    where = exc.filename or path.parent
    said = f"cannot create {where} (for the socket {path}): {exc.strerror}"
    if path.parent in (DEFAULT_SOCKET.parent, BRIDGE_SOCKET.parent):
        why = (
            "without --run-dir or --socket pods-api serves where node agents look for the Pods API "
            f"({path.parent}), which only root may create"
        )
    else:
        why = f"this user (uid {os.geteuid()}) may not write there"
    return f"{said}: {why}; give --run-dir DIR (e.g. --run-dir ./run) for sockets of your own, or run as root"


async def _start_grpc(core: Core, claims: list[sockets.Claim]) -> grpc.aio.Server:
    config = core.config
    claimed = _claim(config.socket, config, claims)
    server = create_server(core)
    try:
        with sockets.private_umask():
            try:
                bound = server.add_insecure_port(f"unix:{claimed.staging}")
            except RuntimeError:  # grpc says why only on its own log
                bound = 0
            if not bound:
                raise StartupError(f"cannot listen on {config.socket}{sockets.bind_problem(claimed.staging)}")
            await server.start()
        sockets.secure(claimed.staging, config.socket_mode, config.socket_group)
        claimed.publish()
    except BaseException:
        await server.stop(None)
        raise
    return server


async def _start_gateway(core: Core, claims: list[sockets.Claim]) -> tuple[GatewayServer, asyncio.Task[None]]:
    config = core.config
    claimed = _claim(config.http_socket_path, config, claims)
    listeners = [sockets.bind_unix(claimed, config.socket_mode, config.socket_group)]
    try:
        if config.http_listen:
            host, port = sockets.parse_loopback(config.http_listen, "--http-listen")
            listeners.append(sockets.bind_tcp(host, port))
    except BaseException:
        for listener in listeners:
            listener.close()
        raise
    server = gateway_server(create_app(core), config)
    task = asyncio.get_running_loop().create_task(server.serve(sockets=listeners))
    return server, task


def _start_metrics(core: Core) -> Any:
    if not core.config.metrics_listen:
        return None
    host, port = sockets.parse_loopback(core.config.metrics_listen, "--metrics-listen")
    server, _thread = start_http_server(port, host, registry=core.metrics.registry)
    return server


async def _shutdown(
    core: Core,
    grpc_server: grpc.aio.Server,
    http: tuple[GatewayServer, asyncio.Task[None]],
    tasks: list[asyncio.Task[None]],
) -> None:
    """Stop accepting, end watches with UNAVAILABLE, stop sources: within SHUTDOWN_GRACE."""
    core.cache.hub.stop()
    http_server, http_task = http
    http_server.should_exit = True
    await asyncio.gather(
        grpc_server.stop(SHUTDOWN_GRACE / 2), asyncio.wait([http_task], timeout=SHUTDOWN_GRACE / 2)
    )
    for task in tasks:
        task.cancel()
