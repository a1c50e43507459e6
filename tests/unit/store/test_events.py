"""The node's event store: one record per (container, type, reason, message), repeats counted on
it with the earliest and latest time whatever order they come in, and bounded."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pods_api.core.store.observations import NORMAL, Involved, NodeEvents, Observation

WEB = Involved("shop", "web", "uid-1", "spec.containers{web}")
SIDECAR = Involved("shop", "web", "uid-1", "spec.containers{proxy}")


def seen(involved: Involved, reason: str, at: int) -> Observation:
    return Observation(involved, NORMAL, reason, f"{reason} container", at)


def test_a_repeat_is_counted_on_the_same_record_and_others_are_their_own() -> None:
    events = NodeEvents()
    events.record(seen(WEB, "Started", 10))
    first = next(events.all())
    events.record(seen(WEB, "Started", 30))
    events.record(seen(SIDECAR, "Started", 20))
    events.record(seen(WEB, "Created", 9))
    by_key = {(e.involved.field_path, e.reason): e for e in events.all()}
    assert len(by_key) == 3
    started = by_key[("spec.containers{web}", "Started")]
    assert (started.count, started.first, started.last) == (2, 10, 30)
    assert started.serial == first.serial and started.version > started.serial
    assert by_key[("spec.containers{proxy}", "Started")].count == 1


@given(st.lists(st.integers(min_value=1, max_value=10**18), min_size=1, max_size=20))
def test_first_and_last_are_the_extremes_whatever_the_order(times: list[int]) -> None:
    events = NodeEvents()
    for at in times:
        events.record(seen(WEB, "Started", at))
    (event,) = events.all()
    assert (event.count, event.first, event.last) == (len(times), min(times), max(times))


def test_bounded_the_least_recently_seen_goes_first() -> None:
    events = NodeEvents(size=2)
    a, b, c = (Involved("ns", p, f"uid-{p}", "spec.containers{x}") for p in "abc")
    events.record(seen(a, "Started", 1))
    events.record(seen(b, "Started", 2))
    events.record(seen(a, "Started", 3))  # a is now the most recent
    events.record(seen(c, "Started", 4))
    assert {e.involved.pod for e in events.all()} == {"a", "c"} and len(events) == 2


def test_names_are_unique_and_later_than_an_earlier_run() -> None:
    earlier = NodeEvents()
    earlier.record(seen(WEB, "Started", 1))
    later = NodeEvents()
    later.record(seen(WEB, "Started", 1))
    later.record(seen(SIDECAR, "Started", 1))
    serials = [e.serial for e in later.all()]
    assert len(set(serials)) == 2 and min(serials) > next(earlier.all()).serial
