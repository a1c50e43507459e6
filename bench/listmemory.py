"""RSS after Lists: `python -m bench listmemory`.

A real `pods-api serve --fixtures` with N pods (bench/pods.py's, 4.7 KiB of protobuf): its RSS
once SERVING and settled (past its next heap trim), then after one List on each surface (gRPC
`ListPods`, `/v1/pods`, `/api/v1/pods`), settled again. **Floor**: a bare grpc.aio + Starlette
server (bench/list_floor.py) holding each pod's framed protobuf and JSON, which are the bytes
pods-api's Lists returned, serving the same three Lists by joining per call, its heap handled
as pods-api's; measured the same way. RSS from /proc/PID/smaps_rollup."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import grpc
import httpx

from bench import pods
from bench.heapdump import proc_memory
from bench.serve import wait_line
from bench.server import CHANNEL_OPTIONS, serving, until_serving
from pods_api.serve.heap import TRIM_EVERY

HERE = Path(__file__).resolve().parent
# Seconds from the Lists to a reading: past the server's next heap trim.
SETTLE = TRIM_EVERY + 2.0
# 5,000 fixtures take a while to decode on a loaded machine.
PATIENCE = 600.0


async def _lists(target: str, http: str) -> dict[str, bytes]:
    """One List on each surface; the bytes each returned."""
    async with grpc.aio.insecure_channel(target, options=CHANNEL_OPTIONS) as channel:
        listed: bytes = await channel.unary_unary("/v1alpha1.Pods/ListPods")(b"")
    transport = httpx.AsyncHTTPTransport(uds=http)
    async with httpx.AsyncClient(
        transport=transport, base_url="http://localhost", timeout=PATIENCE
    ) as client:
        body = (await client.get("/v1/pods")).raise_for_status().content
        kube = (await client.get("/api/v1/pods")).raise_for_status().content
    return {"grpc-list": listed, "http-list": body, "kube-list": kube}


async def _ours(count: int, root: Path, settle: float) -> dict[str, Any]:
    with serving(root / "run", "--fixtures", str(root / "fixtures")) as s:
        await until_serving(s.target, PATIENCE)
        await asyncio.sleep(settle)
        before = proc_memory(s.proc.pid)["rss_mib"]
        bodies = await _lists(s.target, s.http)
        await asyncio.sleep(settle)
        after = proc_memory(s.proc.pid)["rss_mib"]
    for name, data in bodies.items():
        (root / f"{name}.bin").write_bytes(data)
    return {
        "pods": count,
        "ours_before_mib": before,
        "ours_after_mib": after,
        "list_mib": {name: len(data) / 2**20 for name, data in bodies.items()},
    }


def _floor(root: Path, settle: float) -> dict[str, float]:
    command = [sys.executable, str(HERE / "list_floor.py"), str(root)]
    floor = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        wait_line(floor.stdout, "ready")
        return asyncio.run(_floor_rss(floor.pid, root, settle))
    finally:
        floor.terminate()
        floor.wait()


async def _floor_rss(pid: int, root: Path, settle: float) -> dict[str, float]:
    await asyncio.sleep(settle)
    before = proc_memory(pid)["rss_mib"]
    await _lists(f"unix:{root / 'floor.sock'}", str(root / "floor-http.sock"))
    await asyncio.sleep(settle)
    return {"floor_before_mib": before, "floor_after_mib": proc_memory(pid)["rss_mib"]}


def run(counts: list[int], settle: float = SETTLE) -> list[dict[str, Any]]:
    rows = []
    for count in counts:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            pods.write(root / "fixtures", count, kind="fixture", fmt="json")
            row = asyncio.run(_ours(count, root, settle))
            row |= _floor(root, settle)
        row["ratio"] = row["ours_after_mib"] / row["floor_after_mib"]
        print(
            f"{count} pods: ours {row['ours_before_mib']:.1f} -> {row['ours_after_mib']:.1f} MiB, "
            f"floor {row['floor_before_mib']:.1f} -> {row['floor_after_mib']:.1f} MiB, {row['ratio']:.2f}x",
            file=sys.stderr,
            flush=True,
        )
        rows.append(row)
    return rows
