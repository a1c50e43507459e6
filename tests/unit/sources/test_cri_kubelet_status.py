"""The standalone status as the kubelet v1.37.2 writes it: crash loops
and their back-off, `lastState` carried from the previous status, the resources the status
repeats, and every condition's reason, message and time."""

from __future__ import annotations

from typing import Any

import pytest

from pods_api.core.api.codec import pod_from_message, pod_to_message
from pods_api.core.api.quantity import add_quantities, binary_quantity
from pods_api.sources.cri.backoff import CrashLoops
from pods_api.sources.cri.status import (
    INIT,
    REGULAR,
    Container,
    ContainerState,
    Sandbox,
    Shape,
    SpecContainer,
    go_duration,
    pod_status,
    rfc3339,
)
from pods_api.sources.defaults import apply_pod_defaults

SECOND = 1_000_000_000
NOW = "2030-01-01T00:00:00Z"  # pods-api's clock: far from every runtime time below
UID = "0a1b2c3d4e5f60718293a4b5c6d7e8f9"


def sandbox(ready: bool = True, created: int = 100, sid: str = "sb") -> Sandbox:
    return Sandbox(sid, UID, "web-node1", "default", 0, ready, created * SECOND, host_network=True)


def attempt(
    restarts: int,
    state: ContainerState = ContainerState.EXITED,
    *,
    created: int | None = None,
    ran: int = 2,
    code: int = 1,
    name: str = "main",
    kind: str = REGULAR,
    **extra: Any,
) -> Container:
    """One attempt of a container: created 10 s after the one before, exited `ran` s after."""
    at = 100 + 10 * restarts if created is None else created
    return Container(
        id=f"{name}-{restarts}",
        sandbox_id="sb",
        uid=UID,
        name=name,
        kind=kind,
        state=state,
        created_at=at * SECOND,
        started_at=(at + 1) * SECOND,
        finished_at=(at + ran) * SECOND if state is ContainerState.EXITED else 0,
        exit_code=code if state is ContainerState.EXITED else 0,
        reason="Error"
        if state is ContainerState.EXITED and code
        else ("Completed" if state is ContainerState.EXITED else ""),
        image="docker.io/library/busybox:1.36",
        image_ref="sha256:abc",
        restart_count=restarts,
        **extra,
    )


def web(policy: str = "Always", **spec: Any) -> Shape:
    return Shape(
        containers=(SpecContainer("main", "busybox:1.36", **spec),),
        restart_policy=policy,
        static=True,
        host_network=True,
        name="web-node1",
        namespace="default",
        uid=UID,
    )


def main_status(status: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = status["containerStatuses"][0]
    return result


def conditions(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in status["conditions"]}


# -- S4: crash loops -------------------------------------------------------------------------------


def back_offs_over(exits: int, ran: int = 2) -> list[int]:
    """The back-off shown after each of `exits` exits, relisting between them as the source does."""
    loops = CrashLoops()
    shown = []
    for r in range(exits):
        seen = loops.observe({UID: [attempt(r, ran=ran)]})
        shown.append(seen.get(f"main-{r}", 0))
    return shown


def test_the_back_off_doubles_from_10s_to_5_minutes() -> None:
    """doBackOff: the first exit restarts at once, then 10s, 20s, 40s ... capped at 5 min."""
    assert back_offs_over(9) == [0, 10, 20, 40, 80, 160, 300, 300, 300]


def test_a_container_that_ran_10_minutes_starts_the_back_off_again() -> None:
    """The kubelet's HasExpiredFunc: more than 600 s since the last restart resets the entry."""
    loops = CrashLoops()
    for r in range(4):
        loops.observe({UID: [attempt(r)]})
    long_run = attempt(4, ran=601)
    assert loops.observe({UID: [long_run]}) == {}  # restarted at once
    assert loops.observe({UID: [attempt(5, created=800)]}) == {"main-5": 10}


def test_a_crash_loop_seen_from_its_middle_assumes_fast_crashes() -> None:
    assert CrashLoops().observe({UID: [attempt(4)]}) == {"main-4": 80}
    assert CrashLoops().observe({UID: [attempt(12)]}) == {"main-12": 300}


def test_the_same_exit_seen_again_keeps_its_back_off() -> None:
    loops = CrashLoops()
    loops.observe({UID: [attempt(0)]})
    loops.observe({UID: [attempt(1)]})
    assert loops.observe({UID: [attempt(1)]}) == {"main-1": 10}
    assert loops.observe({UID: [attempt(1), attempt(2, ContainerState.RUNNING)]}) == {"main-1": 10}


@pytest.mark.parametrize(("seconds", "text"), [(10, "10s"), (80, "1m20s"), (160, "2m40s"), (300, "5m0s")])
def test_durations_as_go_prints_them(seconds: int, text: str) -> None:
    assert go_duration(seconds) == text


def test_an_exited_container_in_back_off_waits_in_crash_loop_back_off() -> None:
    """convertToAPIContainerStatuses: the reason cache's CrashLoopBackOff, the exit as lastState."""
    exited = attempt(3)
    status = pod_status(web(), [sandbox()], [exited], "containerd", now=NOW, back_offs={exited.id: 40})
    main = main_status(status)
    assert main["state"] == {
        "waiting": {
            "reason": "CrashLoopBackOff",
            "message": f"back-off 40s restarting failed container=main pod=web-node1_default({UID})",
        }
    }
    assert main["lastState"]["terminated"]["exitCode"] == 1
    assert main["lastState"]["terminated"]["containerID"] == "containerd://main-3"
    assert (main["restartCount"], main["ready"], main["started"]) == (3, False, False)
    assert main["containerID"] == "containerd://main-3"
    assert status["phase"] == "Running"  # waiting with a last exit counts as stopped: Always restarts


@pytest.mark.parametrize(("policy", "code"), [("Never", 1), ("OnFailure", 0)])
def test_a_container_that_will_not_restart_stays_terminated(policy: str, code: int) -> None:
    exited = attempt(2, code=code)
    status = pod_status(web(policy), [sandbox()], [exited], "containerd", now=NOW, back_offs={exited.id: 20})
    assert "terminated" in main_status(status)["state"]


def test_the_containers_own_restart_policy_comes_first() -> None:
    """ContainerRestartRules (Beta, on): a container's restartPolicy before the pod's."""
    exited = attempt(2)
    status = pod_status(
        web("Always", restart_policy="Never"),
        [sandbox()],
        [exited],
        "containerd",
        now=NOW,
        back_offs={exited.id: 20},
    )
    assert "terminated" in main_status(status)["state"]


def test_last_state_is_carried_from_the_previous_status_when_the_runtime_removed_the_exit() -> None:
    """RestartAllContainersOnContainerExits (Beta, on): the kubelet keeps the previous exit."""
    exited = attempt(3)
    before = pod_status(web(), [sandbox()], [exited], "containerd", now=NOW, back_offs={exited.id: 40})
    restarted = attempt(4, ContainerState.RUNNING)  # the runtime no longer has main-3
    after = pod_status(web(), [sandbox()], [restarted], "containerd", previous=before, now=NOW)
    main = main_status(after)
    assert "running" in main["state"]
    assert main["lastState"] == main_status(before)["lastState"]
    assert main["lastState"]["terminated"]["containerID"] == "containerd://main-3"
    # and it stays there while the container runs
    again = pod_status(web(), [sandbox()], [restarted], "containerd", previous=after, now=NOW)
    assert main_status(again)["lastState"] == main["lastState"]


def test_a_first_exit_seen_terminated_becomes_the_next_attempts_last_state() -> None:
    first = attempt(0)
    before = pod_status(web(), [sandbox()], [first], "containerd", now=NOW)
    assert "terminated" in main_status(before)["state"]  # restarted at once: no back-off
    after = pod_status(
        web(), [sandbox()], [attempt(1, ContainerState.RUNNING)], "containerd", previous=before, now=NOW
    )
    assert main_status(after)["lastState"] == {"terminated": main_status(before)["state"]["terminated"]}
    assert main_status(after)["restartCount"] == 1


def test_an_init_container_in_a_crash_loop_waits_too() -> None:
    failing = attempt(1, name="setup", kind=INIT)
    pod = Shape(
        containers=(SpecContainer("main"),),
        init_containers=(SpecContainer("setup"),),
        name="web-node1",
        namespace="default",
        uid=UID,
    )
    status = pod_status(pod, [sandbox()], [failing], "containerd", now=NOW, back_offs={failing.id: 10})
    (setup,) = status["initContainerStatuses"]
    assert setup["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert status["phase"] == "Pending"


# -- S5: resources -------------------------------------------------------------------------------


def static_shape(spec: dict[str, Any]) -> Shape:
    """The Shape of a static pod's spec as the manifests source serves it: defaulted."""
    message = pod_to_message(
        {"metadata": {"name": "web-node1", "namespace": "default", "uid": UID}, "spec": spec}
    ).message
    apply_pod_defaults(message)
    return Shape.from_pod(pod_from_message(message))


def test_a_best_effort_pod_repeats_empty_resources() -> None:
    shape = static_shape({"containers": [{"name": "main", "image": "busybox:1.36"}]})
    status = pod_status(shape, [sandbox()], [attempt(0, ContainerState.RUNNING)], "containerd", now=NOW)
    assert (status["qosClass"], status["resources"]) == ("BestEffort", {})
    assert "allocatedResources" not in status
    main = main_status(status)
    assert main["resources"] == {}
    assert "allocatedResources" not in main


def test_a_guaranteed_pod_repeats_its_resources_as_the_runtime_applies_them() -> None:
    limits = {"cpu": "500m", "memory": "64Mi"}
    shape = static_shape(
        {"containers": [{"name": "main", "image": "busybox:1.36", "resources": {"limits": limits}}]}
    )
    applied = attempt(
        0,
        ContainerState.RUNNING,
        cpu_quota=50000,
        cpu_period=100000,
        cpu_shares=512,
        memory_limit=64 * 1024 * 1024,
    )
    status = pod_status(shape, [sandbox()], [applied], "containerd", now=NOW)
    assert status["qosClass"] == "Guaranteed"
    assert status["resources"] == {"limits": limits, "requests": limits}
    assert status["allocatedResources"] == limits
    main = main_status(status)
    assert main["resources"] == {"limits": limits, "requests": limits}  # 64Mi, not 67108864
    assert main["allocatedResources"] == limits
    # the bytes served say the same: the codec keeps the canonical spelling
    served = pod_from_message(pod_to_message({"metadata": {"uid": UID}, "status": status}).message)
    assert served["status"]["containerStatuses"][0]["resources"]["limits"]["memory"] == "64Mi"


def test_a_stopped_containers_resources_are_the_specs() -> None:
    shape = static_shape(
        {
            "containers": [
                {"name": "main", "image": "busybox:1.36", "resources": {"requests": {"cpu": "100m"}}}
            ]
        }
    )
    status = pod_status(shape, [sandbox()], [attempt(0, cpu_shares=2)], "containerd", now=NOW)
    assert main_status(status)["resources"] == {"requests": {"cpu": "100m"}}


def test_pod_resources_add_up_with_init_containers_and_sidecars() -> None:
    """PodRequests: regular containers and sidecars add up; an init container counts with the
    sidecars before it; the larger wins."""
    shape = static_shape(
        {
            "initContainers": [
                {
                    "name": "log",
                    "image": "b",
                    "restartPolicy": "Always",
                    "resources": {"requests": {"cpu": "100m"}},
                },
                {"name": "setup", "image": "b", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}},
            ],
            "containers": [
                {"name": "a", "image": "b", "resources": {"requests": {"cpu": "200m", "memory": "64Mi"}}},
                {"name": "b", "image": "b", "resources": {"requests": {"cpu": "300m", "memory": "64Mi"}}},
            ],
        }
    )
    status = pod_status(shape, [sandbox()], [], "containerd", now=NOW)
    assert status["allocatedResources"] == {"cpu": "1100m", "memory": "1Gi"}
    assert status["resources"] == {"requests": {"cpu": "1100m", "memory": "1Gi"}}


def test_pod_level_resources_override_the_aggregate() -> None:
    shape = static_shape(
        {
            "resources": {"limits": {"memory": "256Mi"}, "requests": {"memory": "128Mi"}},
            "containers": [{"name": "a", "image": "b", "resources": {"requests": {"cpu": "200m"}}}],
        }
    )
    status = pod_status(shape, [sandbox()], [], "containerd", now=NOW)
    assert status["resources"] == {
        "limits": {"memory": "256Mi"},
        "requests": {"cpu": "200m", "memory": "128Mi"},
    }


def test_quantities_as_go_writes_them() -> None:
    assert binary_quantity(67108864) == "64Mi"
    assert binary_quantity(1_000_000) == "1000000"
    assert add_quantities("64Mi", "100M") == "167108864"  # the first operand's format
    assert add_quantities("500m", "500m") == "1"


# -- S7: conditions ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sandboxes", "message"),
    [
        ([], "no pod sandbox exists"),
        ([sandbox(ready=False)], "pod sandbox is not ready"),
        (
            [sandbox(sid="a"), sandbox(created=50, sid="b")],
            "multiple pod sandboxes are ready and need to be reconciled",
        ),
    ],
)
def test_pod_ready_to_start_containers_says_why_not(sandboxes: list[Sandbox], message: str) -> None:
    """GeneratePodReadyToStartContainersCondition: PodSandboxChanged's reason, as its message."""
    status = pod_status(web(), sandboxes, [], "containerd", now=NOW)
    condition = conditions(status)["PodReadyToStartContainers"]
    assert (condition["status"], condition["reason"], condition["message"]) == (
        "False",
        "PodSandboxNotReady",
        message,
    )


def test_condition_times_are_the_runtimes() -> None:
    """The kubelet stamps a condition when the runtime event that changes it happens, not when
    pods-api first looks (`now` is far later)."""
    running = attempt(0, ContainerState.RUNNING, created=110)
    status = pod_status(web(), [sandbox(created=100)], [running], "containerd", now=NOW)
    times = {kind: c["lastTransitionTime"] for kind, c in conditions(status).items()}
    assert times == {
        "PodReadyToStartContainers": rfc3339(100 * SECOND),
        "Initialized": rfc3339(100 * SECOND),
        "Ready": rfc3339(111 * SECOND),
        "ContainersReady": rfc3339(111 * SECOND),
        "PodScheduled": rfc3339(100 * SECOND),
    }
    exited = attempt(0, created=110, ran=30)
    after = pod_status(web(), [sandbox(created=100)], [exited], "containerd", previous=status, now=NOW)
    assert conditions(after)["Ready"]["lastTransitionTime"] == rfc3339(140 * SECOND)  # its exit
    assert conditions(after)["PodScheduled"]["lastTransitionTime"] == rfc3339(100 * SECOND)  # unchanged
    stopped = pod_status(
        web(), [sandbox(ready=False, created=100)], [exited], "containerd", previous=after, now=NOW
    )
    assert conditions(stopped)["PodReadyToStartContainers"]["lastTransitionTime"] == rfc3339(140 * SECOND)


def test_a_succeeded_pod_without_init_containers_is_initialized_as_completed() -> None:
    """GeneratePodInitializedCondition: Succeeded gives reason PodCompleted, init containers or not."""
    done = attempt(0, code=0)
    status = pod_status(web("Never"), [sandbox(ready=False)], [done], "containerd", now=NOW)
    assert status["phase"] == "Succeeded"
    initialized = conditions(status)["Initialized"]
    assert (initialized["status"], initialized.get("reason")) == ("True", "PodCompleted")


def test_an_initialized_pod_stays_initialized() -> None:
    """RestartAllContainersOnContainerExits (on): Initialized once True stays True."""
    pod = Shape(containers=(SpecContainer("main"),), init_containers=(SpecContainer("setup"),))
    setup = attempt(0, name="setup", kind=INIT, code=0)
    first = pod_status(
        pod, [sandbox()], [setup, attempt(0, ContainerState.RUNNING, created=120)], "containerd", now=NOW
    )
    assert conditions(first)["Initialized"]["status"] == "True"
    rerun = attempt(1, ContainerState.RUNNING, name="setup", kind=INIT, created=200)
    again = pod_status(pod, [sandbox()], [rerun], "containerd", previous=first, now=NOW)
    assert conditions(again)["Initialized"]["status"] == "True"


def test_the_phase_counts_a_containers_own_restart_policy() -> None:
    """getPhase with ContainerRestartRules (Beta, on): a stopped container that will not restart
    by its own restartPolicy makes the pod finish though the pod's policy is Always."""
    exited = attempt(0)
    assert (
        pod_status(web("Always", restart_policy="Never"), [sandbox()], [exited], "c", now=NOW)["phase"]
        == "Failed"
    )
    done = attempt(0, code=0)
    status = pod_status(web("Always", restart_policy="OnFailure"), [sandbox()], [done], "c", now=NOW)
    assert status["phase"] == "Succeeded"
    assert pod_status(web("Always"), [sandbox()], [done], "c", now=NOW)["phase"] == "Running"
