"""The bridge (`pods-api serve --kubelet-socket`) between two programs built from the kubelet's
own Go module: the stand-in kubelet (tests/go/kubelet/cmd/standin) upstream, the conformance
client on pods-api's socket. Pods pass through byte for byte, a change and a removal arrive as
exactly MODIFIED and DELETED, and an event type the released API never sends is counted, logged
and shown by `pods-api check`, never guessed at."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from builders import make_pod
from golines import Lines, StandIn, raw, run
from serve import PODS_API, TIMEOUT, Served, serving

from pods_api import pod_from_bytes, pod_to_bytes
from pods_api.client.exitcodes import Exit

pytestmark = pytest.mark.needs_go

PODS = {"uid-a": "db", "uid-b": "web"}


def go_pod(name: str, uid: str, phase: str = "Running") -> dict[str, Any]:
    """A pod as the stand-in reads it: Kubernetes JSON, decoded by Go's encoding/json into v1.Pod
    and sent as v1.Pod.Marshal() gives it. Bytes our own encoder would not write the same: its
    cpu request "1.441" Go keeps as written (ParseQuantity reuses a string it finds canonical),
    where ours writes the canonical "1441m"."""
    pod = make_pod(name, uid, phase)
    pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1.441"
    return pod


@pytest.fixture
def conformance(go_build: Callable[[str, str], Path]) -> Path:
    return go_build("kubelet", "./cmd/conformance")


@pytest.fixture
def kubelet(go_build: Callable[[str, str], Path], tmp_path: Path) -> Iterator[StandIn]:
    with StandIn(go_build("kubelet", "./cmd/standin"), tmp_path / "kubelet.sock") as standin:
        yield standin


@pytest.fixture
def sent(kubelet: StandIn) -> dict[str, bytes]:
    """uid -> the bytes the stand-in serves for each pod."""
    return {uid: raw(kubelet.put(go_pod(name, uid))) for uid, name in PODS.items()}


@pytest.fixture
def bridge(tmp_path: Path, kubelet: StandIn, sent: dict[str, bytes]) -> Iterator[Served]:
    with serving(tmp_path / "run", "--kubelet-socket", str(tmp_path / "kubelet.sock")) as served:
        yield served


def test_list_and_get_are_the_kubelets_bytes(
    conformance: Path, bridge: Served, sent: dict[str, bytes]
) -> None:
    # Go's encoding, which ours would not reproduce: pass-through is what keeps these bytes.
    assert any(pod_to_bytes(pod_from_bytes(b)) != b for b in sent.values())
    code, (listed,), err = run(conformance, "-socket", str(bridge.socket), "list")
    assert code == 0, err
    assert [raw(p) for p in listed["pods"]] == [sent[uid] for uid in sorted(sent)]
    code, (got,), err = run(conformance, "-socket", str(bridge.socket), "get", "uid-b")
    assert code == 0, err
    assert raw(got["pod"]) == sent["uid-b"]


def test_a_change_and_a_removal_arrive_as_modified_and_deleted(
    conformance: Path, bridge: Served, kubelet: StandIn, sent: dict[str, bytes]
) -> None:
    with Lines(conformance, "-socket", str(bridge.socket), "watch") as watch:
        start = watch.take(len(PODS) + 1)
        assert [(e["type"], raw(e["pod"])) for e in start[:-1]] == [
            ("ADDED", sent[uid]) for uid in sorted(sent)
        ]
        assert (start[-1]["type"], start[-1]["pod"]) == ("INITIAL_SYNC_COMPLETE", None)

        changed = kubelet.put(go_pod("web", "uid-b", "Failed"))
        assert changed["type"] == "MODIFIED"
        modified = watch.next()
        assert (modified["type"], modified["number"], raw(modified["pod"])) == ("MODIFIED", 2, raw(changed))

        added = kubelet.put(go_pod("cache", "uid-c"))
        fresh = watch.next()
        assert (fresh["type"], fresh["number"], raw(fresh["pod"])) == ("ADDED", 1, raw(added))

        kubelet.delete("uid-a")
        deleted = watch.next()
        assert (deleted["type"], deleted["number"]) == ("DELETED", 3)
        pod = deleted["pod"]
        assert pod["identityOnly"] and (pod["namespace"], pod["name"], pod["uid"]) == ("shop", "db", "uid-a")


def metric(served: Served, name: str) -> dict[str, float]:
    """Every sample of one metric family, by its labels as written."""
    transport = httpx.HTTPTransport(uds=str(served.http_socket))
    with httpx.Client(transport=transport, base_url="http://localhost", timeout=TIMEOUT) as client:
        text = client.get("/metrics").text
    return {
        line.split(" ")[0]: float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(name) and not line.startswith("#")
    }


def test_an_event_type_the_released_api_never_sends_is_counted_and_shown(
    conformance: Path, bridge: Served, kubelet: StandIn
) -> None:
    lists = kubelet.lists()
    with Lines(conformance, "-socket", str(bridge.socket), "watch") as watch:
        watch.take(len(PODS) + 1)
        kubelet.send(0, "uid-a")  # UNSPECIFIED
        kubelet.send(9, "uid-b")  # a number the released enum does not define
        bridge.wait_for_line("speaks another version of the Pods API")
        changed = kubelet.put(go_pod("db", "uid-a", "Succeeded"))  # the bridge still follows
        assert raw(watch.next()["pod"]) == raw(changed)  # and nothing reached us for 0 or 9
    counted = metric(bridge, "pods_api_upstream_unknown_events_total")
    source = f"kubelet:{kubelet.proc.args[2]}"
    assert counted == {
        f'pods_api_upstream_unknown_events_total{{source="{source}",type="UNSPECIFIED"}}': 1.0,
        f'pods_api_upstream_unknown_events_total{{source="{source}",type="9"}}': 1.0,
    }
    assert kubelet.lists() == lists  # no re-list papered over it
    check = subprocess.run(
        [PODS_API, "check", "--socket", str(bridge.socket)], capture_output=True, text=True, timeout=TIMEOUT
    )
    assert check.returncode == 0, check.stdout + check.stderr
    warning = next(line for line in check.stdout.splitlines() if line.startswith("warning:"))
    assert "speaks another version of the Pods API" in warning
    assert "UNSPECIFIED (0) x1, 9 x1" in warning


def test_an_upstream_with_other_numbers_never_syncs_and_check_says_why(
    go_build: Callable[[str, str], Path], tmp_path: Path
) -> None:
    """The pre-release draft's numbers (ADDED 0 ... INITIAL_SYNC_COMPLETE 3): every ADDED reads
    as UNSPECIFIED and the marker as a DELETED of nothing. The bridge must not sync on a guess
    (no List fallback): it stays not ready, and its refusals carry the warning."""
    socket = tmp_path / "kubelet.sock"
    with StandIn(go_build("kubelet", "./cmd/standin"), socket, "-draft") as kubelet:
        for uid, name in PODS.items():
            kubelet.put(go_pod(name, uid))
        with serving(tmp_path / "run", "--kubelet-socket", str(socket), ready=False) as bridge:
            bridge.wait_for_line("speaks another version of the Pods API")
            check = subprocess.run(
                [PODS_API, "check", "--socket", str(bridge.socket)],
                capture_output=True,
                text=True,
                timeout=TIMEOUT,
            )
            assert check.returncode == Exit.NOT_READY, check.stdout + check.stderr
            warnings = [line for line in check.stdout.splitlines() if line.startswith("warning:")]
            # (How many of the ADDED it has read by now is not the point: the exact counts are
            # checked above, after an event that orders them.)
            assert len(warnings) == 1 and "UNSPECIFIED (0) x" in warnings[0], check.stdout
            assert kubelet.lists() == 0
