"""The `meta.k8s.io/v1` (or `v1beta1`, the same fields) Table of pods, as the API server encodes it
for `Accept: application/json;as=Table;v=v1;g=meta.k8s.io`: kubectl's printer (core/api/printer.py)
in JSON, every column (the server always prints wide; kubectl hides priority 1 without `-o wide`)
and each row's object as `?includeObject=` asks (the server's default is Metadata).

A row is encoded in two steps, so that a server listing the same pods again and again encodes
each pod version once: `encoded_row` makes all of the row's JSON but the two cells that change
with the clock (RESTARTS' "(5m ago)" and AGE), and `row_json` finishes it at a given time around
the row's object, which the caller encodes (the Kubernetes view splices it from its cached pod).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import orjson

from pods_api.core.api.printer import POD_COLUMNS, PrintedPod, printed_pod

__all__ = [
    "TABLE_V1",
    "TABLE_V1BETA1",
    "EncodedRow",
    "IncludeObject",
    "encoded_row",
    "metadata_object",
    "pod_table",
    "row_json",
    "table_json",
]

IncludeObject = Literal["None", "Metadata", "Object"]

# The Table's group-version as the client asked for it: kubectl lists v1 first, v1beta1 after.
TABLE_V1, TABLE_V1BETA1 = "meta.k8s.io/v1", "meta.k8s.io/v1beta1"

# The same for every Table of pods: encoded once.
COLUMN_DEFINITIONS = orjson.dumps([c.to_json() for c in POD_COLUMNS])
# Go's RawExtension is never omitted: with includeObject=None a row's object is null.
NULL = b"null"


@dataclass(frozen=True, slots=True)
class EncodedRow:
    """A pod's Table row as JSON, but for its RESTARTS and AGE cells: `head` is
    `{"cells":[NAME,READY,STATUS,`, `tail` the cells after AGE, the row's conditions and
    `,"object":`."""

    printed: PrintedPod
    head: bytes
    tail: bytes


def encoded_row(printed: PrintedPod) -> EncodedRow:
    """The row's JSON that does not change with the clock, in the API server's key order."""
    head = orjson.dumps([printed.name, printed.ready, printed.status])[:-1] + b","
    after = [printed.ip, printed.node, printed.nominated_node, printed.readiness_gates]
    tail = b"," + orjson.dumps(after)[1:]
    if printed.conditions:
        tail += b',"conditions":' + orjson.dumps([dict(c) for c in printed.conditions])
    return EncodedRow(printed, b'{"cells":' + head, tail + b',"object":')


def row_json(row: EncodedRow, now: datetime, obj: bytes) -> bytes:
    """The row at time now, around its object's JSON (NULL for includeObject=None)."""
    printed = row.printed
    cells = orjson.dumps(printed.restarts_cell(now)) + b"," + orjson.dumps(printed.age(now))
    return b"%s%s%s%s}" % (row.head, cells, row.tail, obj)


def table_json(
    rows: Iterable[bytes],
    *,
    resource_version: str | None = None,
    continue_: str | None = None,
    remaining: int = 0,
    no_headers: bool = False,
    group_version: str = TABLE_V1,
) -> bytes:
    """The Table around rows made by row_json; `continue_` and `remaining` page it as a list's
    metadata does. No headers (TableOptions.noHeaders, as kubectl's watch asks after the first
    event) is the server's nil slice, which Go encodes as null."""
    metadata: dict[str, Any] = {}
    if resource_version is not None:
        metadata["resourceVersion"] = resource_version
    if continue_ is not None:
        metadata["continue"] = continue_
        if remaining:
            metadata["remainingItemCount"] = remaining
    head = orjson.dumps({"kind": "Table", "apiVersion": group_version, "metadata": metadata})[:-1]
    columns = NULL if no_headers else COLUMN_DEFINITIONS
    return b'%s,"columnDefinitions":%s,"rows":[%s]}' % (head, columns, b",".join(rows))


def pod_table(
    pods: Iterable[Mapping[str, Any]],
    now: datetime,
    *,
    resource_version: str | None = None,
    include_object: IncludeObject = "Metadata",
    no_headers: bool = False,
    group_version: str = TABLE_V1,
) -> dict[str, Any]:
    """The Table of pods in Kubernetes JSON, decoded: what the Kubernetes view sends for them,
    made by the same steps."""
    rows = []
    for pod in pods:
        obj = NULL
        if include_object == "Object":
            obj = orjson.dumps({"kind": "Pod", "apiVersion": "v1", **pod})
        elif include_object == "Metadata":
            obj = metadata_object(orjson.dumps(pod.get("metadata") or {}), group_version)
        rows.append(row_json(encoded_row(printed_pod(pod)), now, obj))
    body = table_json(
        rows, resource_version=resource_version, no_headers=no_headers, group_version=group_version
    )
    table: dict[str, Any] = orjson.loads(body)
    return table


def metadata_object(metadata: bytes, group_version: str) -> bytes:
    """A row's object for includeObject=Metadata: a PartialObjectMetadata in the Table's own
    group-version (the apiserver's handlers, asTable), around the pod's metadata JSON."""
    return b'{"kind":"PartialObjectMetadata","apiVersion":"%s","metadata":%s}' % (
        group_version.encode(),
        metadata,
    )
