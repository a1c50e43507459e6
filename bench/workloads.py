"""W3 (gRPC/HTTP Get and masked List) and W6 (start-up), each against a real `pods-api serve`
beside a floor measured in the same run. `python -m bench` runs them; see BENCHMARKS.md for what
each floor is. W4 (the watch fan-out) is bench/fanout.py, W5 (memory) bench/memory.py."""

from __future__ import annotations

import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx

from bench import pods
from bench.serve import HERE, wait_line
from bench.server import CHANNEL_OPTIONS, cpu_seconds, serving, until_serving
from pods_api.core.api.pb import pods_v1alpha1_pb2 as api

MASK = "metadata.name,metadata.namespace,metadata.uid,status.phase,status.podIPs"
UID = "00000000-0000-0000-0000-000000000007"
# The v1alpha1 watch's start marker: WatchPodsEvent{type: INITIAL_SYNC_COMPLETE}.
SYNC_FRAME = api.WatchPodsEvent(type="INITIAL_SYNC_COMPLETE").SerializeToString()

# -- W6 start-up ---------------------------------------------------------------------------------

_PARSE_FLOOR = """
import sys, time
from pathlib import Path
if sys.argv[2] == "pyyaml":
    import yaml
    def parse(data): return yaml.load(data, Loader=yaml.CSafeLoader)
else:
    from pods_api.sources.constructor import load_all as parse
start = time.perf_counter()
for path in sorted(Path(sys.argv[1]).iterdir()):
    parse(path.read_bytes())
print(time.perf_counter() - start, time.process_time())
"""
# The parser the source uses: libyaml (PyYAML's C scanner, parser and composer) with our direct
# construction of its node tree (pods_api/sources/constructor.py), equal to PyYAML's CSafeLoader by
# test; and PyYAML's CSafeLoader itself (its constructor in pure Python), the floor until then.
PARSERS = {"chosen": "libyaml + pods-api construction", "pyyaml": "PyYAML CSafeLoader (libyaml)"}


def _cpu_with_workers(pid: int) -> float:
    """CPU seconds of the server and of the decoding workers it started and has reaped."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")  # utime stime cutime cstime


# Manifests of the untimed start that compiles every module a start imports.
_WARM_FILES = 10


@contextlib.contextmanager
def _bytecode(prefix: Path) -> Iterator[None]:
    """Child processes read and write compiled bytecode under `prefix`, as an installed package
    has it (pip compiles each module at install, the image's too), even where
    PYTHONDONTWRITEBYTECODE is set: there every start would compile the project's modules again,
    ~0.2 CPU s of the server's start and some of each decoding worker's."""
    names = ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")
    saved = {name: os.environ.get(name) for name in names}
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = str(prefix)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def startup(files: int, repeats: int) -> dict[str, Any]:
    """Spawn to SERVING with `files` static manifests, against reading and parsing them alone
    with the parser the source uses, and with PyYAML's CSafeLoader; interleaved. Every process
    runs compiled bytecode, compiled by an untimed start first."""
    ours: list[tuple[float, float]] = []
    floors: dict[str, list[tuple[float, float]]] = {parser: [] for parser in PARSERS}
    with tempfile.TemporaryDirectory() as tmp, _bytecode(Path(tmp) / "pycache"):
        directory = Path(tmp) / "manifests"
        pods.write(directory, files)
        pods.write(Path(tmp) / "warm", _WARM_FILES)
        with serving(Path(tmp) / "warm-run", "--manifests", str(Path(tmp) / "warm")) as served:
            asyncio.run(until_serving(served.target))
        for r in range(repeats):
            for parser, floor in floors.items():
                out = subprocess.run(
                    [sys.executable, "-c", _PARSE_FLOOR, str(directory), parser],
                    capture_output=True,
                    text=True,
                    check=True,
                )
                wall, cpu = (float(x) for x in out.stdout.split())
                floor.append((wall, cpu))
            with serving(Path(tmp) / f"run{r}", "--manifests", str(directory)) as served:
                asyncio.run(until_serving(served.target))
                ours.append((time.monotonic() - served.started, _cpu_with_workers(served.proc.pid)))
    result: dict[str, Any] = {
        "files": files,
        "parser": PARSERS["chosen"],
        "ours_wall_s": statistics.median(w for w, _ in ours),
        "ours_cpu_s": statistics.median(c for _, c in ours),
        "runs": {"ours": ours, **floors},
    }
    for parser, floor in floors.items():
        prefix = "floor" if parser == "chosen" else f"{parser}_floor"
        result[f"{prefix}_wall_s"] = statistics.median(w for w, _ in floor)
        result[f"{prefix}_cpu_s"] = statistics.median(c for _, c in floor)
    return result


# -- W5 memory -----------------------------------------------------------------------------------


async def _lists(target: str, http: str, mask: bool = False) -> tuple[bytes, bytes]:
    metadata = (("x-kubernetes-fieldmask", MASK),) if mask else None
    async with grpc.aio.insecure_channel(target, options=CHANNEL_OPTIONS) as channel:
        listed = await channel.unary_unary("/v1alpha1.Pods/ListPods")(b"", metadata=metadata)
    transport = httpx.AsyncHTTPTransport(uds=http)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost", timeout=60) as client:
        body = (await client.get("/v1/pods", params={"fields": MASK} if mask else None)).content
    return listed, body


# -- W3 Get and masked List ----------------------------------------------------------------------


async def _rate(one: Any, seconds: float) -> float:
    await one()
    done, deadline = 0, time.monotonic() + seconds
    while time.monotonic() < deadline:
        await one()
        done += 1
    return done / seconds


KUBE_TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"
# What each W3 call asks: gRPC (method, request, metadata) or HTTP (path, params, headers).
_GRPC_CALLS: dict[str, tuple[str, bytes, Any]] = {
    "Get": ("GetPod", api.GetPodRequest(podUID=UID).SerializeToString(), None),
    "masked List": ("ListPods", b"", (("x-kubernetes-fieldmask", MASK),)),
    "List": ("ListPods", b"", None),
}
_HTTP_CALLS: dict[str, tuple[str, dict[str, str] | None, dict[str, str] | None]] = {
    "Get": (f"/v1/pods/{UID}", None, None),
    "masked List": ("/v1/pods", {"fields": MASK}, None),
    "List": ("/v1/pods", None, None),
    "kube List": ("/api/v1/pods", None, {"accept": "application/json"}),
    "kube Table": ("/api/v1/pods", None, {"accept": KUBE_TABLE}),
}


async def _grpc_calls(target: str, call: str, seconds: float, pid: int) -> tuple[float, float]:
    async with grpc.aio.insecure_channel(target, options=CHANNEL_OPTIONS) as channel:
        method, request, metadata = _GRPC_CALLS[call]
        stub = channel.unary_unary(f"/v1alpha1.Pods/{method}")

        async def one() -> bytes:
            result: bytes = await stub(request, metadata=metadata)
            return result

        cpu = cpu_seconds(pid)
        rate = await _rate(one, seconds)
        return rate, (cpu_seconds(pid) - cpu) / (rate * seconds)


async def _http_calls(socket_path: str, call: str, seconds: float, pid: int) -> tuple[float, float]:
    transport = httpx.AsyncHTTPTransport(uds=socket_path)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost", timeout=120) as client:
        path, params, headers = _HTTP_CALLS[call]

        async def one() -> bytes:
            response = await client.get(path, params=params, headers=headers)
            response.raise_for_status()
            return response.content

        cpu = cpu_seconds(pid)
        rate = await _rate(one, seconds)
        return rate, (cpu_seconds(pid) - cpu) / (rate * seconds)


async def _bodies(target: str, http: str, calls: list[tuple[str, str]]) -> dict[str, bytes]:
    """What ours answers to each (surface, call), for the floor to serve as it is."""
    out = {}
    async with grpc.aio.insecure_channel(target, options=CHANNEL_OPTIONS) as channel:
        for surface, call in calls:
            if surface == "gRPC":
                method, request, metadata = _GRPC_CALLS[call]
                stub = channel.unary_unary(f"/v1alpha1.Pods/{method}")
                out[f"{surface} {call}"] = await stub(request, metadata=metadata)
    transport = httpx.AsyncHTTPTransport(uds=http)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost", timeout=120) as client:
        for surface, call in calls:
            if surface == "HTTP":
                path, params, headers = _HTTP_CALLS[call]
                out[f"{surface} {call}"] = (await client.get(path, params=params, headers=headers)).content
    return out


def _measure(
    count: int, seconds: float, repeats: int, calls: list[tuple[str, str]], fmt: str = "json"
) -> list[dict[str, Any]]:
    """Calls per second and server CPU per call for each (surface, call), ours against a bare
    grpc.aio / Starlette floor serving the very bytes ours returned, interleaved."""
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        directory = root / "fixtures"
        pods.write(directory, count, kind="fixture", fmt=fmt)
        with serving(root / "run", "--fixtures", str(directory)) as s:
            asyncio.run(until_serving(s.target, patience=600))
            bodies = asyncio.run(_bodies(s.target, s.http, calls))
            for name, data in bodies.items():
                (root / (name.replace(" ", "-") + ".bin")).write_bytes(data)
            floor = subprocess.Popen(
                [sys.executable, str(HERE / "floor_server.py"), str(root)], stdout=subprocess.PIPE, text=True
            )
            try:
                wait_line(floor.stdout, "ready")
                targets = {
                    "ours": (s.target, s.http, s.proc.pid),
                    "floor": (f"unix:{root / 'floor.sock'}", str(root / "floor-http.sock"), floor.pid),
                }
                for surface, call in calls:
                    measure = _grpc_calls if surface == "gRPC" else _http_calls
                    got: dict[str, list[tuple[float, float]]] = {"ours": [], "floor": []}
                    for _ in range(repeats):
                        for who, (grpc_at, http_at, pid) in targets.items():
                            at = grpc_at if surface == "gRPC" else http_at
                            got[who].append(asyncio.run(measure(at, call, seconds, pid)))
                    rows.append(
                        {
                            "pods": count,
                            "surface": surface,
                            "call": call,
                            "bytes": len(bodies[f"{surface} {call}"]),
                            "ours_per_s": statistics.median(r for r, _ in got["ours"]),
                            "floor_per_s": statistics.median(r for r, _ in got["floor"]),
                            "ours_cpu_us": statistics.median(c for _, c in got["ours"]) * 1e6,
                            "floor_cpu_us": statistics.median(c for _, c in got["floor"]) * 1e6,
                        }
                    )
            finally:
                floor.terminate()
                floor.wait()
    return rows


def requests(count: int, seconds: float, repeats: int) -> list[dict[str, Any]]:
    """W3: Get and masked List on both surfaces (bench/floor_server.py is the floor)."""
    calls = [(surface, call) for surface in ("gRPC", "HTTP") for call in ("Get", "masked List")]
    return _measure(count, seconds, repeats, calls)


def lists(counts: list[int], seconds: float, repeats: int) -> list[dict[str, Any]]:
    """W3 extended: the unmasked Lists of every surface (gRPC, the HTTP PodList, the Kubernetes
    view's PodList and Table) at each node size, against the floor serving the same bytes."""
    calls = [("gRPC", "List"), ("HTTP", "List"), ("HTTP", "kube List"), ("HTTP", "kube Table")]
    return [row for count in counts for row in _measure(count, seconds, repeats, calls)]
