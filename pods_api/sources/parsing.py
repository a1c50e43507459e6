"""Parsing manifests: bytes (of a file, or an HTTP body) to pod objects, with errors that name
where and what in one line.

    parse_documents(data, origin) -> [doc]               JSON or YAML, its non-empty documents
    pod_objects(data, origin, fmt) -> [(label, obj)]     each Pod object and where it sits
    decode_pod(obj, where, origin, warnings) -> pod      a pod object as a PodVersion

Every failure is a ManifestError; the sources keep the file's last good pods when they get one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson
import yaml

from pods_api.core.api.codec import CodecError
from pods_api.core.api.statuserrors import quote
from pods_api.core.store.version import MAX_POD_BYTES, PodVersion
from pods_api.sources import ManifestError, constructor
from pods_api.sources.reading import MAX_MANIFEST_BYTES

_UTF8_BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True, slots=True)
class FileFormat:
    """What one file may hold."""

    list_kinds: frozenset[str]  # list kinds accepted besides a single Pod
    multi_document: bool  # several YAML documents in one file
    # Several YAML documents: only the first counts (the kubelet's utilyaml.ToJSON reads one).
    first_document: bool = False


# What the kubelet reads from its /pods: a PodList (or one Pod).
KUBELET_FORMAT = FileFormat(list_kinds=frozenset({"PodList"}), multi_document=False)
# What the kubelet runs from a manifest file (file.go extractFromFile: tryDecodeSinglePod only,
# so no PodList) and from a manifest URL (http.go: a Pod, else a PodList): the first document.
MANIFEST_FILE_FORMAT = FileFormat(list_kinds=frozenset(), multi_document=False, first_document=True)
MANIFEST_URL_FORMAT = FileFormat(list_kinds=frozenset({"PodList"}), multi_document=False, first_document=True)
# What `kubectl get -o yaml` and hand-written test data look like: also `kind: List` and `---`.
FIXTURE_FORMAT = FileFormat(list_kinds=frozenset({"PodList", "List"}), multi_document=True)


# Values a YAML document may hold once its aliases are expanded. A 10 MiB PodList of real pods
# holds a few hundred thousand; more is an alias bomb or a loop (what Go's YAML decoder refuses
# as "excessive aliasing"), and walking it would take the source's time without bound.
MAX_EXPANDED_VALUES = 1_000_000
# Bytes of strings (keys and values) a document may hold once its aliases are expanded: what a
# file may hold at all. Without aliases no document gets near it; with them, a 1 MB file made a
# 315 MB pod (counting values alone let it through: few values, each a long string).
MAX_EXPANDED_BYTES = MAX_MANIFEST_BYTES
# Without an anchor there is no alias, and without aliases a document holds at most one value per
# byte of text and no more text than the file: within both limits, so a file under
# MAX_EXPANDED_VALUES bytes without `&` is not walked (the walk was 6% of a manifest's decode).
# With aliases, what a document holds beyond its text is what its aliases expand to: only their
# values are walked, against what the limits leave beside the text (the whole document is walked
# only when that conservative sum is over: a manifest's probe shared by two containers is a few
# values, where the whole walk was 5% of its decode).
_ANCHOR = b"&"


def parse_documents(data: bytes, origin: str) -> list[Any]:
    """The non-empty documents of a JSON or YAML file, in order."""
    text = data.removeprefix(_UTF8_BOM)
    stripped = text.lstrip()
    json_error: str | None = None
    if stripped[:1] in (b"{", b"["):
        try:
            return [orjson.loads(stripped)]
        except orjson.JSONDecodeError as exc:
            json_error = f"not valid JSON: {exc}"  # YAML flow style also starts so; try that first
    aliased: list[Any] | None = [] if _ANCHOR in text else None
    try:
        docs = [doc for doc in constructor.load_all(text, aliased) if doc is not None]
    except yaml.YAMLError as exc:
        raise ManifestError(origin, json_error or _yaml_problem(exc)) from None
    except RecursionError:
        raise ManifestError(origin, "not valid YAML: nested too deeply") from None
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        # What PyYAML's constructors raise for a value that does not fit its explicit tag
        # (`!!int yes`, `!!timestamp soon`).
        raise ManifestError(origin, f"not valid YAML: a value does not fit its tag ({exc})") from None
    within = len(text) <= MAX_EXPANDED_VALUES
    if not within or (
        aliased and _over(aliased, MAX_EXPANDED_VALUES - len(text), MAX_EXPANDED_BYTES - len(text))
    ):
        for doc in docs:
            _check_expansion(doc, origin)
    return docs


def _check_expansion(doc: Any, origin: str) -> None:
    """Refuse a document whose aliases expand beyond reason, or that refers to itself: YAML
    aliases share one object, so `[*a, *a, ...]` nested a few levels is small to load but
    enormous (or endless) to walk, and every reader of the pod walks it."""
    problem = _over([doc], MAX_EXPANDED_VALUES, MAX_EXPANDED_BYTES)
    if problem is not None:
        raise ManifestError(origin, problem)


def _over(values: list[Any], max_values: int, max_bytes: int) -> str | None:
    """What is over, walking `values` with their aliases expanded (None: within both limits)."""
    budget, size = max_values, 0
    stack = list(values)
    while stack:
        value = stack.pop()
        budget -= 1
        if budget < 0:
            return f"over {MAX_EXPANDED_VALUES} values once YAML aliases are expanded (or an alias loop)"
        if isinstance(value, dict):
            stack.extend(value.values())
            size += sum(len(key) for key in value if isinstance(key, str))
        elif isinstance(value, list):
            stack.extend(value)
        elif isinstance(value, str):
            size += len(value)
        if size > max_bytes:
            return f"over {MAX_EXPANDED_BYTES} bytes of text once YAML aliases are expanded"
    return None


# libyaml 0.2.5 as PyYAML >= 6.0.4 builds it refuses deep nesting itself, before any value is
# made; older builds leave it to Python's stack (the RecursionError above). One message for both.
_DEPTH_PROBLEM = "maximum nesting depth"


def _yaml_problem(exc: yaml.YAMLError) -> str:
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        mark = exc.problem_mark
        problem = "nested too deeply" if _DEPTH_PROBLEM in (exc.problem or "") else exc.problem
        return f"not valid YAML: {problem} at line {mark.line + 1}, column {mark.column + 1}"
    return "not valid YAML: " + " ".join(str(exc).split())


def pod_objects(data: bytes, origin: str, fmt: FileFormat) -> list[tuple[str, dict[str, Any]]]:
    """Each Pod object in a file, with a label saying where it sits ("" for the only one).

    An empty file is an error, not "no pods": an editor that truncates before it writes must not
    make pods disappear for a moment.
    """
    docs = parse_documents(data, origin)
    if not docs:
        raise ManifestError(origin, "empty file: no Pod in it")
    if len(docs) > 1 and fmt.first_document:
        docs = docs[:1]
    if len(docs) > 1 and not fmt.multi_document:
        raise ManifestError(origin, f"{len(docs)} YAML documents; a manifest holds one Pod or a PodList")
    out: list[tuple[str, dict[str, Any]]] = []
    for i, doc in enumerate(docs):
        where = f"document {i + 1}" if len(docs) > 1 else ""
        out += _pods_of(doc, where, origin, fmt)
    return out


def _pods_of(doc: Any, where: str, origin: str, fmt: FileFormat) -> list[tuple[str, dict[str, Any]]]:
    wanted = " or ".join(["Pod", *sorted(fmt.list_kinds)])
    if not isinstance(doc, dict):
        raise ManifestError(origin, locate(where, f"expected a {wanted} object, got {_type_name(doc)}"))
    kind, api_version = doc.get("kind"), doc.get("apiVersion")
    if not kind:
        raise ManifestError(origin, locate(where, f"kind is missing; expected {wanted}"))
    if kind != "Pod" and kind not in fmt.list_kinds:
        raise ManifestError(origin, locate(where, f"kind {kind!r} is not {wanted}"))
    if api_version != "v1":
        got = "missing" if api_version is None else repr(api_version)
        raise ManifestError(origin, locate(where, f"apiVersion is {got}; a {kind} is apiVersion v1"))
    if kind == "Pod":
        return [(where, doc)]
    items = doc.get("items")
    if items is None:  # `items:` with nothing after it, or `null`, as Go reads it
        items = []
    if not isinstance(items, list):
        raise ManifestError(origin, locate(where, f"items: expected a list, got {_type_name(items)}"))
    return [_list_item(item, _join(where, f"items[{i}]"), origin) for i, item in enumerate(items)]


def _list_item(item: Any, where: str, origin: str) -> tuple[str, dict[str, Any]]:
    if not isinstance(item, dict):
        raise ManifestError(origin, locate(where, f"expected a Pod object, got {_type_name(item)}"))
    # Items of a PodList read from the API carry no kind; a List's items do.
    if item.get("kind", "Pod") != "Pod" or item.get("apiVersion", "v1") != "v1":
        raise ManifestError(origin, locate(where, f"not a v1 Pod (kind {item.get('kind')!r})"))
    return where, item


def decode_pod(obj: dict[str, Any], where: str, origin: str, warnings: list[str]) -> PodVersion:
    """One pod object as a PodVersion; a CodecError becomes a ManifestError naming the file."""
    found: list[str] = []
    try:
        pod = PodVersion.from_json(obj, found)
    except CodecError as exc:
        raise ManifestError(origin, locate(where, str(exc))) from None
    if len(pod.pb) > MAX_POD_BYTES:
        name = quote(f"{pod.namespace}/{pod.name}", 253)
        raise ManifestError(
            origin,
            locate(
                where,
                f"pod {name} is {len(pod.pb)} bytes encoded, over the {MAX_POD_BYTES} byte limit per pod",
            ),
        )
    warnings += [f"{origin}: {locate(where, w)}" for w in found]
    return pod


def locate(where: str, problem: str) -> str:
    """A problem prefixed with where in the file it is (a document, a list item), if anywhere."""
    return f"{where}: {problem}" if where else problem


def _join(where: str, step: str) -> str:
    return f"{where}, {step}" if where else step


def _type_name(value: Any) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number" if isinstance(value, int | float) else type(value).__name__)
