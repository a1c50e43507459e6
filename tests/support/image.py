"""The node agent image, built from the repository's Dockerfile for real, with no registry: a
Debian bookworm root made by mmdebstrap is the Dockerfile's BASE (what Docker users pull as
python:3.11-slim), buildah builds the Dockerfile FROM it, and the result is written as OCI
archives that containerd imports (`ctr -n k8s.io images import FILE`) as
docker.io/library/pods-api:<tag>, the name CRI gives a pod's `image: pods-api:<tag>`.

What it takes from the machine, and gives back:
- Root, mmdebstrap and buildah (Debian's packages); without one of them the tests skip saying why
  (Unavailable). No daemon is started: buildah runs each build step in runc and is done.
- The network: Debian's mirror (the one apt uses) for the base, PyPI for pip inside the build.
  Behind a TLS-intercepting proxy pip needs its CA: the host's bundle (CA_BUNDLES) is passed as
  the Dockerfile's documented `ca-bundle` build secret, which is mounted for one RUN and is in no
  layer (tests/e2e/test_image_build.py checks every layer's files).
- Everything is written under one cache directory kept between runs ($XDG_CACHE_HOME or
  ~/.cache, then pods-api-tests/image/): the base's tarball, buildah's own storage (its --root and
  --runroot, vfs driver; not /var/lib/containers) and the archives. Removing that directory
  gives everything back.

The base is cached by mmdebstrap's arguments, the image by a hash of every file that goes into it
(Dockerfile, .dockerignore, pyproject.toml, README.md, pods_api/'s sources) and the base's key: a
second call reads a file and is done, and a concurrent caller waits for the one building (a
flock). A build that fails is an AssertionError with the tail of the builder's output.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from daemon import Unavailable, flock
from repo import ROOT

# The name containerd must hold for a pod's `image: pods-api:<tag>`: CRI normalizes a bare
# name to Docker Hub's library, and looks that up in its image store.
NAME = "docker.io/library/pods-api"
# What goes into the image, as the Dockerfile COPYs it (and .dockerignore, which decides what
# of it a builder sees): the build key hashes these, and the build's context holds only them.
INPUTS = ("Dockerfile", ".dockerignore", "pyproject.toml", "README.md", "pods_api")
# Debian 12: its python3 is 3.11, the Python of the Dockerfile's default python:3.11-slim.
SUITE = "bookworm"
# python3-venv: the build stage's `python3 -m venv` (Debian keeps ensurepip apart). libstdc++6:
# grpcio's manylinux wheel links it, and the essential variant does not have it (found by
# running the image: "libstdc++.so.6: cannot open shared object file").
PACKAGES = ("python3", "python3-venv", "libstdc++6")
# The smallest root that runs python: `essential` (no apt, which an image never runs); merged
# /usr set up by mmdebstrap's hook rather than the usrmerge package, which pulls in perl (46 MB);
# no manual pages, translations or documentation but the copyright files; no /dev (a container
# runtime makes its own).
MMDEBSTRAP_OPTIONS = (
    "--variant=essential",
    f"--include={','.join(PACKAGES)}",
    "--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr",
    "--dpkgopt=path-exclude=/usr/share/man/*",
    "--dpkgopt=path-exclude=/usr/share/locale/*",
    "--dpkgopt=path-exclude=/usr/share/doc/*",
    "--dpkgopt=path-include=/usr/share/doc/*/copyright",
    "--skip=output/dev",
)
# The host's CA bundle, first found (a proxy's CA is added to it where one intercepts TLS):
# pip's own variable, OpenSSL's, then Debian's file.
CA_BUNDLES = ("PIP_CERT", "SSL_CERT_FILE", "/etc/ssl/certs/ca-certificates.crt")
# The Dockerfile's build secret for it (`RUN --mount=type=secret,id=ca-bundle`).
CA_SECRET = "ca-bundle"
# Measured here: ~60 s for the base, ~50 s for the image on 2 cores; the mirror and PyPI can be
# slow: room for 10x.
BASE_TIMEOUT = 900.0
BUILD_TIMEOUT = 900.0
# Another session's cold build, waited for rather than repeated: both of the above.
LOCK_TIMEOUT = BASE_TIMEOUT + BUILD_TIMEOUT
# Builds of other sources kept (another checkout, a branch switched back to); older ones are
# removed when a new one is made. An archive is ~70 MB.
KEEP_BUILDS = 3
# How much of a failed builder's output an AssertionError quotes.
TAIL_LINES = 40
# A tag as Docker's reference grammar allows it.
_TAG = re.compile(r"[\w][\w.-]{0,127}")


@dataclass(frozen=True)
class Built:
    """One build: its archive under the version's tag, and what it measured when it was made
    (kept with it, so a cached call reports the cold build's figures)."""

    key: str
    version: str
    archive: Path
    # The layers as a node unpacks them (their tar streams, gunzipped), and the archive's bytes.
    uncompressed_bytes: int
    archive_bytes: int
    # The base's mmdebstrap and import (0 where the base was cached), and the image's build.
    base_seconds: float
    build_seconds: float


def cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pods-api-tests" / "image"


def version() -> str:
    """The version the package says, from the source that is built (pyproject.toml reads it
    from the same line)."""
    text = (ROOT / "pods_api" / "__init__.py").read_text()
    found = re.search(r'^__version__ = "([^"]+)"$', text, re.M)
    assert found is not None, "pods_api/__init__.py sets no __version__"
    return found.group(1)


def ca_bundle() -> Path | None:
    """The host's CA bundle the build is given as its secret, or None (pip's own then)."""
    for candidate in CA_BUNDLES:
        value = candidate if candidate.startswith("/") else os.environ.get(candidate, "")
        if value and Path(value).is_file():
            return Path(value)
    return None


def unavailable_reason() -> str | None:
    """Why the image cannot be built here, or None."""
    if sys.platform != "linux" or os.geteuid() != 0:
        return "building the image needs root on Linux (mmdebstrap's root mode, buildah's vfs storage)"
    missing = [tool for tool in ("mmdebstrap", "buildah") if shutil.which(tool) is None]
    if missing:
        return f"{' and '.join(missing)} not installed (apt-get install mmdebstrap buildah)"
    return None


def build() -> Built:
    """The image of the checkout's sources, built once (a concurrent caller waits for it)."""
    reason = unavailable_reason()
    if reason is not None:
        raise Unavailable(reason)
    key = build_key()
    out = cache_dir() / key
    done = out / "build.json"
    if not done.exists():
        out.mkdir(parents=True, exist_ok=True)
        with flock(cache_dir() / ".lock", LOCK_TIMEOUT, f"building the image {key}"):
            if not done.exists():  # else built by the session that held the lock
                try:
                    _build(key, out)
                except BaseException:
                    shutil.rmtree(out, ignore_errors=True)  # a partial archive is ~70 MB
                    raise
                _prune(keep=out)
    fields = json.loads(done.read_text())
    return Built(**{**fields, "archive": Path(fields["archive"])})


def archive(tag: str | None = None) -> Path:
    """An OCI archive of the image named docker.io/library/pods-api:<tag> (default: the
    version's): one build, one archive per tag, so that a test can roll a DaemonSet from one tag
    to another of the same image."""
    built = build()
    if tag is None or tag == built.version:
        return built.archive
    assert _TAG.fullmatch(tag), f"{tag!r} is not an image tag"
    path = built.archive.with_name(f"pods-api-{tag}.oci.tar")
    if not path.exists():
        with flock(cache_dir() / ".lock", LOCK_TIMEOUT, f"tagging {tag}"):
            if not path.exists():
                _retag(built.archive, path, tag)
    return path


# -- the keys ----------------------------------------------------------------------------------


def base_key() -> str:
    return hashlib.sha256(json.dumps([SUITE, *MMDEBSTRAP_OPTIONS]).encode()).hexdigest()[:16]


def _inputs() -> Iterator[Path]:
    for name in INPUTS:
        path = ROOT / name
        if path.is_dir():
            for file in sorted(path.rglob("*")):
                if file.is_file() and "__pycache__" not in file.parts and file.suffix != ".pyc":
                    yield file
        else:
            yield path


def build_key() -> str:
    """Every file the build reads, by its path and bytes, and the base's key."""
    digest = hashlib.sha256(base_key().encode())
    for file in _inputs():
        digest.update(f"\0{file.relative_to(ROOT)}\0".encode())
        digest.update(file.read_bytes())
    return digest.hexdigest()[:16]


# -- building ----------------------------------------------------------------------------------


def buildah(*args: str, timeout: float = BUILD_TIMEOUT) -> subprocess.CompletedProcess[str]:
    """buildah on this module's own storage; the output of one that fails is the failure."""
    storage = cache_dir()
    command = [
        "buildah",
        "--root",
        str(storage / "storage"),
        "--runroot",
        str(storage / "run"),
        "--storage-driver",
        "vfs",
        *args,
    ]
    env = {**os.environ, "STORAGE_DRIVER": "vfs"}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise AssertionError(f"buildah {args[0]} failed ({done.returncode}):\n{_tail(done)}")
    return done


def _tail(done: subprocess.CompletedProcess[str]) -> str:
    return "\n".join((done.stdout + done.stderr).splitlines()[-TAIL_LINES:])


def base() -> tuple[str, float]:
    """The base image in buildah's storage (localhost/pods-api-base:<key>), made if missing, and
    the seconds that took (0 if it was there). Call with the lock held."""
    key = base_key()
    name = f"localhost/pods-api-base:{key}"
    if buildah("images", "--quiet", "--filter", f"reference={name}").stdout.strip():
        return name, 0.0
    start = time.monotonic()
    tarball = cache_dir() / f"base-{key}.tar"
    if not tarball.exists():
        partial = tarball.with_suffix(".partial.tar")
        partial.unlink(missing_ok=True)  # a killed run's
        done = subprocess.run(
            ["mmdebstrap", *MMDEBSTRAP_OPTIONS, SUITE, str(partial)],
            capture_output=True,
            text=True,
            timeout=BASE_TIMEOUT,
            check=False,
        )
        if done.returncode != 0:
            raise AssertionError(f"mmdebstrap failed ({done.returncode}):\n{_tail(done)}")
        partial.rename(tarball)
    container = buildah("from", "scratch").stdout.strip()
    try:
        buildah("add", container, str(tarball), "/")
        buildah("commit", "--quiet", container, name)
    finally:
        buildah("rm", container)
    return name, time.monotonic() - start


def _build(key: str, out: Path) -> None:
    buildah("rm", "--all")  # a working container a killed build left; this storage is ours
    base_image, base_seconds = base()
    start = time.monotonic()
    image = f"localhost/pods-api:{key}"
    with tempfile.TemporaryDirectory(prefix="pods-api-image-") as scratch:
        context = Path(scratch)
        for file in _inputs():  # exactly what was hashed
            (context / file.relative_to(ROOT)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(file, context / file.relative_to(ROOT))
        secret = ca_bundle()
        args = [
            "bud",
            "--pull-never",
            # The host's network: no CNI set up for buildah, and a proxy may listen on loopback.
            "--network",
            "host",
            "--build-arg",
            f"BASE={base_image}",
            *(["--secret", f"id={CA_SECRET},src={secret}"] if secret else []),
            "--tag",
            image,
            str(context),
        ]
        buildah(*args)
    pushed = out / ".pushed.oci.tar"
    ref = f"{NAME}:{version()}"
    buildah("push", "--quiet", image, f"oci-archive:{pushed}:{ref}")
    buildah("rmi", image)  # the archive is what is kept; vfs holds a full copy per layer
    buildah("rmi", "--prune")
    path = out / f"pods-api-{version()}.oci.tar"
    _retag(pushed, path, version())
    pushed.unlink()
    built = Built(
        key=key,
        version=version(),
        archive=path,
        uncompressed_bytes=uncompressed_size(path),
        archive_bytes=path.stat().st_size,
        base_seconds=round(base_seconds, 1),
        build_seconds=round(time.monotonic() - start, 1),
    )
    (out / "build.json").write_text(json.dumps({**asdict(built), "archive": str(path)}, indent=1) + "\n")


def _retag(source: Path, path: Path, tag: str) -> None:
    """A copy of an OCI archive whose one manifest is named NAME:tag: by the reference name
    buildah writes, and by containerd's own annotation, which `ctr images import` takes first."""
    partial = path.with_name(f".{path.name}.partial")
    with tarfile.open(source) as src, tarfile.open(partial, "w") as dst:
        for member in src:
            if member.name != "index.json":
                dst.addfile(member, src.extractfile(member) if member.isfile() else None)
                continue
            index = json.loads(_read(src, member))
            (manifest,) = index["manifests"]
            manifest["annotations"] = {
                "org.opencontainers.image.ref.name": f"{NAME}:{tag}",
                "io.containerd.image.name": f"{NAME}:{tag}",
            }
            data = json.dumps(index).encode()
            member.size = len(data)
            dst.addfile(member, io.BytesIO(data))
    partial.rename(path)


def _prune(keep: Path) -> None:
    """Builds beyond the KEEP_BUILDS newest, and bases of other mmdebstrap arguments."""
    builds = sorted(
        (p for p in cache_dir().iterdir() if (p / "build.json").exists() and p != keep),
        key=lambda p: p.stat().st_mtime,
        reverse=True,
    )
    for old in builds[KEEP_BUILDS - 1 :]:
        shutil.rmtree(old, ignore_errors=True)
    current = f"base-{base_key()}.tar"
    for tarball in cache_dir().glob("base-*.tar"):
        if tarball.name != current:
            tarball.unlink()
            with contextlib.suppress(AssertionError):  # not imported, or imported elsewhere
                buildah("rmi", f"localhost/pods-api-base:{tarball.name[5:-4]}")


# -- reading an archive ------------------------------------------------------------------------


def _read(tar: tarfile.TarFile, member: tarfile.TarInfo | str) -> bytes:
    handle = tar.extractfile(member)
    assert handle is not None, f"{member} is not a file"
    return handle.read()


def blob(tar: tarfile.TarFile, digest: str) -> bytes:
    return _read(tar, f"blobs/{digest.replace(':', '/')}")


def manifest(path: Path) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """The archive's one image: its name, its manifest and its config."""
    with tarfile.open(path) as tar:
        (entry,) = json.loads(_read(tar, "index.json"))["manifests"]
        found = json.loads(blob(tar, entry["digest"]))
        config = json.loads(blob(tar, found["config"]["digest"]))
    return entry["annotations"]["io.containerd.image.name"], found, config


def layers(path: Path) -> Iterator[tarfile.TarFile]:
    """Each layer of the archive's image as a tar, bottom first."""
    _, found, _ = manifest(path)
    with tarfile.open(path) as tar:
        for layer in found["layers"]:
            data = blob(tar, layer["digest"])
            if layer["mediaType"].endswith("gzip"):
                data = gzip.decompress(data)
            with tarfile.open(fileobj=io.BytesIO(data)) as files:
                yield files


def uncompressed_size(path: Path) -> int:
    _, found, _ = manifest(path)
    total = 0
    with tarfile.open(path) as tar:
        for layer in found["layers"]:
            handle = tar.extractfile(f"blobs/{layer['digest'].replace(':', '/')}")
            assert handle is not None
            stream = gzip.GzipFile(fileobj=handle) if layer["mediaType"].endswith("gzip") else handle
            while chunk := stream.read(1 << 20):
                total += len(chunk)
    return total


def unpack(path: Path, rootfs: Path) -> None:
    """The image's root filesystem, its layers applied in order, as a container runtime would
    (GNU tar, as root: owners, modes and links as they are in the layers). A layer that deletes
    a lower one's file (an OCI whiteout) is not expected of this Dockerfile's two layers."""
    _, found, _ = manifest(path)
    rootfs.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path) as tar:
        for layer in found["layers"]:
            handle = tar.extractfile(f"blobs/{layer['digest'].replace(':', '/')}")
            assert handle is not None
            gzipped = ["-z"] if layer["mediaType"].endswith("gzip") else []
            done = subprocess.run(
                ["tar", "-x", *gzipped, "-C", str(rootfs)],
                input=handle.read(),
                capture_output=True,
                timeout=BUILD_TIMEOUT,
                check=False,
            )
            assert done.returncode == 0, done.stderr.decode(errors="replace")


def describe(built: Built) -> str:
    """The benchmark's line: the image's sizes and what its build took."""
    mb = 1e6
    return (
        f"pods-api image {built.version} ({built.key}): {built.uncompressed_bytes / mb:.0f} MB uncompressed, "
        f"{built.archive_bytes / mb:.0f} MB as an OCI archive; base {built.base_seconds:.0f} s "
        f"(mmdebstrap and import; 0: cached), image {built.build_seconds:.0f} s (buildah bud, push, measure)"
    )


if __name__ == "__main__":
    # .ci/run builds the image before pytest, so the cold build's minutes are not a test's:
    # `python tests/support/image.py [TAG...]` prints each tag's archive (default: the version's),
    # and the sizes and build times on stderr.
    start = time.monotonic()
    for tag in sys.argv[1:] or [version()]:
        print(archive(tag))
    print(f"{describe(build())}; this call {time.monotonic() - start:.1f} s", file=sys.stderr)
