"""Combining the pods of several inputs, and reporting each problem once."""

from __future__ import annotations

import logging

import pytest
from builders import pod

from pods_api.core.store.version import PodVersion
from pods_api.sources.reporting import Reporter, unique_pods

# ---------------------------------------------------------------------------------------------
# combining and reporting


def test_unique_pods_keeps_the_first_claim() -> None:
    a, a_again = PodVersion.from_json(pod("a", uid="1")), PodVersion.from_json(pod("a", uid="2"))
    b_same_uid = PodVersion.from_json(pod("b", uid="1"))
    pods, problems = unique_pods([("x", [a]), ("y", [a_again, b_same_uid])], by_name=True)
    assert pods == [a]
    assert problems == [
        "y: pod /a ignored: name /a is already served from x",
        "y: pod /b ignored: uid 1 is already served from x",
    ]
    pods, _ = unique_pods([("x", [a]), ("y", [a_again, b_same_uid])], by_name=False)
    assert pods == [a, a_again]


def test_reporter_logs_and_counts_each_problem_once(caplog: pytest.LogCaptureFixture) -> None:
    counted: list[str] = []

    def count(source: str, reason: str) -> None:
        assert source == "src"
        counted.append(reason)

    reporter = Reporter("src", count)
    with caplog.at_level(logging.INFO, logger="pods_api.sources.reporting"):
        reporter.report(["e1"], ["w1"])
        reporter.report(["e1", "e2"], ["w1"])  # a resync: only e2 is new
        reporter.report([], [])  # both resolved
        reporter.report(["e1"])  # back again: reported again
        reporter.attempt_failed("down")
        reporter.attempt_failed("down")  # each failed attempt counts; the log says it once
    assert counted == ["e1", "e2", "e1", "down", "down"]
    assert [r.getMessage() for r in caplog.records] == [
        "pod source src: e1",
        "pod source src: w1",
        "pod source src: e2",
        "pod source src: resolved: e1",
        "pod source src: resolved: e2",
        "pod source src: e1",
        "pod source src: down",
        "pod source src: resolved: e1",
    ]
