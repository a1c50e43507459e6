"""APIServerSource against the test kube-apiserver (TLS, bearer token, the real list/watch wire
protocol on 127.0.0.1), through a real PodCache."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from apipods import NODE, pod
from apiserver import KubeAPIServer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from repo import ROOT
from sourceharness import Harness, Said, by_name, harness_fixture, said_fixture  # noqa: F401

from pods_api.core.store.identity import MIRROR_ANNOTATION
from pods_api.core.store.watch import EventType
from pods_api.sources.apiserver import LIST_PAGE, MAX_EVENT_BYTES, WATCH_TIMEOUT, APIServerSource

ADDED, MODIFIED, DELETED = EventType.ADDED, EventType.MODIFIED, EventType.DELETED


@pytest.fixture
def server(tmp_path: Path) -> Iterator[KubeAPIServer]:
    s = KubeAPIServer(tmp_path)
    s.start()
    yield s
    s.stop()


def source(server: KubeAPIServer, harness: Harness, tmp_path: Path, **kw: Any) -> APIServerSource:
    kubeconfig = kw.pop("kubeconfig", None) or server.kubeconfig(tmp_path / "kubeconfig")
    return APIServerSource(node_name=NODE, kubeconfig=kubeconfig, on_error=harness.on_error, **kw)


async def test_lists_this_nodes_pods_then_watches_from_the_lists_version(
    server: KubeAPIServer, harness: Harness, tmp_path: Path
) -> None:
    server.put(pod("web"))
    server.put(pod("db"))
    server.put(pod("elsewhere", node="node-2"))
    server.put(pod("unscheduled", node=""))

    snapshot = await harness.start(source(server, harness, tmp_path))

    assert sorted(by_name(snapshot.pods)) == ["db", "web"]
    # First a watch-list, as the kubelet's reflector: this server does not offer it (422).
    refused = await server.next_request(sendInitialEvents="True")
    assert refused.status == 422
    listed = await server.next_request()
    want = {"fieldSelector": f"spec.nodeName={NODE}", "resourceVersion": "0", "limit": str(LIST_PAGE)}
    assert listed.query == want
    assert listed.authorization == f"Bearer {server.token}"
    watch = await server.next_request()
    assert watch.query["watch"].lower() == "true" and watch.query["allowWatchBookmarks"].lower() == "true"
    assert watch.query["resourceVersion"] == server.resource_version
    assert watch.query["fieldSelector"] == f"spec.nodeName={NODE}"
    assert WATCH_TIMEOUT[0] <= int(watch.query["timeoutSeconds"]) <= WATCH_TIMEOUT[1]
    web = by_name(snapshot.pods)["web"].json
    assert web["metadata"]["uid"] == "uid-web" and web["status"]["phase"] == "Running"


async def test_a_server_that_offers_watch_list_is_asked_for_it_and_never_listed(
    server: KubeAPIServer, harness: Harness, tmp_path: Path
) -> None:
    # As the kubelet's reflector on v1.35+: one watch brings the state, then goes on.
    server.watch_list = True
    server.put(pod("web"))
    server.put(pod("elsewhere", node="node-2"))

    snapshot = await harness.start(source(server, harness, tmp_path))

    assert sorted(by_name(snapshot.pods)) == ["web"]
    streamed = await server.next_request()
    want = {"sendInitialEvents": "True", "resourceVersionMatch": "NotOlderThan", "resourceVersion": ""}
    assert {k: streamed.query.get(k) for k in want} == want and streamed.status == 200
    assert streamed.query["allowWatchBookmarks"].lower() == "true"
    server.put(pod("db"))
    assert [(e.type, e.pod.name) for e in await harness.events(1)] == [(ADDED, "db")]  # the same stream
    assert server.seen.empty()  # no list, no second watch


async def test_a_watch_list_refused_then_a_410_relists_from_the_version_seen(
    server: KubeAPIServer, harness: Harness, tmp_path: Path
) -> None:
    server.put(pod("web"))
    await harness.start(source(server, harness, tmp_path))
    await server.next_request(watch=True)
    seen = server.resource_version
    server.watch_list = True  # upgraded: not asked again (a restart of pods-api would)
    server.stop()
    server.put(pod("db"))
    server.restart(keep_history=False)  # our version is too old now: 410
    relisted = await server.next_request(watch=False, resourceVersion=seen)
    assert "limit" not in relisted.query  # from a version seen: whole, from the cache
    assert [(e.type, e.pod.name) for e in await harness.events(1)] == [(ADDED, "db")]


async def test_pods_of_other_nodes_are_never_served_even_unfiltered(
    server: KubeAPIServer, harness: Harness, tmp_path: Path
) -> None:
    server.ignore_field_selector = True
    server.put(pod("web"))
    server.put(pod("elsewhere", node="node-2"))
    assert [p.name for p in (await harness.start(source(server, harness, tmp_path))).pods] == ["web"]

    server.put(pod("elsewhere", image="nginx:2", node="node-2"))
    server.put(pod("web", node="node-2"))  # rebound: no longer ours
    server.put(pod("db"))
    events = [(e.type, e.pod.name) for e in await harness.events(2)]
    assert events == [(DELETED, "web"), (ADDED, "db")]


async def test_changes_are_events(server: KubeAPIServer, harness: Harness, tmp_path: Path) -> None:
    server.put(pod("web"))
    await harness.start(source(server, harness, tmp_path))

    server.put(pod("web", image="nginx:1.28"))
    server.put(pod("db"))
    server.delete("uid-web")
    server.put(pod("elsewhere", node="node-2"))  # never seen
    server.put(pod("db", labels={"tier": "data"}))

    events = [(e.type, e.pod.name) for e in await harness.events(4)]
    assert events == [(MODIFIED, "web"), (ADDED, "db"), (DELETED, "web"), (MODIFIED, "db")]
    assert harness.cache.get("uid-db") is not None and len(harness.cache) == 1


async def test_api_pods_say_their_config_source_and_when_first_seen(
    server: KubeAPIServer, harness: Harness, tmp_path: Path
) -> None:
    """pkg/kubelet/config/config.go: every pod of the "api" source gets kubernetes.io/config.source
    api, and config.seen when first seen (recordFirstSeenTime), kept across its changes."""
    server.put(pod("web"))
    (web,) = (await harness.start(source(server, harness, tmp_path))).pods
    annotations = web.json["metadata"]["annotations"]
    assert annotations["kubernetes.io/config.source"] == "api"
    seen = annotations["kubernetes.io/config.seen"]
    assert seen.endswith("Z") and "T" in seen
    server.put(pod("web", image="nginx:1.28"))
    modified = await harness.event()
    assert modified.type is MODIFIED
    assert modified.pod.json["metadata"]["annotations"]["kubernetes.io/config.seen"] == seen


@pytest.mark.parametrize("as_http", [False, True], ids=["error-event", "http-status"])
async def test_a_410_relists_and_only_real_changes_become_events(
    server: KubeAPIServer, harness: Harness, tmp_path: Path, as_http: bool
) -> None:
    for name in ("same", "changed", "removed"):
        server.put(pod(name))
    await harness.start(source(server, harness, tmp_path))
    await server.next_request(watch=True)
    last_seen = server.resource_version

    server.stop()
    server.put(pod("changed", image="nginx:2"))
    server.delete("uid-removed")
    server.put(pod("new"))
    server.gone_as_http = as_http
    server.restart(keep_history=False)  # the watch cache starts afresh: our version is too old

    events = sorted((e.type, e.pod.name) for e in await harness.events(3))
    assert events == [(ADDED, "new"), (MODIFIED, "changed"), (DELETED, "removed")]
    await server.next_request(watch=False, resourceVersion=last_seen)  # a list at least as new
    server.put(pod("after"))
    assert [(e.type, e.pod.name) for e in await harness.events(1)] == [(ADDED, "after")]  # nothing else


async def test_a_dropped_watch_resumes_from_the_last_version_without_a_list(
    server: KubeAPIServer, harness: Harness, tmp_path: Path
) -> None:
    server.put(pod("web"))
    await harness.start(source(server, harness, tmp_path))
    await server.next_request(watch=True)
    server.put(pod("db"))
    await harness.event()
    server.bookmark()  # moves the resume point without an object
    seen = server.resource_version
    server.put(pod("elsewhere", node="node-2"))  # after the bookmark, and not ours
    server.drop_watches()

    resumed = await server.next_request()
    assert resumed.query.get("watch", "").lower() == "true"  # not a list
    assert int(resumed.query["resourceVersion"]) >= int(seen)
    server.put(pod("cache"))
    assert [(e.type, e.pod.name) for e in await harness.events(1)] == [(ADDED, "cache")]


async def test_a_drop_after_a_healthy_stretch_backs_off_from_the_start_again(
    server: KubeAPIServer, harness: Harness, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The failures in a row were counted from zero only after a watch that ended on
    its timeout, so every drop mid-watch added to the count of the drops before it, however long
    the watch had worked in between, and a change after the 6th drop was served 17 s late. A
    watch that delivered for `backoff_reset` since the last failure starts the count again; a
    drop right after delivering still counts as the next failure (a server dropping every watch
    at once must not have us spin)."""
    caplog.set_level(logging.DEBUG, logger="pods_api.sources.apiserver")
    reset = 0.2
    await harness.start(source(server, harness, tmp_path, backoff_reset=reset))
    await server.next_request(watch=True)
    for round, healthy in enumerate((True, True, True, True, False, False)):
        server.put(pod(f"p{round}"))
        assert (await harness.event()).pod.name == f"p{round}"  # the watch delivers
        if healthy:
            await asyncio.sleep(reset * 1.5)  # the healthy stretch: a length, not a synchronisation
        server.drop_watches()
        await server.next_request(watch=True)  # reconnected
    counts = [
        int(r.getMessage().split("failure ")[1].split()[0])
        for r in caplog.records
        if "in a row; trying again" in r.getMessage()
    ]
    assert counts == [1, 1, 1, 1, 2, 3]


async def test_a_corrupt_event_is_an_error_and_the_watch_resumes_before_it(
    server: KubeAPIServer, harness: Harness, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server.put(pod("web"))
    await harness.start(source(server, harness, tmp_path))
    await server.next_request(watch=True)
    seen = server.resource_version
    server.send_raw(b'{"type":"MODIFIED","object":{"spec":{"env":"s3cret-value"\n')

    error = await harness.error("not JSON")
    assert "bytes" in error and "s3cret-value" not in caplog.text
    resumed = await server.next_request()
    assert resumed.query.get("watch", "").lower() == "true" and resumed.query["resourceVersion"] == seen
    server.put(pod("db"))
    assert [(e.type, e.pod.name) for e in await harness.events(1)] == [(ADDED, "db")]


async def test_one_event_too_large_to_read_is_refused_by_name_and_the_watch_goes_on(
    server: KubeAPIServer, harness: Harness, tmp_path: Path
) -> None:
    """A 12 MB pod failed the watch at that event (aiohttp's line bound) on every retry: the
    source applied no later change while health said SERVING."""
    server.put(pod("web"))
    server.put(pod("big"))
    await harness.start(source(server, harness, tmp_path))
    huge = pod("big")
    huge["metadata"]["annotations"] = {"example.com/blob": "x" * 12_000_000}
    server.put(huge)
    error = await harness.error("over the")
    assert "default/big" in error and "uid-big" in error and str(MAX_EVENT_BYTES) in error
    server.put(pod("web", image="nginx:1.28"))
    server.put(pod("db"))
    assert [(e.type, e.pod.name) for e in await harness.events(2)] == [(MODIFIED, "web"), (ADDED, "db")]
    assert harness.cache.get("uid-big") is not None  # its last good version stays
    server.delete("uid-big")
    assert [(e.type, e.pod.name) for e in await harness.events(1)] == [(DELETED, "big")]


async def test_a_source_failing_past_its_resync_says_it_is_stale_until_current_again(
    server: KubeAPIServer, harness: Harness, tmp_path: Path
) -> None:
    """It served its last pods as if current, saying nothing a client could see."""
    connected: list[bool] = []
    server.put(pod("web"))
    s = source(server, harness, tmp_path, stale_after=0.5, on_connected=connected.append)
    await harness.start(s)
    server.stop()
    error = await harness.error("cannot connect")
    while "apiserver" not in harness.cache.warnings:  # the retries come within a few seconds
        await harness.error("cannot connect")
    assert "stale: nothing applied from https://127.0.0.1:" in harness.cache.warnings["apiserver"]
    assert error in harness.cache.warnings["apiserver"] and connected[-1] is False
    assert harness.cache.get("uid-web") is not None  # the last good pods stay served
    server.start()
    server.put(pod("db"))
    assert [(e.type, e.pod.name) for e in await harness.events(1)] == [(ADDED, "db")]
    assert "apiserver" not in harness.cache.warnings and connected[-1] is True


async def test_a_watch_connected_but_silent_past_its_resync_is_stale_until_a_bookmark(
    server: KubeAPIServer, harness: Harness, said: Said, tmp_path: Path
) -> None:
    """A server that holds the watch open and says nothing (hung, or behind a proxy that lost it)
    fails nothing: the resync alone says it, and a bookmark, a change, is current again."""
    connected: list[bool] = []
    server.put(pod("web"))
    s = source(server, harness, tmp_path, stale_after=0.5, on_connected=connected.append)
    await harness.start(s)
    await server.next_request(watch=True)
    await said.line(harness, "pod source apiserver: stale: ")
    assert "it answers, but gave nothing to apply" in harness.cache.warnings["apiserver"]
    assert connected[-1] is False and harness.cache.get("uid-web") is not None
    server.bookmark()
    await said.line(harness, "pod source apiserver: current again")
    assert "apiserver" not in harness.cache.warnings and connected[-1] is True


async def test_a_watch_that_times_out_is_resumed(
    server: KubeAPIServer, harness: Harness, tmp_path: Path
) -> None:
    server.put(pod("web"))
    await harness.start(source(server, harness, tmp_path, watch_timeout=(1, 1)))
    first = await server.next_request(watch=True)
    assert first.query["timeoutSeconds"] == "1"
    server.put(pod("db"))
    await harness.event()
    again = await server.next_request(watch=True, resourceVersion=server.resource_version)
    assert again.status == 200
    server.put(pod("cache"))
    assert [(e.type, e.pod.name) for e in await harness.events(1)] == [(ADDED, "cache")]


async def test_an_outage_keeps_the_pods_and_reconnects(
    server: KubeAPIServer, harness: Harness, tmp_path: Path
) -> None:
    server.put(pod("web"))
    states: list[bool] = []
    await harness.start(source(server, harness, tmp_path, on_connected=states.append))
    assert states == [True]

    server.stop()
    assert "cannot connect" in await harness.error("cannot connect")
    assert states[-1] is False
    assert harness.cache.ready and [p.name for p in harness.cache.snapshot().pods] == ["web"]

    server.put(pod("db"))
    server.start()
    assert [(e.type, e.pod.name) for e in await harness.events(1)] == [(ADDED, "db")]
    assert states[-1] is True


async def test_a_pod_that_does_not_decode_is_one_error_and_the_rest_are_served(
    server: KubeAPIServer, harness: Harness, tmp_path: Path
) -> None:
    broken = pod("broken")
    broken["spec"]["containers"] = "not a list"
    server.put(pod("web"))
    server.put(broken)

    snapshot = await harness.start(source(server, harness, tmp_path))

    assert [p.name for p in snapshot.pods] == ["web"]
    error = await harness.error("broken")
    assert "default/broken" in error and "spec.containers" in error
    server.put(pod("broken"))  # fixed
    assert [(e.type, e.pod.name) for e in await harness.events(1)] == [(ADDED, "broken")]
    bad_again = pod("broken")
    bad_again["spec"]["containers"] = 7
    server.put(bad_again)  # the last good version stays
    await harness.error("broken")
    server.put(pod("marker"))
    assert [(e.type, e.pod.name) for e in await harness.events(1)] == [(ADDED, "marker")]
    assert harness.cache.get("uid-broken") is not None


async def test_a_mirror_pod_is_served_as_its_static_pod(
    server: KubeAPIServer, harness: Harness, tmp_path: Path
) -> None:
    static_uid = "0123456789abcdef0123456789abcdef"
    mirror = pod(
        "etcd-node-1",
        uid="mirror-uid",
        annotations={
            MIRROR_ANNOTATION: static_uid,
            "kubernetes.io/config.hash": static_uid,
            "kubernetes.io/config.source": "file",
        },
    )
    server.put(mirror)

    (served,) = (await harness.start(source(server, harness, tmp_path))).pods

    assert served.uid == static_uid and served.name == "etcd-node-1"
    # The API server's copy keeps the static pod's source: which of the kubelet's it came from.
    assert served.json["metadata"]["annotations"]["kubernetes.io/config.source"] == "file"
    assert harness.cache.get("mirror-uid") is None
    server.delete("mirror-uid")
    deleted = await harness.event()
    assert (deleted.type, deleted.pod.uid) == (DELETED, static_uid)


async def test_a_wrong_token_is_a_clear_error_and_never_no_pods(
    server: KubeAPIServer, harness: Harness, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    server.put(pod("web"))
    kubeconfig = server.kubeconfig(tmp_path / "kubeconfig", token="wr0ng-t0ken")
    harness.launch(source(server, harness, tmp_path, kubeconfig=kubeconfig))

    error = await harness.error("401")
    assert "Unauthorized" in error and f"check the credentials of kubeconfig {kubeconfig}" in error
    assert not harness.cache.ready and len(harness.cache) == 0
    assert "wr0ng-t0ken" not in caplog.text and server.token not in caplog.text


async def test_a_rotated_token_file_is_read_again(
    server: KubeAPIServer, harness: Harness, tmp_path: Path
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(server.token)
    kubeconfig = server.kubeconfig(tmp_path / "kubeconfig", token_file=token_file)
    server.put(pod("web"))
    await harness.start(source(server, harness, tmp_path, kubeconfig=kubeconfig))

    await server.next_request(watch=True)
    old = server.token
    server.token = "r0tated"  # the server moves first: the next request is refused
    server.drop_watches()
    server.put(pod("db"))  # after the drop: only a new watch can bring it
    refused = await server.next_request()
    assert (refused.status, refused.authorization) == (401, f"Bearer {old}")
    assert harness.cache.ready  # a refused reconnect changes nothing clients see
    token_file.write_text("r0tated")  # then the kubelet rotates the file

    assert [(e.type, e.pod.name) for e in await harness.events(1)] == [(ADDED, "db")]
    while (accepted := await server.next_request(watch=True)).status == 401:
        pass  # a retry with the old token before the file changed
    assert (accepted.status, accepted.authorization) == (200, "Bearer r0tated")


async def test_an_untrusted_certificate_is_refused(
    server: KubeAPIServer, harness: Harness, tmp_path: Path
) -> None:
    kubeconfig = server.kubeconfig(tmp_path / "kubeconfig")
    (tmp_path / "other").mkdir()
    other_ca = KubeAPIServer(tmp_path / "other").ca_file  # never started: only its CA is used
    config = yaml.safe_load(kubeconfig.read_text())
    config["clusters"][0]["cluster"]["certificate-authority-data"] = base64.b64encode(
        other_ca.read_bytes()
    ).decode()
    kubeconfig.write_text(yaml.safe_dump(config))
    harness.launch(source(server, harness, tmp_path, kubeconfig=kubeconfig))

    assert "certificate" in await harness.error("certificate")
    assert not harness.cache.ready


async def test_a_missing_context_is_a_clear_error(
    server: KubeAPIServer, harness: Harness, tmp_path: Path
) -> None:
    harness.launch(source(server, harness, tmp_path, context="no-such-context"))
    error = await harness.error("cannot load")
    assert "no-such-context" in error and "kubeconfig" in error


def test_the_rbac_grants_read_on_pods_and_nothing_else() -> None:
    docs = list(yaml.safe_load_all((ROOT / "deploy" / "overlays" / "apiserver" / "rbac.yaml").read_text()))
    by_kind = {doc["kind"]: doc for doc in docs}
    assert sorted(by_kind) == ["ClusterRole", "ClusterRoleBinding", "ServiceAccount"]
    assert by_kind["ClusterRole"]["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}
    ]
    account = by_kind["ServiceAccount"]["metadata"]
    (subject,) = by_kind["ClusterRoleBinding"]["subjects"]
    assert (subject["kind"], subject["name"], subject["namespace"]) == (
        "ServiceAccount",
        account["name"],
        account["namespace"],
    )
    assert by_kind["ClusterRoleBinding"]["roleRef"]["name"] == by_kind["ClusterRole"]["metadata"]["name"]


# ---------------------------------------------------------------------------------------------
# convergence, whatever happens in between

_names = st.sampled_from(["a", "b", "c", "d"])
_ops = st.lists(
    st.one_of(
        st.tuples(st.just("put"), _names, st.sampled_from(["nginx:1", "nginx:2"]), st.booleans()),
        st.tuples(st.just("delete"), _names),
        st.tuples(st.sampled_from(["drop", "bookmark", "compact", "restart"])),
    ),
    max_size=12,
)


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],  # one server, a node per example
)
@given(ops=_ops)
def test_the_cache_converges_to_the_servers_pods(
    server: KubeAPIServer, tmp_path: Path, ops: list[Any]
) -> None:
    node = f"node-{uuid.uuid4().hex[:8]}"
    asyncio.run(_converge(server, tmp_path, node, ops))


async def _converge(server: KubeAPIServer, tmp_path: Path, node: str, ops: list[Any]) -> None:
    harness = Harness()
    kubeconfig = server.kubeconfig(tmp_path / "kubeconfig")
    harness.launch(APIServerSource(node_name=node, kubeconfig=kubeconfig, on_error=harness.on_error))
    expected: dict[str, str] = {}  # uid -> image, for this node
    stored: set[str] = set()
    try:
        await harness.synced()
        for op in ops:
            if op[0] == "put":
                _, name, image, here = op
                uid = f"{node}-{name}"
                server.put(pod(name, uid=uid, image=image, node=node if here else "other-node"))
                stored.add(uid)
                if here:
                    expected[uid] = image
                else:
                    expected.pop(uid, None)
            elif op[0] == "delete" and f"{node}-{op[1]}" in stored:
                server.delete(f"{node}-{op[1]}")
                stored.discard(f"{node}-{op[1]}")
                expected.pop(f"{node}-{op[1]}", None)
            elif op[0] == "drop":
                server.drop_watches()
            elif op[0] == "bookmark":
                server.bookmark()
            elif op[0] == "compact":
                server.compact()
            elif op[0] == "restart":
                await asyncio.to_thread(server.restart, keep_history=False)
        server.put(pod("marker", uid=f"{node}-marker", node=node))
        while (await harness.event()).pod.uid != f"{node}-marker":
            pass
        served = {p.uid: p.json["spec"]["containers"][0]["image"] for p in harness.cache.snapshot().pods}
        assert served == {**expected, f"{node}-marker": "nginx:1.27"}
    finally:
        await harness.stop()


async def test_a_kube_context_with_an_exec_plugin(
    server: KubeAPIServer, harness: Harness, tmp_path: Path
) -> None:
    plugin = tmp_path / "credential-plugin"
    credential = {
        "apiVersion": "client.authentication.k8s.io/v1beta1",
        "kind": "ExecCredential",
        "status": {"token": server.token},
    }
    plugin.write_text(f"#!{sys.executable}\nprint({json.dumps(json.dumps(credential))})\n")
    plugin.chmod(0o700)
    kubeconfig = server.kubeconfig(tmp_path / "kubeconfig", token="wr0ng")  # its current context fails
    config = yaml.safe_load(kubeconfig.read_text())
    exec_user = {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": str(plugin)}
    config["users"].append({"name": "plugin", "user": {"exec": exec_user}})
    config["contexts"].append({"name": "via-plugin", "context": {"cluster": "test", "user": "plugin"}})
    kubeconfig.write_text(yaml.safe_dump(config))
    server.put(pod("web"))

    s = source(server, harness, tmp_path, kubeconfig=kubeconfig, context="via-plugin")
    assert [p.name for p in (await harness.start(s)).pods] == ["web"]
    assert (await server.next_request()).authorization == f"Bearer {server.token}"


def test_the_kubernetes_client_is_loaded_only_for_apiserver() -> None:
    # kubernetes_asyncio loads every generated API model (~44 MiB resident): a server without
    # --apiserver must not pay for it, though every source module is imported for its flags.
    code = (
        "import sys, pods_api.serve.cli, pods_api.serve.process, pods_api.sources.registry;"
        "print(sorted({'kubernetes_asyncio', 'aiohttp'} & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"
