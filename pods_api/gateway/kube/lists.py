"""List of the Kubernetes view (`GET /api/v1/pods`, `/api/v1/namespaces/{ns}/pods`): a PodList
or a Table, paged by `limit` and `continue`, from the snapshot its resourceVersion names.

A continue token or an exact resourceVersion (`resourceVersionMatch=Exact`, or the legacy
`limit` with `resourceVersion=N`, as apiserver's cacher/delegator ShouldDelegateList reads them)
is served from the pods as they were at that revision: a page's snapshot while it is among the
SNAPSHOTS_KEPT, else the cache rebuilds it from its watch ring (PodCache.snapshot_at), so
exactly as far back as a watch can resume (the ring's RING_SIZE events and RING_BYTES, no
memory of its own). Past that it is 410 Expired and the client lists again, as the API server
does once its watch cache no longer holds the revision.
"""

from __future__ import annotations

import time
from collections import OrderedDict

from starlette.requests import Request
from starlette.responses import Response

from pods_api.core.assembly import Core
from pods_api.core.query.view import View
from pods_api.core.store.snapshot import Snapshot
from pods_api.core.store.version import PodVersion
from pods_api.gateway.http import formats
from pods_api.gateway.http.body import SharedBody
from pods_api.gateway.http.params import Args
from pods_api.gateway.kube import listoptions
from pods_api.gateway.kube import objects as kubeobjects
from pods_api.gateway.kube.apistatus import bad_request, expired, too_large

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

    async def respond(self, request: Request, args: Args, namespace: str | None) -> Response:
        media, view = listoptions.accepted(request), listoptions.view(args, namespace)
        include = listoptions.include(args) if media in listoptions.TABLES else "Metadata"
        limit = listoptions.count(args, listoptions.LIMIT) or 0
        listoptions.validate(args)
        self.core.http_lists.check()
        snapshot, start = self.snapshot(args, args[listoptions.CONTINUE], limit)
        chosen, remaining = kubeobjects.page(await kubeobjects.key_ordered(snapshot, view), start, limit)
        token = kubeobjects.continue_token(snapshot.revision, chosen[-1]) if remaining else None
        if token is not None:
            self._keep(snapshot)
        if listoptions.filtered(args):
            # How many of the rest a selector would pass is not known without reading them
            # all: the API server leaves the count out then (storage.PrepareContinueToken).
            remaining = 0
        if media in listoptions.TABLES:
            # Its AGE cells are the time of the call: one Table per second serves every call of
            # that second (kubectl's ages count whole seconds at the finest). Nothing per pod is
            # made for a call the memo answers.
            version = listoptions.table_version(media)
            key = ("kube-table", version, view.key, include, start, limit, int(time.time()))
            body = await snapshot.assembled(
                key,
                lambda: kubeobjects.table_sliced(
                    [(p, p.revision) for p in chosen],
                    snapshot.revision,
                    include,
                    continue_=token,
                    remaining=remaining,
                    group_version=version,
                ),
            )
            return SharedBody(body, media_type=formats.JSON, lists=self.core.http_lists)
        pretty = listoptions.flag(args, listoptions.PRETTY)
        if media == formats.JSON and not pretty:
            return SharedBody(
                await self._json(snapshot, view, start, limit, chosen, token, remaining),
                media_type=formats.JSON,
                lists=self.core.http_lists,
            )
        listed = kubeobjects.list_object(snapshot.revision, chosen, token, remaining)
        return listoptions.render(listed, media, pretty)

    @staticmethod
    async def _json(
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
        return await snapshot.assembled(
            ("kube-list", view.key, start, limit),
            lambda: kubeobjects.list_bytes_sliced(snapshot.revision, chosen, token, remaining),
        )

    def snapshot(self, args: Args, token: str | None, limit: int) -> tuple[Snapshot, Start]:
        """The snapshot a list reads, and where its page starts, by resourceVersion semantics:
        "" most recent; "0" any (the most recent); N at least N (NotOlderThan, the default
        without a limit); N exactly N (Exact, or the default with a limit); a continue token the
        snapshot it came from."""
        revision, match = listoptions.revision(args), listoptions.revision_match(args)
        if token:
            if revision:  # storage.ValidateListOptions: "0" may go with a continue token
                raise bad_request("specifying resource version is not allowed when using continue")
            return self._continued(token)
        exact = match == listoptions.EXACT or (not match and limit > 0)
        return self._at(revision, exact), None

    def _continued(self, token: str) -> tuple[Snapshot, Start]:
        at, start = kubeobjects.parse_continue(token)
        snapshot = self.snapshots.get(at) or self.core.cache.snapshot_at(at)
        if snapshot is None:
            raise expired(
                "The provided continue parameter is too old to display a consistent list result. "
                "You can start a new list without the continue parameter."
            )
        return snapshot, start

    def _at(self, revision: int | None, exact: bool) -> Snapshot:
        current = self.core.cache.snapshot()
        if not revision:
            return current
        if revision > current.revision:
            raise too_large(revision, current.revision)
        if not exact or revision == current.revision:
            return current
        then = self.snapshots.get(revision) or self.core.cache.snapshot_at(revision)
        if then is None:
            raise expired(f"too old resource version: {revision}")
        return then

    def _keep(self, snapshot: Snapshot) -> None:
        """Hold a paged list's snapshot for its continue tokens, the oldest let go first."""
        self.snapshots[snapshot.revision] = snapshot
        self.snapshots.move_to_end(snapshot.revision)
        while len(self.snapshots) > SNAPSHOTS_KEPT:
            self.snapshots.popitem(last=False)
