"""Regenerate core/api/pb/ from proto/*.proto: `python proto/generate.py`.

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
DEFAULT_OUT = PROTO_DIR.parent / "pods_api" / "core" / "api" / "pb"

# protoc writes `import foo_pb2`, which only works with the output folder on sys.path; the
# modules live in the pods_api.core.api.pb package, so make the imports package-relative.
_IMPORT = re.compile(r"^import (\w+_pb2) as (\w+)$", re.MULTILINE)


def generate(out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    protos = sorted(PROTO_DIR.glob("*.proto"))
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
    written = sorted(p for p in out.iterdir() if p.suffix in (".py", ".pyi") and p.name != "__init__.py")
    for path in written:
        text = path.read_text()
        path.write_text(_IMPORT.sub(r"from pods_api.core.api.pb import \1 as \2", text))
    return written


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
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    for path in generate(args.out):
        print(path, file=sys.stderr)


if __name__ == "__main__":
    main()
