"""Memory per source per 1,000 pods: `python -m bench footprint`.

For each source, a real `pods-api serve` with that one source and N pods: once SERVING, one List
on each surface (gRPC ListPods, HTTP `/v1/pods`, the Kubernetes view's `/api/v1/pods`), then past
the server's next heap trim, its RSS, PSS, USS and anonymous memory (/proc/PID/smaps_rollup),
beside the pods' own bytes (the gRPC List's protobuf, the HTTP List's JSON). The upstreams are
the test suite's servers speaking the real protocols (tests/support): fixture and manifest
files, a manifest URL serving a PodList, the test kube-apiserver (TLS, token, list and watch),
a kubelet `/pods` over TLS with a token, another `pods-api serve` for the bridge (only the
bridge process is counted), and a fake CRI runtime (2 containers per sandbox). The pods are
bench/pods.py's (4.7 KiB of protobuf with their status; static manifests get the kubelet's
status instead, CRI pods are what the runtime reports of a sandbox)."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import tempfile
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import grpc
import httpx
import orjson

from bench import pods
from bench.heapdump import proc_memory
from bench.server import CHANNEL_OPTIONS, serving, until_serving
from pods_api.serve.heap import TRIM_EVERY
from pods_api.sources.reading import MAX_MANIFEST_BYTES

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))
from apiserver import KubeAPIServer
from fakecri import FakeRuntime, start
from servers import ManifestServer, make_tls

SOURCES = ("fixtures", "manifests", "manifest-url", "apiserver", "kubelet-pods", "bridge", "cri")
# Seconds from the Lists to the reading: past the server's next heap trim.
SETTLE = TRIM_EVERY + 2.0
TOKEN = "bench-token"
# Containers per CRI sandbox, as bench/pods.py's pods run (an app and a sidecar).
CRI_CONTAINERS = 2
# Upstreams get longer to answer than a test waits: the largest lists are 5,000 pods.
PATIENCE = 600.0


def _url_count(count: int) -> int:
    """`count`, or fewer: the most pods whose PodList fits in the body limit of a manifest URL
    (the kubelet's maxConfigLength, which our source keeps too: a larger one is refused)."""
    per_pod = len(_pod_list([pods.manifest(0)]))
    fits = MAX_MANIFEST_BYTES * 9 // 10 // per_pod // 500 * 500
    return min(count, fits)


def _pod_list(items: list[dict[str, Any]]) -> bytes:
    return orjson.dumps({"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items})


@contextlib.asynccontextmanager
async def _upstream(source: str, count: int, tmp: Path) -> AsyncIterator[tuple[str, ...]]:
    """The upstream of `source` with `count` pods, running; yields the server's flags for it."""
    if source == "fixtures":
        pods.write(tmp / "fixtures", count, kind="fixture", fmt="json")
        yield ("--fixtures", str(tmp / "fixtures"))
    elif source == "manifests":
        pods.write(tmp / "manifests", count)
        yield ("--manifests", str(tmp / "manifests"))
    elif source == "manifest-url":
        server = ManifestServer()
        server.serve(_pod_list([pods.manifest(i) for i in range(_url_count(count))]))
        server.start()
        try:
            yield ("--manifest-url", server.url)
        finally:
            server.stop()
    elif source == "kubelet-pods":
        tls = make_tls(tmp)
        server = ManifestServer(tls=tls.server)
        server.token = TOKEN
        server.serve(_pod_list([pods.fixture(i) for i in range(count)]))
        (tmp / "token").write_text(TOKEN)
        server.start()
        try:
            yield (
                *("--kubelet-pods-url", server.url, "--kubelet-ca-file", str(tls.ca)),
                *("--kubelet-token-file", str(tmp / "token")),
            )
        finally:
            server.stop()
    elif source == "apiserver":
        api = KubeAPIServer(tmp)
        for i in range(count):
            api.put(pods.fixture(i))
        api.start()
        try:
            yield ("--apiserver", "--kubeconfig", str(api.kubeconfig(tmp / "kubeconfig")))
        finally:
            api.stop()
    elif source == "bridge":
        pods.write(tmp / "fixtures", count, kind="fixture", fmt="json")
        with serving(tmp / "upstream", "--fixtures", str(tmp / "fixtures")) as upstream:
            await until_serving(upstream.target, PATIENCE)
            yield ("--kubelet-socket", str(upstream.run / "pods-api.sock"))
    elif source == "cri":
        runtime = FakeRuntime(count, CRI_CONTAINERS * count, events=True)
        server = await start(runtime, tmp / "cri.sock")
        try:
            yield ("--cri-socket", str(tmp / "cri.sock"))
        finally:
            await server.stop(0)
    else:
        raise ValueError(f"no source {source!r}; one of {', '.join(SOURCES)}")


async def _lists(target: str, http: str) -> tuple[int, int]:
    """One List on each surface; the bytes of the gRPC one (protobuf) and the HTTP one (JSON)."""
    async with grpc.aio.insecure_channel(target, options=CHANNEL_OPTIONS) as channel:
        listed = await channel.unary_unary("/v1alpha1.Pods/ListPods")(b"")
    transport = httpx.AsyncHTTPTransport(uds=http)
    async with httpx.AsyncClient(
        transport=transport, base_url="http://localhost", timeout=PATIENCE
    ) as client:
        body = (await client.get("/v1/pods")).raise_for_status().content
        (await client.get("/api/v1/pods")).raise_for_status()
    return len(listed), len(body)


def _children_rss(pid: int) -> float:
    """MiB resident in the server's child processes (the manifest source's decoding workers)."""
    total = 0.0
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            with contextlib.suppress(FileNotFoundError):
                total += proc_memory(child)["rss_mib"]
    return total


async def measure(
    source: str, count: int, settle: float = SETTLE
) -> tuple[dict[str, Any], dict[str, float], float]:
    """The pod bytes, the server's memory and its children's RSS, with `count` pods from `source`."""
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        async with _upstream(source, count, tmp) as flags:
            with serving(tmp / "run", *flags, "--max-watchers", "10") as s:
                await until_serving(s.target, PATIENCE)
                pb, json = await _lists(s.target, s.http)
                await asyncio.sleep(settle)
                memory = proc_memory(s.proc.pid)
                children = _children_rss(s.proc.pid)
    return {"source": source, "pods": count, "pb_mib": pb / 2**20, "json_mib": json / 2**20}, memory, children


def run(
    counts: list[int], sources: tuple[str, ...] = SOURCES, settle: float = SETTLE
) -> list[dict[str, Any]]:
    """A row per source and pod count; each with its slope per 1,000 pods from the count before."""
    rows = []
    for source in sources:
        previous: dict[str, Any] | None = None
        for count in counts:
            if source == "manifest-url":
                count = _url_count(count)
            row, memory, children = asyncio.run(measure(source, count, settle))
            row |= memory
            row["children_rss_mib"] = children
            row["per_1000_mib"] = _slope(previous, row, "rss_mib")
            row["pb_per_1000_mib"] = _slope(previous, row, "pb_mib")
            rows.append(row)
            table([row], lambda text: print(text, file=sys.stderr, flush=True))  # as it goes
            previous = row
    return rows


def _slope(before: dict[str, Any] | None, after: dict[str, Any], key: str) -> float | None:
    if before is None:
        return None
    return (after[key] - before[key]) * 1000 / (after["pods"] - before["pods"])


def table(rows: list[dict[str, Any]], line: Callable[[str], None]) -> None:
    line(
        f"{'source':14} {'pods':>6} {'RSS':>7} {'PSS':>7} {'USS':>7} {'anon':>7} {'pb':>6} {'JSON':>6}"
        f" {'RSS/1000':>9} {'pb/1000':>8}"
    )
    for r in rows:
        slope = "" if r["per_1000_mib"] is None else f"{r['per_1000_mib']:9.1f}"
        pb_slope = "" if r["pb_per_1000_mib"] is None else f"{r['pb_per_1000_mib']:8.2f}"
        line(
            f"{r['source']:14} {r['pods']:6d} {r['rss_mib']:7.1f} {r['pss_mib']:7.1f} {r['uss_mib']:7.1f}"
            f" {r['anon_mib']:7.1f} {r['pb_mib']:6.2f} {r['json_mib']:6.2f} {slope:>9} {pb_slope:>8}"
        )
