"""How `pods-api get` and `pods-api watch` print pods: the formats of `kubectl get -o`.

- `table`/`wide`: `kubectl get pods -A [-o wide]`, cell for cell (core/api/printer.py);
- `json`: kubectl's JSON printer (keys sorted, as kubectl's unstructured objects marshal; four
  spaces of indent; `<`, `>`, `&` escaped as Go's encoder does);
- `yaml`: kubectl's YAML printer (sigs.k8s.io/yaml: the JSON's keys sorted, block style, strings
  that would read as another type double-quoted, multi-line strings as literal blocks);
- `name`: `pod/NAME`;
- `jsonpath=`/`custom-columns=`: kubectl's, applied to the same objects (client/jsonpath.py).

A list is a `v1` `PodList`, where kubectl would print a generic `List`: this is one kind of
object from one source, as the HTTP gateway's `/v1/pods` returns it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pods_api.client.choices import Format
from pods_api.client.client import EventType, WatchEvent
from pods_api.client.gojson import go_json
from pods_api.client.pod import Pod
from pods_api.core.api.messageview import pod_view
from pods_api.core.api.printer import POD_COLUMNS, column_width, pod_row, pod_text_table

if TYPE_CHECKING:  # a template's printer is parsed (and its module loaded) only for -o jsonpath=...
    from pods_api.client.jsonpath import Printer


def sorted_pods(pods: Iterable[Pod]) -> list[Pod]:
    """Rows in kubectl's order for `-A`: by namespace, then name."""
    return sorted(pods, key=lambda p: (p.namespace, p.name))


def pod_object(pod: Pod) -> dict[str, Any]:
    """The pod as Kubernetes JSON with its kind, as `kubectl get -o json` shows it."""
    return {"apiVersion": "v1", "kind": "Pod", **pod.json()}


def pod_list_object(pods: Sequence[Pod]) -> dict[str, Any]:
    # ListMeta's fields are all omitempty, and gRPC carries no list resourceVersion.
    return {"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": [pod_object(p) for p in pods]}


def go_yaml(obj: Any) -> str:
    """YAML as kubectl prints it (client/goyaml.py: loaded for -o yaml only)."""
    from pods_api.client.goyaml import go_yaml as dump

    return dump(obj)


def render_pods(
    pods: Sequence[Pod], fmt: Format | Printer, now: datetime, *, namespace: str | None = None
) -> str:
    """`pods-api get pods`: every pod, sorted, in one format; with `namespace` (`-n`), only that
    namespace's, and the table without its NAMESPACE column, as kubectl prints them."""
    pods = sorted_pods(p for p in pods if namespace is None or p.namespace == namespace)
    if not isinstance(fmt, str):
        return _templated(fmt, pods, pod_list_object(pods))
    if fmt in ("table", "wide"):
        # The printer reads a few fields of each message: rendering whole pods to JSON dicts
        # first was most of a 1,000-pod table's time.
        objects = [pod_view(p.message) for p in pods]
        return pod_text_table(objects, now, wide=fmt == "wide", with_namespace=namespace is None)
    if fmt == "json":
        return go_json(pod_list_object(pods)) + "\n"
    if fmt == "yaml":
        return go_yaml(pod_list_object(pods))
    return "".join(f"pod/{p.name}\n" for p in pods)


def render_pod(pod: Pod, fmt: Format | Printer, now: datetime) -> str:
    """`pods-api get pod UID`: one pod; the table keeps the NAMESPACE column (a UID does not say it)."""
    if not isinstance(fmt, str):
        return _templated(fmt, [pod], pod_object(pod))
    if fmt in ("table", "wide"):
        return pod_text_table([pod_view(pod.message)], now, wide=fmt == "wide", with_namespace=True)
    if fmt == "json":
        return go_json(pod_object(pod)) + "\n"
    if fmt == "yaml":
        return go_yaml(pod_object(pod))
    return f"pod/{pod.name}\n"


def _templated(printer: Printer, pods: Sequence[Pod], obj: dict[str, Any]) -> str:
    """A jsonpath template runs on the object (the PodList, or the one pod); custom columns
    print a row per pod."""
    from pods_api.client.jsonpath import JSONPathPrinter

    if isinstance(printer, JSONPathPrinter):
        return printer.render(obj)
    return printer.render([pod_object(p) for p in pods])


def _event_json(kind: str, pod: Pod | None) -> str:
    # type first, as kubectl's watch events print it, for `jq .type` and humans reading a pipe.
    head = f'{{"type":"{kind}"'
    return head + ("}" if pod is None else f',"object":{go_json(pod_object(pod), indent=None)}}}') + "\n"


class EventPrinter:
    """`pods-api watch`: one line per event (a YAML document for `-o yaml`), for pipes.

    `json` is one `{"type": ..., "object": ...}` per line (kubectl's `--output-watch-events`
    shape), `name` is `TYPE pod/NAME`, and INITIAL_SYNC_COMPLETE, which carries no pod, is a
    line of its own. `table`/`wide`, for people, lead with an EVENT column and print the snapshot
    (the ADDED events before INITIAL_SYNC_COMPLETE) as one aligned table, as `kubectl get -w`
    prints its list; each later event is a line at the widths so far (grown if it needs more).
    """

    def __init__(self, fmt: Format) -> None:
        self.fmt = fmt
        self._widths: list[int] = []
        self._pending: list[list[str]] | None = [] if fmt in ("table", "wide") else None

    @property
    def buffering(self) -> bool:
        """Whether the table is still collecting the snapshot (see `flush`)."""
        return self._pending is not None

    def render(self, event: WatchEvent, now: datetime) -> str:
        kind = event.type.name
        if self.fmt == "json":
            return _event_json(kind, event.pod)
        if self.fmt == "yaml":
            body: dict[str, Any] = {"type": kind}
            if event.pod is not None:
                body["object"] = pod_object(event.pod)
            return "---\n" + go_yaml(body)
        if self.fmt == "name":
            return kind + ("" if event.pod is None else f" pod/{event.pod.name}") + "\n"
        if event.pod is None:
            return self.flush() if event.type is EventType.INITIAL_SYNC_COMPLETE else ""
        row = pod_row(pod_view(event.pod.message), now)
        cells = [kind, row.namespace, *row.cells(wide=self.fmt == "wide")]
        if self._pending is not None and event.type is EventType.ADDED:
            self._pending.append(cells)
            return ""
        return self.flush() + self._line(cells)

    def flush(self) -> str:
        """The snapshot's table so far (once): at INITIAL_SYNC_COMPLETE, at the first other event,
        or when the caller has waited long enough for a marker an old server never sends."""
        if self._pending is None:
            return ""
        wide = self.fmt == "wide"
        headers = ["EVENT", "NAMESPACE", *(c.name.upper() for c in POD_COLUMNS if wide or c.priority == 0)]
        snapshot = sorted(self._pending, key=lambda cells: (cells[1], cells[2]))  # kubectl's order
        rows, self._pending = [headers, *snapshot], None
        for cells in rows:
            self._grow(cells)  # first, so that every row of the block aligns
        return "".join(self._line(cells) for cells in rows)

    def _grow(self, cells: list[str]) -> None:
        widths = [column_width((c,)) for c in cells[:-1]]  # the last cell unpadded
        self._widths = [max(a, b) for a, b in zip(widths, self._widths or widths, strict=True)]

    def _line(self, cells: list[str]) -> str:
        self._grow(cells)
        return "".join(c.ljust(w) for c, w in zip(cells, self._widths, strict=False)) + cells[-1] + "\n"
