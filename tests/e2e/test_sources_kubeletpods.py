"""The kubelet `/pods` source against a real HTTPS server on 127.0.0.1 (a CA and certificate made
here, a bearer token checked): through a real PodCache, and end to end through `pods-api serve`."""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import tracemalloc
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from podwatch import ADDED, DELETED, MODIFIED, SYNCED, Watch, listed
from serve import PODS_API, serving
from servers import ManifestServer, TLSFiles, make_tls
from sourceharness import Harness, harness_fixture, write  # noqa: F401

from pods_api.core.store.watch import EventType
from pods_api.sources import SourceContext
from pods_api.sources import kubelet_pods as kubeletpods
from pods_api.sources.kubelet_pods import KubeletPodsSource, TokenFile

INTERVAL = 0.05
TOKEN = "kubelet-token-1"


def kubelet_pod(name: str, uid: str, *, phase: str = "Running", ready: bool = True) -> dict[str, Any]:
    """A pod as the kubelet's /pods lists it: no kind, status as the kubelet has it locally."""
    return {
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": uid,
            "creationTimestamp": "2026-01-01T10:00:00Z",
            "labels": {"app": name},
        },
        "spec": {"nodeName": "node-1", "containers": [{"name": "main", "image": "nginx:1.27"}]},
        "status": {
            "phase": phase,
            "podIP": "10.0.0.7",
            "containerStatuses": [
                {
                    "name": "main",
                    "ready": ready,
                    "restartCount": 0,
                    "image": "nginx:1.27",
                    "imageID": "",
                    "state": {"running": {"startedAt": "2026-01-01T10:00:05Z"}},
                }
            ],
        },
    }


def pod_list(*pods: dict[str, Any]) -> str:
    return json.dumps({"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": list(pods)})


@pytest.fixture
def tls(tmp_path: Path) -> TLSFiles:
    return make_tls(tmp_path)


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    return path


@pytest.fixture
async def kubelet(tls: TLSFiles) -> AsyncIterator[ManifestServer]:
    server = ManifestServer(tls=tls.server)
    server.token = TOKEN
    server.serve(pod_list(kubelet_pod("web", "uid-web"), kubelet_pod("db", "uid-db")))
    server.start()
    yield server
    server.stop()


def source(kubelet: ManifestServer, tls: TLSFiles, token_file: Path, harness: Harness) -> KubeletPodsSource:
    return _from_flags(
        harness,
        "--kubelet-pods-url",
        kubelet.url,
        "--kubelet-pods-interval",
        str(INTERVAL),
        "--kubelet-ca-file",
        str(tls.ca),
        "--kubelet-token-file",
        str(token_file),
    )


def _from_flags(harness: Harness, *argv: str) -> KubeletPodsSource:
    [built] = kubeletpods.from_args(_args(*argv), SourceContext("node-1", harness.on_error))
    assert isinstance(built, KubeletPodsSource)
    return built


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(exit_on_error=False)
    kubeletpods.add_flags(parser)
    return parser.parse_args(argv)


# -- through a real cache -------------------------------------------------------------------------


async def test_pods_are_served_as_the_kubelet_reports_them(
    kubelet: ManifestServer, tls: TLSFiles, token_file: Path, harness: Harness
) -> None:
    s = source(kubelet, tls, token_file, harness)
    snapshot = await harness.start(s)

    assert s.name == f"kubelet-pods:{kubelet.url}"
    assert [(p.uid, p.name) for p in snapshot.pods] == [("uid-db", "db"), ("uid-web", "web")]  # no suffix
    web = harness.cache.get("uid-web")
    assert web is not None
    assert (
        web.json["status"]["containerStatuses"][0]["state"]["running"]["startedAt"] == "2026-01-01T10:00:05Z"
    )
    assert "annotations" not in web.json["metadata"]  # no static-pod rules
    assert (await kubelet.next_request()).headers["Authorization"] == f"Bearer {TOKEN}"


async def test_only_real_changes_become_events(
    kubelet: ManifestServer, tls: TLSFiles, token_file: Path, harness: Harness
) -> None:
    await harness.start(source(kubelet, tls, token_file, harness))
    web_before = harness.cache.get("uid-web")
    for _ in range(3):  # the same list, polled again and again
        await kubelet.next_request()

    kubelet.serve(pod_list(kubelet_pod("web", "uid-web"), kubelet_pod("db", "uid-db", ready=False)))
    event = await harness.event()  # the first event at all: the unchanged polls made none
    assert (event.type, event.pod.uid) == (EventType.MODIFIED, "uid-db")
    assert event.pod.json["status"]["containerStatuses"][0]["ready"] is False
    assert harness.cache.get("uid-web") is web_before  # not even decoded again

    kubelet.serve(pod_list(kubelet_pod("db", "uid-db", ready=False), kubelet_pod("new", "uid-new")))
    events = await harness.events(2)
    assert sorted((e.type, e.pod.uid) for e in events) == [
        (EventType.ADDED, "uid-new"),
        (EventType.DELETED, "uid-web"),
    ]


async def test_what_the_source_keeps_of_a_list_is_about_the_pods_it_serves(
    kubelet: ManifestServer, tls: TLSFiles, token_file: Path, harness: Harness
) -> None:
    """Memory per 1,000 pods (docs/deploying.md) is what a source keeps between polls: the pods
    it serves and something to tell the next list's unchanged pods by, not the list itself and
    its decoded objects (3x what the pods' encodings hold, before)."""
    pods = [kubelet_pod(f"p{i}", f"uid-{i:04d}") for i in range(300)]
    for pod in pods:
        pod["metadata"]["annotations"] = {"note": "x" * 2000}
    body = pod_list(*pods)
    kubelet.serve(body)
    tracemalloc.start()
    try:
        await harness.start(source(kubelet, tls, token_file, harness))
        for _ in range(2):  # the same list again: nothing new is kept
            await kubelet.next_request()
        gc.collect()
        # What the source's own code allocated and still holds; the versions it made are the
        # cache's (core/store), counted by the cache's figures, not here.
        kept = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(True, "*/pods_api/sources/*")])
    finally:
        tracemalloc.stop()
    held = sum(stat.size for stat in kept.statistics("filename"))
    assert len(harness.cache) == 300
    # At most a poll's body on its way (polled every 50 ms); before: that, the last body and
    # every pod's decoded object, 3 times the list's bytes.
    assert held < 2 * len(body), f"the source holds {held} bytes for a {len(body)} byte list"


async def test_not_allowed_keeps_the_last_state_and_a_rotated_token_is_used(
    kubelet: ManifestServer, tls: TLSFiles, token_file: Path, harness: Harness
) -> None:
    await harness.start(source(kubelet, tls, token_file, harness))
    web = harness.cache.get("uid-web")

    kubelet.token = "kubelet-token-2"  # the token rotated on the kubelet's side first
    message = await harness.error("not allowed")
    assert "HTTP 401" in message and str(token_file) in message and "nodes/proxy" in message
    assert "kubelet-token-1" not in message
    kubelet.token, kubelet.status = None, 403  # authenticated, but not authorized
    assert "HTTP 403 Forbidden" in await harness.error("not allowed (HTTP 403")
    assert harness.cache.get("uid-web") is web and harness.cache.ready  # never "no pods"

    kubelet.token, kubelet.status = "kubelet-token-2", 200
    write(token_file, "kubelet-token-2\n")  # re-read on the next request, swapped as kubelets do
    kubelet.serve(pod_list(kubelet_pod("web", "uid-web", phase="Succeeded")))
    events = await harness.events(2)
    assert sorted((e.type, e.pod.uid) for e in events) == [
        (EventType.MODIFIED, "uid-web"),
        (EventType.DELETED, "uid-db"),
    ]


async def test_not_ready_until_the_first_good_poll(
    kubelet: ManifestServer, tls: TLSFiles, token_file: Path, harness: Harness
) -> None:
    kubelet.status = 403
    harness.launch(source(kubelet, tls, token_file, harness))
    await harness.error("not allowed")
    assert not harness.cache.ready

    kubelet.status = 200
    snapshot = await harness.synced()
    assert len(snapshot.pods) == 2


async def test_a_pod_that_does_not_decode_keeps_its_last_version(
    kubelet: ManifestServer, tls: TLSFiles, token_file: Path, harness: Harness
) -> None:
    await harness.start(source(kubelet, tls, token_file, harness))
    web = harness.cache.get("uid-web")

    bad = kubelet_pod("web", "uid-web")
    bad["status"]["podIP"] = {"not": "a string"}
    kubelet.serve(pod_list(bad, kubelet_pod("db", "uid-db", phase="Failed")))
    event = await harness.event()
    assert (event.type, event.pod.uid) == (EventType.MODIFIED, "uid-db")
    assert "status.podIP: expected string" in await harness.error("podIP")
    assert harness.cache.get("uid-web") is web

    kubelet.serve("not a pod list")
    assert "expected a Pod or PodList object" in await harness.error("expected a Pod")
    assert len(harness.cache) == 2


async def test_a_bad_certificate_is_an_error_not_no_pods(
    kubelet: ManifestServer, token_file: Path, tmp_path: Path, harness: Harness
) -> None:
    (tmp_path / "other").mkdir()
    other = make_tls(tmp_path / "other")  # a CA that did not sign the kubelet's certificate
    harness.launch(source(kubelet, other, token_file, harness))
    assert "CERTIFICATE_VERIFY_FAILED" in await harness.error("fetch failed: ConnectError")
    assert not harness.cache.ready


async def test_insecure_tls_skips_the_certificate_check(
    kubelet: ManifestServer, token_file: Path, harness: Harness
) -> None:
    s = _from_flags(
        harness,
        "--kubelet-pods-url",
        kubelet.url,
        "--kubelet-pods-interval",
        str(INTERVAL),
        "--kubelet-insecure-tls",
        "--kubelet-token-file",
        str(token_file),
    )
    assert len((await harness.start(s)).pods) == 2


async def test_the_default_token_file_may_be_missing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    missing = tmp_path / "serviceaccount" / "token"
    monkeypatch.setattr(kubeletpods, "DEFAULT_TOKEN_FILE", missing)
    args = _args("--kubelet-pods-url", "https://127.0.0.1:10250/pods", "--kubelet-insecure-tls")
    [built] = kubeletpods.from_args(args, SourceContext("node-1"))
    token = built._token  # type: ignore[attr-defined]
    assert isinstance(token, TokenFile) and token.path == missing
    assert token._read() is None  # no token sent; the kubelet's 401 then says what is wrong


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["--kubelet-pods-url", "https://u:pw@127.0.0.1/pods"],
            "https://u:xxxxx@127.0.0.1/pods: https needs",
        ),
        (
            [
                "--kubelet-pods-url",
                "https://h/pods",
                "--kubelet-ca-file",
                "/no/ca.crt",
                "--kubelet-insecure-tls",
            ],
            "give one, not both",
        ),
        (
            ["--kubelet-pods-url", "https://h/pods", "--kubelet-ca-file", "/no/ca.crt"],
            "/no/ca.crt: No such file",
        ),
        (["--kubelet-pods-url", "http://h:10255/pods", "--kubelet-insecure-tls"], "need an https:// URL"),
        (["--kubelet-pods-url", "ftp://h/pods"], "--kubelet-pods-url ftp://h/pods: must be an http"),
        (["--kubelet-ca-file", "ca.crt"], "--kubelet-ca-file is for --kubelet-pods-url"),
        (
            [
                "--kubelet-pods-url",
                "https://h/pods",
                "--kubelet-insecure-tls",
                "--kubelet-token-file",
                "/no/t",
            ],
            "--kubelet-token-file /no/t: No such file",
        ),
    ],
)
def test_bad_flags_are_named(argv: list[str], expected: str) -> None:
    with pytest.raises(ValueError) as caught:
        kubeletpods.from_args(_args(*argv), SourceContext("node-1"))
    assert expected in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_file_that_is_not_a_ca_is_named(tmp_path: Path) -> None:
    bogus = tmp_path / "ca.crt"
    bogus.write_text("-----BEGIN CERTIFICATE-----\nnope\n-----END CERTIFICATE-----\n")
    args = _args("--kubelet-pods-url", "https://h/pods", "--kubelet-ca-file", str(bogus))
    with pytest.raises(ValueError, match=f"--kubelet-ca-file {bogus}: not a PEM CA bundle"):
        kubeletpods.from_args(args, SourceContext("node-1"))


# -- through a real `pods-api serve` --------------------------------------------------------------


async def test_end_to_end_over_https_with_a_token(
    kubelet: ManifestServer, tls: TLSFiles, token_file: Path, tmp_path: Path
) -> None:
    flags = ["--kubelet-pods-url", kubelet.url, "--kubelet-pods-interval", "0.1"]
    flags += ["--kubelet-ca-file", str(tls.ca), "--kubelet-token-file", str(token_file)]
    with serving(tmp_path / "run", *flags) as served:
        pods = await listed(served)
        assert [(p["metadata"]["name"], p["status"]["phase"]) for p in pods] == [
            ("db", "Running"),
            ("web", "Running"),
        ]
        watch = Watch(served)
        try:
            await watch.next(3)  # two ADDED and INITIAL_SYNC_COMPLETE
            kubelet.serve(
                pod_list(kubelet_pod("web", "uid-web"), kubelet_pod("db", "uid-db", phase="Failed"))
            )
            [(kind, pod)] = await watch.next()
            assert (kind, pod["metadata"]["name"], pod["status"]["phase"]) == (MODIFIED, "db", "Failed")

            kubelet.token = "rotated"
            served.wait_for_line("not allowed (HTTP 401 Unauthorized)")
            assert len(await listed(served)) == 2  # the last state, still served
            write(token_file, "rotated")
            kubelet.serve(pod_list(kubelet_pod("web", "uid-web", phase="Succeeded")))
            events = await watch.next(2)
            assert sorted((k, p["metadata"]["name"]) for k, p in events) == [
                (MODIFIED, "web"),
                (DELETED, "db"),
            ]
        finally:
            await watch.close()
    assert TOKEN not in "".join(served.lines) and "rotated" not in "".join(served.lines)


async def test_a_static_pod_from_manifests_and_from_the_kubelet_is_served_once(
    kubelet: ManifestServer, tls: TLSFiles, token_file: Path, tmp_path: Path
) -> None:
    """The kubelet's /pods lists the static pod itself, under the kubelet's uid (a hash we cannot
    reproduce, so not the uid --manifests gives it): one pod, under the kubelet's uid, with the
    manifest's spec and the kubelet's status."""
    kubelet_uid = "6c5b4a39281706f5e4d3c2b1a0918273"
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "etcd", "namespace": "kube-system"},
        "spec": {"containers": [{"name": "etcd", "image": "registry.k8s.io/etcd:3.5.21-0"}]},
    }
    write(manifests / "etcd.yaml", json.dumps(manifest))
    static = kubelet_pod("etcd-node-1", kubelet_uid)
    static["metadata"]["namespace"] = "kube-system"
    static["metadata"]["annotations"] = {
        "kubernetes.io/config.hash": kubelet_uid,
        "kubernetes.io/config.source": "file",
        "kubernetes.io/config.seen": "2026-01-01T10:00:00.123456789Z",
    }
    static["spec"]["containers"][0]["name"] = "etcd"
    static["status"]["containerStatuses"][0]["name"] = "etcd"
    kubelet.serve(pod_list(kubelet_pod("web", "uid-web"), static))

    flags = ["--kubelet-pods-url", kubelet.url, "--kubelet-pods-interval", "0.1"]
    flags += ["--kubelet-ca-file", str(tls.ca), "--kubelet-token-file", str(token_file)]
    with serving(tmp_path / "run", *flags, "--manifests", str(manifests)) as served:
        pods = {p["metadata"]["name"]: p for p in await listed(served)}
        assert sorted(pods) == ["etcd-node-1", "web"]
        etcd = pods["etcd-node-1"]
        assert etcd["metadata"]["uid"] == kubelet_uid
        assert etcd["spec"]["containers"][0]["image"] == "registry.k8s.io/etcd:3.5.21-0"  # the manifest's
        assert etcd["status"]["phase"] == "Running" and etcd["status"]["podIP"] == "10.0.0.7"  # the kubelet's
        watch = Watch(served)
        try:
            events = await watch.next(3)
            assert sorted((k, p.get("metadata", {}).get("uid", "")) for k, p in events) == [
                (ADDED, kubelet_uid),
                (ADDED, "uid-web"),
                (SYNCED, ""),
            ]
            kubelet.serve(pod_list(kubelet_pod("web", "uid-web")))  # the kubelet stopped reporting it
            [(kind, pod), (kind2, pod2)] = await watch.next(2)
            assert (kind, pod["metadata"]["uid"]) == (DELETED, kubelet_uid)
            assert (kind2, pod2["metadata"]["name"]) == (ADDED, "etcd-node-1")  # our own uid, Pending
            assert pod2["metadata"]["uid"] != kubelet_uid and pod2["status"] == {"phase": "Pending"}
        finally:
            await watch.close()


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (
            ["--kubelet-pods-url", "https://127.0.0.1:1/pods"],
            "--kubelet-pods-url https://127.0.0.1:1/pods: https needs --kubelet-ca-file",
        ),
        (["--manifest-url", "ftp://127.0.0.1/pods"], "--manifest-url ftp://127.0.0.1/pods: must be an http"),
        (["--fixtures", "/no/such/dir"], "--fixtures /no/such/dir: not a directory"),
        ([], "no pod source: give at least one of --fixtures DIR, --manifests DIR, --manifest-url URL, "),
    ],
)
def test_bad_source_flags_exit_2_before_serving(tmp_path: Path, flags: list[str], expected: str) -> None:
    result = subprocess.run(
        [PODS_API, "serve", "--run-dir", str(tmp_path / "run"), *flags],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    last = result.stderr.splitlines()[-1]  # after argparse's usage: one line, no traceback
    assert last.startswith("pods-api: error: ") and expected in last
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "run" / "pods-api.sock").exists()


def test_every_source_flag_is_in_the_help() -> None:
    result = subprocess.run([PODS_API, "serve", "--help"], capture_output=True, text=True, timeout=60)
    for flag in ["--fixtures", "--manifests", "--manifest-url", "--kubelet-pods-url", "--kubelet-ca-file"]:
        assert flag in result.stdout
