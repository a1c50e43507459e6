"""The suite's shape: tests/unit/<wing>/ run in-process in seconds; tests/e2e/ start real servers
(`pods-api serve`, containerd, kubectl, Go clients) over real sockets and are marked `e2e`.
Shared builders and harnesses live in tests/support/ (on the path via pyproject.toml)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import settings

# Property tests judge what the code does, never how fast: a per-example deadline only turns a
# loaded CI machine into a failure. Examples stay bounded by each test's max_examples.
settings.register_profile("pods-api", deadline=None)
settings.load_profile("pods-api")

E2E = Path(__file__).resolve().parent / "e2e"
# Fixtures every wing may use: the in-process gateway (gateway, make_gateway), go_build and
# go_remarshal (Go's own bytes of pods), one containerd per session (runtime, kubelet), the sweep
# that kills any `pods-api serve` a test left running (serve), and the real kubelet v1.37.2 per
# module (real_kubelet), and the real one-node cluster per module (real_cluster).
pytest_plugins = ["gatewayharness", "gobuild", "gomarshal", "containerd", "serve", "realkubelet", "cluster"]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("pods-api")
    group.addoption(
        "--seeds",
        type=int,
        default=2,
        help="seeds for the randomized invariant driver (tests/e2e/test_invariant.py); a few run by default",
    )
    group.addoption("--first-seed", type=int, default=0, help="the first of those seeds")
    group.addoption(
        "--changes",
        type=int,
        default=0,
        help="file changes per seed for the invariant driver (0: its short default run)",
    )
    group.addoption(
        "--event-log",
        default=None,
        help="a directory: the invariant driver writes there every event each watcher gets, a file each",
    )


# What a test needs, known from where the fixtures it takes are defined: containerd's
# (tests/support/containerd.py), the Go builder's (tests/support/gobuild.py), the real
# kubelet's (tests/support/realkubelet.py) or the real kube-apiserver's
# (tests/support/realapiserver.py), so that no test that needs one goes unmarked (a test
# module's own fixture of the same name is not theirs).
NEEDS = {
    "containerd": "needs_containerd",
    "gobuild": "needs_go",
    "realkubelet": "needs_kubelet",
    "realapiserver": "needs_apiserver",
    "cluster": "needs_cluster",
}


def _needs(item: pytest.Item) -> set[str]:
    info = getattr(item, "_fixtureinfo", None)  # pytest's resolved fixtures for this test
    if info is None:
        return set()
    homes = {defs[-1].func.__module__ for defs in info.name2fixturedefs.values() if defs}
    return {NEEDS[home] for home in homes if home in NEEDS}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Everything under tests/e2e/ is `e2e`, so `pytest -m 'not e2e'` is the fast suite; a test
    taking containerd's, the Go builder's, the real kubelet's or the real kube-apiserver's
    fixtures is `needs_containerd`, `needs_go`, `needs_kubelet` or `needs_apiserver`."""
    for item in items:
        if E2E in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.e2e)
        for marker in _needs(item):
            if item.get_closest_marker(marker) is None:
                item.add_marker(getattr(pytest.mark, marker))
