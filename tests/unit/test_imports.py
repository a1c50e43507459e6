"""The import graph of the pods_api package: no cycles (every import statement counts), and the
gateway without gRPC's server."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from repo import ROOT

PACKAGES = {"pods_api": ROOT / "pods_api"}


def _modules() -> dict[str, Path]:
    """Every module of the package by dotted name (generated protobuf modules included)."""
    found: dict[str, Path] = {}
    for package, folder in PACKAGES.items():
        for path in folder.rglob("*.py"):
            rel = path.relative_to(folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            found[".".join([package, *parts])] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package's modules this one names in any import statement: at the top, inside a
    function (a lazy import hides a cycle, it does not remove it), under `if TYPE_CHECKING:`
    (the type checker and every tool that reads imports follow it) and under
    `if __name__ == "__main__":` (the module's file names it, whatever runs)."""
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text(), str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            # `from package import module` imports that module; `from module import name` the module.
            targets = [
                f"{module}.{a.name}" if f"{module}.{a.name}" in modules else module for a in node.names
            ]
        else:
            continue
        found.update(t for t in targets if t in modules and t != name)
    return found


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle, as the modules along it, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return None


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def test_the_walker_sees_lazy_imports_and_finds_cycles() -> None:
    graph = import_graph()
    # pods_api/serve/cli.py imports the server inside main(): the walk must see it.
    assert "pods_api.serve.process" in graph["pods_api.serve.cli"]
    assert "pods_api.core.assembly" in graph["pods_api.gateway.pods"]
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_the_walker_counts_every_kind_of_import(tmp_path: Path) -> None:
    code = tmp_path / "m.py"
    code.write_text(
        "from typing import TYPE_CHECKING\n"
        "import p.a\n"
        "if TYPE_CHECKING:\n    from p import b\n"
        "def f() -> None:\n    from . import c\n"
        'if __name__ == "__main__":\n    from p.d import main\n'
    )
    modules = {name: tmp_path / "x.py" for name in ("p.a", "p.b", "p.c", "p.d", "p.e")} | {"p.m": code}
    assert _imports("p.m", code, modules) == {"p.a", "p.b", "p.c", "p.d"}


def test_the_package_imports_have_no_cycle() -> None:
    cycle = _cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or ())


def test_the_gateway_imports_no_grpc_server_and_no_composition_root() -> None:
    """The gateway runs on a Core (core/assembly.py); it does not drag in the gRPC surface."""
    probe = "import sys, pods_api.gateway.app; print('\\n'.join(sorted(sys.modules)))"
    loaded = set(
        subprocess.run(
            [sys.executable, "-c", probe], check=True, capture_output=True, text=True
        ).stdout.split()
    )
    assert "pods_api.gateway.app" in loaded
    assert not loaded & {
        "pods_api.serve.process",
        "pods_api.core.grpc.server",
        "grpc._server",
        "grpc.aio._server",
    }
    assert not [m for m in loaded if m.startswith("pods_api.core.grpc")]


def test_only_serve_puts_the_surfaces_and_the_sources_together() -> None:
    """pods_api/serve/ is the composition root: no other module is in, or imports from, more than
    one of the gRPC surface, the gateway and the sources, so each can be read and tested alone."""
    parts = ("pods_api.core.grpc", "pods_api.gateway", "pods_api.sources")

    def part(module: str) -> str | None:
        return next((p for p in parts if module == p or module.startswith(p + ".")), None)

    mixed = {}
    for module, imported in import_graph().items():
        if module.startswith("pods_api.serve"):
            continue
        joined = {part(m) for m in {module, *imported}} - {None}
        if len(joined) > 1:
            mixed[module] = sorted(str(p) for p in joined)
    assert mixed == {}, f"only pods_api.serve may join these: {mixed}"


# The design card's top-level names: links into the package, for readers. With pytest's
# `pythonpath = ["."]` an import by such a spelling would load a second copy of every module it
# reaches (two caches, two metrics registries, isinstance failing across them).
LINKS = ("core", "gateway")


def _spellings(path: Path) -> list[str]:
    """The imports in one file that spell a module by a top-level link, with their lines."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""]
        else:
            continue
        found += [f"{path.relative_to(ROOT)}:{node.lineno} {n}" for n in names if n.split(".")[0] in LINKS]
    return found


def test_the_top_level_links_point_into_the_package() -> None:
    for link in LINKS:
        assert (ROOT / link).is_symlink() and (ROOT / link).resolve() == ROOT / "pods_api" / link


def test_nothing_imports_the_package_by_a_link_s_spelling() -> None:
    files = [p for part in ("pods_api", "tests", "bench", "examples") for p in (ROOT / part).rglob("*.py")]
    assert len(files) > 100
    spelled = [s for path in files for s in _spellings(path)]
    assert not spelled, "import pods_api.* instead of a link's spelling:\n" + "\n".join(spelled)


def _named_imports(path: Path) -> set[str]:
    """The absolute module names one file's import statements name (other libraries' too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module)
    return found


def _private(part: str) -> bool:
    return part.startswith("_") and not part.startswith("__")  # (`__future__` is no one's internals)


# The libraries whose internals the gateway's HTTP server builds on (gateway/server/).
SERVER_LIBRARIES = ("uvicorn", "h11")


def test_library_internals_are_reached_from_one_room() -> None:
    """Only gateway/server/ imports uvicorn and h11, so that an upgrade of them is a review of that
    package alone; and no module imports another library's private module (a `_name` part), but
    the generated protobuf modules, as grpcio's generator writes them."""
    reaching, private = [], []
    for name, path in _modules().items():
        generated = name.startswith(("pods_api.core.api.pb.", "pods_api.sources.cri.pb."))
        for module in _named_imports(path):
            if module.split(".")[0] == "pods_api":
                continue
            if module.split(".")[0] in SERVER_LIBRARIES and not name.startswith("pods_api.gateway.server."):
                reaching.append(f"{name} imports {module}")
            if not generated and any(_private(part) for part in module.split(".")):
                private.append(f"{name} imports {module}")
    assert reaching == [], "outside gateway/server/: " + "; ".join(reaching)
    assert private == [], "private modules: " + "; ".join(private)


def _generated(path: Path) -> bool:
    return path.parent.name == "pb"


def test_no_module_name_repeats() -> None:
    """A module's name says where it lives: two `errors.py` make every traceback, grep and
    import line ask which one."""
    seen: dict[str, list[str]] = {}
    for name, path in _modules().items():
        if path.name != "__init__.py" and not _generated(path):
            seen.setdefault(path.name, []).append(name)
    assert {n: where for n, where in seen.items() if len(where) > 1} == {}


def test_no_class_name_repeats() -> None:
    """Nor does a class's (the generated protobuf modules aside: protoc names their classes)."""
    seen: dict[str, list[str]] = {}
    for name, path in _modules().items():
        if _generated(path):
            continue
        for node in ast.parse(path.read_text(), str(path)).body:
            if isinstance(node, ast.ClassDef):
                seen.setdefault(node.name, []).append(name)
    assert {n: where for n, where in seen.items() if len(where) > 1} == {}
