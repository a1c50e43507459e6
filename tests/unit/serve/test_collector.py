"""The start-up frozen out of the garbage collector's passes (serve/collector.py): once, when
the sources first sync, and never again, so that what a running server makes stays collectable."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from pods_api.serve.collector import freezer


@pytest.fixture
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()  # the test process's objects go back to the collector


def test_the_start_up_is_frozen_when_first_ready_and_only_then(unfrozen: None) -> None:
    on_readiness = freezer()
    on_readiness(False)
    assert gc.get_freeze_count() == 0, "not synced yet: nothing frozen"
    on_readiness(True)
    frozen = gc.get_freeze_count()
    assert frozen > 0
    made_since = [[] for _ in range(100)]
    on_readiness(False)
    on_readiness(True)
    assert gc.get_freeze_count() == frozen, "a later sync freezes nothing more"
    assert gc.is_tracked(made_since[0])
