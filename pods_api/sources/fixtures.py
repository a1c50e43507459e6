"""`--fixtures DIR`: pods served exactly as written, status included, for developing node agents
without a cluster. Files are YAML or JSON: one Pod, a PodList or List, or several documents.
Edits are served within a second; a file that stops parsing keeps its last good pods.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from pods_api.core.store.version import PodVersion
from pods_api.sources import ErrorCounter, ManifestError, Source, SourceContext
from pods_api.sources.directory import DirectorySource
from pods_api.sources.parsing import FIXTURE_FORMAT, decode_pod, locate, pod_objects

# Relist this often even without a change notice: the safety net for filesystems that send none
# (network filesystems, some bind mounts). Notices make edits show within a second.
RELIST_SECONDS = 30.0

# Editors' backup, swap and lock files: never pods, and read half-written they would be errors.
_EDITOR_SUFFIXES = ("~", ".swp", ".swo", ".swx", ".tmp", ".bak")


@dataclass(frozen=True, slots=True)
class FixtureDecoder:
    """A fixture file's bytes to its pods, served as written: a pure function of the bytes."""

    def decode(self, origin: str, data: bytes, warnings: list[str]) -> list[PodVersion]:
        pods = []
        for where, obj in pod_objects(data, origin, FIXTURE_FORMAT):
            pod = decode_pod(obj, where, origin, warnings)
            # A fixture's identity is its uid: without one, an edit could not be told from a new pod.
            if not pod.uid:
                raise ManifestError(origin, locate(where, "metadata.uid is required in a fixture"))
            if not pod.name:
                raise ManifestError(origin, locate(where, "metadata.name is required"))
            pods.append(pod)
        return pods


class FixturesSource(DirectorySource):
    def __init__(self, path: Path, *, on_error: ErrorCounter | None = None) -> None:
        self.name = f"fixtures:{path}"
        super().__init__(path, FixtureDecoder(), resync=RELIST_SECONDS, on_error=on_error)

    def ignored(self, filename: str) -> bool:
        return (
            filename.startswith((".", "#"))  # dotfiles, emacs' .#lock and #autosave#
            or filename.endswith(_EDITOR_SUFFIXES)
            or filename == "4913"  # vim's probe for whether it may write the directory
        )


SOURCE_FLAGS: tuple[str, ...] = ("--fixtures DIR",)


def add_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--fixtures",
        action="append",
        type=Path,
        default=[],
        metavar="DIR",
        help="pod manifests served as written, status included (repeatable)",
    )


def from_args(args: argparse.Namespace, context: SourceContext) -> list[Source]:
    for path in args.fixtures:
        if not path.is_dir():
            raise ValueError(f"--fixtures {path}: not a directory")
    return [FixturesSource(path, on_error=context.on_error) for path in args.fixtures]
