"""Writes the committed OpenAPI document: `python -m pods_api.serve.openapi_writer [PATH]`
writes openapi/openapi.json; `--check` fails when the committed file is stale.

Apart from gateway/openapi.py, which builds the document for the app that serves it, because
writing needs an app built on a Core, and building one is the composition root's job (serve/):
the gateway describes its routes, it does not assemble a server.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pods_api.core.assembly import build_core
from pods_api.core.config import Config
from pods_api.gateway.app import create_app
from pods_api.gateway.openapi import Doc

DEFAULT_PATH = Path(__file__).resolve().parents[2] / "openapi" / "openapi.json"
COMMAND = "python -m pods_api.serve.openapi_writer"


def render(doc: Doc) -> str:
    """Sorted keys, 2-space indent, trailing newline: a stable file that diffs well."""
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def generate() -> str:
    return render(create_app(build_core(Config(node_name="openapi"))).openapi())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__)
    parser.add_argument("path", nargs="?", type=Path, default=DEFAULT_PATH)
    parser.add_argument("--check", action="store_true", help="fail if the file is not up to date")
    args = parser.parse_args(argv)
    text = generate()
    if args.check:
        if not args.path.exists() or args.path.read_text() != text:
            print(f"{args.path} is stale: run {COMMAND}", file=sys.stderr)
            return 1
        return 0
    args.path.parent.mkdir(parents=True, exist_ok=True)
    args.path.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
