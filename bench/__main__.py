"""`python -m bench [WORKLOAD|all] [--quick] [--sweep]`, WORKLOAD one of source, requests, lists,
sse, fanout, memory, footprint, listmemory, startup, starved, cli, bridge, kubelet, health: the workloads of
BENCHMARKS.md (W1, W3-W7, memory per source, the bridge, the real kubelet's watchers against the
bridge's, health under a burst of Lists), each beside a floor measured in the same run; prints a table
and writes bench/results.json. `--quick` runs every workload small (CI runs it; nothing is
asserted); `--sweep` runs W4's rate sweep instead of its fixed rate."""

from __future__ import annotations

import argparse
import platform
import time
from pathlib import Path
from typing import Any

import orjson

from bench import (
    bridge,
    cli,
    fanout,
    footprint,
    health,
    httpmetrics,
    kubelet,
    listmemory,
    memory,
    source,
    sse,
    workloads,
)

HERE = Path(__file__).resolve().parent

# (full, quick) sizes. The fan-out is W4 at full size: ours and the floor taking
# turns twice, ~4-5 minutes in all.
SIZES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "source": (
        {"files": 1000, "rate": 100.0, "seconds": 10.0, "repeats": 2},
        {"files": 110, "rate": 20.0, "seconds": 3.0, "repeats": 1},
    ),
    "startup": ({"files": 5000, "repeats": 2}, {"files": 300, "repeats": 1}),
    "memory": (
        {"counts": [110, 1000, 5000], "watchers": 1000, "cycles": 12}
        | {"churn_writes": 2500, "churn_rate": 100.0},
        {
            "counts": [110],
            "watchers": 50,
            "cycles": 3,
            "churn_writes": 100,
            "churn_rate": 50.0,
            "settle": 1.0,
        },
    ),
    # Memory per source: 110 pods (the kubelet's default maximum), 1,000 and 5,000, each source
    # alone; ~10 minutes.
    "footprint": ({"counts": [110, 1000, 5000]}, {"counts": [20, 60], "settle": 1.0}),
    # RSS after one List per surface, against a bare server holding the pods' bytes; ~3 minutes.
    "listmemory": ({"counts": [5000]}, {"counts": [110], "settle": 1.0}),
    "requests": ({"count": 110, "seconds": 3.0, "repeats": 2}, {"count": 110, "seconds": 0.5, "repeats": 1}),
    # W3 extended: the unmasked Lists of every surface, up to 5,000 pods (past the 16 MiB memo).
    "lists": (
        {"counts": [1000, 5000], "seconds": 3.0, "repeats": 2},
        {"counts": [110], "seconds": 0.5, "repeats": 1},
    ),
    "httpmetrics": (
        {"count": 110, "requests": 3000, "rounds": 5},
        {"count": 110, "requests": 200, "rounds": 1},
    ),
    "sse": (
        {"watchers": 20, "rate": 100.0, "seconds": 4.0, "repeats": 3},
        {"watchers": 3, "rate": 20.0, "seconds": 1.0, "repeats": 1},
    ),
    "fanout": (
        {
            "count": 1000,
            "grpc_watchers": 200,
            "sse_watchers": 50,
            "rate": 100.0,
            "seconds": 30.0,
            "repeats": 2,
        },
        {"count": 110, "grpc_watchers": 10, "sse_watchers": 3, "rate": 10.0, "seconds": 3.0, "repeats": 1},
    ),
    # The probe and the client command against their peers, per call.
    "cli": ({"count": 1000, "repeats": 5}, {"count": 110, "repeats": 1}),
    # W7: W4 with each server pinned to a CPU beside busy loops (a fifth of a core for it).
    "starved": (
        {
            "count": 1000,
            "grpc_watchers": 200,
            "sse_watchers": 50,
            "rate": 100.0,
            "seconds": 20.0,
            "repeats": 2,
            "busy": 4,
        },
        {
            "count": 110,
            "grpc_watchers": 10,
            "sse_watchers": 3,
            "rate": 20.0,
            "seconds": 2.0,
            "repeats": 1,
            "busy": 2,
        },
    ),
    # `--kubelet-socket` against the relay floor: 110 pods of ~5 KiB, 100 more watchers, the
    # servers taking turns in 4 rounds (bench/bridge.py); ~1 minute. Quick: 2 changes a turn.
    "bridge": (
        {"pods": 110, "pod_kb": 5, "changes": 400, "watchers": 100},
        {"pods": 20, "pod_kb": 2, "changes": 16, "watchers": 5},
    ),
    # N watchers on the real kubelet's socket, then on the bridge, under static-pod churn
    # (bench/kubelet.py); ~2 minutes. Skipped, saying why, where the kubelet cannot run.
    "kubelet": ({"watchers": (50, 200), "seconds": 20.0}, {"watchers": (5,), "seconds": 4.0}),
    # `/healthz`, gRPC health and a watch event, idle and while 10 Lists of 5,000 pods (each a
    # view of its own: what the default --burst admits) are assembled (bench/health.py); 5
    # rounds, ~1-2 minutes.
    "health": (
        {"count": 5000, "lists": 10, "rounds": 5, "idle": 20, "budgets": (None, 512)},
        {"count": 200, "lists": 4, "rounds": 1, "idle": 3, "budgets": (None,)},
    ),
}
# W4's rate sweep (`fanout --sweep`), (full, quick): rates a factor of about sqrt(2) apart, 10 s
# each, ours and the floor taking turns, until one of ours is cut off and the floor's p99
# passes 1 s; ~5 minutes.
SWEEP: tuple[dict[str, Any], dict[str, Any]] = (
    {
        "count": 1000,
        "grpc_watchers": 200,
        "sse_watchers": 50,
        "rates": [10.0, 14.0, 20.0, 28.0, 40.0, 57.0, 80.0, 113.0, 160.0, 226.0, 320.0],
        "seconds": 10.0,
    },
    {"count": 110, "grpc_watchers": 10, "sse_watchers": 3, "rates": [10.0, 20.0], "seconds": 2.0},
)
RUNNERS = {
    "source": source.run,
    "startup": workloads.startup,
    "memory": memory.run,
    "footprint": footprint.run,
    "listmemory": listmemory.run,
    "requests": workloads.requests,
    "lists": workloads.lists,
    "httpmetrics": httpmetrics.run,
    "fanout": fanout.run,
    "sse": sse.run,
    "starved": fanout.starved,
    "cli": cli.run,
    "bridge": bridge.run,
    "kubelet": kubelet.run,
    "health": health.run,
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
    if "httpmetrics" in results:
        for r in results["httpmetrics"]["rows"]:
            if r["variant"] != "floor":
                name = f"W3 HTTP {r['route']} in process"
                row(name, f"µs/request, {r['variant']}"[:30], r["us_per_request"], r["floor_us"])
    if "lists" in results:
        for r in results["lists"]:
            name = f"W3 {r['pods']} pods {r['surface']} {r['call']}"
            row(name, "calls/s", r["ours_per_s"], r["floor_per_s"])
            row(name, "server CPU µs/call", r["ours_cpu_us"], r["floor_cpu_us"])
    if "sse" in results:
        r = results["sse"]
        name = f"W4 SSE {r['watchers']} w {r['rate']:g}/s"
        row(name, "server CPU µs/frame", r["ours_cpu_us_per_frame"], r["floor_cpu_us_per_frame"])
    if "fanout" in results:
        r = results["fanout"]
        name = f"W4 {r['pods']} pods {r['grpc_watchers']}+{r['sse_watchers']} w {r['rate']:g}/s"
        o, f = r["ours"], r["floor"]
        for key in ("cut_off", "lost", "unpublished", "p50_ms", "p99_ms", "grpc_p99_ms", "sse_p99_ms"):
            ours, floor = (float("nan") if v is None else v for v in (o[key], f[key]))  # None: unknown
            row(name, key, ours, floor)
        row(name, "frames_per_s", o["frames_per_s"], f["frames_per_s"])
        for key in (
            "server_cpu_us_per_frame",
            "server_cpu_share",
            "client_cpu_us_per_frame",
            "client_cpu_share",
        ):
            row(name, key, o[key], f[key])
    if "cli" in results:
        r = results["cli"]
        for group, floor_name in (("check", "minimal Python health check"), ("get", "kubectl get pods -A")):
            runs = r[group]
            floor = runs.get(floor_name)
            for command, figures in runs.items():
                for key in ("cpu_s", "rss_mib", "wall_s"):
                    row(
                        f"CLI {r['pods']} pods {command}"[:28],
                        key,
                        figures[key],
                        floor[key] if floor else None,
                    )
    if "starved" in results:
        r = results["starved"]
        name = f"W7 starved {r['grpc_watchers']}+{r['sse_watchers']} w {r['rate']:g}/s"
        o, f = r["ours"], r["floor"]
        for key in (
            "cut_off",
            "frames",
            "lost",
            "coalesced",
            "converged",
            "converge_p50_s",
            "converge_max_s",
            "server_cpu_us_per_frame",
            "server_cpu_share",
        ):
            ours, floor = (float("nan") if v is None else v for v in (o[key], f[key]))
            row(name, key, ours, floor)
    if "bridge" in results:
        r = results["bridge"]
        name = f"bridge {r['pods']} pods +{r['watchers']} w"
        o, f = r["pods-api"], r["floor"]
        for key in ("p50_ms", "p99_ms", "cpu_us_per_frame", "rss_mib", "peak_rss_mib"):
            row(name, key, o[key], f[key])
        row(name, "RSS MiB vs A (--fixtures)", o["rss_mib"], r["upstream_rss_mib"])
        row(name, "load average", r["load_average"])
    if "kubelet" in results:
        r = results["kubelet"]
        if "skipped" in r:
            lines.append(f"{'kubelet':28} skipped: {r['skipped']}")
        for k in r.get("rows", []):
            name = f"kubelet {k['watchers']} w on the {k['on']}"
            row(name, "kubelet CPU µs/event", k["kubelet_cpu_us_per_event"])
            row(name, "bridge CPU µs/event", k["bridge_cpu_us_per_event"])
            row(name, "kubelet CPU share", k["kubelet_cpu_share"])
            row(name, "bridge CPU share", k["bridge_cpu_share"])
    if "health" in results:
        for r in results["health"]:
            budget = f"budget {r['list_budget_mib']} MiB" if r["list_budget_mib"] else "default budget"
            name = f"health {r['pods']}p {r['lists']} Lists {budget}"[:28]
            for probe in ("healthz", "grpc_health", "watch_event"):
                for key in ("p50_ms", "p99_ms", "max_ms"):
                    row(name, f"{probe} {key} (vs idle)", r["burst"][probe][key], r["floor"][probe][key])
            row(name, "burst s (median of rounds)", r["burst_s"])
            row(name, "Lists answered 200", r["list_statuses"].get("200", 0), r["lists"] * r["rounds"])
    if "fanout_sweep" in results:
        r = results["fanout_sweep"]
        name = f"W4 sweep {r['grpc_watchers']}+{r['sse_watchers']} w {r['seconds']:g} s"
        top = max(r["rates"])

        def rate(found: float | None) -> str:
            return f"{found:g}" if found is not None else f">{top:g}"  # not reached

        ours, floor = rate(r["ours_first_cut_off_rate"]), rate(r["floor_p99_over_1s_rate"])
        lines.append(f"{name:28} {'/s: ours cut off, floor p99>1s':30} {ours:>10} {floor:>10}")
    if "memory" in results:
        for r in results["memory"]:
            name = f"W5 {r['pods']} pods"
            row(name, "RSS 1 s after Lists MiB", r["rss_after_lists_mib"], r["target_mib"])
            row(name, "idle RSS MiB (vs 3x+60 MB)", r["idle_rss_mib"], r["target_mib"])
            row(name, "idle RSS vs bare holder MiB", r["idle_rss_mib"], r["floor_rss_mib"])
            row(name, f"RSS, {r['watchers']} watchers MiB", r["rss_with_watchers_mib"], r["target_mib"])
            row(name, "KiB per watcher vs bare stream", r["per_watcher_kib"], r["floor_per_stream_kib"])
            row(name, "RSS after watchers MiB", r["rss_after_watchers_mib"], r["idle_rss_mib"])
            row(name, "cycles: 2nd half's peak - 1st's", r["cycle_growth_mib"])
            row(name, "RSS after churn MiB (target)", r["rss_after_churn_mib"], r["after_churn_target_mib"])
            row(name, "List server CPU µs/pod", r["list_cpu_us_per_pod"], r["list_floor_cpu_us_per_pod"])
    if "footprint" in results:
        for r in results["footprint"]:
            name = f"memory {r['source']} {r['pods']} pods"[:28]
            row(name, "RSS MiB (vs the List's pb)", r["rss_mib"], r["pb_mib"])
            row(name, "USS MiB", r["uss_mib"])
            if r["per_1000_mib"] is not None:
                row(name, "RSS per 1,000 pods (vs pb)", r["per_1000_mib"], r["pb_per_1000_mib"])
    if "listmemory" in results:
        for r in results["listmemory"]:
            name = f"RSS {r['pods']} pods"
            row(name, "before Lists MiB (vs bare)", r["ours_before_mib"], r["floor_before_mib"])
            row(name, "after a List per surface MiB", r["ours_after_mib"], r["floor_after_mib"])
    if "startup" in results:
        r = results["startup"]
        name = f"W6 {r['files']} manifests"
        row(name, "to SERVING s (wall)", r["ours_wall_s"], r["floor_wall_s"])
        row(name, "CPU s", r["ours_cpu_s"], r["floor_cpu_s"])
        row(name, "s (wall) vs PyYAML CSafeLoader", r["ours_wall_s"], r["pyyaml_floor_wall_s"])
        row(name, "CPU s vs PyYAML CSafeLoader", r["ours_cpu_s"], r["pyyaml_floor_cpu_s"])
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workload", nargs="?", default="all", choices=["all", *RUNNERS])
    parser.add_argument("--quick", action="store_true", help="every workload small; for CI")
    parser.add_argument("--sweep", action="store_true", help="fanout: the rate sweep (~5 min)")
    args = parser.parse_args()
    chosen = list(RUNNERS) if args.workload == "all" else [args.workload]
    results: dict[str, Any] = {}
    started = time.monotonic()
    if args.sweep:
        if args.workload != "fanout":
            parser.error("--sweep goes with the fanout workload")
        results["fanout_sweep"] = fanout.sweep(**SWEEP[1 if args.quick else 0])
        chosen = []
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
