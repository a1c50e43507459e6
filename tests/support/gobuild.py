"""Build the Go programs under tests/go/ (never installed with the package) against upstream's own
modules (k8s.io/kubelet, k8s.io/api, k8s.io/client-go), so that a wire claim is checked by the
code real clients and servers are built from, not by our generated stubs.

`go_build` compiles one main package once per test session and returns the binary. Without `go`
the tests that need it skip, saying so; with `go`, a build that fails is a test failure. Modules
come from the Go module proxy into the user's module cache (GOMODCACHE), so a second run builds
offline from it; go.mod and go.sum pin every version.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from repo import ROOT

GO_ROOT = ROOT / "tests" / "go"
# A cold build downloads and compiles client-go and its dependencies: minutes on 2 cores.
BUILD_TIMEOUT = 900.0


def find_go() -> str | None:
    return shutil.which("go") or next((p for p in ("/usr/local/go/bin/go",) if os.access(p, os.X_OK)), None)


def go() -> str:
    found = find_go()
    if found is None:
        pytest.skip("go is not installed (.ci/run installs it): the upstream Go clients cannot be built")
    return found


def build(module: str, package: str, out: Path) -> Path:
    """`go build` tests/go/<module>/<package> into out; the binary's path."""
    binary = out / f"{module}-{package.strip('./').replace('/', '-') or 'main'}"
    env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-mod=readonly"}
    done = subprocess.run(
        [go(), "build", "-o", str(binary), package],
        cwd=GO_ROOT / module,
        env=env,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT,
    )
    if done.returncode != 0:
        raise AssertionError(f"go build {module}/{package} failed:\n{done.stdout}{done.stderr}")
    return binary


@pytest.fixture(scope="session")
def go_build(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str, str], Path]:
    """go_build("kubelet", "./cmd/conformance") -> the built binary, built once per session."""
    out = tmp_path_factory.mktemp("go-bin")
    built: dict[tuple[str, str], Path] = {}

    def get(module: str, package: str = ".") -> Path:
        if (module, package) not in built:
            built[(module, package)] = build(module, package, out)
        return built[(module, package)]

    return get
