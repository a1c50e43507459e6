"""The Python informer example of docs/clients.md is examples/informer.py, word for word, and it runs:
it prints the pods, says when it has synced, and prints a change made afterwards."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
from pathlib import Path

from podfiles import WEB, copy_examples, edit, set_phase
from repo import DOCS, ROOT
from serve import TIMEOUT, serving

EXAMPLE = ROOT / "examples" / "informer.py"


def test_the_docs_show_the_example_as_it_is() -> None:
    code = EXAMPLE.read_text()
    assert f"```python\n{code}```" in (DOCS / "clients.md").read_text()


def test_informer_example_runs(tmp_path: Path) -> None:
    fixtures = copy_examples(tmp_path / "fixtures")
    with serving(tmp_path / "run", "--fixtures", str(fixtures)) as served:
        proc = subprocess.Popen(
            [sys.executable, str(EXAMPLE)],
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PODS_API_SOCKET": str(served.socket)},
        )
        lines: queue.Queue[str] = queue.Queue()
        assert proc.stdout is not None
        threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout or ()], daemon=True).start()
        try:
            seen = []
            while not seen or not seen[-1].startswith("synced:"):
                seen.append(lines.get(timeout=TIMEOUT).strip())
            assert seen[-1] == "synced: 5 pods"
            assert "ADDED shop web-7c9d8f6b5d-x2x9k Running" in seen
            edit(fixtures / WEB, set_phase("Failed"))
            assert lines.get(timeout=TIMEOUT).strip() == "MODIFIED shop web-7c9d8f6b5d-x2x9k Failed"
        finally:
            proc.terminate()
            proc.wait(TIMEOUT)
