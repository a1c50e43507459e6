"""Static pods on a node whose runtime runs them: a real `pods-api serve --manifests DIR
--cri-socket S` (the standalone DaemonSet's combination), a real containerd, and this test acting
as the kubelet over CRI with the kubelet's labels and annotations.

The kubelet gives a static pod a uid of its own (pkg/kubelet/config/common.go, applyDefaults: an
md5 over Go's deep hash of the decoded pod, which no other program reproduces) and puts it on
the pod's sandbox and containers (pkg/kubelet/kuberuntime/labels.go, newPodLabels:
`io.kubernetes.pod.uid`; newPodAnnotations: every pod annotation, `kubernetes.io/config.source`
and `config.hash` among them). What it serves for the pod is under that uid, so pods-api must be.
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from containerd import IMAGE, Containerd, Kubelet, PodRef
from podwatch import ADDED, DELETED, MODIFIED, SYNCED, Watch, listed
from serve import serving
from servers import ManifestServer

from pods_api.sources.cri.pb import cri_runtime_v1_pb2 as cri
from pods_api.sources.cri.status import GONE_INIT_MESSAGE, rfc3339

pytestmark = pytest.mark.needs_containerd

RELIST = ("--cri-relist", "0.1")
CONFIG_SOURCE = "kubernetes.io/config.source"
CONFIG_HASH = "kubernetes.io/config.hash"
CONFIG_SEEN = "kubernetes.io/config.seen"
MIRROR = "kubernetes.io/config.mirror"


def manifest(name: str, command: list[str], namespace: str = "kube-system", **spec: Any) -> dict[str, Any]:
    """A static pod on the host network, as the test's kubelet runs every pod (no CNI here)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"tier": "control-plane"}},
        "spec": {
            "hostNetwork": True,
            "containers": [{"name": name, "image": IMAGE, "command": command}],
            **spec,
        },
    }


def put(directory: Path, filename: str, doc: dict[str, Any]) -> None:
    tmp = directory / f".{filename}.tmp"
    tmp.write_text(yaml.safe_dump(doc))
    os.replace(tmp, directory / filename)


def kubelet_uid() -> str:
    """A uid of the kubelet's shape for a static pod: 32 hex digits (an md5)."""
    return uuid.uuid4().hex


def run_static(
    kubelet: Kubelet, name: str, command: list[str], *, source: str = "file", namespace: str = "kube-system"
) -> tuple[PodRef, str]:
    """What the kubelet does for a static pod: a sandbox under its uid with the pod's
    annotations, and the container; the pod and the container's ID."""
    return run_static_as(kubelet, kubelet_uid(), name, command, source=source, namespace=namespace)


def run_static_as(
    kubelet: Kubelet,
    uid: str,
    name: str,
    command: list[str],
    *,
    source: str = "file",
    namespace: str = "kube-system",
) -> tuple[PodRef, str]:
    """As `run_static`, under a uid given (the same content again: the kubelet's same uid)."""
    annotations = {CONFIG_SOURCE: source, CONFIG_HASH: uid, CONFIG_SEEN: "2026-12-01T10:00:00.5Z"}
    pod = kubelet.run_pod(name, namespace, uid=uid, labels={"tier": "control-plane"}, annotations=annotations)
    return pod, kubelet.start_container(pod, name.rsplit("-node-1", 1)[0], command)


def running_under(uid: str) -> Callable[[int, dict[str, Any]], bool]:
    def want(kind: int, p: dict[str, Any]) -> bool:
        if kind not in (ADDED, MODIFIED) or p["metadata"]["uid"] != uid:
            return False  # a DELETED carries only the pod's identity
        statuses = p["status"].get("containerStatuses") or [{}]
        return "running" in statuses[0].get("state", {})

    return want


def serve(tmp_path: Path, runtime: Containerd, *args: str) -> Any:
    return serving(tmp_path / "run", "--cri-socket", str(runtime.socket), *RELIST, *args)


def events_of(watch: Watch) -> list[tuple[int, str]]:
    """Every event the watch read (SYNCED left out), as (type, uid)."""
    return [(kind, p["metadata"]["uid"]) for kind, p in watch.seen if kind != SYNCED]


async def test_a_static_pod_is_served_under_the_uid_the_runtime_runs_it_with(
    tmp_path: Path, runtime: Containerd, kubelet: Kubelet
) -> None:
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    put(manifests, "etcd.yaml", manifest("etcd", ["/bin/sleep", "1000"]))
    with serve(tmp_path, runtime, "--manifests", str(manifests)) as served:
        # Before the kubelet has started it, the runtime knows no uid: the pod is held back,
        # as the kubelet's own watch says nothing of a pod before it knows it.
        assert await listed(served) == []
        watch = Watch(served)
        await watch.next(1)  # SYNCED: the watch runs before the kubelet starts it
        pod, cid = run_static(kubelet, "etcd-node-1", ["/bin/sleep", "1000"])
        _, p = await watch.until(running_under(pod.uid))
        await watch.close()
        (only,) = await listed(served)
    # One pod, one uid: never a uid the kubelet does not use, so no DELETED.
    assert {uid for _, uid in events_of(watch)} == {pod.uid}
    assert events_of(watch)[0] == (ADDED, pod.uid) and DELETED not in {k for k, _ in events_of(watch)}
    assert only["metadata"]["uid"] == pod.uid
    meta, status = p["metadata"], p["status"]
    assert (meta["name"], meta["namespace"], meta["uid"]) == ("etcd-node-1", "kube-system", pod.uid)
    # The kubelet's config.hash is its uid; the spec is the manifest's, as the kubelet read it.
    assert meta["annotations"][CONFIG_HASH] == pod.uid and meta["annotations"][CONFIG_SOURCE] == "file"
    assert meta["labels"] == {"tier": "control-plane"}
    assert p["spec"]["containers"][0]["command"] == ["/bin/sleep", "1000"]
    # The status the runtime gives: not Pending forever.
    assert status["phase"] == "Running"
    main = status["containerStatuses"][0]
    assert main["containerID"] == f"containerd://{cid}" and main["ready"] is True
    assert {c["type"]: c["status"] for c in status["conditions"]}["Ready"] == "True"
    # BestEffort: the kubelet repeats the (no) resources as empty objects, allocates none.
    assert (status["qosClass"], status["resources"], main["resources"]) == ("BestEffort", {}, {})
    assert "allocatedResources" not in status and "allocatedResources" not in main


async def test_a_static_pod_the_runtime_never_runs_is_served_under_our_uid_after_the_wait(
    tmp_path: Path, runtime: Containerd, kubelet: Kubelet
) -> None:
    """A manifest the kubelet refuses to run (or a kubelet that is not running): after the
    wait, pods-api's own uid, said once in the log; the kubelet's uid once it shows."""
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    put(manifests, "etcd.yaml", manifest("etcd", ["/bin/sleep", "1000"]))
    with serve(tmp_path, runtime, "--manifests", str(manifests), "--static-pod-uid-wait", "0.5") as served:
        watch = Watch(served)
        _, ours = await watch.until(lambda kind, p: kind == ADDED)
        line = served.wait_for_line("shows no sandbox of it")
        assert "kube-system/etcd-node-1" in line and ours["metadata"]["uid"] in line
        assert str(manifests / "etcd.yaml") in line  # the file to look at
        assert ours["status"]["phase"] == "Pending"
        pod, _ = run_static(kubelet, "etcd-node-1", ["/bin/sleep", "1000"])
        await watch.until(running_under(pod.uid))
        await watch.close()
    uid = ours["metadata"]["uid"]
    assert events_of(watch)[:3] == [(ADDED, uid), (DELETED, uid), (ADDED, pod.uid)]
    assert sum("shows no sandbox of it" in text for text in served.lines) == 1


async def test_a_node_restart_is_only_modified(tmp_path: Path, runtime: Containerd, kubelet: Kubelet) -> None:
    """The runtime's state is gone (containerd restarted on a fresh disk); the kubelet makes the
    sandbox again under the same uid, since the manifest did not change."""
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    put(manifests, "etcd.yaml", manifest("etcd", ["/bin/sleep", "1000"]))
    pod, _ = run_static(kubelet, "etcd-node-1", ["/bin/sleep", "1000"])
    with serve(tmp_path, runtime, "--manifests", str(manifests)) as served:
        watch = Watch(served)
        await watch.until(running_under(pod.uid))
        kubelet.remove_everything()
        await watch.until(lambda kind, p: kind == MODIFIED and p["status"]["phase"] == "Pending")
        _, cid = run_static_as(kubelet, pod.uid, "etcd-node-1", ["/bin/sleep", "1000"])
        _, p = await watch.until(running_under(pod.uid))
        await watch.close()
        pods = await listed(served)
    assert [q["metadata"]["uid"] for q in pods] == [pod.uid]
    assert p["status"]["containerStatuses"][0]["containerID"] == f"containerd://{cid}"
    kinds = [kind for kind, _ in events_of(watch)]
    assert kinds[0] == ADDED and set(kinds[1:]) == {MODIFIED}
    assert {uid for _, uid in events_of(watch)} == {pod.uid}


async def test_an_edit_is_the_old_uid_with_the_old_content_then_the_new_uid_with_the_new(
    tmp_path: Path, runtime: Containerd, kubelet: Kubelet
) -> None:
    """The kubelet's order: the old pod (old uid, old spec) is killed, and once it has
    terminated the new one (new uid, new spec) starts (pkg/kubelet/pod_workers.go)."""
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    put(manifests, "etcd.yaml", manifest("etcd", ["/bin/sleep", "1000"]))
    old, _ = run_static(kubelet, "etcd-node-1", ["/bin/sleep", "1000"])
    marker, _ = run_static(kubelet, "marker-node-1", ["/bin/sleep", "1000"])
    with serve(tmp_path, runtime, "--manifests", str(manifests)) as served:
        watch = Watch(served)
        await watch.until(running_under(old.uid))
        edited = manifest("etcd", ["/bin/sleep", "1000"])
        edited["metadata"]["labels"] = {"tier": "edited"}
        put(manifests, "etcd.yaml", edited)
        # A manifest written after the edit: once its pod is served, the edit has been read.
        put(manifests, "marker.yaml", manifest("marker", ["/bin/sleep", "1000"]))
        await watch.until(running_under(marker.uid))
        # The kubelet still runs the old pod (for its grace period): the old content is served.
        (still,) = [q for q in await listed(served) if q["metadata"]["uid"] == old.uid]
        assert still["metadata"]["labels"] == {"tier": "control-plane"}
        kubelet.stop_pod(old)
        await watch.until(lambda kind, p: kind == DELETED and p["metadata"]["uid"] == old.uid)
        during = await listed(served)
        new, _ = run_static(kubelet, "etcd-node-1", ["/bin/sleep", "1000"])
        _, p = await watch.until(running_under(new.uid))
        await watch.close()
    # The new pod waits for its sandbox, as the kubelet waits for the old pod to end.
    assert [q["metadata"]["uid"] for q in during] == [marker.uid]
    assert p["metadata"]["labels"] == {"tier": "edited"}
    for kind, q in watch.seen:
        if kind in (ADDED, MODIFIED) and q["metadata"]["uid"] == old.uid:
            assert q["metadata"]["labels"] == {"tier": "control-plane"}  # never the new label
    assert {uid for _, uid in events_of(watch)} == {old.uid, new.uid, marker.uid}


async def test_a_manifest_edited_while_the_api_server_is_away_is_served_as_the_runtime_runs_it(
    tmp_path: Path, runtime: Containerd, kubelet: Kubelet
) -> None:
    """pkg/kubelet/config/common.go applyDefaults: an edit is a new uid; the kubelet kills the old
    pod and starts the new (pkg/kubelet/kubelet.go HandlePodRemoves, HandlePodAdditions). The
    API server's mirror still names the old uid (here a fixture: its last state, as the apiserver
    source keeps it while unreachable); pod_manager's IsMirrorPodOf no longer holds for it."""
    manifests, fixtures = tmp_path / "manifests", tmp_path / "fixtures"
    manifests.mkdir()
    fixtures.mkdir()
    put(manifests, "etcd.yaml", manifest("etcd", ["/bin/sleep", "1000"]))
    old, _ = run_static(kubelet, "etcd-node-1", ["/bin/sleep", "1000"])
    mirror = {
        **manifest("etcd-node-1", ["/bin/sleep", "1000"]),
        "metadata": {
            "name": "etcd-node-1",
            "namespace": "kube-system",
            "uid": str(uuid.uuid4()),
            "annotations": {MIRROR: old.uid, CONFIG_HASH: old.uid, CONFIG_SOURCE: "file"},
        },
        "status": {
            "phase": "Running",
            "hostIP": "10.0.0.1",
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }
    (fixtures / "mirror.json").write_text(json.dumps(mirror))
    with serve(tmp_path, runtime, "--manifests", str(manifests), "--fixtures", str(fixtures)) as served:
        watch = Watch(served)
        await watch.until(running_under(old.uid))
        put(manifests, "etcd.yaml", manifest("etcd", ["/bin/sleep", "2000"]))
        kubelet.stop_pod(old)
        new, cid = run_static(kubelet, "etcd-node-1", ["/bin/sleep", "2000"])
        _, p = await watch.until(running_under(new.uid))
        assert watch.last(old.uid)[0] == DELETED
        await watch.close()
        pods = await listed(served)
    assert [q["metadata"]["uid"] for q in pods] == [new.uid]
    assert p["spec"]["containers"][0]["command"] == ["/bin/sleep", "2000"]
    assert p["status"]["containerStatuses"][0]["containerID"] == f"containerd://{cid}"
    assert "hostIP" not in p["status"]  # the stale mirror's status is not the new pod's


async def test_file_and_http_static_pods_of_one_name_are_two_pods(
    tmp_path: Path, runtime: Containerd, kubelet: Kubelet
) -> None:
    """pkg/kubelet/config/config.go filterInvalidPods: names must be unique within one source
    only; a file pod and an http pod of the same name both run, each under its own uid."""
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    put(manifests, "etcd.yaml", manifest("etcd", ["/bin/sleep", "1000"]))
    site = ManifestServer()
    site.serve(json.dumps(manifest("etcd", ["/bin/sleep", "3000"])))
    site.start()
    try:
        from_file, file_cid = run_static(kubelet, "etcd-node-1", ["/bin/sleep", "1000"])
        from_http, http_cid = run_static(kubelet, "etcd-node-1", ["/bin/sleep", "3000"], source="http")
        args = ("--manifests", str(manifests), "--manifest-url", site.url)
        with serve(tmp_path, runtime, *args) as served:
            watch = Watch(served)
            _, f = await watch.until(running_under(from_file.uid))
            _, h = await watch.until(running_under(from_http.uid))
            await watch.close()
            pods = await listed(served)
    finally:
        site.stop()
    assert sorted(q["metadata"]["uid"] for q in pods) == sorted([from_file.uid, from_http.uid])
    assert f["metadata"]["annotations"][CONFIG_SOURCE] == "file"
    assert f["spec"]["containers"][0]["command"] == ["/bin/sleep", "1000"]
    assert f["status"]["containerStatuses"][0]["containerID"] == f"containerd://{file_cid}"
    assert h["metadata"]["annotations"][CONFIG_SOURCE] == "http"
    assert h["spec"]["containers"][0]["command"] == ["/bin/sleep", "3000"]
    assert h["status"]["containerStatuses"][0]["containerID"] == f"containerd://{http_cid}"


def conditions(p: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in p["status"]["conditions"]}


async def test_a_static_pods_status_is_complete_as_the_kubelets(
    tmp_path: Path, runtime: Containerd, kubelet: Kubelet
) -> None:
    """pkg/kubelet/kubelet_pods.go generateAPIPodStatus and convertToAPIContainerStatuses,
    pkg/kubelet/status/generate.go: the QoS class of the defaulted spec (limits only:
    Guaranteed), a completed init container ready, PodReadyToStartContainers while the sandbox
    is the one the spec asks for; then a container the runtime lost ends ContainerStatusUnknown."""
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    limits = {"cpu": "100m", "memory": "64Mi"}
    etcd = manifest(
        "etcd",
        ["/bin/sleep", "1000"],
        initContainers=[{"name": "setup", "image": IMAGE, "command": ["/bin/true"]}],
    )
    etcd["spec"]["containers"][0]["resources"] = {"limits": limits}
    etcd["spec"]["initContainers"][0]["resources"] = {"limits": limits}  # init containers count too
    put(manifests, "etcd.yaml", etcd)
    uid = kubelet_uid()
    annotations = {CONFIG_SOURCE: "file", CONFIG_HASH: uid, CONFIG_SEEN: "2026-12-01T10:00:00Z"}
    pod = kubelet.run_pod("etcd-node-1", "kube-system", uid=uid, annotations=annotations)
    kubelet.start_container(pod, "setup", ["/bin/true"], kind="init")
    # The cgroup settings the kubelet derives from those limits (100m: a 10 ms quota of 100 ms).
    cgroups = cri.LinuxContainerResources(
        cpu_period=100_000, cpu_quota=10_000, cpu_shares=102, memory_limit_in_bytes=64 * 1024 * 1024
    )
    cid = kubelet.start_container(pod, "etcd", ["/bin/sleep", "1000"], resources=cgroups)
    with serve(tmp_path, runtime, "--manifests", str(manifests), "--node-ip", "10.0.0.5") as served:
        watch = Watch(served)
        _, p = await watch.until(running_under(uid))
        status = p["status"]
        assert status["qosClass"] == "Guaranteed"
        # generateAPIPodStatus: the node's IPs, a host-network pod's own.
        assert (status["hostIP"], status["hostIPs"]) == ("10.0.0.5", [{"ip": "10.0.0.5"}])
        assert (status["podIP"], status["podIPs"]) == ("10.0.0.5", [{"ip": "10.0.0.5"}])
        (setup,) = status["initContainerStatuses"]
        assert setup["state"]["terminated"]["reason"] == "Completed" and setup["ready"] is True
        assert conditions(p)["PodReadyToStartContainers"]["status"] == "True"
        assert conditions(p)["Initialized"]["status"] == "True"
        assert p["spec"]["containers"][0]["resources"]["requests"] == limits  # defaulted
        # As the runtime applies them, written as Go writes them (64Mi, not 67108864), and as
        # allocated; the pod's own resources the containers' summed (the init container's
        # equal them), as the kubelet writes them with InPlacePodLevelResourcesVerticalScaling.
        (main,) = status["containerStatuses"]
        assert main["resources"] == {"limits": limits, "requests": limits}
        assert main["allocatedResources"] == limits
        assert setup["allocatedResources"] == limits and setup["resources"] == {
            "limits": limits,
            "requests": limits,
        }
        assert (status["resources"], status["allocatedResources"]) == (
            {"limits": limits, "requests": limits},
            limits,
        )

        kubelet.remove_container(cid)

        def lost(kind: int, q: dict[str, Any]) -> bool:
            if kind != MODIFIED or q["metadata"]["uid"] != uid:
                return False
            return "terminated" in (q["status"]["containerStatuses"][0].get("lastState") or {})

        _, q = await watch.until(lost)
        await watch.close()
    (main,) = q["status"]["containerStatuses"]
    assert main["lastState"]["terminated"]["reason"] == "ContainerStatusUnknown"
    assert main["lastState"]["terminated"]["exitCode"] == 137
    assert main["restartCount"] == 1
    assert q["status"]["phase"] == "Running"  # restartPolicy Always: the kubelet restarts it


async def test_a_failed_static_pod_is_not_ready_for_pod_failed(
    tmp_path: Path, runtime: Containerd, kubelet: Kubelet
) -> None:
    """pkg/kubelet/status/generate.go GenerateContainersReadyCondition, GeneratePodReadyCondition:
    a Failed pod's ContainersReady and Ready are False for PodFailed, with no message."""
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    put(manifests, "job.yaml", manifest("job", ["/bin/sh", "-c", "exit 2"], restartPolicy="Never"))
    pod, _ = run_static(kubelet, "job-node-1", ["/bin/sh", "-c", "exit 2"])
    with serve(tmp_path, runtime, "--manifests", str(manifests)) as served:
        watch = Watch(served)
        await watch.until(lambda kind, p: kind != DELETED and p["metadata"]["uid"] == pod.uid)
        kubelet.stop_pod(pod)  # the kubelet is done with a pod that will not restart
        _, p = await watch.until(
            lambda kind, p: (
                kind != DELETED and p["metadata"]["uid"] == pod.uid and p["status"]["phase"] == "Failed"
            )
        )

        def sandbox_stopped(kind: int, q: dict[str, Any]) -> bool:
            if kind == DELETED or q["metadata"]["uid"] != pod.uid:
                return False
            return conditions(q)["PodReadyToStartContainers"]["status"] == "False"

        _, stopped = await watch.until(sandbox_stopped)
        await watch.close()
    for kind in ("ContainersReady", "Ready"):
        condition = conditions(p)[kind]
        assert (condition["status"], condition["reason"]) == ("False", "PodFailed")
        assert "message" not in condition
    # GeneratePodReadyToStartContainersCondition: PodSandboxChanged's words for a stopped sandbox.
    sandbox = conditions(stopped)["PodReadyToStartContainers"]
    assert (sandbox["status"], sandbox["reason"], sandbox["message"]) == (
        "False",
        "PodSandboxNotReady",
        "pod sandbox is not ready",
    )


async def test_termination_messages_are_read_as_the_kubelet_reads_them(
    tmp_path: Path, runtime: Containerd, kubelet: Kubelet
) -> None:
    """pkg/kubelet/kuberuntime/kuberuntime_container.go getTerminationMessage: the file mounted at
    the container's terminationMessagePath (its annotation); readLastStringFromContainerLogs for
    FallbackToLogsOnError when a failed container wrote none. The runtime's own message first."""
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    job = manifest("job", ["/bin/true"], restartPolicy="Never")
    job["spec"]["containers"].append({"name": "noisy", "image": IMAGE, "command": ["/bin/true"]})
    job["spec"]["containers"][0]["volumeMounts"] = [
        {"name": "etc", "mountPath": "/etc/app", "readOnly": True}
    ]
    job["spec"]["volumes"] = [{"name": "etc", "hostPath": {"path": "/etc"}}]
    put(manifests, "job.yaml", job)
    log = tmp_path / "termination-log"
    log.write_text("")  # the kubelet creates it empty and mounts it
    uid = kubelet_uid()
    annotations = {CONFIG_SOURCE: "file", CONFIG_HASH: uid, CONFIG_SEEN: "2026-12-01T10:00:00Z"}
    pod = kubelet.run_pod("job-node-1", "kube-system", uid=uid, annotations=annotations)
    mount = cri.Mount(container_path="/dev/termination-log", host_path=str(log))
    kubelet.start_container(
        pod, "job", ["/bin/sh", "-c", "echo -n 'disk full' > /dev/termination-log; exit 3"], mounts=[mount]
    )
    fallback = {"io.kubernetes.container.terminationMessagePolicy": "FallbackToLogsOnError"}
    kubelet.start_container(
        pod, "noisy", ["/bin/sh", "-c", "echo starting; echo last words; exit 1"], annotations=fallback
    )

    def both_ended(kind: int, p: dict[str, Any]) -> bool:
        if kind == DELETED or p["metadata"]["uid"] != uid:
            return False
        statuses = p["status"].get("containerStatuses") or []
        return len(statuses) == 2 and all("terminated" in s["state"] for s in statuses)

    with serve(tmp_path, runtime, "--manifests", str(manifests)) as served:
        watch = Watch(served)
        _, p = await watch.until(both_ended)
        await watch.close()
    statuses = {s["name"]: s for s in p["status"]["containerStatuses"]}
    assert statuses["job"]["state"]["terminated"]["message"] == "disk full"
    assert statuses["noisy"]["state"]["terminated"]["message"] == "starting\nlast words\n"
    # convertToAPIContainerStatuses: the spec's mounts, a read-only one not recursively so.
    assert statuses["job"]["volumeMounts"] == [
        {"name": "etc", "mountPath": "/etc/app", "readOnly": True, "recursiveReadOnly": "Disabled"}
    ]


async def test_an_init_container_the_runtime_collected_is_completed(
    tmp_path: Path, runtime: Containerd, kubelet: Kubelet
) -> None:
    """pkg/kubelet/kubelet_pods.go convertToAPIContainerStatuses: an init container gone from
    the runtime (garbage collected) while the regular containers run completed: the pod is
    Running and Initialized, not Pending (Init:0/1)."""
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    web = manifest("web", ["/bin/sleep", "1000"], initContainers=[{"name": "setup", "image": IMAGE}])
    put(manifests, "web.yaml", web)
    uid = kubelet_uid()
    annotations = {CONFIG_SOURCE: "file", CONFIG_HASH: uid, CONFIG_SEEN: "2026-12-01T10:00:00Z"}
    pod = kubelet.run_pod("web-node-1", "kube-system", uid=uid, annotations=annotations)
    setup = kubelet.start_container(pod, "setup", ["/bin/true"], kind="init")
    kubelet.start_container(pod, "web", ["/bin/sleep", "1000"])
    kubelet.remove_container(setup)
    with serve(tmp_path, runtime, "--manifests", str(manifests)) as served:
        watch = Watch(served)
        _, p = await watch.until(running_under(uid))
        await watch.close()
    (init,) = p["status"]["initContainerStatuses"]
    message = GONE_INIT_MESSAGE
    assert init["state"] == {"terminated": {"exitCode": 0, "reason": "Completed", "message": message}}
    assert init["ready"] is True
    assert p["status"]["phase"] == "Running"
    assert conditions(p)["Initialized"]["status"] == "True"


async def test_a_crash_loop_waits_in_crash_loop_back_off_and_keeps_the_last_exit(
    tmp_path: Path, runtime: Containerd, kubelet: Kubelet
) -> None:
    """pkg/kubelet/kuberuntime/kuberuntime_manager.go doBackOff, kubelet_pods.go
    convertToAPIContainerStatuses: the second exit in a row is waited on for 10 s, the status
    says so in the kubelet's words with the exit as lastState; once the kubelet has removed the
    exited containers and runs the next attempt, that exit stays its lastState."""
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    crash = ["/bin/sh", "-c", "echo oops; exit 1"]
    put(manifests, "crash.yaml", manifest("crash", crash))
    pod, first = run_static(kubelet, "crash-node-1", crash)
    second = kubelet.start_container(pod, "crash", crash, restart_count=1)  # restarted at once

    def in_back_off(kind: int, p: dict[str, Any]) -> bool:
        if kind == DELETED or p["metadata"]["uid"] != pod.uid:
            return False
        statuses = p["status"].get("containerStatuses") or [{}]
        return "CrashLoopBackOff" in str(statuses[0].get("state", {}).get("waiting", {}))

    with serve(tmp_path, runtime, "--manifests", str(manifests)) as served:
        watch = Watch(served)
        _, p = await watch.until(in_back_off)
        (main,) = p["status"]["containerStatuses"]
        assert main["state"]["waiting"]["message"] == (
            f"back-off 10s restarting failed container=crash pod=crash-node-1_kube-system({pod.uid})"
        )
        exit_ = main["lastState"]["terminated"]
        assert (exit_["exitCode"], exit_["reason"], exit_["containerID"]) == (
            1,
            "Error",
            f"containerd://{second}",
        )
        assert (main["restartCount"], main["ready"], main["started"]) == (1, False, False)
        assert p["status"]["phase"] == "Running"
        # The back-off is over: the kubelet starts the next attempt and collects the old ones.
        third = kubelet.start_container(pod, "crash", ["/bin/sleep", "1000"], restart_count=2)
        kubelet.remove_container(first)
        kubelet.remove_container(second)
        _, q = await watch.until(running_under(pod.uid))
        await watch.close()
    (main,) = q["status"]["containerStatuses"]
    assert main["containerID"] == f"containerd://{third}" and main["restartCount"] == 2
    assert main["lastState"] == {"terminated": exit_}  # carried: the runtime no longer has it


async def test_condition_times_are_the_runtimes_not_our_first_look(
    tmp_path: Path, runtime: Containerd, kubelet: Kubelet
) -> None:
    """The kubelet stamps a condition's lastTransitionTime when it writes the status the runtime
    event changed: the sandbox's creation, the container's start. A pods-api started later
    says the same times."""
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    put(manifests, "etcd.yaml", manifest("etcd", ["/bin/sleep", "1000"]))
    pod, cid = run_static(kubelet, "etcd-node-1", ["/bin/sleep", "1000"])
    created, started = kubelet.sandbox_created_at(pod), kubelet.status(cid).started_at
    # Not synchronisation: the pod must be older than pods-api's first look by a whole second,
    # the conditions' precision, for a first-look time to show.
    await asyncio.sleep(1.1)
    with serve(tmp_path, runtime, "--manifests", str(manifests)) as served:
        watch = Watch(served)
        _, p = await watch.until(running_under(pod.uid))
        await watch.close()
    times = {kind: c["lastTransitionTime"] for kind, c in conditions(p).items()}
    assert times == {
        "PodReadyToStartContainers": rfc3339(created),
        "Initialized": rfc3339(created),
        "Ready": rfc3339(started),
        "ContainersReady": rfc3339(started),
        "PodScheduled": rfc3339(created),
    }
