"""The shared reference pods (../shared/k8s/pod-vectors.json), for the codec tests. A user's
clone has no ../shared: every test that needs them skips, saying so."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

SHARED_K8S = Path(__file__).resolve().parents[3] / "shared" / "k8s"


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
