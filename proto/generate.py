"""Regenerate the generated modules from proto/*.proto: `python proto/generate.py`.

Each file's modules live beside their only user: the CRI's in sources/cri/pb/ (only the CRI
source speaks it), the others in core/api/pb/.

The modules are committed so that installing pods-api needs no protoc; tests/unit/api/test_proto.py fails
when they are stale. grpcio-tools is pinned in pyproject.toml because its output differs between
versions.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from importlib.resources import files
from pathlib import Path

from google.protobuf import descriptor_pb2
from grpc_tools import protoc

PROTO_DIR = Path(__file__).resolve().parent
ROOT = PROTO_DIR.parent
CORE = "pods_api.core.api.pb"
# A .proto whose modules belong to one wing, by file stem; every other one goes to CORE.
HOMES = {"cri_runtime_v1": "pods_api.sources.cri.pb"}
PACKAGES = (CORE, *HOMES.values())

# protoc writes `import foo_pb2`, which only works with the output folder on sys.path; the
# modules live in packages, so import each from its package.
_IMPORT = re.compile(r"^import (\w+_pb2) as (\w+)$", re.MULTILINE)


def folder(root: Path, package: str) -> Path:
    return root.joinpath(*package.split("."))


def generate(root: Path) -> list[Path]:
    """Write every package's modules under root (the repository, or a scratch copy's root)."""
    protos = sorted(PROTO_DIR.glob("*.proto"))
    written: list[Path] = []
    for package in PACKAGES:
        mine = [p for p in protos if HOMES.get(p.stem, CORE) == package]
        written += _generate(folder(root, package), mine)
    return written


def _generate(out: Path, protos: list[Path]) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    args = [
        "grpc_tools.protoc",
        f"-I{PROTO_DIR}",
        f"-I{files('grpc_tools') / '_proto'}",
        f"--python_out={out}",
        f"--pyi_out={out}",
        *(str(p) for p in protos),
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    # gRPC stubs for every file that declares a service (the others would get empty *_pb2_grpc
    # modules), as protoc itself reads the files: a new service file needs no edit here.
    services = [str(PROTO_DIR / name) for name in _with_services(args[1:3], protos)]
    grpc_args = ["grpc_tools.protoc", *args[1:3], f"--grpc_python_out={out}", *services]
    if services and protoc.main(grpc_args) != 0:
        raise SystemExit("protoc failed")
    names = {p.stem + suffix for p in protos for suffix in ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py")}
    written = sorted(p for p in out.iterdir() if p.name in names)
    for path in written:
        path.write_text(_IMPORT.sub(_package_import, path.read_text()))
    return written


def _package_import(match: re.Match[str]) -> str:
    module, alias = match.groups()
    return f"from {HOMES.get(module.removesuffix('_pb2'), CORE)} import {module} as {alias}"


def _with_services(includes: list[str], protos: list[Path]) -> list[str]:
    """The names of the .proto files that declare at least one service."""
    with tempfile.TemporaryDirectory() as tmp:
        descriptors = Path(tmp) / "set.pb"
        args = ["grpc_tools.protoc", *includes, f"--descriptor_set_out={descriptors}", *map(str, protos)]
        if protoc.main(args) != 0:
            raise SystemExit("protoc failed")
        files = descriptor_pb2.FileDescriptorSet.FromString(descriptors.read_bytes()).file
    return [f.name for f in files if f.service]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT, help="the root the packages' folders are under")
    args = parser.parse_args()
    for path in generate(args.out):
        print(path, file=sys.stderr)


if __name__ == "__main__":
    main()
