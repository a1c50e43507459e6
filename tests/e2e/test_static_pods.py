"""Static pod sources end to end: a real `pods-api serve --manifests/--manifest-url`, a real
HTTP server, and events seen through a real watch on the gRPC socket."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from builders import pod
from podwatch import ADDED, DELETED, MODIFIED, SYNCED, Watch, listed  # noqa: F401
from repo import ROOT
from serve import TIMEOUT, Served, serving
from servers import ManifestServer

EXAMPLES = ROOT / "examples" / "manifests"


def static_pod(name: str, image: str = "nginx:1.27", **meta: Any) -> dict[str, Any]:
    """A manifest: one container named after the pod; `meta`: metadata fields."""
    body = pod(name, image=image, container=name)
    body["metadata"].update(meta)
    return body


def put(directory: Path, name: str, doc: dict[str, Any] | str) -> None:
    tmp = directory / f".{name}.tmp"
    tmp.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc))
    os.replace(tmp, directory / name)


@pytest.fixture
def manifests(tmp_path: Path) -> Path:
    directory = tmp_path / "manifests"
    directory.mkdir()
    put(directory, "web.yaml", static_pod("web"))
    put(directory, "etcd.yaml", static_pod("etcd", "registry.k8s.io/etcd:3.5", namespace="kube-system"))
    return directory


async def test_static_pods_get_the_kubelet_treatment(tmp_path: Path, manifests: Path) -> None:
    with serving(tmp_path / "run", "--manifests", str(manifests)) as served:
        pods = {p["metadata"]["name"]: p for p in await listed(served)}
    assert set(pods) == {"web-node-1", "etcd-node-1"}
    web = pods["web-node-1"]
    assert web["metadata"]["namespace"] == "default"
    assert pods["etcd-node-1"]["metadata"]["namespace"] == "kube-system"
    assert re.fullmatch(r"[0-9a-f]{32}", web["metadata"]["uid"])
    annotations = web["metadata"]["annotations"]
    assert annotations["kubernetes.io/config.source"] == "file"
    assert annotations["kubernetes.io/config.hash"] == web["metadata"]["uid"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", annotations["kubernetes.io/config.seen"])
    assert web["spec"]["nodeName"] == "node-1"
    assert web["status"]["phase"] == "Pending"


async def test_edits_are_delete_then_add_and_uids_survive_a_restart(tmp_path: Path, manifests: Path) -> None:
    with serving(tmp_path / "run", "--manifests", str(manifests)) as served:
        before = {p["metadata"]["name"]: p["metadata"]["uid"] for p in await listed(served)}
        watch = Watch(served)
        await watch.next(3)
        put(manifests, "web.yaml", static_pod("web", "nginx:1.28"))
        (deleted, old), (added, new) = await watch.next(2)
        assert (deleted, old["metadata"]["uid"]) == (DELETED, before["web-node-1"])
        assert (added, new["metadata"]["name"]) == (ADDED, "web-node-1")
        assert new["metadata"]["uid"] != before["web-node-1"]
        assert new["spec"]["containers"][0]["image"] == "nginx:1.28"
        (manifests / "etcd.yaml").unlink()
        assert [(t, p["metadata"]["name"]) for t, p in await watch.next()] == [(DELETED, "etcd-node-1")]
        await watch.close()
    put(manifests, "etcd.yaml", static_pod("etcd", "registry.k8s.io/etcd:3.5", namespace="kube-system"))
    with serving(tmp_path / "run", "--manifests", str(manifests)) as served:
        after = {p["metadata"]["name"]: p["metadata"]["uid"] for p in await listed(served)}
    assert after["etcd-node-1"] == before["etcd-node-1"]  # same content, same UID, new process
    assert after["web-node-1"] == new["metadata"]["uid"]


async def test_a_bad_file_gives_no_pods_as_with_the_kubelet_and_is_counted(
    tmp_path: Path, manifests: Path
) -> None:
    """pkg/kubelet/config/file.go extractFromDir: a file that does not decode is skipped at the
    next relist, so its pod is no longer in the set and the kubelet kills it."""
    with serving(tmp_path / "run", "--manifests", str(manifests)) as served:
        watch = Watch(served)
        await watch.next(3)
        put(manifests, "web.yaml", "spec: [unclosed\n")
        put(manifests, "broken.yaml", static_pod("broken", image=""))  # no image: refused
        put(manifests, "new.yaml", static_pod("new"))
        seen = {(t, p["metadata"]["name"]) for t, p in await watch.next(2)}
        assert seen == {(DELETED, "web-node-1"), (ADDED, "new-node-1")}
        await watch.close()
        names = sorted(p["metadata"]["name"] for p in await listed(served))
        assert names == ["etcd-node-1", "new-node-1"]
        served.wait_for_line("web.yaml")
        served.wait_for_line("broken.yaml")
        errors = _metric(served, "pods_api_source_errors_total")
        assert errors >= 2


async def test_a_manifest_url_goes_down_and_comes_back(tmp_path: Path) -> None:
    site = ManifestServer()
    site.serve(
        json.dumps({"apiVersion": "v1", "kind": "PodList", "items": [static_pod("edge")]}), etag='"v1"'
    )
    site.start()
    try:
        args = (
            "--manifest-url",
            site.url,
            "--manifest-url-interval",
            "0.2",
            "--manifest-url-header",
            "Authorization: Bearer s3cret",
        )
        with serving(tmp_path / "run", *args) as served:
            first = await site.next_request()
            assert first.headers.get("Authorization") == "Bearer s3cret"
            (edge,) = await listed(served)
            assert edge["metadata"]["annotations"]["kubernetes.io/config.source"] == "http"
            watch = Watch(served)
            await watch.next(2)
            assert (await site.next_request()).status == 304  # ETag honoured: nothing changes
            site.stop()
            served.wait_for_line("failed")  # a failed fetch, logged; the pod stays
            assert [p["metadata"]["name"] for p in await listed(served)] == ["edge-node-1"]
            site.serve(json.dumps(static_pod("edge", "nginx:2")), etag='"v2"')
            site.start()
            (deleted, _), (added, pod) = await watch.next(2)
            assert (deleted, added, pod["spec"]["containers"][0]["image"]) == (DELETED, ADDED, "nginx:2")
            await watch.close()
        assert "s3cret" not in "".join(served.lines)
    finally:
        site.stop()


async def test_sources_combine_and_a_uid_stays_with_its_first_source(tmp_path: Path, manifests: Path) -> None:
    fixtures = tmp_path / "fixtures"
    fixtures.mkdir()
    shared_uid = "6f9b3c1e-0000-4000-8000-000000000001"
    put(fixtures, "a.yaml", {**static_pod("fixture-pod", uid=shared_uid), "status": {"phase": "Running"}})
    put(manifests, "clash.yaml", static_pod("clash", uid=shared_uid))
    args = ("--fixtures", str(fixtures), "--manifests", str(manifests))
    with serving(tmp_path / "run", *args) as served:
        names = sorted(p["metadata"]["name"] for p in await listed(served))
        line = served.wait_for_line("refused")
    assert shared_uid in line and "fixtures:" in line and "manifests:" in line
    assert len(names) == 3 and "etcd-node-1" in names and "web-node-1" in names
    assert ("fixture-pod" in names) != ("clash-node-1" in names)


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_the_readme_first_run_lists_the_example_static_pods(tmp_path: Path) -> None:
    with serving(tmp_path / "run", "--manifests", str(EXAMPLES)) as served:
        out = subprocess.run(
            ["curl", "-sS", "--unix-socket", str(served.http_socket), "http://localhost/v1/pods"],
            capture_output=True,
            text=True,
            check=True,
            timeout=TIMEOUT,
        ).stdout
    names = sorted(item["metadata"]["name"] for item in json.loads(out)["items"])
    assert names == ["etcd-node-1", "nginx-node-1"]


def _metric(served: Served, name: str) -> float:
    transport = httpx.HTTPTransport(uds=str(served.http_socket))
    with httpx.Client(transport=transport, timeout=TIMEOUT) as client:
        body = client.get("http://localhost/metrics").text
    return sum(float(line.split()[-1]) for line in body.splitlines() if line.startswith(name + "{"))


async def test_a_stale_mirror_and_the_kubelets_view_without_a_manifest_are_one_pod(tmp_path: Path) -> None:
    """pkg/kubelet/pod/mirror_client.go IsMirrorPodOf: a mirror whose config.mirror is not the
    static pod's hash is an orphan (the kubelet deletes it); what the kubelet runs is its own
    pod. Both here as fixtures: the API server's last state and the kubelet's view."""
    fixtures = tmp_path / "fixtures"
    fixtures.mkdir()
    kubelet_uid, old_uid = "5d41402abc4b2a76b9719d911017c592", "7d793037a0760186574b0282f2f435e7"
    base = static_pod("etcd-node-1", namespace="kube-system")
    mirror = {
        **base,
        "metadata": {
            **base["metadata"],
            "uid": "2c1743a3-91f0-4e2a-9e3c-4fb1c1d0a0b1",
            "annotations": {
                "kubernetes.io/config.mirror": old_uid,
                "kubernetes.io/config.hash": old_uid,
                "kubernetes.io/config.source": "file",
            },
        },
        "status": {"phase": "Failed", "reason": "Evicted"},
    }
    view = {
        **base,
        "metadata": {
            **base["metadata"],
            "uid": kubelet_uid,
            "annotations": {"kubernetes.io/config.hash": kubelet_uid, "kubernetes.io/config.source": "file"},
        },
        "status": {"phase": "Running", "podIP": "10.0.0.7", "podIPs": [{"ip": "10.0.0.7"}]},
    }
    (fixtures / "mirror.json").write_text(json.dumps(mirror))
    (fixtures / "view.json").write_text(json.dumps(view))
    with serving(tmp_path / "run", "--fixtures", str(fixtures)) as served:
        pods = await listed(served)
    assert [(p["metadata"]["name"], p["metadata"]["uid"]) for p in pods] == [("etcd-node-1", kubelet_uid)]
    assert pods[0]["status"]["phase"] == "Running" and pods[0]["status"]["podIP"] == "10.0.0.7"
    assert "reason" not in pods[0]["status"]  # nothing of the orphan's status


async def test_static_pods_are_served_defaulted_as_the_kubelet_decodes_them(tmp_path: Path) -> None:
    """pkg/kubelet/config/common.go tryDecodeSinglePod decodes with the defaulting decoder
    (pkg/apis/core/v1/defaults.go SetDefaults_PodSpec, SetDefaults_Container): a field selector
    on a default finds every pod that has it, as on the kubelet's own /pods."""
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    put(manifests, "a.yaml", static_pod("a"))
    put(manifests, "b.yaml", static_pod("b", "busybox"))
    never = static_pod("job")
    never["spec"]["restartPolicy"] = "Never"
    put(manifests, "job.yaml", never)
    with serving(tmp_path / "run", "--manifests", str(manifests)) as served:
        transport = httpx.AsyncHTTPTransport(uds=str(served.http_socket))
        async with httpx.AsyncClient(
            transport=transport, base_url="http://localhost", timeout=TIMEOUT
        ) as http:
            response = await http.get("/api/v1/pods", params={"fieldSelector": "spec.restartPolicy=Always"})
            body = response.json()
        pods = {p["metadata"]["name"]: p for p in await listed(served)}
    assert sorted(p["metadata"]["name"] for p in body["items"]) == ["a-node-1", "b-node-1"]
    spec = pods["b-node-1"]["spec"]
    assert (spec["dnsPolicy"], spec["terminationGracePeriodSeconds"], spec["schedulerName"]) == (
        "ClusterFirst",
        30,
        "default-scheduler",
    )
    assert spec["containers"][0]["imagePullPolicy"] == "Always"  # busybox: the tag latest
    assert pods["a-node-1"]["spec"]["containers"][0]["imagePullPolicy"] == "IfNotPresent"


async def test_a_static_pod_referencing_api_objects_is_refused_with_one_line(tmp_path: Path) -> None:
    """pkg/kubelet/config/common.go tryDecodeSinglePod: with PreventStaticPodAPIReferences (on by
    default since 1.34) a static pod that references a secret is not run."""
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    secretive = static_pod("secretive")
    secretive["spec"]["volumes"] = [{"name": "certs", "secret": {"secretName": "etcd-certs"}}]
    put(manifests, "secretive.yaml", secretive)
    put(manifests, "web.yaml", static_pod("web"))
    with serving(tmp_path / "run", "--manifests", str(manifests)) as served:
        line = served.wait_for_line("secretive.yaml")
        assert [p["metadata"]["name"] for p in await listed(served)] == ["web-node-1"]
    assert "static pods may not reference secrets (PreventStaticPodAPIReferences)" in line


def test_a_missing_manifest_directory_is_said_in_the_log_and_by_check(tmp_path: Path) -> None:
    """No directory is no pods, as with the kubelet, but ready with zero pods from a path that
    is another distribution's is what a user must see: a warning in the log and in `check`,
    gone once the directory exists."""
    absent = tmp_path / "etc-kubernetes-manifests"
    # A directory that appears is found at the next resync (nothing to watch before it exists).
    with serving(tmp_path / "run", "--manifests", str(absent), "--manifests-resync", "0.2") as served:
        logged = served.wait_for_line("does not exist")
        assert f"pod source manifests:{absent}: {absent} does not exist" in logged

        def check() -> str:
            result = subprocess.run(
                ["pods-api", "check", "--socket", str(served.socket)],
                capture_output=True,
                text=True,
                timeout=TIMEOUT,
            )
            assert result.returncode == 0, result.stdout + result.stderr  # ready: it is no error
            return result.stdout

        assert f"warning:   manifests:{absent}: {absent} does not exist" in check()
        watch = subprocess.Popen(
            ["pods-api", "watch", "-o", "name", "--socket", str(served.socket)],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert watch.stdout is not None
            assert watch.stdout.readline() == "INITIAL_SYNC_COMPLETE\n"  # no pods yet
            absent.mkdir()
            put(absent, "web.yaml", static_pod("web"))
            assert watch.stdout.readline().startswith("ADDED pod/web")  # the scan that found it
        finally:
            watch.kill()
            watch.wait()
        output = check()
        assert "warning" not in output and "pods:      1" in output
