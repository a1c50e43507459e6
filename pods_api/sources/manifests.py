"""`--manifests DIR`: the kubelet's static pods (staticPodPath), read and changed as the kubelet
reads and changes them; the rules themselves are in `staticpod.py`.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path

from pods_api.core import argtypes
from pods_api.core.store.version import PodVersion
from pods_api.sources import ErrorCounter, Source, SourceContext
from pods_api.sources.directory import DirectorySource
from pods_api.sources.firstseen import FirstSeen
from pods_api.sources.parsing import MANIFEST_FILE_FORMAT, pod_objects
from pods_api.sources.staticpod import StaticPodRules

# The kubelet's --file-check-frequency default: how often it re-lists the directory.
DEFAULT_RESYNC = 20.0


@dataclass(frozen=True, slots=True)
class ManifestDecoder:
    """A manifest file's bytes to its static pod, as the kubelet's file source makes it: a pure
    function of the bytes and the node name (workers.py runs it in other processes too); the
    pod's config.seen is left to the source (firstseen.py)."""

    node_name: str

    def decode(self, origin: str, data: bytes, warnings: list[str]) -> list[PodVersion]:
        rules = StaticPodRules(self.node_name, config_source="file")
        # The kubelet hashes the file's path into the uid: the same pod in another file is
        # another pod. An absolute path keeps uids stable whatever the working directory.
        source_id = os.path.abspath(origin)
        return [
            rules.build(obj, where, origin, source_id, warnings)
            for where, obj in pod_objects(data, origin, MANIFEST_FILE_FORMAT)
        ]


class ManifestDirSource(DirectorySource):
    unique_names = True
    # The kubelet's file source: a second file with a pod's namespace/name replaces the first
    # (file.go fills a store keyed by namespace/name in file name order), and a file that no
    # longer gives a pod gives none (each relist is what decodes now: the kubelet kills it).
    last_name_wins = True
    keeps_bad_files = False
    configures_static_pods = True  # the kubelet's "file" config source

    def __init__(
        self,
        path: Path,
        *,
        node_name: str,
        resync: float = DEFAULT_RESYNC,
        on_error: ErrorCounter | None = None,
    ) -> None:
        self.name = f"manifests:{path}"
        self.first_seen = FirstSeen()
        decoder = ManifestDecoder(node_name)
        super().__init__(path, decoder, resync=resync, on_error=on_error, first_seen=self.first_seen)


SOURCE_FLAGS: tuple[str, ...] = ("--manifests DIR",)


def add_flags(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add(
        "--manifests",
        action="append",
        type=Path,
        default=[],
        metavar="DIR",
        help="a static pod directory, as the kubelet's --pod-manifest-path (repeatable)",
    )
    add(
        "--manifests-resync",
        type=argtypes.positive,
        default=DEFAULT_RESYNC,
        metavar="SECONDS",
        help=f"re-list the manifest directory this often, as the kubelet does (default {DEFAULT_RESYNC:g})",
    )


def from_args(args: argparse.Namespace, context: SourceContext) -> list[Source]:
    # A directory missing at start is fine: the kubelet waits for it to appear, and so do we.
    return [
        ManifestDirSource(
            path, node_name=context.node_name, resync=args.manifests_resync, on_error=context.on_error
        )
        for path in args.manifests
    ]
