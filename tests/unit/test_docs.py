"""The documentation points at things that exist: every link resolves to a file and a heading in
it, every repository path it names is there, and the README stays a front page."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
from repo import DOCS, ROOT

# The front page: what it is, the quick start, the cookbook, links. Everything else is in docs/.
README_MAX_LINES = 300

_FENCE = re.compile(r"^```.*?^```$", re.S | re.M)
_HEADING = re.compile(r"^#{1,6} (.+)$", re.M)
_LINK = re.compile(r"\]\(([^)\s]+)\)")
# A repository path as the docs write it: `pods_api/core/store/cache.py`, core/api/pb/, the
# top-level links `core/...` and `gateway/...`, tests, benchmarks, manifests and examples.
_PATH = re.compile(
    r"(?<![\w/.\-<])((?:pods_api|core|gateway|tests|bench|deploy|examples|proto|openapi)/[\w./*\-]*[\w*/])"
)
# Named in the docs but made by running something, so absent from a checkout.
GENERATED = {"bench/results.json": "written by python -m bench"}
PERF_NOTES = DOCS / "perf-notes"


def documents() -> list[Path]:
    return [ROOT / "README.md", ROOT / "BENCHMARKS.md", *sorted(DOCS.rglob("*.md"))]


def current() -> list[Path]:
    """The documents that describe the code as it is: not the dated performance notes, which
    record the modules and commits of their day."""
    return [p for p in documents() if PERF_NOTES not in p.parents]


def _ids(paths: list[Path]) -> list[str]:
    return [str(p.relative_to(ROOT)) for p in paths]


def prose(text: str) -> str:
    """The text outside code blocks, where headings and links are."""
    return _FENCE.sub("", text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but - and _ dropped, spaces to -."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    seen: Counter[str] = Counter()
    out = set()
    for heading in _HEADING.findall(prose(text)):
        base = slug(heading)
        out.add(base if seen[base] == 0 else f"{base}-{seen[base]}")  # GitHub numbers repeats
        seen[base] += 1
    return out


def test_the_readme_is_a_front_page() -> None:
    lines = (ROOT / "README.md").read_text().count("\n")
    assert lines < README_MAX_LINES, f"README.md has {lines} lines: move the detail into docs/"


@pytest.mark.parametrize("doc", documents(), ids=_ids(documents()))
def test_every_link_resolves(doc: Path) -> None:
    broken = []
    for target in _LINK.findall(prose(doc.read_text())):
        if re.match(r"[a-z]+:", target):  # https:, mailto:: not ours to check here
            continue
        file, _, anchor = target.partition("#")
        path = (doc.parent / file).resolve() if file else doc
        if not path.exists():
            broken.append(f"{target}: no file {path.relative_to(ROOT)}")
        elif anchor and path.suffix == ".md" and anchor not in anchors(path.read_text()):
            broken.append(f"{target}: no heading #{anchor} in {path.relative_to(ROOT)}")
    assert broken == [], f"{doc.relative_to(ROOT)}: " + "; ".join(broken)


@pytest.mark.parametrize("doc", current(), ids=_ids(current()))
def test_every_named_path_exists(doc: Path) -> None:
    named = set(_PATH.findall(doc.read_text())) - set(GENERATED)
    missing = sorted(p for p in named if not list(ROOT.glob(p.rstrip("/"))))
    assert missing == [], f"{doc.relative_to(ROOT)} names paths that do not exist: {missing}"


@pytest.mark.parametrize("doc", current(), ids=_ids(current()))
def test_every_named_module_exists(doc: Path) -> None:
    """A module named by its file alone (`kubelet_socket.py`, `cri/status.py`) is somewhere."""
    named = set(re.findall(r"`((?:\w+/)*\w+\.py)`", doc.read_text()))
    kept = {str(p.relative_to(ROOT)) for p in ROOT.glob("**/*.py") if ".venv" not in p.parts}
    missing = sorted(n for n in named if not any(k == n or k.endswith("/" + n) for k in kept))
    assert missing == [], f"{doc.relative_to(ROOT)} names modules that do not exist: {missing}"


@pytest.mark.parametrize("doc", documents(), ids=_ids(documents()))
def test_the_docs_speak_of_the_code_not_of_tickets(doc: Path) -> None:
    """Documentation says what is and why; which ticket asked for it is the history's job."""
    named = re.findall(r"\bissue \d+", doc.read_text(), re.I)
    assert named == [], f"{doc.relative_to(ROOT)} names {named}"


def test_ci_runs_the_readmes_test_command() -> None:
    """`.ci/run` ends with the README's test command exactly as a newcomer types it, so that CI
    sees what a fresh clone sees (a variant such as `python -m pytest` puts the checkout on the
    path and can hide an import that only works from there)."""
    readme = (ROOT / "README.md").read_text()
    (line,) = [line for line in readme.splitlines() if line.rstrip().endswith("# test")]
    command = line.rsplit("#", 1)[0].strip()
    assert command == "pip install -e '.[test]' && pytest"
    steps = [s.strip() for s in (ROOT / ".ci" / "run").read_text().splitlines()]
    steps = [s for s in steps if s and not s.startswith("#")]
    assert steps[-1] == command, f".ci/run ends with {steps[-1]!r}, not the README's {command!r}"


def test_the_readme_says_what_ci_installs_and_runs() -> None:
    """The README's account of `.ci/run` names every package it apt-installs and its benchmark
    step, so that "CI runs exactly that" stays true as steps are added."""
    readme = (ROOT / "README.md").read_text()
    said = readme.split("## Development", 1)[1]
    ci = (ROOT / ".ci" / "run").read_text()
    packages = set()
    for words in re.findall(r"for tool in ([\w -]+);", ci) + re.findall(r"install -y -qq ([\w -]+)", ci):
        packages |= set(words.split())
    packages |= set(re.findall(r"missing\+=\(([\w-]+)\)", ci))
    assert {"curl", "jq", "containerd", "nodejs", "golang-go"} <= packages, packages
    missing = sorted(p for p in packages if f"`{p}`" not in said)
    assert missing == [], f"README.md's Development does not name what .ci/run installs: {missing}"
    (bench,) = re.findall(r"^python -m bench .*$", ci, re.M)
    assert f"`{bench}`" in said
