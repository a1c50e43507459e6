"""List of the Kubernetes view (`GET /api/v1/pods`, `/api/v1/namespaces/{ns}/pods`): a PodList
or a Table, paged by `limit` and `continue`, from the snapshot its resourceVersion names.

Recent list snapshots are kept by revision, so a continue token or an Exact resourceVersion is
served from the very snapshot it names while that is kept, and is 410 Expired after (the client
lists again), as the API server does once etcd compacted the revision.
"""

from __future__ import annotations

from collections import OrderedDict

from starlette.requests import Request
from starlette.responses import Response

from pods_api.core.assembly import Core
from pods_api.core.query.view import View
from pods_api.core.store.pod import PodVersion
from pods_api.core.store.snapshot import Snapshot
from pods_api.gateway import formats
from pods_api.gateway.body import SharedBody
from pods_api.gateway.kube import objects as kubeobjects
from pods_api.gateway.kube import params
from pods_api.gateway.kube.errors import bad_request, expired, too_large

# How many snapshots a continue token or an Exact resourceVersion can name: a few pages' worth
# of lists in flight, each holding its snapshot's pods alive until it drops out.
SNAPSHOTS_KEPT = 16
# Where a page starts: after this (namespace, name), or at the first pod.
Start = tuple[str, str] | None


class Lists:
    """The List call of one core, with the snapshots its continue tokens name."""

    def __init__(self, core: Core) -> None:
        self.core = core
        self.snapshots: OrderedDict[int, Snapshot] = OrderedDict()

    def respond(self, request: Request, namespace: str | None) -> Response:
        view, media = params.view(request, namespace), params.accepted(request)
        include = params.include(request) if media == params.TABLE else "Metadata"
        limit = params.count(request, "limit") or 0
        snapshot, start = self.snapshot(request, request.query_params.get("continue"))
        chosen, remaining = kubeobjects.page(kubeobjects.in_key_order(snapshot, view), start, limit)
        token = kubeobjects.continue_token(snapshot.revision, chosen[-1]) if remaining else None
        if token is not None:
            self._keep(snapshot)
        if media == params.TABLE:
            rows = [(p, p.revision) for p in chosen]
            body = kubeobjects.table(rows, snapshot.revision, include, continue_=token, remaining=remaining)
            return Response(body, media_type=formats.JSON)
        if media == formats.JSON and not params.flag(request, "pretty"):
            return SharedBody(
                self._json(snapshot, view, start, limit, chosen, token, remaining), media_type=formats.JSON
            )
        listed = kubeobjects.list_object(snapshot.revision, chosen, token, remaining)
        return params.render(request, listed, media)

    @staticmethod
    def _json(
        snapshot: Snapshot,
        view: View,
        start: Start,
        limit: int,
        chosen: list[PodVersion],
        token: str | None,
        remaining: int,
    ) -> bytes:
        """Assembled once per (snapshot, view, page): every client listing the same way until the
        next change gets the same bytes object, as on the other surfaces."""
        return snapshot.memo(
            ("kube-list", view.key, start, limit),
            lambda: kubeobjects.list_bytes(snapshot.revision, chosen, token, remaining),
        )

    def snapshot(self, request: Request, token: str | None) -> tuple[Snapshot, Start]:
        """The snapshot a list reads, and where its page starts, by resourceVersion semantics:
        "" most recent; "0" any (the most recent); N with NotOlderThan (the default) at least N;
        N with Exact exactly N (while kept); a continue token the snapshot it came from."""
        revision, match = params.revision(request), params.revision_match(request)
        if match and revision is None:
            raise bad_request("resourceVersionMatch is forbidden unless resourceVersion is provided")
        if match == "Exact" and revision == 0:
            raise bad_request('resourceVersionMatch "exact" is forbidden for resourceVersion "0"')
        if token:
            if revision or match:
                raise bad_request("specifying resource version is not allowed when using continue")
            return self._continued(token)
        return self._at(revision, match), None

    def _continued(self, token: str) -> tuple[Snapshot, Start]:
        at, start = kubeobjects.parse_continue(token)
        current = self.core.cache.snapshot()
        snapshot = current if at == current.revision else self.snapshots.get(at)
        if snapshot is None:
            raise expired(
                "The provided continue parameter is too old to display a consistent list result. "
                "You can start a new list without the continue parameter."
            )
        return snapshot, start

    def _at(self, revision: int | None, match: str) -> Snapshot:
        current = self.core.cache.snapshot()
        if not revision:
            return current
        if revision > current.revision:
            raise too_large(revision, current.revision)
        if match == "Exact" and revision != current.revision:
            kept = self.snapshots.get(revision)
            if kept is None:
                raise expired(f"too old resource version: {revision} ({current.revision})")
            return kept
        return current

    def _keep(self, snapshot: Snapshot) -> None:
        self.snapshots[snapshot.revision] = snapshot
        self.snapshots.move_to_end(snapshot.revision)
        while len(self.snapshots) > SNAPSHOTS_KEPT:
            self.snapshots.popitem(last=False)
