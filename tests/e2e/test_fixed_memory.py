"""What a served process has imported: every node pays for the server's imports in resident
memory, so a source's or a surface's libraries load only when it is configured (BENCHMARKS.md,
"Memory"). Read from the running server itself, started as users start it: the command's
`main` in a Python that, once the server has shut down on SIGTERM, writes `sys.modules`."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

from repo import ROOT
from serve import TIMEOUT, start

# `python -c` runs it as: argv[1] the file to write, the rest the command line after `pods-api`.
_DUMP_MODULES = (
    "import json, sys\n"
    "from pods_api.serve.cli import main\n"
    "try:\n"
    "    main(sys.argv[2:])\n"
    "except SystemExit:\n"
    "    pass\n"
    "with open(sys.argv[1], 'w') as out:\n"
    "    json.dump(sorted(sys.modules), out)\n"
)

# Libraries a server with only files as its sources has no use for: the polled sources' HTTP
# client, the API server's client, WebSocket libraries (no WebSocket is served), the CRI API.
NOT_FOR_FILES = (
    "httpx",
    "aiohttp",
    "kubernetes_asyncio",
    "wsproto",
    "websockets",
    "pods_api.sources.cri.pb.cri_runtime_v1_pb2",
    "pods_api.sources.cri.source",
)


def served_modules(tmp_path: Path, *args: str, ready: bool = True) -> set[str]:
    """The modules a `pods-api serve ARGS` had loaded once listening (and, with `ready`, SERVING)
    and then shut down."""
    out = tmp_path / "modules.json"
    served = start(tmp_path / "run", *args, program=(sys.executable, "-c", _DUMP_MODULES, str(out)))
    try:
        if ready:
            served.wait_ready()
        served.proc.send_signal(signal.SIGTERM)
        assert served.proc.wait(timeout=TIMEOUT) == 0, "".join(served.lines)
    finally:
        served.close()
    return set(json.loads(out.read_text()))


def _loaded(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == n or m.startswith(n + ".") for n in names))


def test_a_server_of_fixtures_loads_no_http_client_api_server_client_websocket_or_cri(
    tmp_path: Path,
) -> None:
    modules = served_modules(tmp_path, "--fixtures", str(ROOT / "examples" / "fixtures"))
    assert {"grpc", "fastapi", "uvicorn"} <= modules  # it did serve both surfaces
    assert _loaded(modules, NOT_FOR_FILES) == []


def test_a_polled_source_loads_its_http_client(tmp_path: Path) -> None:
    # The lazy import is where the poller needs it: a URL source still has httpx once it runs.
    url = "http://127.0.0.1:9/pods"  # the discard port: nothing answers, the poll just fails
    modules = served_modules(tmp_path, "--kubelet-pods-url", url, ready=False)  # never synced
    assert "httpx" in modules
