"""Identity and precedence: which pod the cache serves under a UID, built from what sources say.

The policy keeps every source's *contribution* (a whole pod from a source that owns pods) and
places each under the UID it is served under (`place`); the cache keeps the overlays' statuses
and asks the policy to merge what is placed under one UID, with them, into the one PodVersion it
serves (`settle`). It asks again only when a contribution for that UID changed, so a pod is
re-encoded only then, and a pod with a single contribution is served as its source made it.

Kinds of contribution (`IdentityPolicy.kind`):
  - configured: a static pod as its manifest makes it, from a source registered as a static pod
    config source (--manifests, --manifest-url: the kubelet's "file" and "http" sources);
  - mirror: the API server's copy of a static pod, annotated `kubernetes.io/config.mirror:
    <the kubelet's uid of the static pod>` (the kubelet copies the static pod's annotations,
    config.hash included, and adds that one);
  - reported: the kubelet's own view of a static pod (its `/pods`, its Pods API socket): a pod
    from any other source with `kubernetes.io/config.source: file` or `http`, under the
    kubelet's uid (which is also its config.hash);
  - runtime: the container runtime's word on which uid the kubelet runs a static pod under now
    (the CRI overlay: the pod uid label of the pod's current sandbox, whose annotations name
    its config source); it carries no spec and no status, and is never served by itself;
  - plain: every other pod.
Mirrors, reported pods and runtime pods are *reports* of a static pod; configured pods are the
static pods.

Identity (`IdentityPolicy.identities`, per (namespace, name, config source) of the static pods
involved: the kubelet keeps names unique within one config source only, so a file pod and an
http pod of one name are two pods; a mirror that does not say its source goes with the
configured pod, else the kubelet's view):
  - A plain pod is served under its own `metadata.uid`; so is a reported pod alone.
  - A mirror is served under the uid its annotation names, never twice.
  - A configured pod and the reports of *the same static pod* are one pod. They are the same
    when their uids agree (the report's kubelet uid is the configured pod's uid: a manifest
    that sets `metadata.uid`, which the kubelet keeps), or, failing that, when their namespace,
    name and config source agree (a manifest without a uid: the kubelet hashes Go's in-memory
    pod into one, which no other program can reproduce, so our generated uid never matches it).
  - Which uid is served for such a pair: **the kubelet's**. It is the one every other
    component of the node uses (the kubelet's Pods API and `/pods`, the CRI label
    `io.kubernetes.pod.uid`, the mirror's annotation), so a bridge, a CRI status overlay and
    a lookup by uid all agree on it. Our configured pod's uid is only the fallback for while
    nothing reports the static pod. The uid served is the runtime's (what the node runs now:
    after an edit the kubelet kills the old pod and starts the new one under a new uid,
    whatever a mirror the API server could not update still says), else that of a report that
    agrees with the configured pod, else the kubelet's view's, else the earliest mirror's.
  - Without a configured pod, the reports of one static pod are one pod too, under the
    runtime's uid, else the kubelet's view's: a mirror left over from an earlier version
    (the kubelet's IsMirrorPodOf no longer holds for it) is not served beside it. Mirrors
    alone keep their own identities.
  - A report whose uid is not the one served is stale: it joins the served pod (so it is not
    served twice) but its status is not used.
    A change of served uid is a different pod to clients: DELETED of the old uid, then ADDED of
    the new. So a new manifest is ADDED under our uid, and when its mirror (or the kubelet's
    view) arrives it is DELETED and ADDED again under the kubelet's; a mirror deleted from the
    API server (while the manifest stays) moves it back the same way. An API server that is
    unreachable changes nothing: its source keeps its last pods. Before the cache is ready
    (every source synced) no client sees anything, so at start the uid is settled already.

Held back (where a runtime reports static pods: `expect_runtime`, the CRI overlay beside a
static pod config source). Never announce a uid the kubelet will not use:
  - A configured pod is served under the uid *bound* to its content (its key: our uid is a hash
    of the content and the file). The runtime's uid for the static pod, when no content has it
    yet, is bound to the content configured now; a binding outlives the sandbox (a node
    restart wipes the runtime's state, and the kubelet makes the sandbox again under the same
    uid: only MODIFIED). When its content is no longer configured and the runtime no longer
    shows its uid, the uid is one of the static pod's few past uids (`_past`), still no other
    content's; all is forgotten when nothing is left of the static pod.
  - Unbound, it takes a report's uid (the kubelet's view, a mirror) that no other content has;
    failing that it is *held*: placed under HELD, served nowhere, until the runtime shows a new
    uid, at most `runtime_wait` seconds; then (one log line) its own uid. Once shown, never
    held again.
  - Edits: a configured pod its source withdraws while the runtime runs its uid in a ready
    sandbox is *retired*: kept as it was, under that uid, until the sandbox stops (the kubelet
    kills the old pod first, and starts the new one once it has terminated). The new content
    is held meanwhile (the old uid is bound to the old content), and comes under the new
    sandbox's uid: two pods to a client, each with its own content, as the kubelet serves them.
    A removed manifest is retired the same way.

Who owns a UID (the pod's spec and metadata):
  1. the first source to claim it among sources that own pods ("first claim wins"): configured
     and plain pods, and reported pods when no configured pod is there; the others are
     refused, kept, and the earliest of them is served when the holder lets go. A configured
     pod served under the kubelet's uid has it in `metadata.uid` and in `config.hash` (which
     the kubelet sets to the uid);
  2. with no such source, the report, served under that uid (`metadata.uid` rewritten;
     everything else as its source has it).
A change of owning source is a different pod under the same UID: the cache sends DELETED then
ADDED. A report served alone has no owning source, so a configured pod appearing for it, or
going away from under it, is a MODIFIED.

Status precedence. A served pod's `status` is merged, field by field, from up to three layers:
  - overlay: a status-only contribution keyed by UID (the CRI source: the container runtime's
    local view); overlays never make a pod exist;
  - mirror: the report of a static pod that a configured pod owns (a mirror: the kubelet's
    status through the control plane; the kubelet's own view, preferred when both are there);
  - owner: the owning source's own status (a static pod file says only `phase: Pending`).
For each field the first layer in its row that has a value (not absent, empty or null) wins
(where every layer's is empty, an empty object is kept: `resources: {}` is the kubelet's word):

  | status field(s)                                        | precedence                  |
  | ------------------------------------------------------ | --------------------------- |
  | containerStatuses, initContainerStatuses,              | overlay > mirror > owner    |
  |   ephemeralContainerStatuses (each list as a whole)    |   (see readiness below)     |
  | podIP + podIPs (together), hostIP + hostIPs (together) | overlay > mirror > owner    |
  | phase, startTime                                       | overlay > mirror > owner    |
  |   ...but a terminal phase (Succeeded, Failed) of mirror or owner stays, with its        |
  |   reason and message: the kubelet never moves a pod out of a terminal phase            |
  | conditions, merged per `type`: Ready, ContainersReady  | mirror > owner > overlay    |
  | conditions of every other type                         | overlay > mirror > owner    |
  | everything else (reason, message, qosClass,            | mirror > owner > overlay    |
  |   nominatedNodeName, resize, resourceClaimStatuses...) |                             |

Readiness depends on probes only the kubelet runs: a container status taken from the overlay
keeps `ready` and `started` from the mirror's or owner's status for the same container (same
name and same `containerID`, so a restarted container does not inherit its predecessor's).
Several overlays for one UID: the one registered first is used, the others wait for it to clear.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

# The two annotations are the policy's, defined beside the Facts that keep them with a version.
from pods_api.core.store.version import CONFIG_SOURCE as CONFIG_SOURCE
from pods_api.core.store.version import MIRROR_ANNOTATION as MIRROR_ANNOTATION
from pods_api.core.store.version import PodVersion

log = logging.getLogger(__name__)

CONFIG_HASH = "kubernetes.io/config.hash"
# The kubelet's config sources other than "api": a pod from one of them is a static pod.
STATIC_CONFIG_SOURCES = frozenset({"file", "http"})


class IdentityKind(Enum):
    CONFIGURED = "configured"
    MIRROR = "mirror"
    REPORTED = "reported"
    RUNTIME = "runtime"
    PLAIN = "plain"


_REPORTS = (IdentityKind.MIRROR, IdentityKind.REPORTED, IdentityKind.RUNTIME)


class Layer(Enum):
    OVERLAY = "overlay"
    MIRROR = "mirror"
    OWNER = "owner"


_LOCAL_FIRST = (Layer.OVERLAY, Layer.MIRROR, Layer.OWNER)
_REPORTED_FIRST = (Layer.MIRROR, Layer.OWNER, Layer.OVERLAY)

# The precedence table above, as data: field groups taken whole from one layer.
STATUS_PRECEDENCE: tuple[tuple[tuple[str, ...], tuple[Layer, ...]], ...] = (
    (("containerStatuses",), _LOCAL_FIRST),
    (("initContainerStatuses",), _LOCAL_FIRST),
    (("ephemeralContainerStatuses",), _LOCAL_FIRST),
    (("podIP", "podIPs"), _LOCAL_FIRST),
    (("hostIP", "hostIPs"), _LOCAL_FIRST),
    (("phase",), _LOCAL_FIRST),
    (("startTime",), _LOCAL_FIRST),
)
DEFAULT_PRECEDENCE = _REPORTED_FIRST
# Conditions that depend on probe results, which only the kubelet has.
PROBED_CONDITIONS = frozenset({"Ready", "ContainersReady"})
CONTAINER_STATUS_LISTS = ("containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses")
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
# The served UID of a static pod held back ("Held back" in the module docstring): no pod has
# it, and `settle` never serves anything under it.
HELD = ""
# Past uids kept per static pod (`_past`): a report of a static pod names its current version
# or, for a moment after an edit, the one before; a few edits in a row are covered.
PAST_UIDS = 4
# The condition a runtime report carries for whether its sandbox is ready (the kubelet's name
# for the same fact).
SANDBOX_READY = "PodReadyToStartContainers"


@dataclass(frozen=True, slots=True)
class Contribution:
    """One source's pod for a served UID. `order` counts claims: lower claimed first.
    `configured`: the source is a static pod config source (its pods are static pods as their
    manifests make them). `runtime`: the pod only says which uid the container runtime runs a
    static pod under (see IdentityKind.RUNTIME)."""

    source: str
    pod: PodVersion
    order: int
    configured: bool = False
    runtime: bool = False


@dataclass(frozen=True, slots=True)
class Overlay:
    """One overlay's status (canonical Kubernetes JSON of a PodStatus) for a served UID."""

    name: str
    status: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Served:
    """What the cache serves for a UID: the pod, the source that owns it (None for a report
    served alone), and the owner-role contributions that lost the claim (to say so once)."""

    pod: PodVersion
    owner: str | None
    refused: tuple[Contribution, ...] = ()


# A contribution's key: (source, the source's own pod UID).
Key = tuple[str, str]


class IdentityPolicy:
    """Decides under which UID a source's pod is served, and merges the contributions for one
    UID into the served pod (see the module docstring for the rules and the table). It keeps
    every contribution: the cache hands over what a source says (`place`) and asks for what to
    serve under each UID that changed (`settle`), its two write points.

    `mirror_pods=False` is the plain rule "first source to claim a UID wins", nothing merged.
    One policy serves one cache.
    """

    def __init__(
        self,
        *,
        name: str = "mirrors+overlays",
        mirror_pods: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self.mirror_pods = mirror_pods
        self._clock = clock
        # Set by `expect_runtime`: how long a new static pod is held back waiting for the
        # runtime's word on its uid; None: no runtime reports static pods, nothing is held.
        self.runtime_wait: float | None = None
        # A static pod's content (its configured contribution's key: our uid is a hash of the
        # content and the file) -> the kubelet's uid the runtime ran it under, per static pod;
        # and back. Kept while the content is configured or the runtime still shows the uid.
        self._bindings: dict[tuple[str, str], dict[Key, str]] = {}
        self._bound_to: dict[str, Key] = {}
        # Per static pod, the uids of its contents no longer configured nor shown by the runtime,
        # oldest first: still bound (in `_bound_to`), so a report naming one (a mirror the API
        # server has not updated yet) does not give it to the new content.
        self._past: dict[tuple[str, str], list[str]] = {}
        # Configured contributions their source withdrew (an edit, a removal) while the runtime
        # still runs them: served, as they were, until their sandbox stops.
        self._retired: set[Key] = set()
        # Held-back configured contributions -> when they were first held (the clock's time);
        # and those shown once (never held again: a pod served is not taken away to wait).
        self._waiting: dict[Key, float] = {}
        self._shown: set[Key] = set()
        # (source, its pod's uid) -> where the pod comes from (a manifest file), for log lines;
        # the cache asks its sources.
        self.origin: Callable[[str, str], str | None] = lambda source, uid: None
        # served UID -> key -> that source's pod
        self._claims: dict[str, dict[Key, Contribution]] = {}
        # a static pod's (namespace, name) -> what every source says of it
        self._static: dict[tuple[str, str], dict[Key, Contribution]] = {}
        # source -> its own pod UID -> the UID that pod is served under
        self._served_as: dict[str, dict[str, str]] = {}
        self._claim_order = itertools.count()

    # -- the contributions: placed under a UID, settled into the served pod -------------------

    def served_as(self, source: str) -> Mapping[str, str]:
        """A source's pods, by its own UIDs, and the UID each is served under."""
        return self._served_as.get(source, {})

    def place(
        self,
        source: str,
        pods: Sequence[PodVersion],
        gone: Sequence[str],
        *,
        configured: bool = False,
        runtime: bool = False,
    ) -> list[str]:
        """Take `source`'s new or changed `pods` and withdraw its pods `gone` (its own UIDs);
        place every contribution whose served UID is now decided otherwise. Returns the served
        UIDs to settle, in the order to settle them. `configured`, `runtime`: as in
        Contribution."""
        served_as = self._served_as.setdefault(source, {})
        touched: dict[str, None] = {}  # served UIDs to settle, in the order touched
        groups: dict[tuple[str, str], None] = {}  # static pods whose identities to decide again
        for uid in gone:
            key = (source, uid)
            if key in self._retired:
                continue  # withdrawn already, kept while the runtime runs it
            was = served_as[uid]
            contribution = self._claims[was][key]
            group = self.static_pod(contribution)
            if group is not None and self._runs(group, key, was):
                # The kubelet runs the old content until it has stopped it: so does the cache.
                self._retired.add(key)
                groups[group] = None
                continue
            del served_as[uid]
            self._unlink(self._claims[was].pop(key), groups)
            self._forget(key)
            touched[was] = None
        for pod in pods:
            key = (source, pod.uid)
            served = served_as.get(pod.uid)
            old = self._claims[served][key] if served is not None else None
            if old is not None and key in self._retired:
                self._retired.discard(key)  # configured again (an edit undone) before it stopped
                self._decide_again(old, groups)
            if old is not None and old.pod.framed == pod.framed:
                continue
            order = old.order if old is not None else next(self._claim_order)
            new = Contribution(source, pod, order, configured, runtime)
            if old is not None:
                self._unlink(old, groups)
            group = self.static_pod(new)
            if group is not None:
                self._static.setdefault(group, {})[key] = new
                groups[group] = None
            self._place(new, self.identity(pod), touched, changed=True)
        self._held_long_enough(groups)
        self._decide(groups, touched)
        return self._in_order(touched)

    def expect_runtime(self, wait: float) -> list[str]:
        """A container runtime reports which uid the kubelet runs each static pod under
        (IdentityKind.RUNTIME): from now on a static pod it has not shown is held back, for at most
        `wait` seconds ("Held back" in the module docstring). Returns the served UIDs to settle."""
        self.runtime_wait = wait
        touched: dict[str, None] = {}
        self._decide(dict.fromkeys(self._static), touched)
        return self._in_order(touched)

    def _decide(self, groups: Mapping[tuple[str, str], None], touched: dict[str, None]) -> None:
        for group in groups:
            self._drop_stopped(group, touched)
            members = list(self._static.get(group, {}).values())
            for member, uid in zip(members, self.identities(members), strict=True):
                self._place(member, uid, touched, changed=False)

    def _in_order(self, touched: dict[str, None]) -> list[str]:
        touched.pop(HELD, None)  # never served: nothing to settle
        # A UID left with nothing goes first: when a pod moves to another UID (a static pod to
        # the kubelet's uid, an edited static pod to its new uid), the old goes before the new
        # comes, as the kubelet kills before it starts.
        return sorted(touched, key=lambda uid: bool(self._claims.get(uid)))

    def settle(self, uid: str, overlays: Sequence[Overlay]) -> Served | None:
        """What to serve under `uid` now, from every contribution placed there and `overlays`
        (the overlays' statuses for it, first registered first); None: nothing."""
        if uid == HELD:
            return None
        claims = self._claims.get(uid)
        if claims is not None and not claims:
            del self._claims[uid]
            claims = None
        return self.merge(uid, list(claims.values()), overlays) if claims else None

    def _unlink(self, contribution: Contribution, groups: dict[tuple[str, str], None]) -> None:
        group = self.static_pod(contribution)
        if group is not None:
            members = self._static[group]
            members.pop((contribution.source, contribution.pod.uid), None)
            if not members:
                del self._static[group]
            groups[group] = None

    def _place(
        self, contribution: Contribution, uid: str, touched: dict[str, None], *, changed: bool
    ) -> None:
        """Serve `contribution` under `uid` (where it may be already)."""
        served_as = self._served_as.setdefault(contribution.source, {})
        key = (contribution.source, contribution.pod.uid)
        was = served_as.get(contribution.pod.uid)
        if was == uid and not changed:
            return
        if was is not None and was != uid:
            self._claims[was].pop(key, None)
            touched[was] = None
        self._claims.setdefault(uid, {})[key] = contribution
        served_as[contribution.pod.uid] = uid
        touched[uid] = None

    # -- held back, bound, retired: a static pod as the runtime runs it -----------------------

    def _runs(self, group: tuple[str, str], key: Key, uid: str) -> bool:
        """Whether `key`'s content is what the runtime runs, in a ready sandbox, as `uid`."""
        if self._bindings.get(group, {}).get(key) != uid:
            return False
        return self._sandboxes(group).get(uid, False)

    def _sandboxes(self, group: tuple[str, str]) -> dict[str, bool]:
        """The uids the runtime reports for a static pod's (namespace, name), and whether each
        one's sandbox is ready."""
        members = self._static.get(group, {}).values()
        return {c.pod.uid: _sandbox_ready(c.pod) for c in members if c.runtime}

    def _forget(self, key: Key) -> None:
        """A configured contribution is gone for good; its binding stays while the runtime
        shows the uid (`_drop_stopped`), so no other content takes that uid meanwhile."""
        self._retired.discard(key)
        self._waiting.pop(key, None)
        self._shown.discard(key)

    def _decide_again(self, contribution: Contribution, groups: dict[tuple[str, str], None]) -> None:
        group = self.static_pod(contribution)
        if group is not None:
            groups[group] = None

    def _held_long_enough(self, groups: dict[tuple[str, str], None]) -> None:
        """Decide again the static pods held back for the whole wait (they fall back)."""
        if self.runtime_wait is None or not self._waiting:
            return
        now = self._clock()
        for (source, uid), since in self._waiting.items():
            if now - since >= self.runtime_wait:
                contribution = self._claims.get(self.served_as(source).get(uid, HELD), {}).get((source, uid))
                if contribution is not None:
                    self._decide_again(contribution, groups)

    def _drop_stopped(self, group: tuple[str, str], touched: dict[str, None]) -> None:
        """Withdraw, for good, retired contents whose sandbox is no longer ready, and forget
        bindings of contents no longer configured whose uid the runtime no longer shows."""
        sandboxes = self._sandboxes(group)
        members = self._static.get(group, {})
        for key in [k for k in members if k in self._retired]:
            contribution = members[key]
            was = self._served_as[key[0]][key[1]]
            if not sandboxes.get(was, False):
                del self._served_as[key[0]][key[1]]
                self._claims[was].pop(key, None)
                self._unlink(contribution, {})
                self._forget(key)
                touched[was] = None
        bindings = self._bindings.get(group, {})
        members = self._static.get(group, {})
        past = self._past.setdefault(group, [])
        for key, uid in list(bindings.items()):
            if key not in members and uid not in sandboxes:
                del bindings[key]
                past.append(uid)  # still the old content's, to a report that names it
        if not members:  # nothing left of the static pod, nothing to remember of it
            for uid in [*bindings.values(), *past]:
                self._bound_to.pop(uid, None)
            bindings.clear()
            past.clear()
        while len(past) > PAST_UIDS:
            self._bound_to.pop(past.pop(0), None)
        if not bindings:
            self._bindings.pop(group, None)
        if not past:
            self._past.pop(group, None)

    def _bind(self, group: tuple[str, str], key: Key, uid: str) -> None:
        """The runtime runs `key`'s content as `uid`."""
        bindings = self._bindings.setdefault(group, {})
        was = bindings.get(key)
        if was is not None and was != uid:
            self._bound_to.pop(was, None)
        past = self._past.get(group, [])
        if uid in past:
            past.remove(uid)  # the content again (an edit undone): the kubelet's same uid
        bindings[key] = uid
        self._bound_to[uid] = key

    def _held_or_own(self, contribution: Contribution, key: Key) -> str:
        """A configured pod nothing has told the kubelet's uid of: HELD while it waits for the
        runtime, else (after the wait, or once shown) its own uid."""
        if key in self._shown:
            return contribution.pod.uid
        now = self._clock()
        since = self._waiting.setdefault(key, now)
        assert self.runtime_wait is not None  # only asked when a runtime reports static pods
        if now - since < self.runtime_wait:
            return HELD
        pod = contribution.pod
        log.warning(
            "static pod %s/%s (%s): the container runtime shows no sandbox of it after %gs, so its "
            "uid as the kubelet runs it is unknown; serving it under pods-api's own uid %s",
            pod.namespace,
            pod.name,
            self.origin(contribution.source, pod.uid) or contribution.source,
            self.runtime_wait,
            pod.uid,
        )
        return pod.uid

    def _settle_with_runtime(
        self, group: Sequence[Contribution], kinds: Sequence[IdentityKind], part: list[int], uids: list[str]
    ) -> None:
        """`_settle_identity` where a runtime reports static pods (`runtime_wait` is set), for
        a part with a configured pod ("Held back" in the module docstring)."""
        configured = [i for i in part if kinds[i] is IdentityKind.CONFIGURED]
        keys = {i: (group[i].source, group[i].pod.uid) for i in configured}
        static = (group[part[0]].pod.namespace, group[part[0]].pod.name)
        bindings = self._bindings.get(static, {})
        kept = set()  # the uids retired contents are served under
        for i in configured:
            if keys[i] in self._retired:
                uids[i] = bindings[keys[i]]
                kept.add(uids[i])
        live = [i for i in configured if keys[i] not in self._retired]
        rest = [i for i in part if kinds[i] is not IdentityKind.CONFIGURED and uids[i] not in kept]
        if not live:
            _settle_identity(group, kinds, rest, uids)
            return
        anchor, others = live[0], {group[i].pod.uid for i in live[1:]}
        key, own = keys[anchor], group[anchor].pod.uid
        runtime = [uids[i] for i in rest if kinds[i] is IdentityKind.RUNTIME]
        if runtime and self._bound_to.get(runtime[0], key) == key:
            self._bind(static, key, runtime[0])  # a uid the runtime runs that no other content has
        uid = self._bindings.get(static, {}).get(key)
        if uid is None:
            # A report agreeing with the manifest's uid first, then the kubelet's view, then
            # the mirrors, of uids no other content has.
            said = [
                uids[i]
                for kind in (IdentityKind.REPORTED, IdentityKind.MIRROR)
                for i in rest
                if kinds[i] is kind
            ]
            said = [u for u in said if u not in others and self._bound_to.get(u, key) == key]
            said.sort(key=lambda u: u != own)
            uid = said[0] if said else self._held_or_own(group[anchor], key)
        if uid != HELD:
            self._waiting.pop(key, None)
            self._shown.add(key)
        uids[anchor] = uid
        for i in rest:
            if uids[i] not in others:
                uids[i] = uid

    # -- the rules ------------------------------------------------------------------------------

    def kind(self, contribution: Contribution) -> IdentityKind:
        if contribution.runtime:
            return IdentityKind.RUNTIME
        if not self.mirror_pods:
            return IdentityKind.PLAIN
        if self.mirror_of(contribution.pod) is not None:
            return IdentityKind.MIRROR
        if contribution.configured:
            return IdentityKind.CONFIGURED
        if _annotations(contribution.pod).get(CONFIG_SOURCE) in STATIC_CONFIG_SOURCES:
            return IdentityKind.REPORTED
        return IdentityKind.PLAIN

    def static_pod(self, contribution: Contribution) -> tuple[str, str] | None:
        """The (namespace, name) that matches a static pod with its reports; None for a plain
        pod, whose uid alone is its identity."""
        if not self.mirror_pods or self.kind(contribution) is IdentityKind.PLAIN:
            return None
        return contribution.pod.namespace, contribution.pod.name

    def identity(self, pod: PodVersion) -> str:
        """The UID a pod is served under when nothing else is known: a mirror's static pod's
        uid (the kubelet's), else its own."""
        static_uid = self.mirror_of(pod)
        return static_uid if static_uid is not None else pod.uid

    def mirror_of(self, pod: PodVersion) -> str | None:
        """The static pod's UID if this pod is a mirror pod (and mirrors are recognised)."""
        if not self.mirror_pods:
            return None
        static_uid = _annotations(pod).get(MIRROR_ANNOTATION)
        if isinstance(static_uid, str) and static_uid and static_uid != pod.uid:
            return static_uid
        return None

    def identities(self, group: Sequence[Contribution]) -> list[str]:
        """The UID each contribution of one static pod's (namespace, name) is served under, in
        the group's order (see "Identity" in the module docstring)."""
        uids = [self.identity(c.pod) for c in group]
        kinds = [self.kind(c) for c in group]
        sources = [_config_source(c.pod) for c in group]
        in_order = sorted(range(len(group)), key=lambda i: group[i].order)
        unsaid = next((sources[i] for i in in_order if kinds[i] is IdentityKind.CONFIGURED), None) or next(
            (sources[i] for i in in_order if kinds[i] is IdentityKind.REPORTED), None
        )
        parts: dict[str | None, list[int]] = {}
        for i in in_order:
            parts.setdefault(sources[i] or unsaid, []).append(i)
        for part in parts.values():
            if self.runtime_wait is not None and any(kinds[i] is IdentityKind.CONFIGURED for i in part):
                self._settle_with_runtime(group, kinds, part, uids)
            else:
                _settle_identity(group, kinds, part, uids)
        return uids

    def merge(
        self, uid: str, contributions: Sequence[Contribution], overlays: Sequence[Overlay]
    ) -> Served | None:
        """The pod served under `uid`, or None when no source owns or reports it."""
        # The runtime's word says under which uid, nothing about the pod: never merged.
        pairs = [(c, k) for c in contributions if (k := self.kind(c)) is not IdentityKind.RUNTIME]
        configured = any(k is IdentityKind.CONFIGURED for _, k in pairs)
        # With a configured pod, the kubelet's view is a report of it; without, a pod it owns.
        reporting = _REPORTS if configured else (IdentityKind.MIRROR,)
        owners = sorted((c for c, k in pairs if k not in reporting), key=lambda c: c.order)
        reports = sorted(
            (c for c, k in pairs if k in reporting),
            key=lambda c: (self.identity(c.pod) != uid, self.kind(c) is not IdentityKind.REPORTED, c.order),
        )
        if owners:
            base, owner = owners[0], owners[0].source
        elif reports:
            base, owner = reports[0], None
        else:
            return None
        # A report of another uid is of an earlier version of the static pod: not its status.
        current = [c for c in reports if self.identity(c.pod) == uid]
        report = current[0] if owners and current else None
        refused = tuple(owners[1:])
        if report is None and not overlays and owner is not None and base.pod.uid == uid:
            return Served(base.pod, owner, refused)  # as the source made it: no re-encoding
        layers: dict[Layer, Mapping[str, Any]] = {Layer.OWNER: base.pod.json.get("status") or {}}
        if report is not None:
            layers[Layer.MIRROR] = report.pod.json.get("status") or {}
        if overlays:
            layers[Layer.OVERLAY] = overlays[0].status
        pod_json = dict(base.pod.json)
        if base.pod.uid != uid:
            meta = pod_json["metadata"] = {**pod_json["metadata"], "uid": uid}
            if owner is not None and CONFIG_HASH in (meta.get("annotations") or {}):
                meta["annotations"] = {**meta["annotations"], CONFIG_HASH: uid}  # the hash is the uid
        pod_json["status"] = merge_status(layers)
        return Served(PodVersion.from_json(pod_json), owner, refused)


def _settle_identity(
    group: Sequence[Contribution], kinds: Sequence[IdentityKind], part: list[int], uids: list[str]
) -> None:
    """Decide, in `uids`, the served uid of one static pod's contributions (`part`: indexes
    into `group`, in claim order, all of one config source)."""

    def of(kind: IdentityKind) -> list[int]:
        return [i for i in part if kinds[i] is kind]

    configured, runtime, reported, mirrors = (
        of(IdentityKind.CONFIGURED),
        of(IdentityKind.RUNTIME),
        of(IdentityKind.REPORTED),
        of(IdentityKind.MIRROR),
    )
    reports = [*mirrors, *reported, *runtime]
    if configured:
        anchor = configured[0]
        own = group[anchor].pod.uid
        others = {group[i].pod.uid for i in configured[1:]}  # reports agreeing with those are theirs
        followers = [i for i in reports if uids[i] not in others]
        agreed = [anchor] if any(uids[i] == own for i in followers) else []
        chosen = [*runtime, *agreed, *reported, *mirrors]
        uid = uids[chosen[0]] if chosen else own
        for i in (anchor, *followers):
            uids[i] = uid
    elif (runtime or reported) and (reported or mirrors):
        uid = uids[[*runtime, *reported][0]]
        for i in reports:
            uids[i] = uid


def _sandbox_ready(pod: PodVersion) -> bool:
    """Whether a runtime report says its sandbox is ready."""
    conditions = (pod.json.get("status") or {}).get("conditions") or ()
    return any(c.get("type") == SANDBOX_READY and c.get("status") == "True" for c in conditions)


def _config_source(pod: PodVersion) -> str | None:
    """The kubelet's config source a static pod (or a report of one) says it is from."""
    source = _annotations(pod).get(CONFIG_SOURCE)
    return source if source in STATIC_CONFIG_SOURCES else None


def _annotations(pod: PodVersion) -> Mapping[str, Any]:
    """The pod's config.mirror and config.source annotations, all the policy reads of them:
    decoded once with the version (not the JSON, which a bridged pod may not have rendered)."""
    return pod.facts.config


def _has(value: Any) -> bool:
    return value is not None and value != "" and value != [] and value != {}


def _first(
    layers: Mapping[Layer, Mapping[str, Any]], order: Sequence[Layer], keys: Sequence[str]
) -> Layer | None:
    for layer in order:
        status = layers.get(layer)
        if status is not None and any(_has(status.get(k)) for k in keys):
            return layer
    return None


def merge_status(layers: Mapping[Layer, Mapping[str, Any]]) -> dict[str, Any]:
    """Merge PodStatus JSON from the layers present, by the precedence table."""
    grouped = {k for keys, _ in STATUS_PRECEDENCE for k in keys}
    out: dict[str, Any] = {}
    for keys, order in STATUS_PRECEDENCE:
        layer = _first(layers, order, keys)
        if layer is not None:
            out.update({k: layers[layer][k] for k in keys if _has(layers[layer].get(k))})
    every = {k for status in layers.values() for k in status}
    for key in sorted(every - grouped - {"conditions"}):
        layer = _first(layers, DEFAULT_PRECEDENCE, (key,)) or _empty_object(layers, key)
        if layer is not None:
            out[key] = layers[layer][key]
    _keep_terminal_phase(layers, out)
    conditions = _merge_conditions(layers)
    if conditions:
        out["conditions"] = conditions
    for key in CONTAINER_STATUS_LISTS:
        if key in out and layers.get(Layer.OVERLAY, {}).get(key) is out[key]:
            out[key] = _keep_readiness(out[key], layers, key)
    return out


def _empty_object(layers: Mapping[Layer, Mapping[str, Any]], key: str) -> Layer | None:
    """The first layer whose `key` is an empty object, where no layer has more: the kubelet
    writes some as `{}` (a BestEffort pod's `resources`), and `{}` is not the field's absence."""
    return next((layer for layer in DEFAULT_PRECEDENCE if layers.get(layer, {}).get(key) == {}), None)


def _keep_terminal_phase(layers: Mapping[Layer, Mapping[str, Any]], out: dict[str, Any]) -> None:
    for layer in (Layer.MIRROR, Layer.OWNER):
        status = layers.get(layer)
        if status is not None and status.get("phase") in TERMINAL_PHASES:
            out["phase"] = status["phase"]
            for key in ("reason", "message"):
                if _has(status.get(key)):
                    out[key] = status[key]
            return


def _merge_conditions(layers: Mapping[Layer, Mapping[str, Any]]) -> list[dict[str, Any]]:
    by_layer = {
        layer: {c.get("type"): c for c in status.get("conditions") or []} for layer, status in layers.items()
    }
    types: list[Any] = []
    for layer in _LOCAL_FIRST:
        for kind in by_layer.get(layer, {}):
            if kind not in types:
                types.append(kind)
    merged = []
    for kind in types:
        order = _REPORTED_FIRST if kind in PROBED_CONDITIONS else _LOCAL_FIRST
        merged.append(next(by_layer[layer][kind] for layer in order if kind in by_layer.get(layer, {})))
    return merged


def _keep_readiness(
    statuses: list[dict[str, Any]], layers: Mapping[Layer, Mapping[str, Any]], key: str
) -> list[dict[str, Any]]:
    reported: dict[tuple[Any, Any], dict[str, Any]] = {}
    for layer in (Layer.OWNER, Layer.MIRROR):  # the mirror's word last, so it wins
        for status in layers.get(layer, {}).get(key) or []:
            reported[(status.get("name"), status.get("containerID"))] = status
    out = []
    for status in statuses:
        known = reported.get((status.get("name"), status.get("containerID")))
        if known is not None and status.get("containerID"):
            status = {**status, **{k: known[k] for k in ("ready", "started") if k in known}}
        out.append(status)
    return out
