"""`pods-api serve` that says what holds its memory: `python -m bench.heapdump OUT [--trace] serve ...`
runs the server's own entry point (pods_api.serve.cli) and, on SIGUSR1, writes to OUT (JSON) the
process's resident memory (/proc: RSS, PSS, USS, anonymous), the sizes of the server's bounded
holders (the pods served, the watch ring and the pod versions only it keeps alive, every
snapshot's memo of assembled responses, the watch frame cache, the watchers' queues, the
compiled masks and views), glibc's heap (mallinfo2) and RSS before and after a malloc_trim, and
Python's small-object allocator. With `--trace`, tracemalloc runs from the start (one frame per
block: it costs memory of its own, reported) and the dump has the top allocation sites by line
and by file. protobuf's upb arenas and grpc's C core allocate with malloc directly: they are in
glibc's figures, never in tracemalloc's; the difference is reported as "untraced".

Read by bench/soak.py (the RSS plateau) and bench/footprint.py (memory per source)."""

from __future__ import annotations

import ctypes
import gc
import os
import signal
import sys
import tempfile
import tracemalloc
from pathlib import Path
from typing import Any

import orjson

MIB = 1024 * 1024
# Allocation sites kept in a dump: enough to cover what holds more than ~0.1 MiB at a plateau.
TOP_SITES = 30


class _Mallinfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",  # bytes from sbrk (the main heap)
            "ordblks",
            "smblks",
            "hblks",  # mmapped blocks
            "hblkhd",  # bytes in mmapped blocks
            "usmblks",
            "fsmblks",
            "uordblks",  # bytes in use (excluding mmapped blocks)
            "fordblks",  # free bytes inside the heaps
            "keepcost",  # free bytes at the top a trim can return
        )
    ]


def _libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return None
    if not hasattr(libc, "mallinfo2"):
        return None
    libc.mallinfo2.restype = _Mallinfo2
    return libc


_LIBC = _libc()


def proc_memory(pid: int | str = "self") -> dict[str, float]:
    """MiB from /proc/PID/smaps_rollup: Rss, Pss, USS (private clean + dirty), anonymous."""
    fields: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        name, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[-1] == "kB":
            fields[name] = int(parts[0])
    return {
        "rss_mib": fields["Rss"] / 1024,
        "pss_mib": fields["Pss"] / 1024,
        "uss_mib": (fields["Private_Clean"] + fields["Private_Dirty"]) / 1024,
        "anon_mib": fields["Anonymous"] / 1024,
    }


def _mallinfo() -> dict[str, float]:
    if _LIBC is None:
        return {}
    info = _LIBC.mallinfo2()
    names = ("arena", "hblkhd", "uordblks", "fordblks", "keepcost")
    return {name: getattr(info, name) / MIB for name in names}


def _pymalloc() -> dict[str, float]:
    """Python's small-object allocator: its arenas' bytes, and of those the ones in use, from
    sys._debugmallocstats (written to the C stderr, so read back through a file)."""
    with tempfile.TemporaryFile() as out:
        saved = os.dup(2)
        try:
            sys.stderr.flush()
            os.dup2(out.fileno(), 2)
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        out.seek(0)
        text = out.read().decode(errors="replace")
    figures: dict[str, float] = {}
    for line in text.splitlines():
        name, _, value = line.partition("=")
        name = name.strip().lstrip("#").strip()
        value = value.strip().replace(",", "")
        if (
            value.isdigit()
            and name not in figures
            and name
            in (
                "arenas allocated current",
                "bytes in allocated blocks",
                "bytes in available blocks",
                "bytes lost to pool headers",
                "bytes lost to quantization",
                "bytes lost to arena alignment",
                "Total",
            )
        ):
            figures[name] = int(value) / (1 if "arenas" in name else MIB)
    return figures


def _of(cls_name: str, module: str) -> list[Any]:
    wanted = sys.modules.get(module)
    if wanted is None:
        return []
    cls = getattr(wanted, cls_name)
    return [o for o in gc.get_objects() if isinstance(o, cls)]


def _version_bytes(pod: Any) -> int:
    """What one pod version holds in bytes objects: its framed protobuf, its JSON (if rendered:
    reading `json_bytes` would render it), its identity and every masked encoding kept with it."""
    held = len(pod.framed) + len(pod._json or b"") + len(pod._identity or b"")
    if pod._masked is not None:
        held += sum(len(m.framed) + len(m._json or b"") for m in pod._masked._items.values())
    return held


def holders() -> dict[str, Any]:
    """The bounded holders of the running server, found on the heap (there is one core)."""
    out: dict[str, Any] = {}
    caches = _of("PodCache", "pods_api.core.store.cache")
    versions = _of("PodVersion", "pods_api.core.store.version")
    served_ids: set[int] = set()
    ring_ids: set[int] = set()
    for cache in caches:
        served = [s.pod for s in cache._served.values()]
        served_ids.update(id(p) for p in served)
        out["pods_served"] = len(served)
        out["pods_served_mib"] = sum(_version_bytes(p) for p in served) / MIB
        out["pods_served_unmasked_mib"] = sum(len(p.framed) + len(p._json or b"") for p in served) / MIB
        out["pods_served_pb_mib"] = sum(len(p.framed) for p in served) / MIB
        ring = [event for event, _ in cache._ring]
        out["ring_events"] = len(ring)
        out["ring_counted_mib"] = cache._ring_held / MIB
        only_ring = {}
        for event in ring:
            for pod in (event.pod, event.previous):
                if pod is not None and id(pod) not in served_ids:
                    only_ring[id(pod)] = pod
        ring_ids.update(only_ring)
        out["ring_only_versions"] = len(only_ring)
        out["ring_only_versions_mib"] = sum(_version_bytes(p) for p in only_ring.values()) / MIB
    others = [p for p in versions if id(p) not in served_ids and id(p) not in ring_ids]
    out["other_versions"] = len(others)
    out["other_versions_mib"] = sum(_version_bytes(p) for p in others) / MIB
    snapshots = _of("Snapshot", "pods_api.core.store.snapshot")
    out["snapshots"] = len(snapshots)
    out["snapshot_memos_mib"] = sum(s._memo._weight for s in snapshots) / MIB
    out["snapshot_memo_entries"] = sum(len(s._memo) for s in snapshots)
    streams = _of("WatchStreams", "pods_api.core.store.stream")
    out["frames_kept"] = sum(s.frames_held[0] for s in streams)
    out["frames_mib"] = sum(s.frames_held[1] for s in streams) / MIB
    watchers = _of("Watcher", "pods_api.core.store.watch")
    out["watchers"] = len(watchers)
    out["watcher_queued_events"] = sum(len(w._queue) + len(w._pending) for w in watchers)
    for name, module, attr in (
        ("compiled_masks", "pods_api.core.query.fieldmask", "_compile"),
        ("views_kept", "pods_api.gateway.pods", "_cached_view"),
    ):
        cached = getattr(sys.modules.get(module), attr, None)
        if cached is not None and hasattr(cached, "cache_info"):
            out[name] = cached.cache_info().currsize
    return out


def _tracemalloc_top() -> dict[str, Any]:
    snapshot = tracemalloc.take_snapshot()
    snapshot = snapshot.filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)])
    traced, peak = tracemalloc.get_traced_memory()

    def top(key: str) -> list[dict[str, Any]]:
        return [
            {"where": str(stat.traceback), "mib": stat.size / MIB, "blocks": stat.count}
            for stat in snapshot.statistics(key)[:TOP_SITES]
        ]

    return {
        "traced_mib": traced / MIB,
        "traced_peak_mib": peak / MIB,
        "tracemalloc_own_mib": tracemalloc.get_tracemalloc_memory() / MIB,
        "by_line": top("lineno"),
        "by_file": top("filename"),
    }


def dump(path: Path) -> None:
    """Everything above, written to `path` (the trim is the heap module's own)."""
    from pods_api.serve import heap

    # The process's own figures first: walking the heap and taking tracemalloc's snapshot
    # allocate, and would be counted in them.
    report: dict[str, Any] = {"before_trim": proc_memory(), "malloc_before_trim": _mallinfo()}
    heap.trim()
    report["after_trim"] = proc_memory()
    report["malloc_after_trim"] = _mallinfo()
    report["pymalloc"] = _pymalloc()
    report["holders"] = holders()
    if tracemalloc.is_tracing():
        report["tracemalloc"] = _tracemalloc_top()
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(orjson.dumps(report, option=orjson.OPT_INDENT_2))
    os.replace(tmp, path)  # the reader waits for the file: never a half-written one


def main() -> None:
    out, *argv = sys.argv[1:]
    if argv[:1] == ["--trace"]:
        argv = argv[1:]
        tracemalloc.start(1)
    signal.signal(signal.SIGUSR1, lambda *_: _dump_or_say(Path(out)))
    from pods_api.serve import cli

    cli.main(argv)


def _dump_or_say(path: Path) -> None:
    """A dump that fails says why in the file the reader waits for, never in the server."""
    try:
        dump(path)
    except Exception as exc:  # a holder renamed: the measurement is wrong, the server is not
        path.write_bytes(orjson.dumps({"error": repr(exc)}))


if __name__ == "__main__":
    main()
