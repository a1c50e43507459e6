"""`GET /api/v1[/namespaces/{ns}]/events`: what this node observed happen to its pods'
containers (core/store/observations.py) as core/v1 Events, for `kubectl describe pod`, which asks by
`fieldSelector=involvedObject.name=…,involvedObject.namespace=…,involvedObject.uid=…`.

Each names pods-api as its source (`source.component`, `reportingComponent`) and the node as
its host, so nobody mistakes it for the kubelet's own record in the API server. Not in discovery:
`kubectl get events` still says there is no such resource. `limit` is not honoured: the API
server lets a server that does not chunk return every result, and a node's events are bounded.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from pods_api.core.api.codec import format_time
from pods_api.core.api.statuserrors import SelectorError
from pods_api.core.assembly import Core
from pods_api.core.query.fields import EVENT_FIELDS, parse_fields
from pods_api.core.store.observations import NodeEvent
from pods_api.gateway.http import formats
from pods_api.gateway.kube import listoptions
from pods_api.gateway.kube.apistatus import bad_request

# Who reports these events: pods-api, observing the runtime, never the kubelet.
COMPONENT = "pods-api"
_NS = 1_000_000_000


def event_object(event: NodeEvent, node: str) -> dict[str, Any]:
    involved = event.involved
    first, last = format_time(event.first // _NS), format_time(event.last // _NS)
    return {
        "kind": "Event",
        "apiVersion": "v1",
        "metadata": {
            # The kubelet's recorder names an event <object>.<hex>; the hex is unique here.
            "name": f"{involved.pod}.{event.serial:x}",
            "namespace": involved.namespace,
            "resourceVersion": str(event.version),
            "creationTimestamp": first,
        },
        "involvedObject": {
            "kind": "Pod",
            "namespace": involved.namespace,
            "name": involved.pod,
            "uid": involved.uid,
            "apiVersion": "v1",
            "fieldPath": involved.field_path,
        },
        "reason": event.reason,
        "message": event.message,
        "source": {"component": COMPONENT, "host": node},
        "firstTimestamp": first,
        "lastTimestamp": last,
        "count": event.count,
        "type": event.type,
        "eventTime": None,
        "reportingComponent": COMPONENT,
        "reportingInstance": node,
    }


async def events(core: Core, request: Request, namespace: str | None) -> Response:
    text = request.query_params.get("fieldSelector", "")
    try:
        selector = parse_fields(text, EVENT_FIELDS, kind="events")
    except SelectorError as exc:
        raise bad_request(str(exc)) from None
    node = core.config.node_name
    items = [
        obj
        for obj in (event_object(e, node) for e in core.cache.events.all())
        if (namespace is None or obj["metadata"]["namespace"] == namespace) and selector.matches(obj)
    ]
    items.sort(key=lambda obj: (obj["lastTimestamp"], obj["metadata"]["name"]))
    listed = {
        "kind": "EventList",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": str(core.cache.snapshot().revision)},
        "items": items,
    }
    media = listoptions.accepted(request)
    # No Table for events (they are not in discovery): the list, which every client accepts too.
    form = formats.JSON if media in listoptions.TABLES else media
    return listoptions.render(listed, form, listoptions.pretty(request))
