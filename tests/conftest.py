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
# Fixtures every wing may use: the in-process gateway (gateway, make_gateway), go_build, one
# containerd per session (runtime, kubelet), and the sweep that kills any `pods-api serve` a
# test left running (serve).
pytest_plugins = ["gatewayharness", "gobuild", "containerd", "serve"]


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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Everything under tests/e2e/ is `e2e`, so `pytest -m 'not e2e'` is the fast suite."""
    for item in items:
        if E2E in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.e2e)
