"""The metrics' own pieces: the bridge's unknown-event counter's bounded `type` label, and the
fan-out delay histogram, whose exposition is prometheus_client's Histogram's."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Histogram, generate_latest

from pods_api.core.policy.metrics import Delays, event_type_label

BOUNDS = (0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0)


def test_unknown_event_type_labels_are_bounded() -> None:
    assert event_type_label(0) == "UNSPECIFIED"
    assert [event_type_label(n) for n in (5, 9, 15)] == ["5", "9", "15"]
    # An int32 the upstream chose: each label value would be a series kept for the process's life.
    assert {event_type_label(n) for n in (16, 2**31 - 1, -1, -(2**31))} == {"other"}


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.one_of(st.sampled_from(BOUNDS), st.floats(min_value=0, max_value=5, allow_nan=False)),
        max_size=50,
    )
)
def test_the_delay_histogram_exposes_what_prometheus_clients_histogram_exposes(seconds: list[float]) -> None:
    """Scrapers and dashboards read `pods_api_watch_event_delay_seconds` as a Prometheus
    histogram: the same bucket labels, cumulative counts (a value on a bound counts in that
    bucket), count and sum as the library's own Histogram gives for the same observations."""
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    delays = Delays("delay_seconds", "Delay.", BOUNDS)
    ours.register(delays)
    histogram = Histogram("delay_seconds", "Delay.", buckets=BOUNDS, registry=theirs)
    for value in seconds:
        delays.observe(value)
        histogram.observe(value)
    assert generate_latest(ours) == generate_latest(theirs)
