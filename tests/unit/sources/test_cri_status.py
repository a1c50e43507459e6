"""Status computed from CRI data by the kubelet's rules: getPhase's cases as the kubelet's own
tests state them, container status history, conditions, and properties over random pods."""

from __future__ import annotations

import ast
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from repo import ROOT

from pods_api.core.api.codec import pod_from_message, pod_to_message
from pods_api.sources.cri.source import _log_message
from pods_api.sources.cri.status import (
    EPHEMERAL,
    GONE_INIT_MESSAGE,
    INIT,
    LOST_MESSAGE,
    REGULAR,
    Container,
    ContainerState,
    Sandbox,
    Shape,
    SpecContainer,
    get_phase,
    pod_status,
    qos_class,
    rfc3339,
)
from pods_api.sources.defaults import apply_pod_defaults

NOW = "2026-01-01T00:00:00Z"
LATER = "2026-01-01T01:00:00Z"
SECOND = 1_000_000_000


def running(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "state": {"running": {"startedAt": NOW}}, **extra}


def terminated(name: str, code: int, **extra: Any) -> dict[str, Any]:
    return {"name": name, "state": {"terminated": {"exitCode": code}}, **extra}


def waiting(name: str, last_code: int | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"name": name, "state": {"waiting": {"reason": "ContainerCreating"}}}
    if last_code is not None:
        status["lastState"] = {"terminated": {"exitCode": last_code}}
    return status


def shape(
    *names: str, init: tuple[str, ...] = (), sidecars: tuple[str, ...] = (), policy: str = "Always"
) -> Shape:
    return Shape(
        containers=tuple(SpecContainer(n) for n in names),
        init_containers=tuple(SpecContainer(n) for n in init)
        + tuple(SpecContainer(n, sidecar=True) for n in sidecars),
        restart_policy=policy,
    )


# (case, shape, statuses, terminal, initialized, phase): the kubelet's TestPodPhase* cases.
PHASES = [
    ("all running", shape("a", "b"), [running("a"), running("b")], False, True, "Running"),
    (
        "all stopped, Always",
        shape("a", "b"),
        [terminated("a", 0), terminated("b", 0)],
        False,
        True,
        "Running",
    ),
    (
        "all succeeded, Never",
        shape("a", "b", policy="Never"),
        [terminated("a", 0), terminated("b", 0)],
        False,
        True,
        "Succeeded",
    ),
    (
        "all succeeded, OnFailure",
        shape("a", policy="OnFailure"),
        [terminated("a", 0)],
        False,
        True,
        "Succeeded",
    ),
    (
        "one failed, Never",
        shape("a", "b", policy="Never"),
        [terminated("a", 0), terminated("b", 1)],
        False,
        True,
        "Failed",
    ),
    (
        "one failed, OnFailure",
        shape("a", "b", policy="OnFailure"),
        [terminated("a", 0), terminated("b", 1)],
        False,
        True,
        "Running",
    ),
    (
        "running and failed, Never",
        shape("a", "b", policy="Never"),
        [running("a"), terminated("b", 1)],
        False,
        True,
        "Running",
    ),
    ("one waiting", shape("a", "b"), [running("a"), waiting("b")], False, True, "Pending"),
    (
        "restarting after a failure",
        shape("a", "b"),
        [running("a"), waiting("b", last_code=1)],
        False,
        True,
        "Running",
    ),
    ("a status missing", shape("a", "b"), [running("a")], False, True, "Pending"),
    ("nothing known", shape("a"), [], False, False, "Pending"),
    ("init running", shape("a", init=("i",)), [running("i"), waiting("a")], False, False, "Pending"),
    (
        "init failed, Never",
        shape("a", init=("i",), policy="Never"),
        [terminated("i", 1), waiting("a")],
        False,
        False,
        "Failed",
    ),
    (
        "init failed, Always",
        shape("a", init=("i",)),
        [terminated("i", 1), waiting("a")],
        False,
        False,
        "Pending",
    ),
    ("init done", shape("a", init=("i",)), [terminated("i", 0), running("a")], False, True, "Running"),
    (
        "init restarting, Never",
        shape("a", init=("i",), policy="Never"),
        [waiting("i", last_code=2), waiting("a")],
        False,
        False,
        "Failed",
    ),
    (
        "sidecar not started",
        shape("a", sidecars=("s",)),
        [running("s", started=False), waiting("a")],
        False,
        False,
        "Pending",
    ),
    (
        "sidecar started",
        shape("a", sidecars=("s",)),
        [running("s", started=True), running("a")],
        False,
        True,
        "Running",
    ),
    (
        "sidecar restarting after init",
        shape("a", sidecars=("s",)),
        [running("s", started=False), running("a")],
        False,
        True,
        "Running",
    ),
    (
        "terminal, a failure, Always",
        shape("a", "b"),
        [terminated("a", 0), terminated("b", 1)],
        True,
        True,
        "Failed",
    ),
    ("terminal, all succeeded, Always", shape("a"), [terminated("a", 0)], True, True, "Succeeded"),
]


@pytest.mark.parametrize(
    ("case", "pod", "statuses", "terminal", "initialized", "phase"), PHASES, ids=[p[0] for p in PHASES]
)
def test_get_phase(
    case: str, pod: Shape, statuses: list[dict[str, Any]], terminal: bool, initialized: bool, phase: str
) -> None:
    assert get_phase(pod, statuses, terminal=terminal, initialized=initialized) == phase


def test_a_terminal_static_pod_keeps_the_restart_policy_phase() -> None:
    # The kubelet's TODO(#116484): static pods get no terminal phase from podIsTerminal.
    static = Shape(containers=(SpecContainer("a"),), static=True)
    assert get_phase(static, [terminated("a", 1)], terminal=True, initialized=True) == "Running"


def sandbox(ready: bool = True, created: int = 100, ips: tuple[str, ...] = ()) -> Sandbox:
    return Sandbox("sb", "uid-1", "web", "default", 0, ready, created * SECOND, ips=ips)


def ctr(
    name: str, state: ContainerState, created: int, *, kind: str = REGULAR, code: int = 0, restarts: int = 0
) -> Container:
    return Container(
        id=f"{name}-{created}",
        sandbox_id="sb",
        uid="uid-1",
        name=name,
        kind=kind,
        state=state,
        created_at=created * SECOND,
        started_at=(created + 1) * SECOND if state is not ContainerState.CREATED else 0,
        finished_at=(created + 2) * SECOND if state is ContainerState.EXITED else 0,
        exit_code=code,
        reason=("Completed" if code == 0 else "Error") if state is ContainerState.EXITED else "",
        image="docker.io/library/busybox:1",
        image_ref="sha256:abc",
        restart_count=restarts,
    )


def test_the_newest_container_is_the_state_and_the_one_before_the_last_state() -> None:
    history = [
        ctr("main", ContainerState.EXITED, 100, code=1, restarts=0),
        ctr("main", ContainerState.EXITED, 110, code=2, restarts=1),
        ctr("main", ContainerState.RUNNING, 120, restarts=2),
    ]
    status = pod_status(shape("main"), [sandbox()], history, "containerd", now=NOW)
    (main,) = status["containerStatuses"]
    assert main["state"] == {"running": {"startedAt": rfc3339(121 * SECOND)}}
    assert main["lastState"]["terminated"]["exitCode"] == 2
    assert main["lastState"]["terminated"]["containerID"] == "containerd://main-110"
    assert (main["restartCount"], main["containerID"]) == (2, "containerd://main-120")


def test_containers_not_created_yet_wait_with_the_kubelets_reasons() -> None:
    status = pod_status(shape("a", init=("i",)), [sandbox()], [], "containerd", now=NOW)
    assert status["containerStatuses"][0]["state"] == {"waiting": {"reason": "PodInitializing"}}
    assert status["initContainerStatuses"][0]["state"] == {"waiting": {"reason": "PodInitializing"}}
    status = pod_status(shape("a"), [sandbox()], [], "containerd", now=NOW)
    assert status["containerStatuses"][0]["state"] == {"waiting": {"reason": "ContainerCreating"}}
    assert status["phase"] == "Pending"
    initialized = {c["type"]: c for c in status["conditions"]}["Initialized"]
    assert initialized["status"] == "True"


def test_incomplete_init_containers_are_named() -> None:
    containers = [
        ctr("i1", ContainerState.EXITED, 100, kind=INIT),
        ctr("i2", ContainerState.RUNNING, 110, kind=INIT),
    ]
    status = pod_status(shape("a", init=("i1", "i2", "i3")), [sandbox()], containers, "containerd", now=NOW)
    initialized = {c["type"]: c for c in status["conditions"]}["Initialized"]
    assert (initialized["status"], initialized["reason"]) == ("False", "ContainersNotInitialized")
    assert initialized["message"] == "containers with incomplete status: [i2 i3]"
    assert [s["name"] for s in status["initContainerStatuses"]] == ["i1", "i2", "i3"]  # spec order


def test_ephemeral_containers_have_their_own_list() -> None:
    pod = Shape(containers=(SpecContainer("a"),), ephemeral_containers=(SpecContainer("debug"),))
    containers = [
        ctr("a", ContainerState.RUNNING, 100),
        ctr("debug", ContainerState.RUNNING, 120, kind=EPHEMERAL),
    ]
    status = pod_status(pod, [sandbox()], containers, "cri-o", now=NOW)
    assert [s["containerID"] for s in status["ephemeralContainerStatuses"]] == ["cri-o://debug-120"]


def test_pod_ips_come_from_the_newest_ready_sandbox_ipv4_first() -> None:
    old = Sandbox("old", "uid-1", "web", "default", 0, False, 50 * SECOND, ips=("10.0.0.1",))
    new = sandbox(ips=("fd00::5", "10.0.0.9", "10.0.0.10"))
    status = pod_status(shape("a"), [old, new], [], "containerd", now=NOW)
    assert status["podIP"] == "10.0.0.9"
    assert status["podIPs"] == [{"ip": "10.0.0.9"}, {"ip": "fd00::5"}]
    assert status["startTime"] == rfc3339(50 * SECOND)  # the oldest sandbox
    stopped = pod_status(shape("a"), [sandbox(ready=False, ips=("10.0.0.9",))], [], "containerd", now=NOW)
    assert "podIP" not in stopped


def test_probe_results_and_foreign_conditions_in_previous_are_kept() -> None:
    containers = [ctr("a", ContainerState.RUNNING, 100)]
    previous = {
        "containerStatuses": [running("a", containerID="containerd://a-100", ready=False, started=True)],
        "conditions": [{"type": "example.com/gate", "status": "True", "lastTransitionTime": NOW}],
    }
    pod = Shape(containers=(SpecContainer("a"),), readiness_gates=("example.com/gate",))
    status = pod_status(pod, [sandbox()], containers, "containerd", previous=previous, now=LATER)
    assert status["containerStatuses"][0]["ready"] is False  # the kubelet's readiness probe said so
    kinds = [c["type"] for c in status["conditions"]]
    assert kinds[0] == "example.com/gate"
    ready = {c["type"]: c for c in status["conditions"]}["Ready"]
    assert (ready["status"], ready["message"]) == ("False", "containers with unready status: [a]")


def test_a_readiness_gate_without_its_condition_keeps_the_pod_unready() -> None:
    pod = Shape(containers=(SpecContainer("a"),), readiness_gates=("example.com/lb",))
    status = pod_status(pod, [sandbox()], [ctr("a", ContainerState.RUNNING, 100)], "containerd", now=NOW)
    ready = {c["type"]: c for c in status["conditions"]}["Ready"]
    assert (ready["status"], ready["reason"]) == ("False", "ReadinessGatesNotReady")
    assert (
        ready["message"] == 'corresponding condition of pod readiness gate "example.com/lb" does not exist.'
    )


def test_a_running_container_the_runtime_lost_is_terminated_and_counted() -> None:
    previous = {"containerStatuses": [running("a", containerID="containerd://a-100", restartCount=4)]}
    lost = [ctr("a", ContainerState.UNKNOWN, 100, restarts=4)]
    status = pod_status(shape("a"), [sandbox()], lost, "containerd", previous=previous, now=NOW)
    (a,) = status["containerStatuses"]
    assert a["state"]["terminated"]["reason"] == "ContainerStatusUnknown"
    assert (a["state"]["terminated"]["exitCode"], a["restartCount"]) == (137, 5)


def test_shape_from_a_pod() -> None:
    pod = {
        "metadata": {"annotations": {"kubernetes.io/config.source": "file"}},
        "spec": {
            "restartPolicy": "OnFailure",
            "initContainers": [{"name": "s", "image": "x", "restartPolicy": "Always"}],
            "containers": [{"name": "a", "image": "y"}],
            "readinessGates": [{"conditionType": "g"}],
        },
    }
    got = Shape.from_pod(pod)
    assert got.restart_policy == "OnFailure" and got.static and got.readiness_gates == ("g",)
    assert got.init_containers == (SpecContainer("s", "x", sidecar=True, restart_policy="Always"),)


# -- properties ----------------------------------------------------------------------------------

NAMES = st.sampled_from(["a", "b", "c"])
PHASE_NAMES = {"Pending", "Running", "Succeeded", "Failed"}


@st.composite
def runtime_pods(draw: st.DrawFn) -> tuple[Shape, list[Sandbox], list[Container]]:
    names = draw(st.lists(NAMES, min_size=1, max_size=3, unique=True))
    inits = draw(st.lists(st.sampled_from(["i", "j"]), max_size=2, unique=True))
    pod = Shape(
        containers=tuple(SpecContainer(n) for n in names),
        init_containers=tuple(SpecContainer(n) for n in inits),
        restart_policy=draw(st.sampled_from(["Always", "OnFailure", "Never"])),
    )
    created = draw(st.lists(st.integers(1, 10_000), max_size=8, unique=True))
    containers = [
        ctr(
            draw(st.sampled_from(names + inits)),
            draw(st.sampled_from(list(ContainerState))),
            at,
            code=draw(st.integers(0, 3)),
            restarts=draw(st.integers(0, 5)),
        )
        for at in created
    ]
    containers = [
        Container(**{**{f: getattr(c, f) for f in c.__slots__}, "kind": INIT if c.name in inits else REGULAR})
        for c in containers
    ]
    sandboxes = [sandbox(ready=draw(st.booleans()), ips=("10.1.2.3",))]
    return pod, sandboxes, containers


@given(runtime_pods())
def test_recomputing_with_nothing_changed_changes_nothing(
    case: tuple[Shape, list[Sandbox], list[Container]],
) -> None:
    # What makes a relist that found nothing new produce no MODIFIED: the previous status in,
    # a later clock, the same status out.
    pod, sandboxes, containers = case
    first = pod_status(pod, sandboxes, containers, "containerd", now=NOW)
    again = pod_status(pod, sandboxes, containers, "containerd", previous=first, now=LATER)
    assert again == first


@given(runtime_pods(), st.booleans(), st.booleans())
def test_phase_rules_hold_for_any_pod(
    case: tuple[Shape, list[Sandbox], list[Container]], terminal: bool, initialized: bool
) -> None:
    pod, sandboxes, containers = case
    status = pod_status(pod, sandboxes, containers, "containerd", now=NOW)
    statuses = status.get("containerStatuses", []) + status.get("initContainerStatuses", [])
    phase = get_phase(pod, statuses, terminal=terminal, initialized=initialized)
    assert phase in PHASE_NAMES
    regular = status.get("containerStatuses", [])
    if any("waiting" in s["state"] and not s.get("lastState") for s in regular):
        assert phase in ("Pending", "Failed")  # Failed only from an init container under Never
    if pod.restart_policy == "Always" and not terminal:
        assert phase in ("Pending", "Running")
    if phase == "Succeeded":
        assert all(s["state"].get("terminated", {}).get("exitCode") == 0 for s in regular)


def test_the_source_only_reads() -> None:
    # It never creates, starts, stops or removes anything: of the RuntimeService's methods, it
    # names only the read ones.
    from pods_api.sources.cri.pb import cri_runtime_v1_pb2

    methods = set(cri_runtime_v1_pb2.DESCRIPTOR.services_by_name["RuntimeService"].methods_by_name)
    source = ROOT / "pods_api" / "sources" / "cri" / "source.py"
    named = {node.attr for node in ast.walk(ast.parse(source.read_text())) if isinstance(node, ast.Attribute)}
    reads = {
        "Version",
        "ListPodSandbox",
        "ListContainers",
        "PodSandboxStatus",
        "ContainerStatus",
        "GetContainerEvents",
    }
    assert named & methods == reads


# -- what the kubelet's status has beyond containers and phase ---------------------------------


def _resources(**kinds: dict[str, str]) -> dict[str, Any]:
    return {"name": "c", "image": "i", "resources": kinds}


@pytest.mark.parametrize(
    ("containers", "init", "qos"),
    [
        ([{"name": "c", "image": "i"}], [], "BestEffort"),
        ([_resources(requests={"cpu": "0"})], [], "BestEffort"),  # zero quantities do not count
        (
            [_resources(requests={"cpu": "1", "memory": "1Gi"}, limits={"cpu": "1", "memory": "1Gi"})],
            [],
            "Guaranteed",
        ),
        ([_resources(requests={"cpu": "500m"}, limits={"cpu": "1", "memory": "1Gi"})], [], "Burstable"),
        ([_resources(limits={"cpu": "1"})], [], "Burstable"),  # memory unlimited
        (
            [_resources(requests={"cpu": "1", "memory": "1Gi"}, limits={"cpu": "1", "memory": "1Gi"})],
            [{"name": "i", "image": "i"}],
            "Burstable",
        ),
        ([_resources(requests={"nvidia.com/gpu": "1"}, limits={"nvidia.com/gpu": "1"})], [], "BestEffort"),
    ],
)
def test_qos_class_as_compute_pod_qos(containers: list[Any], init: list[Any], qos: str) -> None:
    """pkg/apis/core/helper/qos ComputePodQOS, the cases of its qos_test.go."""
    assert qos_class({"containers": containers, "initContainers": init}) == qos


def test_a_limits_only_pod_is_guaranteed_once_defaulted() -> None:
    """SetDefaults_Pod fills requests from limits before the kubelet computes QoS."""
    obj = {
        "metadata": {"name": "p"},
        "spec": {"containers": [_resources(limits={"cpu": "1", "memory": "1Gi"})]},
    }
    message = pod_to_message(obj).message
    apply_pod_defaults(message)
    assert qos_class(pod_from_message(message)["spec"]) == "Guaranteed"
    status = pod_status(
        Shape(containers=(SpecContainer("c"),), qos="Guaranteed"), [sandbox()], [], "containerd", now=NOW
    )
    assert status["qosClass"] == "Guaranteed"


def test_a_running_container_the_runtime_lost_ended_unknown_and_restarted() -> None:
    """kubelet_pods.go convertToAPIContainerStatuses: a container that was running and that the
    runtime no longer has waits with lastState ContainerStatusUnknown, exit 137, one restart
    more (none when the pod is being deleted); a terminated one keeps its status."""
    before = pod_status(
        shape("a", "b"),
        [sandbox()],
        [ctr("a", ContainerState.RUNNING, 101), ctr("b", ContainerState.EXITED, 101)],
        "containerd",
        now=NOW,
    )
    after = pod_status(shape("a", "b"), [sandbox()], [], "containerd", previous=before, now=LATER)
    a, b = after["containerStatuses"]
    assert a["state"] == {"waiting": {"reason": "ContainerCreating"}}
    assert a["lastState"] == {
        "terminated": {"exitCode": 137, "reason": "ContainerStatusUnknown", "message": LOST_MESSAGE}
    }
    assert a["restartCount"] == 1
    assert b == before["containerStatuses"][1]  # terminated: kept as it was
    assert after["phase"] == "Running"  # not back to Pending
    deleting = Shape(containers=(SpecContainer("a"), SpecContainer("b")), deleted=True)
    gone = pod_status(deleting, [sandbox()], [], "containerd", previous=before, now=LATER)
    assert gone["containerStatuses"][0]["restartCount"] == 0


def test_a_completed_init_container_is_ready_a_failed_one_not() -> None:
    """convertToAPIContainerStatuses: a non-restartable init container exited 0 is ready."""
    containers = [
        ctr("setup", ContainerState.EXITED, 101, kind=INIT),
        ctr("check", ContainerState.EXITED, 102, kind=INIT, code=1),
    ]
    status = pod_status(
        shape("main", init=("setup", "check")), [sandbox()], containers, "containerd", now=NOW
    )
    ready = {s["name"]: s["ready"] for s in status["initContainerStatuses"]}
    assert ready == {"setup": True, "check": False}


def test_a_failed_pods_readiness_says_pod_failed() -> None:
    """status/generate.go GenerateContainersReadyCondition: PodFailed, no message; Ready follows."""
    status = pod_status(
        shape("a", policy="Never"),
        [sandbox(ready=False)],
        [ctr("a", ContainerState.EXITED, 101, code=2)],
        "containerd",
        now=NOW,
    )
    assert status["phase"] == "Failed"
    for kind in ("ContainersReady", "Ready"):
        condition = next(c for c in status["conditions"] if c["type"] == kind)
        assert (condition["status"], condition["reason"]) == (
            "False",
            "PodFailed",
        ) and "message" not in condition


def test_ready_to_start_containers_follows_pod_sandbox_changed() -> None:
    """kuberuntime_manager.go PodSandboxChanged: two ready sandboxes, or a pod network sandbox
    without an IP, means a new sandbox: PodReadyToStartContainers False."""

    def ready_to_start(s: Shape, sandboxes: list[Sandbox]) -> str:
        status = pod_status(s, sandboxes, [], "containerd", now=NOW)
        return next(c["status"] for c in status["conditions"] if c["type"] == "PodReadyToStartContainers")

    on_pod_network = shape("a")
    assert ready_to_start(on_pod_network, [sandbox(ips=("10.0.0.7",))]) == "True"
    assert ready_to_start(on_pod_network, [sandbox()]) == "False"  # no IP
    second = Sandbox("sb2", "uid-1", "web", "default", 1, True, 200 * SECOND, ips=("10.0.0.8",))
    assert ready_to_start(on_pod_network, [sandbox(ips=("10.0.0.7",)), second]) == "False"
    host = Shape(containers=(SpecContainer("a"),), host_network=True)
    on_host = Sandbox("sb", "uid-1", "web", "default", 0, True, 100 * SECOND, host_network=True)
    assert ready_to_start(host, [on_host]) == "True"
    assert ready_to_start(on_pod_network, [on_host]) == "False"  # the spec asks for another netns


def test_conditions_carry_the_generation_they_observed() -> None:
    """PodObservedGenerationTracking (on since 1.34): status.observedGeneration and each
    condition's are the pod's metadata.generation."""
    status = pod_status(
        Shape(containers=(SpecContainer("a"),), generation=3), [sandbox()], [], "containerd", now=NOW
    )
    assert status["observedGeneration"] == 3
    assert all(c["observedGeneration"] == 3 for c in status["conditions"])
    assert Shape.from_pod({"metadata": {"generation": 3}, "spec": {}}).generation == 3


def test_a_running_containers_resources_user_and_mounts() -> None:
    """convertToAPIContainerStatuses: resources (requests from the spec, limits as the runtime
    applies them: a CFS quota of 50000 per 100000 is 500m), the runtime's user, the spec's mounts."""
    spec = SpecContainer.from_spec(
        {
            "name": "a",
            "image": "i",
            "resources": {
                "requests": {"cpu": "250m", "memory": "64Mi"},
                "limits": {"cpu": "1", "memory": "64Mi"},
            },
            "volumeMounts": [
                {"name": "data", "mountPath": "/data"},
                {"name": "etc", "mountPath": "/etc/x", "readOnly": True},
            ],
        }
    )
    c = ctr("a", ContainerState.RUNNING, 101)
    applied = Container(
        **{
            **{f: getattr(c, f) for f in c.__slots__},
            "cpu_quota": 50000,
            "cpu_period": 100000,
            "user": (1000, 1000, (4, 20)),
        }
    )
    (status,) = pod_status(Shape(containers=(spec,)), [sandbox()], [applied], "containerd", now=NOW)[
        "containerStatuses"
    ]
    assert status["resources"] == {
        "limits": {"cpu": "500m", "memory": "64Mi"},
        "requests": {"cpu": "250m", "memory": "64Mi"},
    }
    assert status["user"] == {"linux": {"uid": 1000, "gid": 1000, "supplementalGroups": [4, 20]}}
    assert status["volumeMounts"] == [
        {"name": "data", "mountPath": "/data"},
        {"name": "etc", "mountPath": "/etc/x", "readOnly": True, "recursiveReadOnly": "Disabled"},
    ]


def test_a_log_message_is_the_last_lines_bounded() -> None:
    """readLastStringFromContainerLogs: the last 80 lines of the CRI log, at most 2 KiB; partial
    lines (P) joined with the line that completes them."""
    lines = b"".join(b"2026-01-01T00:00:00.000000001Z stdout F line %d\n" % i for i in range(100))
    message = _log_message(
        lines + b"2026-01-01T00:00:00Z stderr P part \n2026-01-01T00:00:00Z stderr F end\n"
    )
    assert message.endswith("line 99\npart end\n")
    assert message.splitlines()[0] == "line 21" and len(message.splitlines()) == 80
    assert len(_log_message(b"".join(b"t stdout F " + b"x" * 100 + b"\n" for _ in range(50)))) == 2048


def test_host_ips_are_the_nodes_and_a_host_network_pods_ips_too() -> None:
    """generateAPIPodStatus: hostIP(s) from the node; podIP(s) of a host-network pod the same."""
    on_host = Sandbox("sb", "uid-1", "web", "default", 0, True, 100 * SECOND, host_network=True)
    host = Shape(containers=(SpecContainer("a"),), host_network=True)
    status = pod_status(host, [on_host], [], "containerd", now=NOW, node_ips=("10.0.0.5", "fd00::5"))
    assert status["hostIP"] == "10.0.0.5" and status["hostIPs"] == [{"ip": "10.0.0.5"}, {"ip": "fd00::5"}]
    assert status["podIPs"] == status["hostIPs"]
    pod_net = pod_status(
        shape("a"), [sandbox(ips=("10.244.0.7",))], [], "containerd", now=NOW, node_ips=("10.0.0.5",)
    )
    assert (pod_net["hostIP"], pod_net["podIP"]) == ("10.0.0.5", "10.244.0.7")


def test_an_init_container_gone_while_the_regular_ones_run_completed() -> None:
    """kubelet_pods.go convertToAPIContainerStatuses: an init container the runtime no longer
    has (garbage collected) in a pod whose regular containers have started is terminated
    Completed, so the pod is Running and Initialized, not Pending (Init:0/1)."""
    status = pod_status(
        shape("main", init=("setup",)),
        [sandbox()],
        [ctr("main", ContainerState.RUNNING, 105)],
        "containerd",
        now=NOW,
    )
    (setup,) = status["initContainerStatuses"]
    assert (
        setup["state"] == {"terminated": {"exitCode": 0, "reason": "Completed", "message": GONE_INIT_MESSAGE}}
        and setup["ready"] is True
    )
    assert status["phase"] == "Running"
    assert next(c for c in status["conditions"] if c["type"] == "Initialized")["status"] == "True"
    # Before any regular container: it has not run yet, it waits.
    pending = pod_status(shape("main", init=("setup",)), [sandbox()], [], "containerd", now=NOW)
    assert "waiting" in pending["initContainerStatuses"][0]["state"] and pending["phase"] == "Pending"
