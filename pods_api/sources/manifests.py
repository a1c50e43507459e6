"""`--manifests DIR`: the kubelet's static pods (staticPodPath), read and changed as the kubelet
reads and changes them; the rules themselves are in `staticpod.py`.
"""

from __future__ import annotations

import argparse
import functools
import os
from collections.abc import Callable
from pathlib import Path

from pods_api.core import argtypes
from pods_api.core.store.pod import PodVersion
from pods_api.sources import ErrorCounter, Source, SourceContext
from pods_api.sources.directory import DirectorySource
from pods_api.sources.loader import MANIFEST_FILE_FORMAT, pod_objects
from pods_api.sources.staticpod import StaticPodRules

# The kubelet's --file-check-frequency default: how often it re-lists the directory.
DEFAULT_RESYNC = 20.0


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
        self._rules = StaticPodRules(node_name, config_source="file")
        super().__init__(path, resync=resync, on_error=on_error)

    def _decode(self, origin: str, data: bytes, warnings: list[str]) -> list[PodVersion]:
        # The kubelet hashes the file's path into the uid: the same pod in another file is
        # another pod. An absolute path keeps uids stable whatever the working directory.
        source_id = os.path.abspath(origin)
        return [
            self._rules.build(obj, where, origin, source_id, warnings)
            for where, obj in pod_objects(data, origin, MANIFEST_FILE_FORMAT)
        ]

    def _served(self, pods: list[PodVersion]) -> None:
        self._rules.retain({pod.uid for pod in pods})

    def _worker_factory(self) -> Callable[[], ManifestDirSource]:
        return functools.partial(ManifestDirSource, self.path, node_name=self._rules.node_name)

    def worker_state(self) -> dict[str, str]:
        return self._rules.take_seen()

    def worker_sync(self) -> dict[str, str]:
        # Every pod's first-seen time, so a churn worker decoding a served pod again gives the
        # same bytes: ~40 bytes a pod pickled (0.4 ms for 5,000), once a scan, only while the
        # files churn.
        return self._rules.seen()

    def apply_sync(self, state: object) -> None:
        assert isinstance(state, dict)
        self._rules.start_from(state)

    def _adopt(self, state: object) -> None:
        assert isinstance(state, dict)
        self._rules.adopt_seen(state)


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
