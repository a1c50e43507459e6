"""The Dockerfile built for real (tests/support/image.py: mmdebstrap's Debian base, buildah, an
OCI archive), checked for what a user of the image depends on: the name containerd gives it, the
entrypoint and command, root, no CA bundle left from the build's secret, bytecode for every
module, and the image run as the DaemonSet runs it (runc: read-only root, every capability
dropped, the standalone overlay's arguments and probes). Where the image cannot be built here
(no root, mmdebstrap or buildah) each test skips saying why."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import image
import pytest
from daemon import Unavailable, log_tail, spawn, terminate
from docblocks import run_by
from kustomize import container, environment, expanded_args
from repo import EXAMPLES, ROOT

import pods_api

# What the Dockerfile's CMD says, as written (the one exec-form CMD line).
CMD: list[str] = json.loads(re.findall(r"^CMD (\[.*\])$", (ROOT / "Dockerfile").read_text(), re.M)[-1])
# The image's one venv, on PATH for ENTRYPOINT and the probes' `pods-api check`.
VENV = "opt/pods-api"
# pods-api in the container: starting Python and grpcio, then syncing two static pods, is a
# second or two; a loaded machine stretches it.
TIMEOUT = 60.0
# The standalone overlay's volumes, by name: what the test mounts in their place.
OVERLAY = "standalone"


@pytest.fixture(scope="module")
def built() -> image.Built:
    try:
        return image.build()
    except Unavailable as exc:
        pytest.skip(str(exc))


def test_image_archive_is_named_as_a_pod_asks_for_it(built: image.Built) -> None:
    """`image: pods-api:<version>` in a pod is docker.io/library/pods-api:<version> to CRI: the
    name containerd must hold after `ctr -n k8s.io images import`. A second tag is the same image
    (a DaemonSet rolled to it runs the same bytes)."""
    name, found, config = image.manifest(built.archive)
    assert name == f"docker.io/library/pods-api:{pods_api.__version__}"
    assert built.version == pods_api.__version__
    assert found["mediaType"] == "application/vnd.oci.image.manifest.v1+json"
    assert (config["os"], config["architecture"]) == ("linux", "amd64")

    rolled = image.archive("rolled")
    other, other_manifest, _ = image.manifest(rolled)
    assert other == "docker.io/library/pods-api:rolled"
    assert other_manifest == found
    assert image.archive("rolled") == rolled  # made once


def test_image_docs_command_prints_the_archive(built: image.Built) -> None:
    """docs/deploying.md's command, as written, from the checkout: the archive's path, at once
    (the build above is cached)."""
    block = run_by("deploying.md", "test_image_docs_command_prints_the_archive")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    done = subprocess.run(
        ["bash", "-e", "-c", block], cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(built.archive)]
    assert "MB uncompressed" in done.stderr  # the benchmark's line


def test_image_config_runs_the_dockerfiles_command_as_root(built: image.Built) -> None:
    _, _, config = image.manifest(built.archive)
    run: dict[str, Any] = config["config"]
    assert run["Entrypoint"] == ["pods-api"]
    assert run.get("Cmd") == CMD and CMD[0] == "serve"
    assert run.get("User", "") in ("", "0", "root", "0:0")
    env = dict(item.split("=", 1) for item in run["Env"])
    assert env["PATH"].split(":")[0] == f"/{VENV}/bin"


def test_image_layers_hold_no_ca_bundle(built: image.Built) -> None:
    """The build's CA secret is mounted for one RUN: no layer holds it, at its mount path or
    anywhere by its bytes. The base layer is mmdebstrap's, made before any secret (its own
    Debian bundle may equal the host's where no proxy adds a CA): only the layers the Dockerfile
    made are searched by content."""
    bundle = image.ca_bundle()
    if bundle is None:
        pytest.skip(f"no CA bundle on this machine ({', '.join(image.CA_BUNDLES)}): none was passed")
    secret = hashlib.sha256(bundle.read_bytes()).hexdigest()
    _, found, _ = image.manifest(built.archive)
    assert len(found["layers"]) >= 2, "the base and the venv copied from the build stage"
    for number, files in enumerate(image.layers(built.archive)):  # each open only in its turn
        names = files.getnames()
        assert not [n for n in names if n.lstrip("./").startswith("run/secrets")], number
        if number == 0:
            continue
        for member in files.getmembers():
            if member.isfile() and member.size == bundle.stat().st_size:
                data = files.extractfile(member)
                assert data is not None
                assert hashlib.sha256(data.read()).hexdigest() != secret, f"layer {number}: {member.name}"


def test_image_has_bytecode_for_every_module(built: image.Built) -> None:
    """The DaemonSet's root filesystem is read-only: every module of the venv was compiled at
    build time, or Python would compile it again on every start (and fail to write it)."""
    files = {n.lstrip("./") for layer in image.layers(built.archive) for n in layer.getnames()}
    sources = sorted(n for n in files if n.startswith(f"{VENV}/lib/") and n.endswith(".py"))
    assert len(sources) > 1000  # the project and its dependencies
    missing = []
    for source in sources:
        folder, _, module = source.rpartition("/")
        if f"{folder}/__pycache__/{module[:-3]}.cpython-311.pyc" not in files:
            missing.append(source)
    assert missing == [], f"{len(missing)} modules without bytecode: {missing[:10]}"
    assert not [n for n in files if n.startswith(f"{VENV}/bin/pip")], "pip is left in the image"


def test_image_runs_as_the_daemonset_runs_it(built: image.Built, tmp_path: Path) -> None:
    """runc on the unpacked image: root with every capability dropped, no new privileges, a
    read-only root filesystem, the standalone overlay's arguments and environment and its two
    volumes (the socket directory, the static pod manifests). It serves the manifests' pods, its
    probes pass as the kubelet execs them, nothing can be written outside the socket directory,
    and SIGTERM stops it cleanly."""
    runc = shutil.which("runc")
    if runc is None:
        pytest.skip("runc is not installed (apt-get install runc; .ci/run does)")
    spec = container(OVERLAY)
    _, _, config = image.manifest(built.archive)
    bundle, sockets, state = tmp_path / "bundle", tmp_path / "sockets", tmp_path / "runc"
    sockets.mkdir()
    try:
        image.unpack(built.archive, bundle / "rootfs")
        (bundle / "config.json").write_text(json.dumps(_runtime_spec(runc, bundle, spec, config, sockets)))
        name = f"pods-api-image-{tmp_path.name}"[:64]
        log = tmp_path / "container.log"
        proc = spawn([runc, "--root", str(state), "run", "--bundle", str(bundle), name], log)
        try:

            def inside(*command: str) -> subprocess.CompletedProcess[str]:
                return subprocess.run(
                    [runc, "--root", str(state), "exec", name, *command],
                    capture_output=True,
                    text=True,
                    timeout=TIMEOUT,
                    check=False,
                )

            startup = spec["startupProbe"]["exec"]["command"]
            deadline = time.monotonic() + TIMEOUT
            while inside(*startup).returncode != 0:
                assert proc.poll() is None, f"pods-api exited with {proc.returncode}: {log_tail(log, 20)}"
                assert time.monotonic() < deadline, f"not ready in {TIMEOUT} s: {log_tail(log, 20)}"
                time.sleep(0.5)
            for probe in ("readinessProbe", "livenessProbe"):
                done = inside(*spec[probe]["exec"]["command"])
                assert done.returncode == 0, (probe, done.stdout, done.stderr)

            assert inside("pods-api", "--version").stdout.strip() == f"pods-api {pods_api.__version__}"
            listed = inside("pods-api", "get", "pods", "-o", "name")
            assert listed.returncode == 0, listed.stderr
            expected = {f"pod/{p.stem}-node-1" for p in (EXAMPLES / "manifests").glob("*.yaml")}
            assert set(listed.stdout.split()) == expected

            refused = inside("sh", "-c", "touch /opt/pods-api/x || touch /tmp/x")
            assert refused.returncode != 0 and "Read-only file system" in refused.stderr
            dropped = inside("sh", "-c", "grep ^CapEff /proc/self/status")
            assert dropped.stdout.split() == ["CapEff:", "0000000000000000"]
            assert (sockets / "pods-api.sock").exists()  # where the host's kubelet-side dir is

            proc.terminate()  # runc passes it to the container's pods-api
            assert proc.wait(TIMEOUT) == 0, log_tail(log, 20)
            assert "Traceback" not in log.read_text(), log_tail(log, 20)
        finally:
            terminate(proc, TIMEOUT)
            subprocess.run([runc, "--root", str(state), "delete", "--force", name], capture_output=True)
    finally:
        shutil.rmtree(bundle, ignore_errors=True)  # ~220 MB, not left to pytest's kept temp dirs


def _runtime_spec(
    runc: str, bundle: Path, spec: dict[str, Any], config: dict[str, Any], sockets: Path
) -> dict[str, Any]:
    """runc's default spec, made what the kubelet would make of the DaemonSet's container."""
    subprocess.run([runc, "spec", "--bundle", str(bundle)], check=True, capture_output=True)
    runtime: dict[str, Any] = json.loads((bundle / "config.json").read_text())
    security = spec["securityContext"]
    assert security["capabilities"] == {"drop": ["ALL"]} and security["readOnlyRootFilesystem"]
    assert security["runAsUser"] == 0 and security["allowPrivilegeEscalation"] is False
    env = dict(item.split("=", 1) for item in config["config"]["Env"]) | environment(spec)
    runtime["process"] |= {
        "terminal": False,
        "args": [*config["config"]["Entrypoint"], *expanded_args(spec)],
        "env": [f"{k}={v}" for k, v in env.items()],
        "cwd": config["config"].get("WorkingDir") or "/",
        "user": {"uid": 0, "gid": 0},
        "capabilities": {kind: [] for kind in runtime["process"]["capabilities"]},
        "noNewPrivileges": True,
    }
    runtime["root"] = {"path": "rootfs", "readonly": True}
    hosts = {"sockets": sockets, "manifests": EXAMPLES / "manifests"}
    mounts = {m["name"]: m for m in spec["volumeMounts"]}
    assert set(mounts) == set(hosts), f"the {OVERLAY} overlay's volumes changed: {sorted(mounts)}"
    for volume, host in hosts.items():
        mode = "ro" if mounts[volume].get("readOnly") else "rw"
        runtime["mounts"].append(
            {
                "destination": mounts[volume]["mountPath"],
                "type": "bind",
                "source": str(host),
                "options": ["rbind", mode],
            }
        )
    return runtime
