"""Pods in every state kubectl's printer distinguishes, and the clock they are printed at."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import yaml
from repo import ROOT

NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)


def example_pods() -> list[dict[str, Any]]:
    pods = []
    for path in sorted((ROOT / "examples" / "fixtures").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            pods.extend(doc.get("items", [doc]))
    return sorted(pods, key=lambda p: (p["metadata"]["namespace"], p["metadata"]["name"]))
