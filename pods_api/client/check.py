"""`pods-api check`: what an operator asks first of a Pods API socket, answered in order, each
step only if the one before it passed: is the file there and what are its permissions; may this
user open it; does a server answer (gRPC health), and is it ready; which contracts does it serve,
how many pods, how fast. The first failure decides the exit code, and says what failed.
"""

from __future__ import annotations

import contextlib
import grp
import os
import pwd
import socket
import stat
import time
from dataclasses import dataclass, field

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from pods_api.client.exceptions import NotReady, PodsAPIError, RateLimited, Unimplemented
from pods_api.client.exitcodes import Exit

# ListPods with only the identity fields (the server keeps them whatever the mask): a count and a
# round trip without moving every pod's status over the socket.
_COUNT_MASK = "metadata.uid"
# The trailing metadata pods-api warns its clients in (core/grpc/interceptors.py's name for it).
WARNING_METADATA = "pods-api-warning"
_CONTRACT_NAMES = {"KUBELET": "kubelet", "DOCUMENTED": "documented"}


@dataclass
class Report:
    """What check found, line by line, and the exit code it earns."""

    socket: str
    lines: list[tuple[str, str]] = field(default_factory=list)
    exit: Exit = Exit.OK

    def add(self, key: str, value: str) -> None:
        self.lines.append((key, value))

    def fail(self, key: str, value: str, code: Exit) -> Report:
        self.add(key, value)
        self.exit = code
        return self

    def text(self) -> str:
        width = max(len(k) for k, _ in self.lines) + 2
        return "".join(f"{k + ':':<{width}}{v}\n" for k, v in self.lines)


def _user() -> str:
    uid = os.geteuid()
    try:
        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except KeyError:
        return f"uid {uid}"


def _owner(st: os.stat_result) -> str:
    try:
        user = pwd.getpwuid(st.st_uid).pw_name
    except KeyError:
        user = str(st.st_uid)
    try:
        group = grp.getgrgid(st.st_gid).gr_name
    except KeyError:
        group = str(st.st_gid)
    return f"{user}:{group}"


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def _file(report: Report) -> bool:
    """The socket file: there, a socket, and its mode and owner."""
    path = report.socket
    try:
        st = os.stat(path)
    except FileNotFoundError:
        report.fail(
            "file", "no such file: is the server running, and is this its --socket?", Exit.UNREACHABLE
        )
        return False
    except PermissionError:
        report.fail(
            "file",
            f"permission denied: {_user()} may not look inside {os.path.dirname(path) or '.'}",
            Exit.PERMISSION_DENIED,
        )
        return False
    mode = f"{stat.filemode(st.st_mode)} {stat.S_IMODE(st.st_mode):04o} {_owner(st)}"
    if not stat.S_ISSOCK(st.st_mode):
        report.fail("file", f"{mode}: not a socket", Exit.ERROR)
        return False
    report.add("file", mode)
    return True


def _access(report: Report, timeout: float) -> bool:
    """Whether this user may open it: asked of the kernel with one connect()."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(timeout)
        probe.connect(report.socket)
    except PermissionError:
        report.fail(
            "access",
            f"permission denied: {_user()} may not open the socket (run as its owner, or as a "
            "member of its group with --socket-group and --socket-mode 0660 on the server)",
            Exit.PERMISSION_DENIED,
        )
        return False
    except ConnectionRefusedError:
        report.fail(
            "access", "connection refused: nothing listens on it (a stale socket file?)", Exit.UNREACHABLE
        )
        return False
    except OSError as exc:
        report.fail("access", f"cannot connect: {exc.strerror or exc}", Exit.UNREACHABLE)
        return False
    finally:
        probe.close()
    report.add("access", f"{_user()} can open it")
    return True


async def _health(report: Report, seconds: float) -> bool | None:
    """grpc.health.v1 for the whole server: True (SERVING), False, or None (not served: the
    kubelet need not serve it). Answered by the server's event loop, so a wedged process fails
    here even though the kernel still accepts its connections."""
    async with grpc.aio.insecure_channel(f"unix:{report.socket}") as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        start = time.perf_counter()
        try:
            answer = await stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=seconds)
        except grpc.aio.AioRpcError as exc:
            if exc.code() is grpc.StatusCode.UNIMPLEMENTED:
                report.add("server", "answers (no gRPC health service)")
                return None
            if exc.code() is grpc.StatusCode.DEADLINE_EXCEEDED:
                report.fail(
                    "server", f"no answer within {seconds:g} s: wedged or overloaded", Exit.UNREACHABLE
                )
            else:
                report.fail("server", f"no answer: {exc.code().name}: {exc.details()}", Exit.UNREACHABLE)
            return False
        elapsed = time.perf_counter() - start
    status = health_pb2.HealthCheckResponse.ServingStatus.Name(answer.status)
    report.add("server", f"answers: health {status} in {_ms(elapsed)}")
    return bool(answer.status == health_pb2.HealthCheckResponse.SERVING)


async def _contracts(report: Report, seconds: float) -> bool | None:
    """ListPods on each contract: which are served, the pod count and the round trip. True if
    one answered with pods, False if every served one said not ready, None if none told."""
    # Only here the client (its stubs and the codec) loads: a probe (quick, with health) never does.
    from pods_api.client.client import Client, Contract

    served, counts, ready = [], [], None
    for contract in Contract:
        name = f"{contract.value} ({_CONTRACT_NAMES[contract.name]})"
        async with Client(report.socket, contract=contract, timeout=seconds) as client:
            start = time.perf_counter()
            try:
                pods = await client.list(fields=_COUNT_MASK)
            except Unimplemented:
                continue
            except NotReady:
                served.append(f"{name}: not ready")
                ready = ready or False
                continue
            except RateLimited:
                served.append(f"{name}: rate limited")
                continue
            except PodsAPIError as exc:
                served.append(f"{name}: {exc.message}")
                continue
            elapsed = time.perf_counter() - start
        served.append(f"{name} in {_ms(elapsed)}")
        counts.append(len(pods))
        ready = True
    report.add("contracts", "; ".join(served) if served else "none (neither Pods service answers)")
    if counts:
        report.add("pods", str(counts[0]))
    return ready


async def _warnings(report: Report, seconds: float) -> None:
    """What the server warns its clients of (a bridged upstream that speaks another version of
    the Pods API): trailing metadata of a ListPods, served or refused. A line each; the exit
    code stays what the other steps earned."""
    from pods_api.client.client import FIELDMASK_METADATA

    async with grpc.aio.insecure_channel(f"unix:{report.socket}") as channel:
        call = channel.unary_unary("/v1alpha1.Pods/ListPods")(
            b"", metadata=((FIELDMASK_METADATA, _COUNT_MASK),), timeout=seconds
        )
        with contextlib.suppress(grpc.aio.AioRpcError):  # refused: warnings come with it too
            await call
        trailing = await call.trailing_metadata()
    for key, value in trailing or ():
        if key == WARNING_METADATA:
            report.add("warning", str(value))


async def check(socket_path: str, seconds: float, *, quick: bool = False, liveness: bool = False) -> Report:
    """Diagnose socket_path. `quick` (probes) skips the contract and pod listing when health
    answers; `liveness` passes a server that answers but is not ready yet. Each step waits at
    most `seconds`."""
    report = Report(socket_path)
    report.add("socket", socket_path)
    if not (_file(report) and _access(report, seconds)):
        return report
    healthy = await _health(report, seconds)
    if report.exit is not Exit.OK:
        return report
    ready = healthy
    if not quick or healthy is None:
        listed = await _contracts(report, seconds)
        if healthy is not None:  # pods-api (the kubelet serves no health): spend no kubelet token
            await _warnings(report, seconds)
        ready = listed if healthy is None else healthy
    if ready:
        report.add("ready", "yes")
    elif ready is None:
        report.fail("ready", "unknown: no health service, and ListPods did not say", Exit.ERROR)
    elif liveness:
        report.add("ready", "no, but alive: it answers")
    else:
        report.fail("ready", "no: its pod sources have not synced yet (FAILED_PRECONDITION)", Exit.NOT_READY)
    return report
