"""The List budget: each body counted once while any hold it, refused past the budget unless
it would be the only one."""

from __future__ import annotations

import pytest

from pods_api.core.api.statuserrors import ResourceExhausted
from pods_api.core.policy.inflight import BytesInFlight


def test_a_body_counts_once_however_many_hold_it_and_goes_with_the_last() -> None:
    lists = BytesInFlight("HTTP", budget=100)
    body = b"x" * 60
    first, second = lists.hold(body), lists.hold(body)
    assert lists.held == 60
    first()
    first()  # a second release of the same hold changes nothing
    assert lists.held == 60
    second()
    assert lists.held == 0


def test_a_new_body_past_the_budget_is_refused_but_one_alone_always_goes() -> None:
    lists = BytesInFlight("gRPC", budget=100)
    release = lists.hold(b"x" * 250)  # larger than the budget, but alone: a List must stay possible
    with pytest.raises(ResourceExhausted, match="budget of 0 MiB") as err:
        lists.hold(b"y" * 10)
    assert err.value.retry_after == 1.0
    release()
    lists.hold(b"y" * 10)()


def test_a_spent_budget_refuses_before_anything_is_assembled() -> None:
    lists = BytesInFlight("HTTP", budget=100)
    lists.check()
    release = lists.hold(b"x" * 100)
    with pytest.raises(ResourceExhausted, match="on their way to HTTP clients: that is the budget"):
        lists.check()
    release()
    lists.check()
