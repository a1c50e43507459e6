"""The comparison of pods-api with the real kubelet, node action by node action: after each
action, at a settled moment (the kubelet has reached the action's state, sent the DELETED of every
pod it stopped listing, gone quiet, and pods-api has had time to agree), every server's ListPods,
GetPod and recorded watch are kept as an `Answer`, and `differences` compares one field group of
one mode's with the kubelet's. Shared by the static-pod scenario on a standalone kubelet
(tests/e2e/test_real_kubelet.py) and the API-pod scenario on a registered one
(tests/e2e/test_cluster_apipods.py).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import grpc
from podrecorder import Event, Recorder, get_pod, held, list_pods, uid_of
from realkubelet import Node
from released import ADDED, DELETED, MODIFIED, SYNCED

from pods_api.core.api.codec import pod_from_bytes

# Seconds without a kubelet event that count as settled: its status manager sends a pod's
# changes within a second of each other (ADDED, MODIFIED, MODIFIED on start).
QUIET = 3.0
# How long pods-api may take to agree with the kubelet after it settled: the standalone relists
# CRI every second and re-reads the directory on inotify; a loaded machine stretches both.
AGREE = 12.0
TYPES = {ADDED: "ADDED", MODIFIED: "MODIFIED", DELETED: "DELETED", SYNCED: "SYNCED"}


@dataclass(frozen=True)
class Action:
    id: str
    what: str
    do: Callable[[Any], None]  # given the lab: a Node, or a cluster
    # The kubelet's state that ends the action (ListPods by name); None: the log lines `logged`
    # (a refused manifest is announced nowhere else).
    reached: Callable[[dict[str, dict[str, Any]]], bool] | None
    logged: tuple[str, ...] = ()
    timeout: float = 60.0


# -- what each server answered at a settled moment ----------------------------------------------


@dataclass
class Answer:
    """One server's ListPods and GetPod (by UID; an error as "CODE: details") at a settled
    moment, its watch's events during the action (see `watched`), and the pods
    a watcher holds (by UID, as raw bytes) after them."""

    listed: list[bytes]
    got: dict[str, bytes | str]
    events: list[Event]
    held: dict[str, bytes]
    known: set[str]  # the UIDs its watch had announced before the action


@dataclass
class Moment:
    action: Action
    answers: dict[str, Answer] = field(default_factory=dict)  # "kubelet", "bridge", "standalone"
    # What the kubelet and the standalone logged during the action (how each refuses a manifest).
    logs: dict[str, list[str]] = field(default_factory=dict)


def get_answer(target: str, uid: str) -> bytes | str:
    answer = get_pod(target, uid)
    if isinstance(answer, grpc.RpcError):
        return f"{answer.code().name}: {answer.details()}"
    return answer


def watched(events: list[Event]) -> list[Event]:
    """The pod events, as a watcher that reconnects whenever the stream ends sees them (a
    reconnected stream's replay of ADDEDs included): sync markers and stream ends left out."""
    return [event for event in events if not event.end and event.type != SYNCED]


def answer(target: str, uids: set[str], recorder: Recorder, mark: int) -> Answer:
    listed = list_pods(target)
    everyone = uids | {uid_of(pod) for pod in listed}
    got = {uid: get_answer(target, uid) for uid in sorted(everyone)}
    events = recorder.since(0)
    known = {event.uid for event in events[:mark] if event.pod}
    return Answer(listed, got, watched(events[mark:]), held(events), known)


# -- the field groups ---------------------------------------------------------------------------


def _status(pod: dict[str, Any]) -> dict[str, Any]:
    status: dict[str, Any] = pod.get("status", {})
    return status


RESOURCE_KEYS = ("resources", "allocatedResources")


def _container_statuses(pod: dict[str, Any]) -> Any:
    statuses = _status(pod).get("containerStatuses", [])
    return [{k: v for k, v in s.items() if k not in RESOURCE_KEYS} for s in statuses]


def _resources(pod: dict[str, Any]) -> Any:
    status = _status(pod)
    return {
        "pod": {k: status.get(k) for k in RESOURCE_KEYS},
        "containers": [{k: s.get(k) for k in RESOURCE_KEYS} for s in status.get("containerStatuses", [])],
    }


# A field group: what of a decoded pod it compares.
GROUPS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "metadata": lambda pod: pod.get("metadata"),
    "spec": lambda pod: pod.get("spec"),
    "phase": lambda pod: _status(pod).get("phase"),
    "conditions": lambda pod: _status(pod).get("conditions"),
    "containerStatuses": _container_statuses,
    "resources": _resources,
}
# Comparisons of a whole answer, beside the field groups.
WHOLE = ("uids", "bytes", "watch-types", "watch-bytes", "watch-held", "watch-held-bytes")


def by_uid(answer: Answer, group: str, uids: set[str]) -> dict[str, Any]:
    """What `group` is of each pod in uids, from ListPods and GetPod: {uid: {"list": .., "get": ..}}."""
    pick = GROUPS[group]
    listed = {uid_of(pod): pick(pod_from_bytes(pod)) for pod in answer.listed}
    got = {
        uid: pick(pod_from_bytes(pod)) if isinstance(pod, bytes) else pod for uid, pod in answer.got.items()
    }
    return {uid: {"list": listed.get(uid), "get": got.get(uid)} for uid in sorted(uids)}


def _exact_types(events: list[Event], known: set[str]) -> dict[str, list[str]]:
    """Per UID, the event types in order: what the bridge, relaying the kubelet's events one for
    one, must send."""
    out: dict[str, list[str]] = {}
    for event in events:
        out.setdefault(event.uid, []).append(TYPES[event.type])
    return out


def _shape(events: list[Event], known: set[str]) -> dict[str, list[str]]:
    """Per UID, the watch's shape: ADDED when first announced, one MODIFIED for any run of
    updates (an ADDED of a UID already announced included), then DELETED. What the standalone,
    which derives its events from CRI and the directory rather than from the kubelet's status
    manager, owes: how many updates the kubelet sends, and whether it re-sends ADDED, is its own
    timing."""
    out: dict[str, list[str]] = {}
    for event in events:
        kinds = out.setdefault(event.uid, [])
        name = TYPES[event.type]
        if name == "ADDED" and (kinds or event.uid in known):
            name = "MODIFIED"
        if not (name == "MODIFIED" and kinds[-1:] == ["MODIFIED"]):
            kinds.append(name)
    return out


WATCH_TYPES = {"bridge": _exact_types, "standalone": _shape}


def whole(answer: Answer, group: str, uids: set[str], mode: str) -> dict[str, Any]:
    if group == "uids":  # which pods are served, in which order, and which GetPod finds
        got = {uid: isinstance(pod, bytes) or pod for uid, pod in answer.got.items()}
        return {"list": [uid_of(pod) for pod in answer.listed], "get": got}
    if group == "bytes":
        listed = {uid_of(pod): pod.hex() for pod in answer.listed}
        got = {uid: pod.hex() if isinstance(pod, bytes) else pod for uid, pod in answer.got.items()}
        return {uid: {"list": listed.get(uid), "get": got.get(uid)} for uid in sorted(uids)}
    if group == "watch-types":
        return WATCH_TYPES[mode](answer.events, answer.known)
    if group == "watch-bytes":
        out: dict[str, list[str]] = {}
        for event in answer.events:
            out.setdefault(event.uid, []).append(f"{TYPES[event.type]} {event.pod.hex()}")
        return out
    if group == "watch-held":  # which pods a watcher holds
        return {"uids": sorted(answer.held)}
    assert group == "watch-held-bytes"
    return {uid: pod.hex() for uid, pod in sorted(answer.held.items())}


def differences(kubelet: Answer, ours: Answer, group: str, mode: str) -> dict[str, tuple[Any, Any]]:
    """{uid (or key): (the kubelet's, pods-api's)} where they differ. Pod contents are compared
    for the pods both list, so that a pod one of them lacks fails `uids` alone."""
    common = {uid_of(pod) for pod in kubelet.listed} & {uid_of(pod) for pod in ours.listed}
    if group in WHOLE:
        theirs, mine = whole(kubelet, group, common, mode), whole(ours, group, common, mode)
    else:
        theirs, mine = by_uid(kubelet, group, common), by_uid(ours, group, common)
    keys = sorted(set(theirs) | set(mine))
    return {key: (theirs.get(key), mine.get(key)) for key in keys if theirs.get(key) != mine.get(key)}


# -- a settled moment --------------------------------------------------------------------------


def _agree(moment: Moment) -> bool:
    kubelet = moment.answers["kubelet"]
    modes = [name for name in moment.answers if name != "kubelet"]
    return all(
        not differences(kubelet, moment.answers[mode], group, mode)
        for mode in modes
        for group in (*GROUPS, *WHOLE)
    )


def deleted(uid: str) -> Callable[[Event], bool]:
    return lambda event: event.type == DELETED and event.uid == uid


def settle(
    node: Node,
    action: Action,
    targets: dict[str, str],
    recorders: dict[str, Recorder],
    marks: dict[str, int],
    before: set[str],
    log_mark: int,
) -> Moment:
    """The moment after `action` when the kubelet has reached its state, sent the DELETED of
    every pod it stopped listing (after the pod's grace period: a removed pod leaves ListPods at
    once, its DELETED comes when it has stopped), gone quiet, and pods-api agrees with it (or has
    had AGREE seconds to)."""
    if action.reached is not None:
        node.wait_pods(action.reached, action.what, action.timeout)
    for text in action.logged:
        node.wait_log(text, log_mark, action.timeout)
    kubelet = recorders["kubelet"]
    for uid in before - {uid_of(pod) for pod in list_pods(node.target)}:
        kubelet.wait(deleted(uid), action.timeout, marks["kubelet"])
    kubelet.wait_quiet(QUIET)
    # Snapshots are taken until pods-api agrees, AGREE runs out, or the kubelet moves on (a crash
    # loop's next start): then the last one taken while the kubelet stood still is the moment.
    still, deadline = len(kubelet), time.monotonic() + AGREE
    moment = None
    while True:
        taken = Moment(action)
        theirs = taken.answers["kubelet"] = answer(node.target, set(), kubelet, marks["kubelet"])
        for mode in targets:
            taken.answers[mode] = answer(targets[mode], set(theirs.got), recorders[mode], marks[mode])
        if len(kubelet) != still and moment is not None:
            return moment
        moment = taken
        if _agree(moment) or time.monotonic() > deadline:
            return moment
        time.sleep(0.5)  # pods-api's next relist or event; nothing announces agreement


def short(value: Any, limit: int = 1500) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} chars)"


def disagreement(moment: Moment, mode: str, group: str) -> str:
    """Where `mode`'s `group` differs from the kubelet's at `moment`, said per UID with both
    values; empty where they agree."""
    diff = differences(moment.answers["kubelet"], moment.answers[mode], group, mode)
    if not diff:
        return ""
    action = f"{moment.action.id} ({moment.action.what})"
    lines = [f"after action {action}, {mode}'s {group} differs from the kubelet's:"]
    for uid, (theirs, ours) in diff.items():
        lines.append(f"  {uid}:\n    kubelet:  {short(theirs)}\n    pods-api: {short(ours)}")
    return "\n".join(lines)


def every_pod(moments: Iterable[Moment], server: str) -> list[bytes]:
    """Every pod `server` sent at the moments (Lists, Gets, watch events, DELETED ones too),
    each once."""
    pods: list[bytes] = []
    for moment in moments:
        answer = moment.answers[server]
        pods += answer.listed
        pods += [pod for pod in answer.got.values() if isinstance(pod, bytes)]
        pods += [event.pod for event in answer.events if event.pod]
    return list(dict.fromkeys(pods))
