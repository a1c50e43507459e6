"""The client commands of `pods-api`: `get`, `watch` and `check`, on any Pods API socket (the
kubelet's or pods-api's), through `pods_api.client` only. `pods_api/serve/cli.py` registers them beside
`serve` with `add_commands`.

Errors are one line on stderr and an exit code from `pods_api.client.exitcodes`, never a
traceback; "not ready", "not allowed" and "unreachable" each have their own code and are never
printed as an empty list.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from pods_api.client import kubeconfig
from pods_api.client.choices import FORMATS, KUBELET_SOCKET, Format
from pods_api.client.exceptions import (
    InvalidArgument,
    NotFound,
    NotReady,
    PodsAPIError,
    RateLimited,
    Unimplemented,
    Unreachable,
)
from pods_api.client.exitcodes import HELP, Exit, for_error
from pods_api.core.argtypes import positive

if TYPE_CHECKING:
    from pods_api.client.client import Client
    from pods_api.client.jsonpath import Printer
    from pods_api.client.pod import Pod

# Each command loads what it uses when it runs (`check`, a probe run every few seconds, loads
# neither the codec nor the protobuf stubs nor the renderers of `get`).

SOCKET_ENV = "PODS_API_SOCKET"
# List and Get answer from memory in milliseconds on a local socket; a server that has not
# answered in 10 s is wedged, and a probe or script should hear so rather than hang.
DEFAULT_TIMEOUT = 10.0
# --wait's backoff: starts at 0.1 s (a sync usually completes in well under a second), grows to at
# most 2 s so a server that becomes ready is noticed promptly, jittered so that many agents
# started together do not retry in step.
WAIT_BACKOFF = {"initial": 0.1, "maximum": 2.0, "factor": 2.0, "jitter": 0.2}
# How long a table watch waits, after the last snapshot event, for INITIAL_SYNC_COMPLETE before it
# prints the snapshot anyway: a snapshot arrives in one burst over a local socket.
SNAPSHOT_WAIT = 1.0
CONTRACTS = {"kubelet": "KUBELET", "documented": "DOCUMENTED"}  # names of client.Contract
POD_RESOURCES = ("pods", "pod", "po")

T = TypeVar("T")


def add_commands(commands: Any) -> None:
    """Add get, watch and check to `pods-api`'s subcommands (an argparse subparsers action)."""
    connection = argparse.ArgumentParser(add_help=False)
    default = os.environ.get(SOCKET_ENV) or KUBELET_SOCKET
    connection.add_argument(
        "--socket",
        default=default,
        metavar="PATH",
        help=f"the Pods API socket (default: ${SOCKET_ENV}, else {KUBELET_SOCKET}; now {default})",
    )
    connection.add_argument(
        "--timeout",
        type=positive,
        default=DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help=f"give up after this long (default {DEFAULT_TIMEOUT:g}); with --wait, the whole wait",
    )
    calls = argparse.ArgumentParser(add_help=False)
    calls.add_argument(
        "--contract",
        choices=list(CONTRACTS),
        default="kubelet",
        help="the kubelet's v1alpha1.Pods (default; every server has it) or the documentation's Pods",
    )
    calls.add_argument(
        "--fields", metavar="PATHS", help="a field mask, e.g. status.phase,status.podIPs (name, uid kept)"
    )
    calls.add_argument(
        "--wait",
        action="store_true",
        help="retry while the server is not ready or rate limits, with jittered backoff, until --timeout",
    )
    calls.add_argument(
        "-o",
        "--output",
        type=_output,
        default="table",
        metavar="FORMAT",
        help=f"output format: {', '.join(FORMATS)} (default table); with get, also "
        "jsonpath=TEMPLATE, jsonpath-file=FILE or custom-columns=HEADER:PATH,... as kubectl's",
    )
    # pods-api's extension (podsapi.v1.PodLookup): a kubelet's socket answers Unimplemented.
    selectors = argparse.ArgumentParser(add_help=False)
    selectors.add_argument(
        "-l",
        "--selector",
        default="",
        metavar="SELECTOR",
        help="only pods whose labels match, e.g. app=web,tier!=db or 'env in (a,b)' (pods-api only)",
    )
    selectors.add_argument(
        "--field-selector",
        default="",
        metavar="SELECTOR",
        help="only pods whose fields match, e.g. status.phase=Running,spec.hostNetwork=true (pods-api only)",
    )
    shared = {"epilog": HELP, "formatter_class": argparse.RawDescriptionHelpFormatter}

    get = commands.add_parser(
        "get",
        parents=[connection, calls, selectors],
        help="print pods as kubectl get pods does",
        description="Print every pod (sorted by namespace and name), or the one with UID.",
        **shared,
    )
    get.add_argument("resource", choices=POD_RESOURCES, help="pods (or pod, po)")
    get.add_argument("uid", nargs="?", help="one pod, by its UID (with -n: by its name)")
    get.add_argument(
        "-n",
        "--namespace",
        metavar="NAMESPACE",
        help="the pods of this namespace; with NAME after pod: the pod by namespace and name (pods-api only)",
    )
    get.add_argument(
        "-A",
        "--all-namespaces",
        action="store_true",
        help="the pods of every namespace (the default: a node's pods are few), over -n as kubectl",
    )
    keys = get.add_mutually_exclusive_group()
    keys.add_argument(
        "--container-id",
        metavar="ID",
        help="the pods with this container: containerd://<id>, the bare ID, or a unique prefix of "
        "12+ characters as crictl shows it (pods-api only)",
    )
    keys.add_argument(
        "--pod-ip",
        metavar="IP",
        help="the pods with this IP; host-network pods share the node's (pods-api only)",
    )
    get.set_defaults(run=_get)

    watch = commands.add_parser(
        "watch",
        parents=[connection, calls, selectors],
        help="print pod events as they come, one line each",
        description="Print ADDED for each pod, then every change as it happens, one line (one YAML "
        "document with -o yaml) per event, flushed at once: for `| while read ...`.",
        **shared,
    )
    watch.set_defaults(run=_watch)

    check = commands.add_parser(
        "check",
        parents=[connection],
        help="diagnose a Pods API socket: permissions, server, readiness",
        description="Report the socket's mode and owner, whether this user may open it, whether a "
        "server answers (gRPC health), whether it is ready, which contracts it serves, the pod count "
        "and the round-trip time. Exits non-zero at the first failure.",
        **shared,
    )
    check.add_argument(
        "-q", "--quiet", action="store_true", help="print nothing: the exit code only (probes)"
    )
    check.add_argument(
        "--liveness",
        action="store_true",
        help="pass once the server answers, ready or not (a liveness probe: syncing is not dead)",
    )
    check.set_defaults(run=_check)
    kubeconfig.add_command(commands)


def run(args: argparse.Namespace) -> int:
    """Run a client command; returns its exit code."""
    command: Callable[[argparse.Namespace], Coroutine[Any, Any, int]] = args.run
    try:
        return asyncio.run(command(args))
    except PodsAPIError as exc:
        print(f"pods-api: {exc}{_hint(exc, args)}", file=sys.stderr)
        return for_error(exc)
    except Exception as exc:
        if not _undecodable(exc):
            raise
        print(f"pods-api: {args.socket}: the server sent a pod that does not decode: {exc}", file=sys.stderr)
        return Exit.ERROR
    except BrokenPipeError:
        # The reader went away (`| head`): not an error. Point stdout at nothing, so the
        # interpreter's final flush does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return Exit.OK
    except KeyboardInterrupt:
        return 130  # the shell's code for SIGINT


def _undecodable(exc: Exception) -> bool:
    """Whether exc is the codec's error (a pod that does not decode). Loaded only when asked:
    only a command that decoded pods can have raised it."""
    codec = sys.modules.get("pods_api.core.api.codec")
    return codec is not None and isinstance(exc, codec.CodecError)


def _hint(exc: PodsAPIError, args: argparse.Namespace) -> str:
    if isinstance(exc, NotReady | RateLimited) and not getattr(args, "wait", True):
        return " (retry later, or pass --wait)"
    extension = ("selector", "field_selector", "container_id", "pod_ip", "namespace")
    if isinstance(exc, Unimplemented) and any(getattr(args, name, None) for name in extension):
        return " (lookups and selectors are pods-api's extension: a kubelet's socket does not serve them)"
    if isinstance(exc, Unimplemented):
        other = next(name for name in CONTRACTS if name != args.contract)
        return f" (the server does not serve the {args.contract} contract; try --contract {other})"
    return ""


def _client(args: argparse.Namespace) -> Client:
    from pods_api.client.client import Client, Contract

    return Client(args.socket, contract=Contract[CONTRACTS[args.contract]], timeout=args.timeout)


async def _retrying(args: argparse.Namespace, client: Client, call: Callable[[], Awaitable[T]]) -> T:
    """call(), and with --wait again after NotReady or RateLimited until --timeout has passed;
    each attempt's deadline is what is left of it."""
    deadline = time.monotonic() + args.timeout
    delays: Iterator[float] | None = None
    while True:
        client.timeout = max(deadline - time.monotonic(), 0.001)
        try:
            return await call()
        except (NotReady, RateLimited):
            if delays is None:  # the informer's module (and the codec it loads) only on a retry
                from pods_api.client.informer import Backoff

                delays = Backoff(**WAIT_BACKOFF).delays()
            delay = next(delays)
            if not args.wait or time.monotonic() + delay >= deadline:
                raise
            await asyncio.sleep(delay)


def _output(value: str) -> Any:
    """`-o`: a fixed format's name, or the parsed jsonpath/custom-columns printer."""
    if value in FORMATS:
        return value
    from pods_api.client.jsonpath import JSONPathError, output_printer

    try:
        printer = output_printer(value)
    except JSONPathError as error:
        raise argparse.ArgumentTypeError(f"{value.partition('=')[0]}: {error}") from None
    if printer is None:
        choices = ", ".join([*FORMATS, "jsonpath=...", "jsonpath-file=...", "custom-columns=..."])
        raise argparse.ArgumentTypeError(f"invalid choice: {value!r} (choose from {choices})")
    return printer


def _rendered(render: Callable[[], str]) -> int:
    """Print what `render` makes; a template that fails on these pods (an index out of range, a
    comparison of a string with a number) prints nothing, as kubectl, and exits 1."""
    try:
        text = render()
    except ValueError as error:
        # Only a template (whose module -o loaded) raises JSONPathError: a table need not load it.
        jsonpath = sys.modules.get("pods_api.client.jsonpath")
        if jsonpath is None or not isinstance(error, jsonpath.JSONPathError):
            raise
        print(f"pods-api get: error executing the template: {error}", file=sys.stderr)
        return Exit.ERROR
    _print(text)
    return Exit.OK


def _print(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def _usage(args: argparse.Namespace) -> str | None:
    """What is wrong with a `get`'s combination of keys, or None."""
    looked_up = args.container_id is not None or args.pod_ip is not None
    if args.all_namespaces and args.uid is not None:
        return "a pod cannot be got by UID or NAME across all namespaces: drop -A"
    if looked_up and (args.uid is not None or args.namespace is not None):
        return "--container-id and --pod-ip take no UID, NAME or -n"
    if args.uid is not None and args.namespace is None and (args.selector or args.field_selector):
        return "a UID names one pod: -l and --field-selector are for lists and lookups"
    return None


async def _get(args: argparse.Namespace) -> int:
    from pods_api.core.api.printer import POD_FIELDS

    fmt: Format | Printer = args.output
    wrong = _usage(args)
    if wrong is not None:
        print(f"pods-api get: {wrong}", file=sys.stderr)
        return Exit.USAGE
    if args.all_namespaces:
        args.namespace = None  # -A over -n, as kubectl
    # A table shows a few fields: the server sends (and we decode) only those, a third of each
    # pod. That mask is ours, not the user's, so it may save work but never change an answer:
    # a server that refuses it (INVALID_ARGUMENT: a Pod without a field the printer reads) is
    # asked again without it.
    own_mask = args.fields is None and fmt in ("table", "wide")
    async with _client(args) as client:
        if not own_mask:
            return await _got(args, client, fmt, args.fields)
        try:
            return await _got(args, client, fmt, POD_FIELDS)
        except InvalidArgument:
            return await _got(args, client, fmt, None)


async def _got(args: argparse.Namespace, client: Client, fmt: Format | Printer, fields: str | None) -> int:
    """Fetch what `get`'s arguments name, with this mask, and print it."""
    from pods_api.client.output import render_pod, render_pods

    selected = {"label_selector": args.selector, "field_selector": args.field_selector}
    if args.namespace is not None and args.uid is not None:  # -n NAMESPACE NAME: by name
        namespace, name = args.namespace, args.uid
        found = await _retrying(
            args,
            client,
            lambda: client.lookup(namespace=namespace, name=name, fields=fields, **selected),
        )
        if not found:
            raise NotFound(args.socket, f"pod {namespace}/{name} not found")
        return _rendered(lambda: render_pod(found[0].pod, fmt, datetime.now(UTC)))
    if args.uid is not None:
        uid: str = args.uid
        pod = await _retrying(args, client, lambda: client.get(uid, fields=fields))
        return _rendered(lambda: render_pod(pod, fmt, datetime.now(UTC)))
    pods: list[Pod]
    if args.container_id is not None or args.pod_ip is not None:
        key = {"container_id": args.container_id, "pod_ip": args.pod_ip}
        matches = await _retrying(args, client, lambda: client.lookup(**key, fields=fields, **selected))
        pods = [match.pod for match in matches]
    else:
        pods = await _retrying(args, client, lambda: client.list(fields, **selected))
    # -n filters here, not with a field selector: a kubelet's socket serves no selectors.
    return _rendered(lambda: render_pods(pods, fmt, datetime.now(UTC), namespace=args.namespace))


async def _watch(args: argparse.Namespace) -> int:
    from pods_api.client.output import EventPrinter

    fmt: Format | Printer = args.output
    if not isinstance(fmt, str):
        print("pods-api watch: -o jsonpath and custom-columns are for get, not watch", file=sys.stderr)
        return Exit.USAGE
    printer = EventPrinter(fmt)
    async with _client(args) as client:

        async def first() -> Any:
            # --wait and --timeout cover the stream's opening only: once events flow, it runs
            # until the server ends it, and an error then ends the command.
            stream = client.watch(
                args.fields, label_selector=args.selector, field_selector=args.field_selector
            )
            try:
                return stream, await asyncio.wait_for(anext(stream), client.timeout)
            except TimeoutError:
                raise Unreachable(args.socket, f"no answer within {args.timeout:g} s") from None

        stream, event = await _retrying(args, client, first)
        while True:
            _print(printer.render(event, datetime.now(UTC)))
            next_event = asyncio.ensure_future(anext(stream))
            if printer.buffering:
                # A server that never marks its snapshot's end (an early alpha kubelet) must not
                # keep the table from printing: flush once it has been quiet for a moment.
                done, _ = await asyncio.wait({next_event}, timeout=SNAPSHOT_WAIT)
                if not done:
                    _print(printer.flush())
            try:
                event = await next_event
            except StopAsyncIteration:
                return Exit.OK


async def _check(args: argparse.Namespace) -> int:
    from pods_api.client import check as checking

    report = await checking.check(args.socket, args.timeout, quick=args.quiet, liveness=args.liveness)
    if not args.quiet:
        _print(report.text())
    return report.exit
