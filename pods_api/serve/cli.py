"""`pods-api serve`: the command line. Errors in flags or files are one line and a non-zero exit."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import faulthandler
import functools
import logging
import os
import re
import socket
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pods_api import __version__
from pods_api.client import commands as client_cli
from pods_api.client.exitcodes import HELP as CLIENT_EXIT_CODES

if TYPE_CHECKING:
    from pods_api.core.config import Config

GRPC_SOCKET_NAME = "pods-api.sock"


def _parser(serve_flags: bool = True) -> argparse.ArgumentParser:
    """The command line; the serve command's flags (which load every source's module) only with
    `serve_flags`: the client commands and --version need none of it."""
    parser = argparse.ArgumentParser(
        prog="pods-api",
        description="The kubelet's node-local Pods API.",
        epilog=CLIENT_EXIT_CODES.replace("exit codes:", "exit codes of get, watch and check:", 1),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"pods-api {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="serve the Pods API (gRPC) and its HTTP gateway")
    if serve_flags:
        _add_serve_flags(serve)
    client_cli.add_commands(commands)
    return parser


def _add_serve_flags(serve: argparse.ArgumentParser) -> None:
    from pods_api.core.argtypes import mode as _mode
    from pods_api.core.argtypes import non_negative as _non_negative
    from pods_api.core.argtypes import positive as _positive
    from pods_api.core.argtypes import positive_int as _positive_int
    from pods_api.core.config import (
        BRIDGE_SOCKET,
        DEFAULT_MAX_WATCHERS,
        DEFAULT_SOCKET,
        DEFAULT_WATCH_BUFFER,
        HTTP_SOCKET_NAME,
    )
    from pods_api.core.policy.connections import (
        DEFAULT_HEADER_TIMEOUT,
        DEFAULT_IDLE_TIMEOUT,
        DEFAULT_SEND_TIMEOUT,
        MAX_CONNECTIONS_CEILING,
    )
    from pods_api.core.policy.inflight import LIST_BYTES_IN_FLIGHT, MIB
    from pods_api.core.policy.ratelimit import DEFAULT_BURST, DEFAULT_QPS
    from pods_api.core.store.watch import Overflow
    from pods_api.sources import registry

    serve.description = f"Serve the Pods API from one or more pod sources ({registry.source_flags()})."
    add = serve.add_argument
    add("--node-name", help="this node's name (default: the host name)")
    registry.add_flags(serve)
    add(
        "--run-dir",
        type=Path,
        metavar="DIR",
        help=f"put every socket under DIR ({GRPC_SOCKET_NAME}, {HTTP_SOCKET_NAME}), for unprivileged use",
    )
    add(
        "--socket",
        type=Path,
        help=f"the gRPC socket (default {DEFAULT_SOCKET}; with --kubelet-socket, {BRIDGE_SOCKET})",
    )
    add(
        "--http-socket",
        type=Path,
        help=f"the gateway's socket (default: {HTTP_SOCKET_NAME} next to --socket)",
    )
    add("--http-listen", metavar="HOST:PORT", help="also serve the gateway on loopback TCP")
    add("--socket-mode", type=_mode, default=0o600, metavar="OCTAL", help="socket file mode (default 0600)")
    add("--socket-group", metavar="GROUP", help="socket file group (name or gid)")
    add(
        "--qps",
        type=_non_negative,
        default=DEFAULT_QPS,
        help=f"List, Get and Lookup rate limit per second, shared (default {DEFAULT_QPS:g}; 0 turns it off)",
    )
    add(
        "--burst",
        type=_positive_int,
        default=DEFAULT_BURST,
        help=f"rate limit burst (default {DEFAULT_BURST})",
    )
    add(
        "--watch-buffer",
        type=_positive_int,
        default=DEFAULT_WATCH_BUFFER,
        metavar="EVENTS",
        help="events queued for a watcher as published; past them, its events are coalesced to one "
        f"per pod, the newest, or with --watch-overflow drop it is dropped (default {DEFAULT_WATCH_BUFFER})",
    )
    add(
        "--watch-overflow",
        choices=[overflow.value for overflow in Overflow],
        default=Overflow.COALESCE.value,
        help="a watcher whose --watch-buffer is full: coalesce its events per pod (ours, the default), "
        "or drop it as the kubelet does (its watch ends with RESOURCE_EXHAUSTED 'watch client channel "
        "closed'), to test a client's reconnect path",
    )
    add(
        "--max-watchers",
        type=_positive_int,
        default=DEFAULT_MAX_WATCHERS,
        help=f"concurrent watches (default {DEFAULT_MAX_WATCHERS})",
    )
    add(
        "--heartbeat",
        type=_positive,
        default=15.0,
        metavar="SECONDS",
        help="SSE comment heartbeat interval (default 15)",
    )
    add(
        "--header-timeout",
        type=_positive,
        default=DEFAULT_HEADER_TIMEOUT,
        metavar="SECONDS",
        help="close a connection whose request head (gRPC: handshake) takes longer "
        f"(default {DEFAULT_HEADER_TIMEOUT:g})",
    )
    add(
        "--idle-timeout",
        type=_positive,
        default=DEFAULT_IDLE_TIMEOUT,
        metavar="SECONDS",
        help=f"close a connection with nothing in flight this long (default {DEFAULT_IDLE_TIMEOUT:g})",
    )
    add(
        "--send-timeout",
        type=_positive,
        default=DEFAULT_SEND_TIMEOUT,
        metavar="SECONDS",
        help=f"end a watch whose client has taken nothing this long (default {DEFAULT_SEND_TIMEOUT:g})",
    )
    add(
        "--list-budget",
        type=_positive_int,
        default=LIST_BYTES_IN_FLIGHT // MIB,
        metavar="MIB",
        help="refuse a List whose response would take those on their way to clients past this many "
        f"MiB, per surface (default {LIST_BYTES_IN_FLIGHT // MIB})",
    )
    add(
        "--max-connections",
        type=_positive_int,
        metavar="N",
        help="open connections per surface, gRPC and HTTP (default: from the open-file limit, at most "
        f"{MAX_CONNECTIONS_CEILING})",
    )
    add("--metrics-listen", metavar="HOST:PORT", help="serve /metrics on loopback TCP as well")
    add(
        "--ready-delay",
        type=_non_negative,
        default=0.0,
        metavar="SECONDS",
        help="hold readiness back this long after start (to exercise FAILED_PRECONDITION)",
    )
    add("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    add("--log-format", default="text", choices=["text", "json"])


def config_from_args(args: argparse.Namespace) -> Config:
    from pods_api.core.config import BRIDGE_SOCKET, DEFAULT_SOCKET, HTTP_SOCKET_NAME, Config
    from pods_api.core.policy.inflight import MIB
    from pods_api.core.store.watch import Overflow
    from pods_api.serve import sockets
    from pods_api.sources import SourceContext, registry

    kubelet_socket: Path | None = args.kubelet_socket
    default_socket = BRIDGE_SOCKET if kubelet_socket else DEFAULT_SOCKET
    grpc_socket = args.socket or (args.run_dir / GRPC_SOCKET_NAME if args.run_dir else default_socket)
    http_socket = args.http_socket or (args.run_dir / HTTP_SOCKET_NAME if args.run_dir else None)
    if kubelet_socket is not None:
        for ours in (grpc_socket, http_socket or grpc_socket.parent / HTTP_SOCKET_NAME):
            if _same_file(ours, kubelet_socket):
                raise ValueError(
                    f"--kubelet-socket {kubelet_socket} is also where pods-api would serve ({ours}): "
                    "our socket must never be the kubelet's; give --socket or --run-dir elsewhere"
                )
    sockets.check_path(grpc_socket, "--socket")
    if http_socket is not None:
        sockets.check_path(http_socket, "--http-socket")
    elif args.socket is not None:
        sockets.check_path(grpc_socket.parent / HTTP_SOCKET_NAME, "--socket (its HTTP socket beside it)")
    for flag in ("http_listen", "metrics_listen"):
        value = getattr(args, flag)
        if value is not None:
            sockets.parse_loopback(value, "--" + flag.replace("_", "-"))
    node_name = (args.node_name or socket.gethostname()).lower()
    # Built once here to check every source flag before anything starts (ValueError: exit 2);
    # the server builds them again with its error counters.
    if not registry.from_args(args, SourceContext(node_name)):
        raise ValueError(f"no pod source: give at least one of {registry.source_flags()}")
    return Config(
        node_name=node_name,
        socket=grpc_socket,
        http_socket=http_socket,
        http_listen=args.http_listen,
        socket_mode=args.socket_mode,
        socket_group=args.socket_group,
        qps=args.qps,
        burst=args.burst,
        watch_buffer=args.watch_buffer,
        watch_overflow=Overflow(args.watch_overflow),
        max_watchers=args.max_watchers,
        metrics_listen=args.metrics_listen,
        ready_delay=args.ready_delay,
        heartbeat=args.heartbeat,
        sources=functools.partial(registry.from_args, args),
        header_timeout=args.header_timeout,
        idle_timeout=args.idle_timeout,
        send_timeout=args.send_timeout,
        list_budget=args.list_budget * MIB,
        max_connections=args.max_connections,
    )


def _same_file(a: Path, b: Path) -> bool:
    """Whether two paths name one file, through symlinks and relative paths, existing or not."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    parser = _parser(serve_flags=_command(argv) == "serve")
    args, extra = parser.parse_known_args(argv)
    # `get pod -n NAMESPACE NAME`, as kubectl takes it: argparse binds the positionals before an
    # option and leaves a NAME after it over (a long-standing argparse limit): picked up here.
    if args.command == "get" and args.uid is None and len(extra) == 1 and not extra[0].startswith("-"):
        args.uid = extra.pop()
    if extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if args.command != "serve":
        raise SystemExit(client_cli.run(args))
    _setup_logging(args.log_level, args.log_format)
    try:
        config = config_from_args(args)
        if config.socket_group is not None:
            from pods_api.serve import sockets

            sockets.resolve_group(config.socket_group)
    except ValueError as exc:
        parser.error(str(exc))
    from pods_api.serve import heap
    from pods_api.serve.process import StartupError, serve

    heap.limit_arenas()  # before grpc starts its threads
    # A fatal signal (a C library's failed allocation) then says where, on stderr.
    faulthandler.enable()
    try:
        asyncio.run(serve(config))
    except MemoryError:
        print("pods-api: out of memory (an address-space or memory limit was reached)", file=sys.stderr)
        raise SystemExit(1) from None
    except (StartupError, OSError, ValueError) as exc:
        print(f"pods-api: {exc}", file=sys.stderr)
        raise SystemExit(getattr(exc, "exit_code", 1)) from None


def entry() -> None:
    """The `pods-api` command (pyproject's script): `main`. A client command then ends the process
    once its output is flushed, without the interpreter's teardown: freeing every module and
    object it loaded was ~15 ms of a 1,000-pod `get pods`' ~160 ms of CPU, and a probe
    (`check`) runs every few seconds. Its channel is closed and it holds no other open file
    for writing, so nothing is lost. `serve` ends as Python does (logging's handlers flushed)."""
    argv = sys.argv[1:]
    if _command(argv) in (None, "serve"):
        main(argv)
        return
    try:
        main(argv)
        code = 0
    except SystemExit as exc:
        if not isinstance(exc.code, int | None):
            raise  # a message: Python prints it
        code = exc.code or 0
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(BrokenPipeError):  # the reader left (`| head`): not wanted
            stream.flush()
    os._exit(code)


def _command(argv: list[str]) -> str | None:
    """The subcommand named (the first word that is not an option); None when there is none."""
    return next((word for word in argv if not word.startswith("-")), None)


# -- logging -----------------------------------------------------------------------------------


class _JSONFormatter(logging.Formatter):
    """One JSON object per line, for node log collectors."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        import orjson  # here: the client commands, which log nothing, need not load it

        return orjson.dumps(entry).decode()


# What a text log line shows escaped: C0 and C1 controls (a newline in a file name forged a
# whole log line of its own) and Unicode's line and paragraph separators.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def escape_controls(text: str) -> str:
    """`text` with every control character written as Python writes it in a string (`\\n`,
    `\\x1b`), so that whatever a message quotes from outside (names, paths, URLs, masks)
    stays on its line and cannot move the terminal's cursor."""
    return _CONTROL.sub(lambda match: repr(match.group())[1:-1], text)


class _EscapingFormatter(logging.Formatter):
    """Text lines whose message cannot hold a line break or a terminal control; a traceback
    (exc_info) keeps its lines."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = escape_controls(record.message)
        return super().formatMessage(record)


def _setup_logging(level: str, fmt: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(_JSONFormatter())  # JSON escapes control characters itself
    else:
        handler.setFormatter(_EscapingFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)
    # httpx logs every request's full URL at INFO (a token may be in its query); watchfiles
    # logs every change batch. Our sources log what matters about both.
    for chatty in ("httpx", "watchfiles", "kubernetes_asyncio"):
        logging.getLogger(chatty).setLevel(logging.WARNING)
