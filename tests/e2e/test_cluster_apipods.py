"""pods-api beside a registered kubelet v1.37.2, for the pods the API server binds to its node: one
cluster (tests/support/cluster.py), and pods-api started as users start it in both modes at once,
the bridge (`--kubelet-socket` the kubelet's socket) and the standalone as the overlays run it on
a node older than v1.37 (`--apiserver --cri-socket --manifests`, as the DaemonSet's
ServiceAccount, with the node's name and IP). Both only read, so they run side by side through
one pass of the twelve actions of the API-pod issue: Deployments, scaling, a readiness probe,
init containers, a graceful delete, Jobs, a static pod and its mirror, a pod the kubelet refuses
at admission, the API server stopped while a pod crashes, etcd compacted past pods-api's
resourceVersion, the kubelet restarted and the node restarted.

After each action, at a settled moment (tests/support/kubeletcompare.py), every server's ListPods,
GetPod and recorded watch are kept; each test below compares one field group of one mode at one
action with the kubelet's. A difference that stays is listed in docs/sources.md ("Beside a
registered kubelet") and named here, in KNOWN, with its reason.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from cluster import NODE_IP, Cluster, container, deployment, template
from kubeletcompare import (
    GROUPS,
    QUIET,
    TYPES,
    WHOLE,
    Action,
    Moment,
    disagreement,
    every_pod,
    get_answer,
    settle,
)
from podrecorder import Recorder, list_pods, uid_of
from realapiserver import Request
from realkubelet import NODE, static_name, static_pod
from released import SYNCED
from repo import ROOT
from serve import Served, start
from tcpcut import Link

from pods_api.core.api.codec import pod_from_bytes
from pods_api.sources.apiserver import MAX_RETRY

# The scenario takes the cluster through getfixturevalue (it may be loaded instead): marked here.
pytestmark = pytest.mark.needs_cluster

MODES = ("bridge", "standalone")
NAMESPACE = "apipods"
RBAC = ROOT / "deploy" / "overlays" / "apiserver" / "rbac.yaml"
ACCOUNT = ("kube-system", "pods-api")  # the apiserver overlay's ServiceAccount (rbac.yaml)
SLEEPER = ["sleep", "3600"]
# The API server's outage while a pod crashes (the 60 s).
OUTAGE = 60.0
# A graceful delete's grace period (the 20 s): the pod is listed as terminating for it.
GRACE = 20
# Waits that include a container's start on a loaded machine, a crash and its back-off, or a
# graceful delete's period.
SLOW = 180.0
# Once its link is mended the standalone's next try waits out its backoff (MAX_RETRY at most,
# as its failures while cut add up), then it is told 410 and lists: three times that is room for
# a loaded machine, and a wait that ends early on the line.
RELIST_WAIT = 3 * MAX_RETRY
MIRROR = "kubernetes.io/config.mirror"
# The standalone's link to the API server (the scenario makes it; the compaction cuts it).
LINKS: list[Link] = []


# -- the objects -------------------------------------------------------------------------------


def job(name: str, command: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "backoffLimit": 0,
            "template": template(name, [container("main", command)], restartPolicy="Never"),
        },
    }


def pod(name: str, containers: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    body = template(name, containers, **spec)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, **body["metadata"]},
        "spec": body["spec"],
    }


# -- the kubelet's states (its ListPods, by name) ----------------------------------------------

Pods = dict[str, dict[str, Any]]


def app(pods: Pods, name: str) -> list[dict[str, Any]]:
    return [p for p in pods.values() if p["metadata"].get("labels", {}).get("app") == name]


def running(p: dict[str, Any]) -> bool:
    statuses = p["status"].get("containerStatuses", [])
    return (
        p["status"].get("phase") == "Running"
        and bool(statuses)
        and all("running" in s.get("state", {}) for s in statuses)
        and bool(p["status"].get("podIP"))
    )


def ready(p: dict[str, Any]) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions", []))


def n_running(name: str, count: int) -> Callable[[Pods], bool]:
    def reached(pods: Pods) -> bool:
        members = app(pods, name)
        return len(members) == count and all(running(p) and ready(p) for p in members)

    return reached


def phase(name: str, want: str) -> Callable[[Pods], bool]:
    return lambda pods: [p["status"].get("phase") for p in app(pods, name)] == [want]


# -- the actions -------------------------------------------------------------------------------


def _scale(cluster: Cluster) -> None:
    cluster.kubectl("-n", NAMESPACE, "scale", "deployment/web", "--replicas=5")
    cluster.node.wait_pods(n_running("web", 5), "web scaled to 5", SLOW)
    cluster.kubectl("-n", NAMESPACE, "scale", "deployment/web", "--replicas=2")


def _readiness(cluster: Cluster) -> None:
    # Not ready for its first seconds (the file is missing), then ready: the probe fails, then passes.
    probe = {"exec": {"command": ["cat", "/tmp/ready"]}, "periodSeconds": 1, "failureThreshold": 1}
    command = ["sh", "-c", "sleep 8; echo ok > /tmp/ready; exec sleep 3600"]
    cluster.apply(deployment("probed", NAMESPACE, 1, [container("main", command, readinessProbe=probe)]))


def _init_containers(cluster: Cluster) -> None:
    inits = [container("first", ["true"]), container("second", ["sh", "-c", "sleep 1"])]
    cluster.apply(pod("inits", [container("main", SLEEPER)], initContainers=inits))


def _graceful(cluster: Cluster) -> None:
    # PID 1 with no SIGTERM handler ignores it: the pod is terminating for its whole grace period.
    cluster.apply(pod("graceful", [container("main", SLEEPER)], terminationGracePeriodSeconds=GRACE))
    cluster.node.wait_pods(lambda p: any(running(q) for q in app(p, "graceful")), "graceful running", SLOW)
    cluster.kubectl("-n", NAMESPACE, "delete", "pod", "graceful", "--wait=false")


def _terminating(pods: Pods) -> bool:
    members = app(pods, "graceful")
    return len(members) == 1 and bool(members[0]["metadata"].get("deletionTimestamp"))


def _jobs(cluster: Cluster) -> None:
    cluster.apply(job("succeeds", ["true"]), job("fails", ["false"]))


def _static(cluster: Cluster) -> None:
    """The manifest written, and its mirror pod made in the API server by the kubelet."""
    cluster.node.put("static-web.yaml", static_pod("static-web", SLEEPER))
    cluster.wait(lambda: mirror_of(cluster), "the static pod's mirror", SLOW)


def mirror_of(cluster: Cluster) -> dict[str, Any] | None:
    return cluster.get(f"/api/v1/namespaces/default/pods/{static_name('static-web')}")


def _static_running(pods: Pods) -> bool:
    static = pods.get(static_name("static-web"))
    return bool(static and running(static))


def _refused(cluster: Cluster) -> None:
    # Bound by hand (no scheduler would place it): more CPU than the node has; the kubelet's
    # admission refuses it.
    too_big = {"resources": {"requests": {"cpu": "1000"}}}
    cluster.apply(pod("refused", [container("main", SLEEPER, **too_big)], nodeName=NODE))


def _outage(cluster: Cluster) -> None:
    # A pod that crashes once (an emptyDir remembers it), then runs; its crash happens while the
    # API server is stopped, which both servers must show once it is back.
    volume = {"name": "memory", "emptyDir": {}}
    command = [
        "sh",
        "-c",
        "if [ -e /memory/crashed ]; then exec sleep 3600; fi; echo > /memory/crashed; sleep 5; exit 1",
    ]
    main = container("main", command, volumeMounts=[{"name": "memory", "mountPath": "/memory"}])
    cluster.apply(pod("crasher", [main], volumes=[volume]))
    cluster.node.wait_pods(lambda p: any(running(q) for q in app(p, "crasher")), "crasher running", SLOW)
    cluster.plane.stop_apiserver()
    stopped = time.monotonic()
    try:
        cluster.node.wait_pods(_restarted, "crasher restarted while the API server is stopped", SLOW)
        time.sleep(max(0.0, OUTAGE - (time.monotonic() - stopped)))  # the outage lasts its minute
    finally:
        cluster.plane.start_apiserver(*cluster.plane.apiserver_flags)


def _restarted(pods: Pods) -> bool:
    members = app(pods, "crasher")
    if len(members) != 1 or not running(members[0]):
        return False
    (status,) = members[0]["status"]["containerStatuses"]
    return int(status.get("restartCount", 0)) == 1


def _compacted(cluster: Cluster) -> None:
    """pods-api cut off from the API server (its link, not the server: a stopping API server
    sends every watcher a bookmark of where it is), a change it misses, etcd compacted past its
    resourceVersion and the API server restarted (its watch cache starts from now): its watch
    from where it was is refused, 410 Gone, and it lists again."""
    LINKS[0].cut()
    cluster.kubectl("-n", NAMESPACE, "label", "pod", "inits", "compacted=yes")
    cluster.plane.stop_apiserver()
    cluster.plane.compact()
    cluster.plane.start_apiserver(*cluster.plane.apiserver_flags)
    LINKS[0].mend()


def _labelled(pods: Pods) -> bool:
    return any(p["metadata"].get("labels", {}).get("compacted") == "yes" for p in app(pods, "inits"))


def _web_running(pods: Pods) -> bool:
    return n_running("web", 2)(pods) and n_running("probed", 1)(pods)


ACTIONS = [
    Action(
        "1-deployment",
        "a Deployment of 3 replicas, each with its pod IP",
        lambda c: c.apply(deployment("web", NAMESPACE, 3, [container("main", SLEEPER)])),
        n_running("web", 3),
        timeout=SLOW,
    ),
    Action("2-scaled", "scaled to 5, then to 2", _scale, lambda p: len(app(p, "web")) == 2, timeout=SLOW),
    Action(
        "3-readiness",
        "a readiness probe that fails, then passes",
        _readiness,
        n_running("probed", 1),
        timeout=SLOW,
    ),
    Action(
        "4-init-containers",
        "a pod with two init containers",
        _init_containers,
        n_running("inits", 1),
        timeout=SLOW,
    ),
    Action(
        "5a-terminating",
        "a graceful delete (20 s): listed as terminating",
        _graceful,
        _terminating,
        timeout=SLOW,
    ),
    Action("5b-deleted", "... then gone", lambda c: None, lambda p: not app(p, "graceful"), timeout=SLOW),
    Action(
        "6-jobs",
        "a Job pod that succeeds, one that fails",
        _jobs,
        lambda p: phase("succeeds", "Succeeded")(p) and phase("fails", "Failed")(p),
        timeout=SLOW,
    ),
    Action("7-static-mirror", "a static pod and its mirror", _static, _static_running, timeout=SLOW),
    Action(
        "8-admission",
        "a pod the kubelet refuses at admission",
        _refused,
        phase("refused", "Failed"),
        timeout=SLOW,
    ),
    Action(
        "9-apiserver-outage",
        "the API server stopped 60 s while a pod crashes",
        _outage,
        _restarted,
        timeout=SLOW,
    ),
    Action(
        "10-compacted", "etcd compacted past pods-api's resourceVersion", _compacted, _labelled, timeout=SLOW
    ),
    Action(
        "11-kubelet-restarted",
        "the kubelet restarted",
        lambda c: c.node.restart(),
        _web_running,
        timeout=SLOW,
    ),
    Action(
        "12-node-restarted",
        "the node restarted (containerd's sandboxes gone)",
        lambda c: c.node.restart_node(),
        _web_running,
        timeout=SLOW,
    ),
]


# -- the scenario, once per module ------------------------------------------------------------


@dataclass
class Relist:
    """What the standalone did after the compaction: its log line saying it was told 410 (None:
    none came), and its requests of the API server from the action on (verb and query)."""

    told: str | None
    requests: list[str]

    @property
    def listed(self) -> bool:
        return any(r.startswith("list ") or "sendInitialEvents=True" in r for r in self.requests)


@dataclass
class Scenario:
    """The actions' moments; what each server answers a GetPod of the mirror's UID and of a UID
    it never had; how each recorded watch ended; the standalone's requests of the API server."""

    moments: dict[str, Moment]
    mirror_uid: str
    mirror: dict[str, str]
    unknown: dict[str, str]
    ends: dict[str, list[str]]
    relist: Relist
    refused_removed: dict[str, list[str]]


UNKNOWN_UID = "0123456789abcdef0123456789abcdef"


@pytest.fixture(scope="module")
def scenario(request: pytest.FixtureRequest) -> Iterator[Scenario]:
    """The scenario, run on the lab; with PODS_API_LAB_LOAD=<file>, one a run kept there with
    PODS_API_LAB_SAVE=<file> (to study the comparisons without the minutes of a run)."""
    saved = os.environ.get("PODS_API_LAB_LOAD")
    if saved:
        yield _load(Path(saved))
        return
    cluster = request.getfixturevalue("real_cluster")
    with _running(cluster, request.getfixturevalue("tmp_path_factory")) as ran:
        if os.environ.get("PODS_API_LAB_SAVE"):
            _save(ran, Path(os.environ["PODS_API_LAB_SAVE"]))
        yield ran


def _removed(cluster: Cluster, name: str, recorders: dict[str, Recorder]) -> dict[str, list[str]]:
    """The pod `name` deleted from the API server: the types of the events each server sends of
    it until every List lacks it and the kubelet has been quiet for QUIET (a DELETED may come
    once a pod has stopped, after it leaves the List)."""
    (gone,) = app(cluster.node.pods(), name)
    uid = gone["metadata"]["uid"]
    marks = {server: len(recorder) for server, recorder in recorders.items()}
    cluster.kubectl("-n", NAMESPACE, "delete", "pod", name, "--wait=false")
    cluster.node.wait_pods(lambda pods: not app(pods, name), f"{name} removed", SLOW)
    for server, recorder in recorders.items():
        _wait_unlisted(recorder.target, uid, f"{server}'s List without {name}")
    recorders["kubelet"].wait_quiet(QUIET)
    return {
        server: [TYPES[e.type] for e in recorder.events[marks[server] :] if e.uid == uid]
        for server, recorder in recorders.items()
    }


def _wait_unlisted(target: str, uid: str, what: str) -> None:
    deadline = time.monotonic() + SLOW
    while uid in {uid_of(pod) for pod in list_pods(target)}:
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} within {SLOW} s")
        time.sleep(0.5)  # the next relist or event; a List's change announces nothing


def _relist(standalone: Served, line_mark: int, cluster: Cluster, user: str, audit_mark: int) -> Relist:
    """Waits for the standalone's line saying it was told 410 and lists again (its reconnect
    after the link is mended waits out its backoff, MAX_RETRY at most), then reads what it asked
    the API server from the action on: the list, or a watch-list where the server offers it (a
    watch sending its initial events)."""
    try:
        told: str | None = standalone.wait_for_line("listing again", RELIST_WAIT, since=line_mark)
    except AssertionError:
        told = None
    requests = [_said(r) for r in cluster.plane.requests(user, audit_mark)]
    return Relist(told.strip() if told else None, requests)


def _said(request: Request) -> str:
    query = "&".join(f"{k}={v}" for k, v in sorted(request.query.items()))
    return f"{request.verb} {query} -> {request.code}"


def _save(ran: Scenario, path: Path) -> None:
    answers = {action: moment.answers for action, moment in ran.moments.items()}
    path.write_bytes(pickle.dumps({**vars(ran), "moments": answers}))


def _load(path: Path) -> Scenario:
    kept = pickle.loads(path.read_bytes())
    actions = {action.id: action for action in ACTIONS}
    kept["moments"] = {
        action: Moment(actions[action], answers) for action, answers in kept["moments"].items()
    }
    return Scenario(**kept)


@contextlib.contextmanager
def _running(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    node = cluster.node
    run = tmp_path_factory.mktemp("pods-api")
    cluster.plane.apply(doc for doc in yaml.safe_load_all(RBAC.read_text()) if doc)
    link = Link(cluster.plane.port)  # the standalone's way to the API server, to cut
    LINKS[:] = [link]
    token = cluster.plane.token(*ACCOUNT)
    kubeconfig = cluster.plane.kubeconfig(run / "kubeconfig", token, f"https://127.0.0.1:{link.port}")
    cluster.kubectl("create", "namespace", NAMESPACE)
    cluster.wait_service_account(NAMESPACE)
    standalone = (
        *("--apiserver", "--kubeconfig", str(kubeconfig)),
        *("--cri-socket", str(node.runtime.socket), "--manifests", str(node.manifests), "--node-ip", NODE_IP),
    )
    servers: dict[str, Served] = {
        "bridge": start(run / "bridge", "--kubelet-socket", str(node.socket), node_name=NODE),
        "standalone": start(run / "standalone", *standalone, node_name=NODE),
    }
    recorders: dict[str, Recorder] = {}
    targets = {mode: served.target for mode, served in servers.items()}
    try:
        for served in servers.values():
            served.wait_ready()
        recorders = {"kubelet": Recorder(node.target)} | {mode: Recorder(targets[mode]) for mode in MODES}
        for recorder in recorders.values():
            recorder.wait(lambda e: e.type == SYNCED)
        moments: dict[str, Moment] = {}
        user = f"system:serviceaccount:{ACCOUNT[0]}:{ACCOUNT[1]}"
        relist, refused_removed = Relist(None, []), {}
        for action in ACTIONS:
            marks = {name: len(recorder) for name, recorder in recorders.items()}
            log_mark, before = node.log_size(), {uid_of(p) for p in list_pods(node.target)}
            audit_mark, line_mark = cluster.plane.audit_size(), len(servers["standalone"].lines)
            action.do(cluster)
            moments[action.id] = settle(node, action, targets, recorders, marks, before, log_mark)
            if action.id == "8-admission":
                refused_removed = _removed(cluster, "refused", recorders)
            if action.id == "10-compacted":
                relist = _relist(servers["standalone"], line_mark, cluster, user, audit_mark)
        mirror = mirror_of(cluster)
        assert mirror is not None
        mirror_uid = mirror["metadata"]["uid"]
        everyone = {"kubelet": node.target, **targets}
        yield Scenario(
            moments,
            mirror_uid,
            {name: str(get_answer(target, mirror_uid)) for name, target in everyone.items()},
            {name: str(get_answer(target, UNKNOWN_UID)) for name, target in everyone.items()},
            {name: [e.end for e in recorder.events if e.end] for name, recorder in recorders.items()},
            relist,
            refused_removed,
        )
    finally:
        for recorder in recorders.values():
            recorder.close()
        for served in servers.values():
            served.close()
        link.close()


# -- the comparisons ---------------------------------------------------------------------------

# What differs from the kubelet, each named in docs/sources.md ("Beside a registered kubelet")
# with its reason: (mode, action id, group) -> why; xfail, not strict (each hangs on timing, or
# on which pods an action leaves behind).
SEEN = (
    "seen: config.seen is when pods-api first saw the pod, some ms from the kubelet's; and pods-api "
    "serves the API server's newest resourceVersion and managedFields (one real version's), the "
    "kubelet those it first saw"
)
TIMES = (
    "times: condition times from the runtime's events and the API server's copy, a second from the "
    "kubelet's own clock"
)
RESTARTED = (
    "restarted: the restarted kubelet keeps each pod as it finds it then (today's resourceVersion); "
    "pods-api, which did not restart, keeps it as first seen"
)
ADMISSION = (
    "admission: the kubelet's first word of a pod it refused is ADDED (Failed); pods-api heard of "
    "the pod before the refusal reached the API server: ADDED (Pending), then MODIFIED (Failed)"
)
NOT_READY = (
    "not ready: the API server away past the node monitor's grace period, the controller manager "
    "marks the node's pods Ready False in the API server; the kubelet's own status never was, and it "
    "puts the API server's copy right at its next sync; pods-api serves that copy meanwhile"
)
REPLAY = (
    "replay: the kubelet's watchers are cut at its restart and start again (ADDED per pod, finished "
    "ones included); pods-api's stay connected and get what changed"
)
LAST_STATE = (
    "last state: after a node restart the kubelet keeps a container's lastState; pods-api's runtime "
    "status, with no exited container left, wins over the API server's"
)
ALL = tuple(action.id for action in ACTIONS)

KNOWN: dict[tuple[str, str, str], str] = {
    **{
        ("bridge", a, g): REPLAY
        for a in ALL[-2:]
        for g in ("watch-types", "watch-bytes", "watch-held", "watch-held-bytes")
    },
    **{
        ("standalone", a, g): SEEN
        for a in ALL
        for g in ("metadata", "bytes", "watch-bytes", "watch-held-bytes")
    },
    **{("standalone", a, "metadata"): f"{SEEN}; {RESTARTED}" for a in ALL[-2:]},
    **{("standalone", a, "conditions"): f"{TIMES}; {NOT_READY}" for a in ALL},
    ("standalone", "8-admission", "watch-types"): ADMISSION,
    **{("standalone", a, "watch-types"): NOT_READY for a in ("9-apiserver-outage", "10-compacted")},
    **{("standalone", a, g): REPLAY for a in ALL[-2:] for g in ("watch-types", "watch-held")},
    ("standalone", "12-node-restarted", "containerStatuses"): LAST_STATE,
}


def _cases() -> Iterator[Any]:
    for mode in MODES:
        for action in ACTIONS:
            for group in (*GROUPS, *WHOLE):
                reason = KNOWN.get((mode, action.id, group))
                marks = [pytest.mark.xfail(strict=False, reason=reason)] if reason else []
                yield pytest.param(mode, action.id, group, marks=marks, id=f"{mode}-{action.id}-{group}")


@pytest.mark.parametrize(("mode", "action", "group"), list(_cases()))
def test_pods_api_equals_the_registered_kubelet(
    scenario: Scenario, mode: str, action: str, group: str
) -> None:
    said = disagreement(scenario.moments[action], mode, group)
    assert not said, said


def test_the_kubelet_does_not_serve_a_mirror_pod(scenario: Scenario) -> None:
    """A static pod is served once, under its static UID (the mirror's config.mirror); the
    mirror's own UID is not found."""
    assert scenario.mirror["kubelet"] == f"NOT_FOUND: pod with UID {scenario.mirror_uid} not found"
    static = [p for p in scenario.moments["7-static-mirror"].answers["kubelet"].listed if b"static-web" in p]
    assert len(static) == 1


@pytest.mark.parametrize("mode", MODES)
def test_a_mirror_pod_s_uid_is_answered_as_the_kubelet_answers_it(scenario: Scenario, mode: str) -> None:
    assert scenario.mirror[mode] == scenario.mirror["kubelet"]


@pytest.mark.parametrize("mode", MODES)
def test_an_unknown_uid_is_answered_as_the_kubelet_answers_it(scenario: Scenario, mode: str) -> None:
    assert (
        scenario.unknown[mode]
        == scenario.unknown["kubelet"]
        == f"NOT_FOUND: pod with UID {UNKNOWN_UID} not found"
    )


@pytest.mark.parametrize("mode", MODES)
def test_a_refused_pod_removed_is_told_as_the_kubelet_tells_it(scenario: Scenario, mode: str) -> None:
    """No DELETED when the kubelet refused it (it never ran, so it was not terminated); once
    removed, the kubelet's watch sends its last change and its DELETED: pods-api's too."""
    said = scenario.refused_removed
    assert said[mode] == said["kubelet"] == ["MODIFIED", "DELETED"], said


def test_the_standalone_listed_again_after_the_compaction(scenario: Scenario) -> None:
    """etcd compacted past its resourceVersion and the API server's watch cache started anew:
    its watch from where it was is refused ("410 Expired: too old resource version"), and it
    lists again, with a watch-list."""
    relist = scenario.relist
    assert relist.told is not None and "410" in relist.told, relist
    assert relist.listed, relist


@pytest.mark.parametrize("mode", MODES)
def test_pods_api_watches_outlive_the_restarts(scenario: Scenario, mode: str) -> None:
    """The API server's outage, the kubelet's and the node's restarts: pods-api's own watchers
    are never cut off (the kubelet's are, at each of its restarts)."""
    assert scenario.ends[mode] == []


@pytest.mark.parametrize("server", ["kubelet", *MODES])
def test_every_pod_served_is_what_go_s_marshal_writes(
    scenario: Scenario, server: str, go_remarshal: Callable[[Sequence[bytes]], list[bytes]]
) -> None:
    pods = every_pod(scenario.moments.values(), server)
    assert pods
    again = go_remarshal(pods)
    differ = [i for i, (ours, go) in enumerate(zip(pods, again, strict=True)) if ours != go]
    assert not differ, f"{len(differ)} of {len(pods)} pods are not Go's bytes, e.g. {pods[differ[0]][:200]!r}"


@pytest.mark.parametrize("mode", MODES)
def test_every_uid_pods_api_announces_is_one_the_kubelet_announces(scenario: Scenario, mode: str) -> None:
    def announced(name: str) -> set[str]:
        out: set[str] = set()
        for moment in scenario.moments.values():
            answer = moment.answers[name]
            out |= {uid_of(p) for p in answer.listed} | {e.uid for e in answer.events if e.uid}
        return out

    extra = announced(mode) - announced("kubelet")
    names = {
        uid: pod_from_bytes(p)["metadata"]["name"]
        for m in scenario.moments.values()
        for p in m.answers[mode].listed
        for uid in [uid_of(p)]
    }
    assert not extra, {uid: names.get(uid) for uid in extra}
