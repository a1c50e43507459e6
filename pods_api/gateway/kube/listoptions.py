"""What a request of the Kubernetes view asks for, read as the API server reads it: Go's booleans,
non-negative integers, resourceVersion and its match, label and field selectors, `Accept` in the
client's order, `includeObject`; and the answer rendered in the form it negotiated.

Each reader raises a 400 Status (`bad_request`) naming the parameter and echoing the value, as
the API server's decoding of the query does; `validate` then refuses the combinations its
ListOptions validation refuses, with a 422 Invalid naming each field (apimachinery's
pkg/apis/meta/internalversion/validation ValidateListOptions).
"""

from __future__ import annotations

from typing import Any, cast

import orjson
from starlette.requests import Request
from starlette.responses import Response

from pods_api.core.api.table import TABLE_V1, TABLE_V1BETA1, IncludeObject
from pods_api.core.query.fields import escape_value, parse_fields
from pods_api.core.query.selector import SelectorError, parse_selector
from pods_api.core.query.view import View
from pods_api.gateway.http import formats
from pods_api.gateway.http.params import GO_BOOLEAN, GO_INTEGER, GO_STRING, Args, Param
from pods_api.gateway.kube.apistatus import (
    FieldError,
    KubeError,
    bad_request,
    forbidden,
    invalid_list_options,
    not_supported,
)

# The third form this view serves, beside formats.JSON and formats.YAML: a meta.k8s.io/v1 Table.
TABLE = "table"
# The same Table in meta.k8s.io/v1beta1, for a client that asks for that version first.
TABLE_BETA = "table-v1beta1"
TABLES = (TABLE, TABLE_BETA)
# strconv.ParseBool's words: the API server reads boolean parameters with it.
_GO_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_GO_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})
_NOT_ACCEPTABLE = (
    "only the following media types are accepted: application/json, application/yaml, "
    "application/json;as=Table;v=v1;g=meta.k8s.io"
)
_YAML_TYPES = ("application/yaml", "application/x-yaml", "text/yaml")
_JSON_TYPES = ("application/json", "application/*", "*/*")
_ZERO_Q = ("0", "0.0", "0.00", "0.000")
EXACT, NOT_OLDER_THAN = "Exact", "NotOlderThan"
_MATCH = "resourceVersionMatch"
# A client's value is echoed in an error only this far: enough to recognise it, and a 1 MB
# value never makes the Status itself large.
ECHO_LIMIT = 128


# The parameters of the routes, declared once: what the OpenAPI document says they take. The
# router hands them on as text (`Args`); the readers below read them as the API server does,
# when the route needs each (unknown ones are ignored, as upstream).
LABEL_SELECTOR = Param(
    "labelSelector", GO_STRING, "Kubernetes label selector (`app=web,tier!=db`, `env in (a,b)`)."
)
FIELD_SELECTOR = Param(
    "fieldSelector", GO_STRING, "Kubernetes field selector, on the fields the API server allows."
)
LIMIT = Param("limit", GO_INTEGER, "At most this many pods; `metadata.continue` fetches the rest.")
CONTINUE = Param("continue", GO_STRING, "The `metadata.continue` of the previous page.")
RESOURCE_VERSION = Param(
    "resourceVersion", GO_STRING, "pods-api's revision: list at least this new; watch after it."
)
MATCH = Param(_MATCH, GO_STRING, "`NotOlderThan` or `Exact`.")
WATCH = Param("watch", GO_BOOLEAN, "Stream events, one JSON object per line.")
BOOKMARKS = Param("allowWatchBookmarks", GO_BOOLEAN, "Watch: send BOOKMARK events.")
INITIAL_EVENTS = Param(
    "sendInitialEvents", GO_BOOLEAN, "Watch: the current pods first, ended by an annotated BOOKMARK."
)
TIMEOUT = Param("timeoutSeconds", GO_INTEGER, "Watch: end after this many seconds.")
INCLUDE_OBJECT = Param("includeObject", GO_STRING, "Tables: `None`, `Metadata` (default) or `Object`.")
PRETTY = Param("pretty", GO_BOOLEAN, "Indented JSON.")
LIST_PARAMS: tuple[Param[str | None], ...] = (
    LABEL_SELECTOR,
    FIELD_SELECTOR,
    LIMIT,
    CONTINUE,
    RESOURCE_VERSION,
    MATCH,
    WATCH,
    BOOKMARKS,
    INITIAL_EVENTS,
    TIMEOUT,
    INCLUDE_OBJECT,
    PRETTY,
)
GET_PARAMS: tuple[Param[str | None], ...] = (INCLUDE_OBJECT, PRETTY)


def echo(value: str) -> str:
    return value if len(value) <= ECHO_LIMIT else f"{value[:ECHO_LIMIT]}… ({len(value)} characters)"


def flag(args: Args, param: Param[str | None]) -> bool | None:
    """A boolean parameter; None when absent or empty."""
    return go_boolean(param.name, args[param])


def go_boolean(name: str, value: str | None) -> bool | None:
    """`value` of the parameter `name` as strconv.ParseBool reads it; None when absent or empty."""
    if value is None or value == "":
        return None
    if value in _GO_TRUE:
        return True
    if value in _GO_FALSE:
        return False
    raise bad_request(f'{name}: Invalid value: "{echo(value)}": must be a boolean')


def pretty(request: Request) -> bool | None:
    """`pretty` of a FastAPI route (the cluster's objects, events), which the router does not
    parse into Args."""
    return go_boolean(PRETTY.name, request.query_params.get(PRETTY.name))


def count(args: Args, param: Param[str | None]) -> int | None:
    """A non-negative integer parameter; None when absent or empty."""
    value = args[param]
    if value is None or value == "":
        return None
    name = param.name
    try:
        number = int(value)
    except ValueError:
        raise bad_request(f'{name}: Invalid value: "{echo(value)}": must be an integer') from None
    if number < 0:
        raise bad_request(f"{name}: Invalid value: {number}: must be greater than or equal to 0")
    return number


def revision(args: Args) -> int | None:
    """resourceVersion: None when absent or "" (most recent), 0 for "0" (any)."""
    value = args[RESOURCE_VERSION]
    if not value:
        return None
    try:
        number = int(value)
    except ValueError:
        raise bad_request(f'resourceVersion: Invalid value: "{echo(value)}": must be an integer') from None
    if number < 0:
        raise bad_request(f'resourceVersion: Invalid value: "{echo(value)}": must be non-negative')
    return number


def revision_match(args: Args) -> str:
    """resourceVersionMatch as given ("" when absent); `validate` has refused other values."""
    return args[MATCH] or ""


def validate(args: Args) -> None:
    """ListOptions as the API server validates them once decoded, a list's and a watch's apart
    (by the `watch` parameter, as upstream, even on the /watch/ paths): 422 Invalid with every
    refused field. The WatchList feature is on, as in every API server since 1.34."""
    match, given, token = args[MATCH] or "", args[RESOURCE_VERSION] or "", args[CONTINUE] or ""
    initial = flag(args, INITIAL_EVENTS)
    watch = flag(args, WATCH) or False
    causes = _watch_problems(match, initial, token) if watch else _list_problems(match, given, initial, token)
    if causes:
        raise invalid_list_options(causes)


_NO_VERSION = "resourceVersionMatch is forbidden unless resourceVersion is provided"
_WITH_CONTINUE = "resourceVersionMatch is forbidden when continue is provided"
_EXACT_ZERO = 'resourceVersionMatch "exact" is forbidden for resourceVersion "0"'
_INITIAL_NEEDS_MATCH = "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"
_MATCH_NEEDS_INITIAL = "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"


def _list_problems(match: str, given: str, initial: bool | None, token: str) -> list[FieldError]:
    causes = []
    if match:
        if not given:
            causes.append(forbidden(_MATCH, _NO_VERSION))
        if token:
            causes.append(forbidden(_MATCH, _WITH_CONTINUE))
        if match not in (EXACT, NOT_OLDER_THAN):
            causes.append(not_supported(_MATCH, echo(match), (EXACT, NOT_OLDER_THAN, "")))
        if match == EXACT and given == "0":
            causes.append(forbidden(_MATCH, _EXACT_ZERO))
    if initial is not None:
        causes.append(forbidden("sendInitialEvents", "sendInitialEvents is forbidden for list"))
    return causes


def _watch_problems(match: str, initial: bool | None, token: str) -> list[FieldError]:
    causes = []
    if initial is not None and match != NOT_OLDER_THAN:
        causes.append(forbidden(_MATCH, _INITIAL_NEEDS_MATCH))
    if match:
        if initial is None:
            causes.append(forbidden(_MATCH, _MATCH_NEEDS_INITIAL))
        if match != NOT_OLDER_THAN:
            causes.append(not_supported(_MATCH, echo(match), (NOT_OLDER_THAN,)))
        if token:
            causes.append(forbidden(_MATCH, _WITH_CONTINUE))
    return causes


def view(args: Args, namespace: str | None, name: str | None = None) -> View:
    """The selectors; the namespace of the path is one more field requirement, and its name
    the field selector when none is given (apiserver handlers/get.go listOpts)."""
    labels, fields = args[LABEL_SELECTOR] or "", args[FIELD_SELECTOR] or ""
    if name is not None:
        fields = _named(fields, name)
    if namespace is not None:
        fields = ",".join(filter(None, [fields, f"metadata.namespace={namespace}"]))
    try:
        return View(selector=parse_selector(labels, fields))
    except SelectorError as exc:
        raise bad_request(str(exc)) from None


def filtered(args: Args) -> bool:
    """A label or field selector given (the namespace of the path is not one: upstream it is
    the storage key's prefix, not the predicate)."""
    return bool(args[LABEL_SELECTOR] or args[FIELD_SELECTOR])


def _named(fields: str, name: str) -> str:
    """The field selector of a request for one pod by name: `metadata.name=<name>`, or the
    client's own if that requires exactly this name (fields.Selector.RequiresExactMatch)."""
    if not fields:
        return f"metadata.name={escape_value(name)}"
    try:
        given = parse_fields(fields)
    except SelectorError as exc:
        raise bad_request(str(exc)) from None
    required = next(
        (r.value for r in given.requirements if r.field == "metadata.name" and not r.negated), None
    )
    if required != name:
        raise bad_request("fieldSelector metadata.name doesn't match requested name")
    return fields


def accepted(request: Request) -> str:
    """JSON, YAML or TABLE: the first the Accept header lists that this view serves (the API
    server's order: the client's), skipping what it does not (protobuf, other `as=` forms)."""
    accept = request.headers.get("accept")
    if not accept:
        return formats.JSON
    for part in accept.split(","):
        media = _acceptable(part)
        if media is not None:
            return media
    raise KubeError(406, "NotAcceptable", _NOT_ACCEPTABLE)


def _acceptable(part: str) -> str | None:
    """What one entry of Accept asks for, if this view serves it."""
    media, *raw = (p.strip() for p in part.split(";"))
    params = dict(p.partition("=")[::2] for p in raw)
    media = media.lower()
    if params.get("q", "1").strip() in _ZERO_Q:
        return None
    if media in _JSON_TYPES:
        conversion = params.get("as")
        if conversion is None:
            return formats.JSON
        if (
            conversion == "Table"
            and params.get("g") == "meta.k8s.io"
            and params.get("v") in ("v1", "v1beta1")
        ):
            return TABLE if params["v"] == "v1" else TABLE_BETA
    elif media in _YAML_TYPES and "as" not in params:
        return formats.YAML
    return None


def table_version(media: str) -> str:
    """The group-version of the Table a negotiated TABLE or TABLE_BETA stands for."""
    return TABLE_V1BETA1 if media == TABLE_BETA else TABLE_V1


def include(args: Args) -> IncludeObject:
    """includeObject of a Table: None, Metadata (the default) or Object."""
    value = args[INCLUDE_OBJECT] or "Metadata"
    if value not in ("None", "Metadata", "Object"):
        raise bad_request(f'unrecognized includeObject value: "{echo(value)}"')
    return cast(IncludeObject, value)


def render(obj: Any, media: str, pretty: bool | None) -> Response:
    """`obj` as YAML, or JSON (indented if `pretty`)."""
    if media == formats.YAML:
        return Response(formats.render(obj, formats.Format.YAML), media_type=formats.YAML)
    if pretty:
        return Response(formats.render(obj, formats.Format.PRETTY), media_type=formats.JSON)
    return Response(orjson.dumps(obj), media_type=formats.JSON)
