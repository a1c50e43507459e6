"""grpc's own log lines about clients, as the cygrpc layer writes them (its logger, its text,
with the traceback it attaches), become one throttled line each."""

from __future__ import annotations

import logging

import pytest

from pods_api.core.grpc import corelog


def _log_as_grpc(message: str, *args: object) -> None:
    try:
        raise RuntimeError("what grpc's traceback would show")
    except RuntimeError:
        logging.getLogger(corelog.GRPC_LOGGER).exception(message, *args)


def test_a_client_gone_mid_answer_is_one_line_per_interval(caplog: pytest.LogCaptureFixture) -> None:
    corelog.install()
    corelog.install()  # once, however often the server is built
    for _ in range(20):
        _log_as_grpc("ExecuteBatchError raised in core by servicer method [/v1alpha1.Pods/ListPods]")
    lines = [r for r in caplog.records if r.name.startswith("pods_api")]
    assert [r.getMessage() for r in lines] == [
        "a gRPC client went away before its answer was sent (/v1alpha1.Pods/ListPods)"
    ]
    assert not any(r.exc_info for r in caplog.records)


def test_metadata_that_is_not_utf8_is_one_line_and_other_records_pass(
    caplog: pytest.LogCaptureFixture,
) -> None:
    corelog.install()
    for _ in range(5):
        _log_as_grpc("Invalid encoding on %s", b"metadata.\xff")
    _log_as_grpc("Unexpected [%s] raised by servicer method [%s]", "KeyError", "/x")
    shown = [r.getMessage() for r in caplog.records]
    assert shown == [
        "a gRPC request carried metadata that is not UTF-8 (read as Latin-1)",
        "Unexpected [KeyError] raised by servicer method [/x]",
    ]
