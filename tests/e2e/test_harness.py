"""The harness that starts `pods-api serve` (tests/support/serve.py) stops every server it
starts, whatever happens: a start that times out or fails, a handle a test lost."""

from __future__ import annotations

from pathlib import Path

import pytest
from repo import ROOT
from serve import close_all, start

FIXTURES = str(ROOT / "examples" / "fixtures")


def running(run_dir: Path) -> list[int]:
    """The pids of the processes whose command line names `run_dir` (each server has its own)."""
    pids = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes()
        except OSError:  # it ended while we looked
            continue
        if str(run_dir).encode() in text:
            pids.append(int(cmdline.parent.name))
    return pids


def test_a_start_that_times_out_leaves_no_process(tmp_path: Path) -> None:
    run = tmp_path / "run"
    with pytest.raises(AssertionError, match="no line with 'a line pods-api never writes'"):
        start(run, "--fixtures", FIXTURES, wait="a line pods-api never writes", timeout=1)
    assert running(run) == []


def test_a_start_whose_server_exits_leaves_no_process(tmp_path: Path) -> None:
    run = tmp_path / "run"
    with pytest.raises(AssertionError, match="pods-api exited"):
        start(run, "--fixtures", str(tmp_path / "absent"), "--qps", "-1")
    assert running(run) == []


def test_a_server_whose_handle_was_lost_is_killed_by_the_sweep(tmp_path: Path) -> None:
    run = tmp_path / "run"
    start(run, "--fixtures", FIXTURES)
    assert running(run) != []
    assert run in [served.run_dir for served in close_all()]
    assert running(run) == []
