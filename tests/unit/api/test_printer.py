"""The pod printer against the API server's own printer cases (pkg/printers/internalversion's
TestPrintPod, TestPrintPodWithRestartableInitContainer, TestPrintPodwide, TestPrintPodConditions,
TestPrintNonTerminatedPod, TestTranslateTimestampSince): their inputs, written as pod JSON, and
their expected cells, taken as facts."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import builders
import pytest
from hypothesis import given
from hypothesis import strategies as st
from printerpods import NOW, example_pods
from strategies import pods as any_pods

from pods_api.core.api.codec import pod_from_message
from pods_api.core.api.messageview import pod_view
from pods_api.core.api.printer import (
    POD_COLUMNS,
    POD_FIELDS,
    human_duration,
    pod_row,
    pod_text_table,
    render_text_table,
)
from pods_api.core.api.table import pod_table
from pods_api.core.query.fieldmask import parse_mask


def ago(**delta: float) -> str:
    return (NOW - timedelta(**delta)).isoformat().replace("+00:00", "Z")


def pod(
    name: str, containers: int = 1, init: list[dict[str, Any]] | int = 0, **status: Any
) -> dict[str, Any]:
    """A pod the way Go's test literals build one: unnamed containers, a status as given."""
    inits = [{"name": ""} for _ in range(init)] if isinstance(init, int) else init
    unnamed = [{"name": ""} for _ in range(containers)]
    body = builders.pod(name, image=None, typed=False, containers=unnamed, initContainers=inits)
    body["status"] = status
    return body


RUNNING = {"running": {}}
TEN_S = {"terminated": {"finishedAt": ago(seconds=10)}}
SIDECARS = [
    {"name": "restartable-init-1", "restartPolicy": "Always"},
    {"name": "restartable-init-2", "restartPolicy": "Always"},
]

# (pod, expected cells NAME READY STATUS RESTARTS AGE)
CASES: list[tuple[dict[str, Any], list[str]]] = [
    (
        pod(
            "test1",
            2,
            phase="podPhase",
            containerStatuses=[{"ready": True, "restartCount": 3, "state": RUNNING}, {"restartCount": 3}],
        ),
        ["test1", "1/2", "podPhase", "6", "<unknown>"],
    ),
    (
        pod(
            "test2",
            2,
            phase="podPhase",
            containerStatuses=[
                {"ready": True, "restartCount": 3, "state": RUNNING},
                {"state": {"waiting": {"reason": "ContainerWaitingReason"}}, "restartCount": 3},
            ],
        ),
        ["test2", "1/2", "ContainerWaitingReason", "6", "<unknown>"],
    ),
    (
        pod(
            "test3",
            2,
            phase="podPhase",
            containerStatuses=[
                {"state": {"waiting": {"reason": "ContainerWaitingReason"}}, "restartCount": 3},
                {"state": {"terminated": {"reason": "ContainerTerminatedReason"}}, "restartCount": 3},
            ],
        ),
        ["test3", "0/2", "ContainerWaitingReason", "6", "<unknown>"],
    ),
    (
        pod(
            "test4",
            2,
            phase="podPhase",
            containerStatuses=[
                {"ready": True, "restartCount": 3, "state": RUNNING},
                {"ready": True, "restartCount": 3},
            ],
        ),
        ["test4", "1/2", "podPhase", "6", "<unknown>"],
    ),
    (
        pod(
            "test5",
            2,
            reason="podReason",
            phase="podPhase",
            containerStatuses=[
                {"ready": True, "restartCount": 3, "state": RUNNING},
                {"ready": True, "restartCount": 3},
            ],
        ),
        ["test5", "1/2", "podReason", "6", "<unknown>"],
    ),
    (
        pod(
            "test6",
            2,
            phase="Running",
            reason="",
            containerStatuses=[
                {
                    "ready": True,
                    "restartCount": 3,
                    "state": {"terminated": {"reason": "Completed", "exitCode": 0}},
                },
                {"ready": True, "restartCount": 3, "state": RUNNING},
            ],
        ),
        ["test6", "1/2", "NotReady", "6", "<unknown>"],
    ),
    (
        pod(
            "test6",
            2,
            phase="Running",
            reason="",
            containerStatuses=[
                {
                    "ready": True,
                    "restartCount": 3,
                    "state": {"terminated": {"reason": "Completed", "exitCode": 0}},
                },
                {"ready": True, "restartCount": 3, "state": RUNNING},
            ],
            conditions=[{"type": "Ready", "status": "True", "lastProbeTime": ago(seconds=0)}],
        ),
        ["test6", "1/2", "Running", "6", "<unknown>"],
    ),
    (
        pod(
            "test7",
            1,
            1,
            phase="podPhase",
            initContainerStatuses=[{"ready": False, "restartCount": 3, "state": RUNNING, "lastState": TEN_S}],
            containerStatuses=[{"ready": False, "restartCount": 0, "state": {"waiting": {}}}],
        ),
        ["test7", "0/1", "Init:0/1", "3 (10s ago)", "<unknown>"],
    ),
    (
        pod(
            "test8",
            1,
            2,
            phase="podPhase",
            initContainerStatuses=[
                {"ready": False, "restartCount": 3, "state": RUNNING, "lastState": TEN_S},
                {"ready": False, "state": {"waiting": {}}},
            ],
            containerStatuses=[{"ready": False, "state": {"waiting": {}}}],
        ),
        ["test8", "0/1", "Init:0/2", "3 (10s ago)", "<unknown>"],
    ),
    (
        pod(
            "test9",
            1,
            2,
            phase="podPhase",
            initContainerStatuses=[
                {"ready": False, "state": {"terminated": {}}},
                {"ready": False, "restartCount": 3, "state": RUNNING, "lastState": TEN_S},
            ],
            containerStatuses=[{"ready": False, "state": {"waiting": {}}}],
        ),
        ["test9", "0/1", "Init:1/2", "3 (10s ago)", "<unknown>"],
    ),
    (
        pod(
            "test10",
            1,
            2,
            phase="podPhase",
            initContainerStatuses=[
                {
                    "ready": False,
                    "restartCount": 2,
                    "state": {"terminated": {}},
                    "lastState": {"terminated": {"finishedAt": ago(minutes=2)}},
                },
                {"ready": False, "restartCount": 3, "state": RUNNING, "lastState": TEN_S},
            ],
            containerStatuses=[{"ready": False, "state": {"waiting": {}}}],
        ),
        ["test10", "0/1", "Init:1/2", "5 (10s ago)", "<unknown>"],
    ),
    (
        pod(
            "test11",
            1,
            1,
            phase="Running",
            initContainerStatuses=[
                {
                    "ready": False,
                    "restartCount": 2,
                    "state": {"terminated": {}},
                    "lastState": {"terminated": {"finishedAt": ago(minutes=2)}},
                }
            ],
            containerStatuses=[
                {
                    "ready": False,
                    "restartCount": 4,
                    "state": RUNNING,
                    "lastState": {"terminated": {"finishedAt": ago(seconds=20)}},
                }
            ],
        ),
        ["test11", "0/1", "Running", "4 (20s ago)", "<unknown>"],
    ),
    (
        pod(
            "test12",
            1,
            phase="Running",
            containerStatuses=[
                {
                    "ready": True,
                    "restartCount": 3,
                    "state": RUNNING,
                    "lastState": {"terminated": {"finishedAt": ago(days=5)}},
                }
            ],
        ),
        ["test12", "1/1", "Running", "3 (5d ago)", "<unknown>"],
    ),
    (
        pod(
            "test13",
            2,
            phase="Running",
            containerStatuses=[
                {"ready": True, "restartCount": 0, "state": RUNNING},
                {
                    "ready": True,
                    "restartCount": 3,
                    "state": RUNNING,
                    "lastState": {"terminated": {"finishedAt": ago(days=10)}},
                },
            ],
        ),
        ["test13", "2/2", "Running", "3 (10d ago)", "<unknown>"],
    ),
    (
        pod(
            "test14",
            2,
            phase="Running",
            containerStatuses=[
                {
                    "ready": True,
                    "restartCount": 6,
                    "state": RUNNING,
                    "lastState": {"terminated": {"finishedAt": ago(days=5)}},
                },
                {
                    "ready": True,
                    "restartCount": 3,
                    "state": RUNNING,
                    "lastState": {"terminated": {"finishedAt": ago(days=20)}},
                },
            ],
        ),
        ["test14", "2/2", "Running", "9 (5d ago)", "<unknown>"],
    ),
    (
        pod(
            "test15",
            2,
            phase="podPhase",
            conditions=[{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}],
        ),
        ["test15", "0/2", "SchedulingGated", "0", "<unknown>"],
    ),
    (
        pod(
            "test16",
            1,
            phase="Succeeded",
            containerStatuses=[
                {
                    "ready": False,
                    "restartCount": 0,
                    "state": {"terminated": {"reason": "Completed", "exitCode": 0}},
                }
            ],
        ),
        ["test16", "0/1", "Completed", "0", "<unknown>"],
    ),
    (
        pod(
            "test17",
            1,
            phase="Failed",
            containerStatuses=[
                {
                    "ready": False,
                    "restartCount": 0,
                    "state": {"terminated": {"reason": "Error", "exitCode": 1}},
                }
            ],
        ),
        ["test17", "0/1", "Error", "0", "<unknown>"],
    ),
    # TestPrintNonTerminatedPod / TestPrintPodConditions: the phase shows through.
    *(
        (
            pod(
                f"phase-{phase}",
                2,
                phase=phase,
                containerStatuses=[{"ready": True, "restartCount": 3, "state": RUNNING}, {"restartCount": 3}],
            ),
            [f"phase-{phase}", "1/2", phase, "6", "<unknown>"],
        )
        for phase in ("Running", "Pending", "Unknown", "Succeeded", "Failed")
    ),
    # TestPrintPodWithRestartableInitContainer
    (
        pod(
            "sidecar1",
            1,
            SIDECARS,
            phase="Pending",
            initContainerStatuses=[
                {
                    "name": "restartable-init-1",
                    "ready": False,
                    "restartCount": 3,
                    "state": RUNNING,
                    "started": False,
                    "lastState": TEN_S,
                },
                {"name": "restartable-init-2", "ready": False, "state": {"waiting": {}}, "started": False},
            ],
            containerStatuses=[{"ready": False, "restartCount": 0, "state": {"waiting": {}}}],
            conditions=[{"type": "Initialized", "status": "False"}],
        ),
        ["sidecar1", "0/3", "Init:0/2", "3 (10s ago)", "<unknown>"],
    ),
    (
        pod(
            "sidecar2",
            1,
            SIDECARS,
            phase="Pending",
            initContainerStatuses=[
                {
                    "name": "restartable-init-1",
                    "ready": False,
                    "restartCount": 3,
                    "state": RUNNING,
                    "started": True,
                    "lastState": TEN_S,
                },
                {"name": "restartable-init-2", "ready": False, "state": RUNNING, "started": False},
            ],
            containerStatuses=[{"ready": False, "restartCount": 0, "state": {"waiting": {}}}],
            conditions=[{"type": "Initialized", "status": "False"}],
        ),
        ["sidecar2", "0/3", "Init:1/2", "3 (10s ago)", "<unknown>"],
    ),
    (
        pod(
            "sidecar3",
            1,
            SIDECARS,
            phase="Running",
            initContainerStatuses=[
                {
                    "name": "restartable-init-1",
                    "ready": False,
                    "restartCount": 3,
                    "state": RUNNING,
                    "started": True,
                    "lastState": TEN_S,
                },
                {"name": "restartable-init-2", "ready": False, "state": RUNNING, "started": True},
            ],
            containerStatuses=[
                {
                    "ready": True,
                    "restartCount": 4,
                    "state": RUNNING,
                    "lastState": {"terminated": {"finishedAt": ago(seconds=20)}},
                }
            ],
            conditions=[{"type": "Initialized", "status": "True"}],
        ),
        ["sidecar3", "1/3", "Running", "7 (10s ago)", "<unknown>"],
    ),
    (
        pod(
            "sidecar4",
            1,
            SIDECARS,
            phase="Succeeded",
            initContainerStatuses=[
                {
                    "name": "restartable-init-1",
                    "ready": False,
                    "restartCount": 3,
                    "state": {"terminated": {"reason": "Error", "exitCode": 137}},
                    "started": False,
                    "lastState": TEN_S,
                },
                {
                    "name": "restartable-init-2",
                    "ready": False,
                    "state": {"terminated": {"reason": "Error", "exitCode": 137}},
                    "started": False,
                },
            ],
            containerStatuses=[
                {
                    "ready": False,
                    "restartCount": 4,
                    "state": {"terminated": {"reason": "Completed", "exitCode": 0}},
                    "lastState": {"terminated": {"finishedAt": ago(seconds=20)}},
                }
            ],
            conditions=[{"type": "Initialized", "status": "True"}],
        ),
        ["sidecar4", "0/3", "Completed", "7 (10s ago)", "<unknown>"],
    ),
    (
        {
            "metadata": {"name": "sidecar5"},
            "spec": {
                "initContainers": [
                    {"name": "init1", "image": "initimage"},
                    {"name": "sidecar1", "image": "sidecarimage", "restartPolicy": "Always"},
                ],
                "containers": [{"name": "container1", "image": "containerimage"}],
            },
            "status": {
                "phase": "Running",
                "initContainerStatuses": [{"name": "initinvalid"}, {"name": "init1"}, {"name": "sidecar1"}],
                "containerStatuses": [{"name": "containerinvalid"}, {"name": "container1"}],
            },
        },
        ["sidecar5", "0/2", "Init:0/2", "0", "<unknown>"],
    ),
]

DELETED = {"deletionTimestamp": ago(seconds=10)}
TERMINATING_CASES: list[tuple[dict[str, Any], list[str]]] = [
    (
        {
            **pod(
                "test18",
                1,
                phase="Succeeded",
                containerStatuses=[
                    {"ready": False, "state": {"terminated": {"reason": "Completed", "exitCode": 0}}}
                ],
            ),
            "metadata": {"name": "test18", **DELETED},
        },
        ["test18", "0/1", "Completed", "0", "<unknown>"],
    ),
    (
        {
            **pod("test19", 1, phase="Running", containerStatuses=[{"ready": False, "state": RUNNING}]),
            "metadata": {"name": "test19", **DELETED},
        },
        ["test19", "0/1", "Terminating", "0", "<unknown>"],
    ),
    (
        {**pod("test20", 1, phase="Pending"), "metadata": {"name": "test20", **DELETED}},
        ["test20", "0/1", "Terminating", "0", "<unknown>"],
    ),
    (  # a pod on a node that stopped reporting, being deleted
        {**pod("lost", 1, phase="Running", reason="NodeLost"), "metadata": {"name": "lost", **DELETED}},
        ["lost", "0/1", "Unknown", "0", "<unknown>"],
    ),
]


@pytest.mark.parametrize(("pod_json", "cells"), CASES + TERMINATING_CASES, ids=lambda v: str(v)[:40])
def test_upstream_printer_cases(pod_json: dict[str, Any], cells: list[str]) -> None:
    assert pod_row(pod_json, NOW).cells() == cells


def row_status(**state: Any) -> str:
    p = pod("p", 1, phase="Running", containerStatuses=[{"state": state}])
    return pod_row(p, NOW).status


def init_status(**state: Any) -> str:
    p = pod("p", 1, 1, phase="Pending", initContainerStatuses=[{"state": state}])
    return pod_row(p, NOW).status


def test_container_states_become_status() -> None:
    assert row_status(waiting={"reason": "CrashLoopBackOff"}) == "CrashLoopBackOff"
    assert row_status(waiting={"reason": "ImagePullBackOff"}) == "ImagePullBackOff"
    assert row_status(terminated={"reason": "OOMKilled", "exitCode": 137}) == "OOMKilled"
    assert row_status(terminated={"exitCode": 2}) == "ExitCode:2"
    assert row_status(terminated={"exitCode": 137, "signal": 9}) == "Signal:9"
    assert row_status(waiting={}) == "Running"  # no reason: the phase stays


def test_init_container_states_become_status() -> None:
    assert init_status(waiting={"reason": "CrashLoopBackOff"}) == "Init:CrashLoopBackOff"
    assert init_status(waiting={"reason": "PodInitializing"}) == "Init:0/1"
    assert init_status(terminated={"reason": "Error", "exitCode": 1}) == "Init:Error"
    assert init_status(terminated={"exitCode": 3}) == "Init:ExitCode:3"
    assert init_status(terminated={"exitCode": 3, "signal": 15}) == "Init:Signal:15"
    assert init_status(running={}) == "Init:0/1"
    # A completed init container is passed over: the app containers decide.
    assert init_status(terminated={"reason": "Completed", "exitCode": 0}) == "Pending"


WIDE = [
    (
        {
            "metadata": {"name": "test1"},
            "spec": {
                "containers": [{}, {}],
                "nodeName": "test1",
                "readinessGates": [
                    {"conditionType": "condition1"},
                    {"conditionType": "condition2"},
                    {"conditionType": "condition3"},
                ],
            },
            "status": {
                "conditions": [
                    {"type": "condition1", "status": "False"},
                    {"type": "condition2", "status": "True"},
                ],
                "phase": "podPhase",
                "podIPs": ips,
                "containerStatuses": [
                    {"ready": True, "restartCount": 3, "state": RUNNING},
                    {"restartCount": 3},
                ],
                "nominatedNodeName": "node1",
            },
        },
        ["test1", "1/2", "podPhase", "6", "<unknown>", "1.1.1.1", "test1", "node1", "1/3"],
    )
    for ips in ([{"ip": "1.1.1.1"}], [{"ip": "1.1.1.1"}, {"ip": "2001:db8::"}])
] + [
    (
        pod(
            "test2",
            2,
            phase="podPhase",
            containerStatuses=[
                {"ready": True, "restartCount": 3, "state": RUNNING},
                {"state": {"waiting": {"reason": "ContainerWaitingReason"}}, "restartCount": 3},
            ],
        ),
        ["test2", "1/2", "ContainerWaitingReason", "6", "<unknown>", "<none>", "<none>", "<none>", "<none>"],
    )
]


@pytest.mark.parametrize(("pod_json", "cells"), WIDE)
def test_upstream_wide_cases(pod_json: dict[str, Any], cells: list[str]) -> None:
    assert pod_row(pod_json, NOW).cells(wide=True) == cells


def test_finished_pods_carry_row_conditions() -> None:
    succeeded = pod_row(pod("a", phase="Succeeded"), NOW).conditions
    failed = pod_row(pod("b", phase="Failed"), NOW).conditions
    assert [dict(c) for c in succeeded] == [
        {
            "type": "Completed",
            "status": "True",
            "reason": "Succeeded",
            "message": "The pod has completed successfully.",
        }
    ]
    assert [dict(c) for c in failed] == [
        {"type": "Completed", "status": "True", "reason": "Failed", "message": "The pod failed."}
    ]
    assert pod_row(pod("c", phase="Running"), NOW).conditions == ()


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        # TestTranslateTimestampSince
        (-2.1, "<invalid>"),
        (-1.9, "0s"),
        (0, "0s"),
        (30, "30s"),
        (300, "5m"),
        (6000, "100m"),
        (2 * 86400, "2d"),
        (90 * 86400, "90d"),
        (10 * 365 * 86400, "10y"),
        # each branch of HumanDuration at and around its edges
        (119.9, "119s"),
        (120, "2m"),
        (190, "3m10s"),
        (599, "9m59s"),
        (600, "10m"),
        (3 * 3600 - 1, "179m"),
        (3 * 3600, "3h"),
        (3 * 3600 + 60 * 25, "3h25m"),
        (8 * 3600, "8h"),
        (47 * 3600 + 3599, "47h"),
        (48 * 3600, "2d"),
        (49 * 3600, "2d1h"),
        (8 * 86400, "8d"),
        (729 * 86400, "729d"),
        (730 * 86400, "2y"),
        (731 * 86400, "2y1d"),
        (8 * 365 * 86400, "8y"),
    ],
)
def test_human_duration(seconds: float, text: str) -> None:
    assert human_duration(seconds) == text


UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "y": 365 * 86400}


@given(st.floats(min_value=0, max_value=50 * 365 * 86400, allow_nan=False))
def test_human_duration_truncates_never_rounds_up(seconds: float) -> None:
    """Read back, the text is the duration cut down to its last unit: never more than the input,
    and less by under one of that unit."""
    parts = re.findall(r"(\d+)([smhdy])", human_duration(seconds))
    assert 1 <= len(parts) <= 2
    value = sum(int(n) * UNITS[u] for n, u in parts)
    assert value <= int(seconds) < value + UNITS[parts[-1][1]]


@given(any_pods())
def test_any_pod_prints(message: Any) -> None:
    """Whatever a decodable pod holds, it prints: one string per column, a READY of n/m."""
    row = pod_row(pod_from_message(message), NOW)
    cells = row.cells(wide=True)
    assert len(cells) == len(POD_COLUMNS) and all(isinstance(c, str) for c in cells)
    assert re.fullmatch(r"\d+/\d+", row.ready) and row.status is not None


def test_ages_and_restarts_are_relative_to_now() -> None:
    p = pod(
        "p",
        1,
        phase="Running",
        containerStatuses=[
            {
                "ready": True,
                "restartCount": 1,
                "state": RUNNING,
                "lastState": {"terminated": {"finishedAt": ago(minutes=3, seconds=4)}},
            }
        ],
    )
    p["metadata"]["creationTimestamp"] = ago(hours=5)
    row = pod_row(p, NOW)
    assert (row.restarts, row.age) == ("1 (3m4s ago)", "5h")


def test_text_table_is_kubectls_layout() -> None:
    """kubectl's tabwriter: minimum width 6, padding 3, the last column unpadded."""
    text = render_text_table(["Name", "Ready", "Age"], [["web-1", "1/1", "5s"], ["a", "0/1", "12d"]])
    assert text == "NAME    READY   AGE\nweb-1   1/1     5s\na       0/1     12d\n"


def test_example_fixtures_print_as_kubectl_would() -> None:
    now = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)
    text = pod_text_table(example_pods(), now, with_namespace=True)
    lines = text.splitlines()
    assert lines[0].split() == ["NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    by_name = {line.split()[1]: line for line in lines[1:]}
    assert "CrashLoopBackOff" in by_name["orders-worker-6d5f7c9b8-q7zrt"]
    assert "12 (57m ago)" in by_name["orders-worker-6d5f7c9b8-q7zrt"]
    # every column starts at the same offset on every line
    starts = [m.start() for m in re.finditer(r"\S+", lines[0])][1:]
    for line in lines[1:]:
        for start in starts:
            assert line[start - 1] == " " and line[start] != " "
    wide = pod_text_table(example_pods(), now, wide=True).splitlines()[0]
    assert re.split(r"\s{3,}", wide) == [
        *["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE"],
        "NOMINATED NODE",
        "READINESS GATES",
    ]


def test_table_json_is_the_api_servers() -> None:
    pods = example_pods()
    table = pod_table(pods, NOW, resource_version="7")
    assert (table["kind"], table["apiVersion"], table["metadata"]) == (
        "Table",
        "meta.k8s.io/v1",
        {"resourceVersion": "7"},
    )
    assert [(c["name"], c["type"], c["format"], c["priority"]) for c in table["columnDefinitions"]] == [
        ("Name", "string", "name", 0),
        ("Ready", "string", "", 0),
        ("Status", "string", "", 0),
        ("Restarts", "string", "", 0),
        ("Age", "string", "", 0),
        ("IP", "string", "", 1),
        ("Node", "string", "", 1),
        ("Nominated Node", "string", "", 1),
        ("Readiness Gates", "string", "", 1),
    ]
    assert all(len(r["cells"]) == 9 for r in table["rows"])
    first = table["rows"][0]["object"]
    assert first["kind"] == "PartialObjectMetadata" and first["metadata"] == pods[0]["metadata"]
    assert pod_table(pods, NOW, include_object="None")["rows"][0]["object"] is None
    assert pod_table(pods, NOW, no_headers=True)["columnDefinitions"] is None
    assert pod_table([], NOW)["rows"] == []
    assert pod_table(pods, NOW, include_object="Object")["rows"][0]["object"]["kind"] == "Pod"


def test_column_descriptions_are_the_apis_field_docs() -> None:
    """Each description is its field's documentation, as the OpenAPI of the `kubernetes` client
    (v1.37) carries it (paragraph breaks there are two spaces; the API server's are blank lines)."""
    models = pytest.importorskip("kubernetes.client")
    fields = {
        "Name": (models.V1ObjectMeta, "name"),
        "Age": (models.V1ObjectMeta, "creation_timestamp"),
        "IP": (models.V1PodStatus, "pod_ip"),
        "Node": (models.V1PodSpec, "node_name"),
        "Nominated Node": (models.V1PodStatus, "nominated_node_name"),
        "Readiness Gates": (models.V1PodSpec, "readiness_gates"),
    }
    for column in POD_COLUMNS:
        if column.name in fields:
            cls, attr = fields[column.name]
            model_fields = getattr(cls, "model_fields", None)
            if model_fields is None:
                pytest.skip("this kubernetes client's models carry no field descriptions")
            assert column.description.replace("\n\n", "  ") == model_fields[attr].description


@given(any_pods())
def test_a_pods_message_read_by_its_json_names_prints_the_same_row(message: Any) -> None:
    """`pods-api get pods` prints each message through a view of it (core/api/messageview.py),
    never rendering it to JSON: every row must be the one its Kubernetes JSON prints."""
    assert pod_row(pod_view(message), NOW) == pod_row(pod_from_message(message), NOW)
    masked = parse_mask(POD_FIELDS).apply_message(message)  # type: ignore[union-attr]
    assert pod_row(pod_view(masked), NOW) == pod_row(pod_from_message(message), NOW)


@given(any_pods())
def test_a_pod_masked_to_the_printers_fields_prints_the_same_row(message: Any) -> None:
    """`pods-api get pods` asks the server for POD_FIELDS only: the rows must not change."""
    masked = parse_mask(POD_FIELDS).apply_message(message)  # type: ignore[union-attr]
    assert pod_row(pod_from_message(masked), NOW) == pod_row(pod_from_message(message), NOW)


def test_the_example_pods_masked_to_the_printers_fields_print_the_same_table() -> None:
    mask = parse_mask(POD_FIELDS)
    pods = example_pods()
    evicted = {**pods[0], "status": {**pods[0]["status"], "phase": "Failed", "reason": "Evicted"}}
    lost = {**evicted, "status": {**evicted["status"], "reason": "NodeLost"}}
    lost["metadata"] = {**lost["metadata"], "deletionTimestamp": "2026-11-30T11:00:00Z"}
    pods += [evicted, lost]
    masked = [mask.apply_json(pod) for pod in pods]  # type: ignore[union-attr]
    for wide in (False, True):
        assert pod_text_table(masked, NOW, wide=wide, with_namespace=True) == pod_text_table(
            pods, NOW, wide=wide, with_namespace=True
        )
