"""`python -m bench [all|source|requests|fanout|memory|startup] [--quick]`: the benchmarks of
issue 14, each beside a floor measured in the same run; prints a table and writes
bench/results.json. `--quick` runs every workload small (CI runs it; nothing is asserted)."""

from __future__ import annotations

import argparse
import platform
import time
from pathlib import Path
from typing import Any

import orjson

from bench import source, workloads

HERE = Path(__file__).resolve().parent

# (full, quick) sizes. The full fan-out is scaled down from issue 14's 200 gRPC + 50 SSE
# watchers at 100 changes/s for 30 s: on a shared 2-core machine the watcher processes alone
# would take both cores (BENCHMARKS.md).
SIZES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "source": (
        {"files": 1000, "rate": 100.0, "seconds": 10.0, "repeats": 2},
        {"files": 110, "rate": 20.0, "seconds": 3.0, "repeats": 1},
    ),
    "startup": ({"files": 5000, "repeats": 2}, {"files": 300, "repeats": 1}),
    "memory": ({"counts": [110, 1000, 5000], "watchers": 1000}, {"counts": [110], "watchers": 50}),
    "requests": ({"count": 110, "seconds": 3.0, "repeats": 2}, {"count": 110, "seconds": 0.5, "repeats": 1}),
    "fanout": (
        {"count": 1000, "grpc_watchers": 100, "sse_watchers": 25, "rate": 50.0, "seconds": 15.0},
        {"count": 110, "grpc_watchers": 10, "sse_watchers": 3, "rate": 10.0, "seconds": 3.0},
    ),
}
RUNNERS = {
    "source": source.run,
    "startup": workloads.startup,
    "memory": workloads.memory,
    "requests": workloads.requests,
    "fanout": workloads.fanout,
}


def table(results: dict[str, Any]) -> list[str]:
    lines = [f"{'workload':28} {'measure':30} {'ours':>10} {'floor':>10} {'ratio':>6}"]

    def row(workload: str, measure: str, ours: float, floor: float | None = None) -> None:
        ratio = f"{ours / floor:6.2f}" if floor else ""
        floor_text = f"{floor:10.2f}" if floor is not None else ""
        lines.append(f"{workload:28} {measure:30} {ours:10.2f} {floor_text:>10} {ratio}")

    if "source" in results:
        r = results["source"]
        name = f"W1 source {r['files']} files {r['rate']:g}/s"
        o, f = r["ours"], r["floor"]
        for key in ("cpu_per_change_ms", "delivered", "p50_ms", "p99_ms", "loop_lag_p99_ms", "ready_s"):
            row(name, key, o[key], f[key])
    if "requests" in results:
        for r in results["requests"]:
            name = f"W3 {r['surface']} {r['call']}"
            row(name, "calls/s", r["ours_per_s"], r["floor_per_s"])
            row(name, "server CPU µs/call", r["ours_cpu_us"], r["floor_cpu_us"])
    if "fanout" in results:
        r = results["fanout"]
        name = f"W4 {r['pods']} pods {r['grpc_watchers']}+{r['sse_watchers']} w {r['rate']:g}/s"
        for key in ("cut_off", "min_share_delivered", "p50_ms", "p99_ms", "server_cpu_us_per_frame"):
            row(name, key, r[key])
        if "source" in results:
            row(name, "p99 vs W1 watchfiles floor", r["p99_ms"], results["source"]["floor"]["p99_ms"])
    if "memory" in results:
        for r in results["memory"]:
            name = f"W5 {r['pods']} pods"
            row(name, "idle RSS MiB (vs 3x+80 target)", r["idle_rss_mib"], r["target_mib"])
            row(name, f"RSS, {r['watchers']} watchers MiB", r["rss_with_watchers_mib"], r["target_mib"])
            row(name, "RSS after watchers MiB", r["rss_after_watchers_mib"], r["idle_rss_mib"])
            row(name, "idle RSS vs bare holder MiB", r["idle_rss_mib"], r["floor_rss_mib"])
            row(name, "List server CPU µs/pod", r["list_cpu_us_per_pod"])
    if "startup" in results:
        r = results["startup"]
        name = f"W6 {r['files']} manifests"
        row(name, "to SERVING s (wall)", r["ours_wall_s"], r["floor_wall_s"])
        row(name, "CPU s", r["ours_cpu_s"], r["floor_cpu_s"])
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workload", nargs="?", default="all", choices=["all", *RUNNERS])
    parser.add_argument("--quick", action="store_true", help="every workload small; for CI")
    args = parser.parse_args()
    chosen = list(RUNNERS) if args.workload == "all" else [args.workload]
    results: dict[str, Any] = {}
    started = time.monotonic()
    for name in chosen:
        sizes = SIZES[name][1 if args.quick else 0]
        results[name] = RUNNERS[name](**sizes)
    lines = table(results)
    print("\n".join(lines))
    meta = {
        "quick": args.quick,
        "machine": f"{platform.machine()} {platform.python_implementation()} {platform.python_version()}",
        "seconds": time.monotonic() - started,
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    out = HERE / "results.json"
    out.write_bytes(
        orjson.dumps({"meta": meta, "results": results, "table": lines}, option=orjson.OPT_INDENT_2)
    )
    print(f"({meta['seconds']:.0f} s; written to {out})")


if __name__ == "__main__":
    main()
