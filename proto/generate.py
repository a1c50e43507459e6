"""Regenerate core/pb/ from proto/*.proto: `python proto/generate.py`.

The modules are committed so that installing pods-api needs no protoc; tests/test_proto.py fails
when they are stale. grpcio-tools is pinned in pyproject.toml because its output differs between
versions.
"""

from __future__ import annotations

import argparse
import re
import sys
from importlib.resources import files
from pathlib import Path

from grpc_tools import protoc

PROTO_DIR = Path(__file__).resolve().parent
DEFAULT_OUT = PROTO_DIR.parent / "core" / "pb"

# protoc writes `import foo_pb2`, which only works with the output folder on sys.path; the
# modules live in the pods_api.core.pb package, so make the imports package-relative.
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
    # Only the service files get gRPC stubs; the others would get empty *_pb2_grpc modules.
    services = [str(p) for p in protos if p.name.startswith("pods_")]
    grpc_args = ["grpc_tools.protoc", args[1], args[2], f"--grpc_python_out={out}", *services]
    if protoc.main(args) != 0 or protoc.main(grpc_args) != 0:
        raise SystemExit("protoc failed")
    written = sorted(p for p in out.iterdir() if p.suffix in (".py", ".pyi") and p.name != "__init__.py")
    for path in written:
        text = path.read_text()
        path.write_text(_IMPORT.sub(r"from pods_api.core.pb import \1 as \2", text))
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    for path in generate(args.out):
        print(path, file=sys.stderr)


if __name__ == "__main__":
    main()
