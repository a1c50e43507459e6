"""The bridge's unknown-event counter: its `type` label is bounded, whatever the upstream sends."""

from __future__ import annotations

from pods_api.core.policy.metrics import event_type_label


def test_unknown_event_type_labels_are_bounded() -> None:
    assert event_type_label(0) == "UNSPECIFIED"
    assert [event_type_label(n) for n in (5, 9, 15)] == ["5", "9", "15"]
    # An int32 the upstream chose: each label value would be a series kept for the process's life.
    assert {event_type_label(n) for n in (16, 2**31 - 1, -1, -(2**31))} == {"other"}
