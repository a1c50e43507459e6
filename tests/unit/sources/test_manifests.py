"""ManifestDirSource (kubelet static pods) against real files in tmp_path, through a real PodCache."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from builders import pod
from sourceharness import Harness, by_name, dump, harness_fixture, write  # noqa: F401

import pods_api.sources.dirwatch
from pods_api.core.store.watch import EventType
from pods_api.sources.manifests import ManifestDirSource
from pods_api.sources.reading import MAX_MANIFEST_BYTES
from pods_api.sources.staticpod import CONFIG_HASH, CONFIG_SEEN, CONFIG_SOURCE

NODE = "Node-1"  # mixed case: the kubelet lowercases it in pod names only
RFC3339_NANO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?Z")


def source(path: Path, harness: Harness, *, node: str = NODE, resync: float = 20.0) -> ManifestDirSource:
    return ManifestDirSource(path, node_name=node, resync=resync, on_error=harness.on_error)


async def start(harness: Harness, path: Path, **kw: Any) -> dict[str, Any]:
    snapshot = await harness.start(source(path, harness, **kw))
    return by_name(snapshot.pods)


async def marker_is_next(harness: Harness, directory: Path) -> None:
    """Prove that nothing else happened: a new file's ADDED is the very next event."""
    write(directory / "zz-marker.yaml", dump(pod("marker")))
    event = await harness.event()
    assert (event.type, event.pod.name) == (EventType.ADDED, "marker-node-1")


# ---------------------------------------------------------------------------------------------
# what the kubelet does to a static pod


async def test_kubelet_mutations(tmp_path: Path, harness: Harness) -> None:
    obj = pod("web", phase="Running", tolerations=[{"key": "dedicated", "operator": "Exists"}])
    write(tmp_path / "web.yaml", dump(obj))
    system = pod(
        "proxy", tolerations=[{"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]
    )
    system["metadata"]["namespace"] = "kube-system"
    write(tmp_path / "proxy.json", json.dumps(system))

    pods = await start(harness, tmp_path)

    web = pods["web-node-1"].json
    uid = web["metadata"]["uid"]
    assert re.fullmatch(r"[0-9a-f]{32}", uid)
    assert web["metadata"]["namespace"] == "default"
    assert web["spec"]["nodeName"] == NODE
    annotations = web["metadata"]["annotations"]
    assert annotations[CONFIG_HASH] == uid
    assert annotations[CONFIG_SOURCE] == "file"
    assert RFC3339_NANO.fullmatch(annotations[CONFIG_SEEN])
    assert web["spec"]["tolerations"] == [
        {"key": "dedicated", "operator": "Exists"},
        {"operator": "Exists", "effect": "NoExecute"},
    ]
    assert web["status"] == {"phase": "Pending"}  # the config source sets it, whatever the file says

    proxy = pods["proxy-node-1"].json
    assert proxy["metadata"]["namespace"] == "kube-system"
    assert proxy["spec"]["tolerations"] == [{"operator": "Exists", "effect": "NoExecute"}]  # replaced


async def test_a_given_uid_is_kept(tmp_path: Path, harness: Harness) -> None:
    write(tmp_path / "web.yaml", dump(pod("web", uid="my-own-uid")))
    pods = await start(harness, tmp_path)
    assert pods["web-node-1"].uid == "my-own-uid"
    assert pods["web-node-1"].json["metadata"]["annotations"][CONFIG_HASH] == "my-own-uid"


async def test_generated_uids_survive_a_restart_and_depend_on_node_and_file(tmp_path: Path) -> None:
    write(tmp_path / "web.yaml", dump(pod("web")))
    write(tmp_path / "db.yaml", dump(pod("db")))

    async def uids(node: str) -> dict[str, str]:
        harness = Harness()
        try:
            snapshot = await harness.start(source(tmp_path, harness, node=node))
            return {p.name.split("-")[0]: p.uid for p in snapshot.pods}
        finally:
            await harness.stop()

    first, again, elsewhere = await uids("node-1"), await uids("node-1"), await uids("node-2")
    assert first == again
    assert first["web"] != first["db"]
    assert first["web"] != elsewhere["web"]


async def test_an_edit_is_a_new_pod(tmp_path: Path, harness: Harness) -> None:
    write(tmp_path / "web.yaml", dump(pod("web", image="nginx:1.26")))
    old = (await start(harness, tmp_path))["web-node-1"]

    write(tmp_path / "web.yaml", dump(pod("web", image="nginx:1.27")))

    events = {e.type: e.pod for e in await harness.events(2)}
    assert events[EventType.DELETED].uid == old.uid
    assert events[EventType.ADDED].uid != old.uid
    assert events[EventType.ADDED].json["spec"]["containers"][0]["image"] == "nginx:1.27"


async def test_an_edit_with_a_given_uid_is_modified_and_keeps_config_seen(
    tmp_path: Path, harness: Harness
) -> None:
    write(tmp_path / "web.yaml", dump(pod("web", uid="fixed")))
    seen = (await start(harness, tmp_path))["web-node-1"].json["metadata"]["annotations"][CONFIG_SEEN]

    write(tmp_path / "web.yaml", dump(pod("web", uid="fixed", labels={"v": "2"})))

    event = await harness.event()
    assert (event.type, event.pod.json["metadata"]["labels"]) == (EventType.MODIFIED, {"v": "2"})
    assert event.pod.json["metadata"]["annotations"][CONFIG_SEEN] == seen


async def test_rescans_change_nothing(tmp_path: Path, harness: Harness) -> None:
    write(tmp_path / "web.yaml", dump(pod("web")))
    web = (await start(harness, tmp_path, resync=0.05))["web-node-1"]

    await marker_is_next(harness, tmp_path)  # many resyncs and a rescan on the notice later

    assert harness.cache.get(web.uid) is web  # config.seen did not move: the very same version


async def test_a_rename_is_a_new_pod_as_with_the_kubelet(tmp_path: Path, harness: Harness) -> None:
    write(tmp_path / "web.yaml", dump(pod("web")))
    old = (await start(harness, tmp_path))["web-node-1"]

    os.rename(tmp_path / "web.yaml", tmp_path / "web-server.yaml")  # the path is part of the uid

    events = {e.type: e.pod for e in await harness.events(2)}
    assert events[EventType.DELETED].uid == old.uid
    assert events[EventType.ADDED].name == "web-node-1"


async def test_add_and_remove(tmp_path: Path, harness: Harness) -> None:
    await start(harness, tmp_path)
    write(tmp_path / "web.yaml", dump(pod("web")))
    added = await harness.event()
    assert (added.type, added.pod.name) == (EventType.ADDED, "web-node-1")
    (tmp_path / "web.yaml").unlink()
    deleted = await harness.event()
    assert (deleted.type, deleted.pod.uid) == (EventType.DELETED, added.pod.uid)


async def test_a_pod_list_file_is_refused_and_a_second_document_ignored(
    tmp_path: Path, harness: Harness
) -> None:
    """pkg/kubelet/config/file.go extractFromFile: tryDecodeSinglePod only (no PodList, which only
    the http source takes), after utilyaml.ToJSON, which reads the first YAML document."""
    write(
        tmp_path / "pods.yaml", dump({"apiVersion": "v1", "kind": "PodList", "items": [pod("a"), pod("b")]})
    )
    write(tmp_path / "two.yaml", dump(pod("first"), pod("second")))
    assert sorted(await start(harness, tmp_path)) == ["first-node-1"]
    assert "kind 'PodList' is not Pod" in await harness.error("pods.yaml")


async def test_dotfiles_are_not_read(tmp_path: Path, harness: Harness) -> None:
    write(tmp_path / ".web.yaml", dump(pod("web")))
    (tmp_path / ".notes").write_text("not yaml: [")
    assert await start(harness, tmp_path) == {}
    assert harness.errors.empty()


async def test_of_two_pods_with_one_name_the_last_file_wins(tmp_path: Path, harness: Harness) -> None:
    """pkg/kubelet/config/file.go: the pods go into a store keyed by namespace/name in file name
    order (extractFromDir sorts), so the last file's pod replaces the first's."""
    write(tmp_path / "a.yaml", dump(pod("web", image="nginx:1.26")))
    write(tmp_path / "b.yaml", dump(pod("web", image="nginx:1.27")))
    pods = await start(harness, tmp_path)
    assert pods["web-node-1"].json["spec"]["containers"][0]["image"] == "nginx:1.27"
    error = await harness.error("a.yaml")
    assert "name default/web-node-1 is already served from" in error and "b.yaml" in error


# ---------------------------------------------------------------------------------------------
# what the kubelet would not admit


def _no_name() -> str:
    obj = pod("x")
    del obj["metadata"]["name"]
    return dump(obj)


def _duplicate_containers() -> str:
    return dump(pod("x", initContainers=[{"name": "main", "image": "busybox"}]))


def _pod_list_with_a_bad_pod() -> str:
    return dump({"apiVersion": "v1", "kind": "PodList", "items": [pod("ok"), pod("bad", containers=[])]})


INVALID: dict[str, tuple[Callable[[], str], str]] = {
    "no name": (_no_name, "invalid pod: metadata.name is required"),
    "no containers": (lambda: dump(pod("x", containers=[])), "spec.containers: at least one container"),
    "duplicate container": (
        _duplicate_containers,
        "spec.containers[0].name: duplicate container name 'main'",
    ),
    "no image": (lambda: dump(pod("x", image="")), "spec.containers[0].image is required"),
    "bad container name": (
        lambda: dump(pod("x", containers=[{"name": "Main_1", "image": "i"}])),
        "'Main_1' is not a DNS-1123 label",
    ),
    "bad name": (lambda: dump(pod("Web")), "'Web-node-1' (with the node name appended) is not a DNS-1123"),
    "wrong kind": (lambda: dump({**pod("x"), "kind": "Deployment"}), "kind 'Deployment' is not Pod"),
    "wrong apiVersion": (lambda: dump({**pod("x"), "apiVersion": "apps/v1"}), "apiVersion is 'apps/v1'"),
    "no apiVersion": (
        lambda: dump({k: v for k, v in pod("x").items() if k != "apiVersion"}),
        "apiVersion is missing",
    ),
    "a List": (lambda: dump({"apiVersion": "v1", "kind": "List", "items": []}), "kind 'List' is not"),
    "a pod list": (_pod_list_with_a_bad_pod, "kind 'PodList' is not Pod"),
    "two documents, the first bad": (lambda: dump(pod("x", containers=[]), pod("y")), "spec.containers"),
    "wrong type": (lambda: dump(pod("x", hostPID="yes")), "spec.hostPID: expected boolean"),
    # pkg/apis/core/validation validateContainers, ValidatePodSpec (after defaulting):
    "container port 70000": (
        lambda: dump(pod("x", containers=[{"name": "c", "image": "i", "ports": [{"containerPort": 70000}]}])),
        "spec.containers[0].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535",
    ),
    "pull policy Sometimes": (
        lambda: dump(pod("x", containers=[{"name": "c", "image": "i", "imagePullPolicy": "Sometimes"}])),
        'spec.containers[0].imagePullPolicy: Unsupported value: "Sometimes": supported values: "Always"',
    ),
    "restart policy Sometimes": (
        lambda: dump(pod("x", restartPolicy="Sometimes")),
        'spec.restartPolicy: Unsupported value: "Sometimes"',
    ),
    # pkg/kubelet/config/common.go tryDecodeSinglePod, podutil.HasAPIObjectReference:
    "a service account": (
        lambda: dump(pod("x", serviceAccountName="etcd")),
        "static pods may not reference serviceaccounts (PreventStaticPodAPIReferences)",
    ),
    "a secret in env": (
        lambda: dump(
            pod(
                "x",
                containers=[
                    {
                        "name": "c",
                        "image": "i",
                        "env": [{"name": "T", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}],
                    }
                ],
            )
        ),
        "static pods may not reference secrets",
    ),
    "a configmap volume": (
        lambda: dump(pod("x", volumes=[{"name": "v", "configMap": {"name": "cm"}}])),
        "static pods may not reference configmaps",
    ),
    "a projected token": (
        lambda: dump(
            pod(
                "x",
                volumes=[{"name": "v", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}}],
            )
        ),
        "static pods may not reference serviceaccounts (via projected volumes)",
    ),
    "a claim": (
        lambda: dump(pod("x", volumes=[{"name": "v", "persistentVolumeClaim": {"claimName": "data"}}])),
        "static pods may not reference persistentvolumeclaims",
    ),
}


@pytest.mark.parametrize("case", INVALID)
async def test_what_the_kubelet_would_not_admit(tmp_path: Path, harness: Harness, case: str) -> None:
    content, reason = INVALID[case]
    write(tmp_path / "bad.yaml", content())
    write(tmp_path / "good.yaml", dump(pod("good")))

    pods = await start(harness, tmp_path)

    assert sorted(pods) == ["good-node-1"]  # nothing at all from the bad file
    error = await harness.error("bad.yaml")
    assert error.startswith(f"{tmp_path}/bad.yaml: ") and reason in error, error


async def test_volumes_of_the_node_itself_are_admitted(tmp_path: Path, harness: Harness) -> None:
    """HasAPIObjectReference lets hostPath, emptyDir and downward API volumes through."""
    volumes = [
        {"name": "etc", "hostPath": {"path": "/etc/kubernetes"}},
        {"name": "tmp", "emptyDir": {}},
        {"name": "info", "projected": {"sources": [{"downwardAPI": {"items": []}}]}},
    ]
    write(tmp_path / "etcd.yaml", dump(pod("etcd", volumes=volumes)))
    assert sorted(await start(harness, tmp_path)) == ["etcd-node-1"]


# ---------------------------------------------------------------------------------------------
# a file that fails gives no pods, as with the kubelet


def _replace_with(path: Path, make: Callable[[Path], None]) -> None:
    """Put something else at `path` in one atomic step, as a bad deploy would."""
    tmp = path.with_name(".incoming")
    make(tmp)
    os.replace(tmp, path)


def _unparsable(p: Path) -> None:
    _replace_with(p, lambda t: t.write_text("kind: Pod\nmetadata: {name: [\n"))


def _invalid(p: Path) -> None:
    _replace_with(p, lambda t: t.write_text(dump(pod("web", containers=[]))))


def _too_big(p: Path) -> None:
    _replace_with(p, lambda t: t.write_bytes(b"#" * (MAX_MANIFEST_BYTES + 1)))


def _symlink_out(p: Path) -> None:
    outside = p.parent.parent / "outside.yaml"
    outside.write_text(dump(pod("elsewhere")))
    _replace_with(p, lambda t: t.symlink_to(outside))


def _symlink_loop(p: Path) -> None:
    _replace_with(p, lambda t: t.symlink_to(p.name))  # once renamed, it points at itself


def _dangling(p: Path) -> None:
    _replace_with(p, lambda t: t.symlink_to("nowhere.yaml"))


def _fifo(p: Path) -> None:
    _replace_with(p, os.mkfifo)


def _directory(p: Path) -> None:
    (p.parent / ".subdir").mkdir()
    _replace_with(p, lambda t: t.symlink_to(".subdir"))


BREAKERS: dict[str, tuple[Callable[[Path], None], str]] = {
    "unparsable": (_unparsable, "not valid YAML: "),
    "invalid": (_invalid, "invalid pod: spec.containers"),
    "over 10 MiB": (_too_big, f"over the {MAX_MANIFEST_BYTES} byte limit"),
    "symlink out": (_symlink_out, "symlink points out of the directory"),
    "symlink loop": (_symlink_loop, "symlink loop"),
    "dangling symlink": (_dangling, "dangling symlink"),
    "fifo": (_fifo, "not a regular file"),
    "directory": (_directory, "is a directory"),
}


@pytest.mark.parametrize("case", BREAKERS)
async def test_a_broken_file_takes_its_pods_away(tmp_path: Path, harness: Harness, case: str) -> None:
    """pkg/kubelet/config/file.go extractFromDir: a file that cannot be read or decoded is
    skipped, so its pod is not in the next complete set, and the kubelet kills it."""
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    write(manifests / "web.yaml", dump(pod("web")))
    web = (await start(harness, manifests))["web-node-1"]
    breaker, reason = BREAKERS[case]

    breaker(manifests / "web.yaml")

    error = await harness.error("web.yaml")
    assert error.startswith(f"{manifests}/web.yaml: ") and reason in error, error
    deleted = await harness.event()
    assert (deleted.type, deleted.pod.uid) == (EventType.DELETED, web.uid)
    await marker_is_next(harness, manifests)
    assert harness.errors.empty()  # reported once, though the marker made another scan


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file whatever its mode")
async def test_an_unreadable_file_takes_its_pods_away(tmp_path: Path, harness: Harness) -> None:
    write(tmp_path / "web.yaml", dump(pod("web")))
    web = (await start(harness, tmp_path))["web-node-1"]
    (tmp_path / "web.yaml").chmod(0)
    assert "permission denied" in await harness.error("web.yaml")
    assert harness.cache.get(web.uid) is None


@pytest.mark.parametrize(
    ("cut", "reason"),
    [("", "empty file"), ('{"apiVersion": "v1", "kind": "Pod", "metadata": {"na', "not valid JSON")],
)
async def test_a_half_written_file_is_gone_until_it_is_whole(
    tmp_path: Path, harness: Harness, cut: str, reason: str
) -> None:
    """As with the kubelet (which kills and restarts it): write manifests atomically."""
    whole = json.dumps(pod("web"))
    write(tmp_path / "web.json", whole)
    web = (await start(harness, tmp_path))["web-node-1"]

    (tmp_path / "web.json").write_text(cut)  # truncated, in place: a writer caught halfway
    assert "web.json" in await harness.error(reason)
    assert (await harness.event()).type is EventType.DELETED
    (tmp_path / "web.json").write_text(whole)  # the writer finishes
    added = await harness.event()
    assert (added.type, added.pod.uid) == (EventType.ADDED, web.uid)  # the same pod again


# ---------------------------------------------------------------------------------------------
# the directory itself


async def test_a_missing_directory_is_ready_and_empty_then_read_when_it_appears(
    tmp_path: Path, harness: Harness
) -> None:
    manifests = tmp_path / "etc" / "kubernetes" / "manifests"
    assert await start(harness, manifests) == {}

    manifests.mkdir(parents=True)
    write(manifests / "web.yaml", dump(pod("web")))

    event = await harness.event()
    assert (event.type, event.pod.name) == (EventType.ADDED, "web-node-1")


async def test_a_removed_directory_is_no_pods_as_with_the_kubelet(tmp_path: Path, harness: Harness) -> None:
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    write(manifests / "web.yaml", dump(pod("web")))
    await start(harness, manifests)

    shutil.rmtree(manifests)

    assert (await harness.event()).type == EventType.DELETED


async def test_a_replaced_directory_is_watched_anew(tmp_path: Path, harness: Harness) -> None:
    manifests, incoming = tmp_path / "manifests", tmp_path / "incoming"
    manifests.mkdir()
    incoming.mkdir()
    write(manifests / "web.yaml", dump(pod("web", uid="web")))
    write(incoming / "web.yaml", dump(pod("web", uid="web")))
    await start(harness, manifests)

    os.rename(manifests, tmp_path / "old")
    os.rename(incoming, manifests)
    write(manifests / "db.yaml", dump(pod("db")))  # only a watch on the new directory sees this

    # A scan between the renames finds no directory, hence no pods (as with the kubelet): web
    # may go and come back before db arrives.
    while (event := await harness.event()).pod.name != "db-node-1":
        assert event.pod.name == "web-node-1"
    assert event.type == EventType.ADDED


async def test_a_single_file_path(tmp_path: Path, harness: Harness) -> None:
    write(tmp_path / "web.yaml", dump(pod("web", uid="web")))
    write(tmp_path / "other.yaml", dump(pod("other")))
    assert sorted(await start(harness, tmp_path / "web.yaml")) == ["web-node-1"]

    write(tmp_path / "web.yaml", dump(pod("web", uid="web", labels={"v": "2"})))
    assert (await harness.event()).type == EventType.MODIFIED


async def test_the_resync_relists_without_change_notices(
    tmp_path: Path, harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    def deaf(*paths: object, **options: object) -> AsyncIterator[set[object]]:
        async def never() -> AsyncIterator[set[object]]:
            await asyncio.Event().wait()
            yield set()

        return never()

    monkeypatch.setattr(pods_api.sources.dirwatch, "awatch", deaf)
    await start(harness, tmp_path, resync=0.1)

    write(tmp_path / "web.yaml", dump(pod("web")))

    assert (await harness.event()).pod.name == "web-node-1"
