"""Reading manifests: bytes from a file (or an HTTP body) to pod objects, with errors that name the
file and the problem in one line.

    read_manifest(path, within=dir) -> bytes | None     None: the file is gone
    pod_objects(data, origin, fmt) -> [(label, obj)]     each Pod object and where it sits
    unique_pods(groups, by_name=...) -> pods, problems   drop a second claim to a uid (or name)
    Reporter                                             logs and counts each problem once

Every failure is a ManifestError; the sources keep the file's last good pods when they get one.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import yaml

from pods_api.core.api.codec import CodecError
from pods_api.core.api.status import quote
from pods_api.core.store.pod import MAX_POD_BYTES, PodVersion
from pods_api.sources import ErrorCounter, constructor

log = logging.getLogger(__name__)

# The kubelet's maxConfigLength: a pod manifest is kilobytes, so a file this big is a mistake
# (a log or an image dropped in the directory), not a pod.
MAX_MANIFEST_BYTES = 10 * 1024 * 1024
_READ_CHUNK = 1 << 16
# Reads of a file that is swapped while being opened, before giving up: one swap is an editor's
# save; one after another means something rewrites it constantly.
_READ_ATTEMPTS = 3

_UTF8_BOM = b"\xef\xbb\xbf"


class ManifestError(Exception):
    """An input that gives no pods. `str()` is one line: where, then what is wrong."""

    def __init__(self, origin: str, problem: str) -> None:
        super().__init__(f"{origin}: {problem}")
        self.origin = origin
        self.problem = problem


@dataclass(frozen=True, slots=True)
class Format:
    """What one file may hold."""

    list_kinds: frozenset[str]  # list kinds accepted besides a single Pod
    multi_document: bool  # several YAML documents in one file
    # Several YAML documents: only the first counts (the kubelet's utilyaml.ToJSON reads one).
    first_document: bool = False


# What the kubelet reads from its /pods: a PodList (or one Pod).
KUBELET_FORMAT = Format(list_kinds=frozenset({"PodList"}), multi_document=False)
# What the kubelet runs from a manifest file (file.go extractFromFile: tryDecodeSinglePod only,
# so no PodList) and from a manifest URL (http.go: a Pod, else a PodList): the first document.
MANIFEST_FILE_FORMAT = Format(list_kinds=frozenset(), multi_document=False, first_document=True)
MANIFEST_URL_FORMAT = Format(list_kinds=frozenset({"PodList"}), multi_document=False, first_document=True)
# What `kubectl get -o yaml` and hand-written test data look like: also `kind: List` and `---`.
FIXTURE_FORMAT = Format(list_kinds=frozenset({"PodList", "List"}), multi_document=True)


# ---------------------------------------------------------------------------------------------
# files


def read_manifest(path: Path, *, within: str | None) -> bytes | None:
    """The bytes of one manifest file; None when it no longer exists (removed since the listing).

    `within` is the real path of the directory the file was listed in: a symlink resolving
    outside it is refused. Special files (FIFOs, devices, directories) are refused without
    blocking, and so is anything over MAX_MANIFEST_BYTES.
    """
    origin = str(path)
    for _ in range(_READ_ATTEMPTS):
        if within is not None:
            _check_inside(path, within, origin)  # before opening: never open what is outside
        try:
            # O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever.
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
        except FileNotFoundError:
            if os.path.lexists(path):
                raise ManifestError(origin, "dangling symlink") from None
            return None
        except OSError as exc:
            raise ManifestError(origin, describe_os_error(exc)) from None
        try:
            # Again after opening, on what was opened: the symlink may have been swapped between
            # the check and the open, and a file from outside must never become "last good".
            if within is None or _check_inside(path, within, origin, opened=fd):
                return _read_regular(fd, origin)
        finally:
            os.close(fd)
    raise ManifestError(origin, "kept changing while being read")


def _check_inside(path: Path, within: str, origin: str, opened: int | None = None) -> bool:
    """Raise if `path` resolves outside `within`; with `opened`, also whether that fd is still
    the file `path` resolves to (False: it changed in between; read again)."""
    target = os.path.realpath(path)
    if os.path.commonpath([within, target]) != within:
        raise ManifestError(origin, f"symlink points out of the directory (to {target}); not read")
    if opened is None:
        return True
    try:
        now = os.stat(target)
    except OSError:
        return False
    then = os.fstat(opened)
    return (now.st_dev, now.st_ino) == (then.st_dev, then.st_ino)


def _read_regular(fd: int, origin: str) -> bytes:
    info = os.fstat(fd)
    if stat.S_ISDIR(info.st_mode):
        raise ManifestError(origin, "is a directory; manifest directories are not read recursively")
    if not stat.S_ISREG(info.st_mode):
        raise ManifestError(origin, "not a regular file (a FIFO, socket or device?)")
    if info.st_size > MAX_MANIFEST_BYTES:
        raise ManifestError(origin, f"{info.st_size} bytes is over the {MAX_MANIFEST_BYTES} byte limit")
    chunks: list[bytes] = []
    size = 0
    try:
        while chunk := os.read(fd, _READ_CHUNK):
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_MANIFEST_BYTES:  # it grew after the fstat
                raise ManifestError(origin, f"over the {MAX_MANIFEST_BYTES} byte limit")
    except OSError as exc:
        raise ManifestError(origin, describe_os_error(exc)) from None
    return b"".join(chunks)


def describe_os_error(exc: OSError) -> str:
    """An OSError as a short reason, without the path (the caller names the file)."""
    if exc.errno == errno.EACCES:
        return "permission denied"
    if exc.errno == errno.ELOOP:
        return "too many levels of symbolic links (a symlink loop?)"
    return exc.strerror or str(exc)


# ---------------------------------------------------------------------------------------------
# documents


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
    try:
        docs = [doc for doc in constructor.load_all(text) if doc is not None]
    except yaml.YAMLError as exc:
        raise ManifestError(origin, json_error or _yaml_problem(exc)) from None
    except RecursionError:
        raise ManifestError(origin, "not valid YAML: nested too deeply") from None
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        # What PyYAML's constructors raise for a value that does not fit its explicit tag
        # (`!!int yes`, `!!timestamp soon`).
        raise ManifestError(origin, f"not valid YAML: a value does not fit its tag ({exc})") from None
    if _ANCHOR in text or len(text) > MAX_EXPANDED_VALUES:
        for doc in docs:
            _check_expansion(doc, origin)
    return docs


def _check_expansion(doc: Any, origin: str) -> None:
    """Refuse a document whose aliases expand beyond reason, or that refers to itself: YAML
    aliases share one object, so `[*a, *a, ...]` nested a few levels is small to load but
    enormous (or endless) to walk, and every reader of the pod walks it."""
    budget, size = MAX_EXPANDED_VALUES, 0
    stack = [doc]
    while stack:
        value = stack.pop()
        budget -= 1
        if budget < 0:
            raise ManifestError(
                origin, f"over {MAX_EXPANDED_VALUES} values once YAML aliases are expanded (or an alias loop)"
            )
        if isinstance(value, dict):
            stack.extend(value.values())
            size += sum(len(key) for key in value if isinstance(key, str))
        elif isinstance(value, list):
            stack.extend(value)
        elif isinstance(value, str):
            size += len(value)
        if size > MAX_EXPANDED_BYTES:
            raise ManifestError(
                origin, f"over {MAX_EXPANDED_BYTES} bytes of text once YAML aliases are expanded"
            )


# libyaml 0.2.5 as PyYAML >= 6.0.4 builds it refuses deep nesting itself, before any value is
# made; older builds leave it to Python's stack (the RecursionError above). One message for both.
_DEPTH_PROBLEM = "maximum nesting depth"


def _yaml_problem(exc: yaml.YAMLError) -> str:
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        mark = exc.problem_mark
        problem = "nested too deeply" if _DEPTH_PROBLEM in (exc.problem or "") else exc.problem
        return f"not valid YAML: {problem} at line {mark.line + 1}, column {mark.column + 1}"
    return "not valid YAML: " + " ".join(str(exc).split())


def pod_objects(data: bytes, origin: str, fmt: Format) -> list[tuple[str, dict[str, Any]]]:
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


def _pods_of(doc: Any, where: str, origin: str, fmt: Format) -> list[tuple[str, dict[str, Any]]]:
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


# ---------------------------------------------------------------------------------------------
# combining files, reporting


def unique_pods(
    groups: Iterable[tuple[str, list[PodVersion]]], *, by_name: bool, last_wins: bool = False
) -> tuple[list[PodVersion], list[str]]:
    """All pods of (origin, pods) groups, in order, keeping the first claim to each uid (and, when
    `by_name`, to each namespace/name, as the kubelet does for static pods), or with `last_wins`
    the last (the kubelet's file source: a store keyed by namespace/name, filled in file name
    order); problems name both."""
    pods: list[PodVersion] = []
    problems: list[str] = []
    uids: dict[str, str] = {}
    names: dict[tuple[str, str], str] = {}
    ordered = list(groups)
    if last_wins:
        ordered = [(origin, group[::-1]) for origin, group in reversed(ordered)]
    for origin, group in ordered:
        for pod in group:
            key = (pod.namespace, pod.name)
            first = uids.get(pod.uid) or (names.get(key) if by_name else None)
            if first is not None:
                what = f"uid {pod.uid}" if pod.uid in uids else f"name {pod.namespace}/{pod.name}"
                problems.append(
                    f"{origin}: pod {pod.namespace}/{pod.name} ignored: {what} is already served from {first}"
                )
                continue
            uids[pod.uid] = names[key] = origin
            pods.append(pod)
    return (pods[::-1] if last_wins else pods), problems


class Reporter:
    """Logs each distinct problem once while it lasts (not on every resync) and counts it once.

    A source hands over every problem it currently sees with `report(errors, warnings)`; the
    ones it did not report last time are logged and, for errors, passed to `on_error`.
    """

    def __init__(self, source: str, on_error: ErrorCounter | None) -> None:
        self._source = source
        self._on_error = on_error
        self._errors: set[str] = set()
        self._warnings: set[str] = set()

    def report(self, errors: Iterable[str], warnings: Iterable[str] = ()) -> None:
        errors, warnings = set(errors), set(warnings)
        for message in sorted(errors - self._errors):
            log.error("pod source %s: %s", self._source, message)
            self._count(message)
        for message in sorted(warnings - self._warnings):
            log.warning("pod source %s: %s", self._source, message)
        for message in sorted(self._errors - errors):
            log.info("pod source %s: resolved: %s", self._source, message)
        self._errors, self._warnings = errors, warnings

    def attempt_failed(self, message: str) -> None:
        """A fetch that failed: every attempt counts, but an unchanged reason is logged once."""
        if message in self._errors:
            self._count(message)
        self.report([message], self._warnings)

    def _count(self, message: str) -> None:
        if self._on_error is not None:
            self._on_error(self._source, message)
