from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

# Property tests judge what the code does, never how fast: a per-example deadline only turns a
# loaded CI machine into a failure. Examples stay bounded by each test's max_examples.
settings.register_profile("pods-api", deadline=None)
settings.load_profile("pods-api")

# The shared reference data sits beside the clone (../shared); a user's clone has none.
SHARED_K8S = Path(__file__).resolve().parents[2] / "shared" / "k8s"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("pods-api")
    group.addoption(
        "--seeds",
        type=int,
        default=2,
        help="seeds for the randomized invariant driver (tests/test_invariant.py); a few run by default",
    )
    group.addoption("--first-seed", type=int, default=0, help="the first of those seeds")


def shared_vectors() -> list[dict[str, Any]]:
    path = SHARED_K8S / "pod-vectors.json"
    if not path.exists():
        return []
    return json.loads(path.read_text())["vectors"]


def vector_params() -> list[Any]:
    vectors = shared_vectors()
    if not vectors:
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"{SHARED_K8S} is absent"))]
    return [pytest.param(v, id=v["name"]) for v in vectors]


def vector_pb(vector: dict[str, Any]) -> bytes:
    return base64.b64decode(vector["pb"])
