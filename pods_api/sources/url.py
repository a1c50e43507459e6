"""`--manifest-url URL`: static pods polled over HTTP, as the kubelet's manifest URL source.

The body is one Pod or a PodList (YAML or JSON) and gets the kubelet's static-pod rules with
config.source "http". Polled every `interval` seconds by a `Poller` (ETag and 304, a body limit,
a total deadline per fetch, jittered exponential backoff capped at the interval). A failed fetch
or a body that does not decode keeps the last good pods. Header values are credentials: they
appear in no name and no log line, and neither does a password or a query value in the URL.
A header's value may come from a file (`--manifest-url-header-file 'Name: PATH'`), read at each
poll, so a token stays off the command line (any local user reads /proc/PID/cmdline): a URL that
carries a password or a query parameter named like a credential is warned about at start.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from pathlib import Path

from pods_api.core import argtypes
from pods_api.core.store.cache import SourceSink
from pods_api.core.store.version import PodVersion
from pods_api.sources import ErrorCounter, ManifestError, Source, SourceContext, connected_gauge
from pods_api.sources.firstseen import FirstSeen
from pods_api.sources.parsing import MANIFEST_URL_FORMAT, pod_objects
from pods_api.sources.poller import (
    FETCH_DEADLINE,
    Poller,
    PollError,
    credentials_in,
    read_header_files,
    shown_url,
)
from pods_api.sources.reporting import Reporter, unique_pods
from pods_api.sources.staleness import ConnectedGauge, Staleness, after_missed
from pods_api.sources.staticpod import StaticPodRules

log = logging.getLogger(__name__)

FLAG = "--manifest-url"
# The kubelet's --http-check-frequency default: how often it polls the manifest URL.
DEFAULT_INTERVAL = 20.0


class ManifestURLSource:
    configures_static_pods = True  # the kubelet's "http" config source

    def __init__(
        self,
        url: str,
        *,
        node_name: str,
        headers: Sequence[tuple[str, str]] = (),
        header_files: Sequence[tuple[str, Path]] = (),
        interval: float = DEFAULT_INTERVAL,
        on_error: ErrorCounter | None = None,
        on_connected: ConnectedGauge | None = None,
        stale_after: float | None = None,
    ) -> None:
        """`stale_after`: its resync, by default two polls (the second given its deadline)."""
        self._poller = Poller(url, flag=FLAG, interval=interval, headers=headers, header_files=header_files)
        self.url = url  # as given: part of generated uids, as with the kubelet
        self.name = url_source_name(url)
        resync = after_missed(interval, FETCH_DEADLINE) if stale_after is None else stale_after
        self._staleness = Staleness(self.name, stale_after=resync, on_connected=on_connected)
        self._staleness.upstream = self._poller.shown
        self._rules = StaticPodRules(node_name, config_source="http")
        self._first_seen = FirstSeen()
        self._reporter = Reporter(self.name, on_error)
        self._body: bytes | None = None  # the last good body
        self._pods: list[PodVersion] = []  # from it
        self._problems: tuple[list[str], list[str]] = ([], [])  # errors, warnings of that body

    async def run(self, sink: SourceSink) -> None:
        found = credentials_in(self.url)
        if found:
            log.warning(
                "%s: %s on the command line, where any local user reads it (/proc/PID/cmdline); "
                "send it as a header read from a file instead: --manifest-url-header-file 'NAME: PATH'",
                self.name,
                " and ".join(found),
            )

        def failed(exc: PollError) -> None:
            self._reporter.attempt_failed(f"{self.name}: {exc}")
            self._staleness.failed(str(exc))

        with self._staleness.running(sink):
            await self._poller.run(lambda body: self._take(body, sink), failed)

    def _take(self, body: bytes | None, sink: SourceSink) -> bool:
        """One fetched body (None: unchanged); whether it gave a complete state."""
        if body is not None and body != self._body:
            warnings: list[str] = []
            try:
                pods, duplicates = self._decode(body, warnings)
            except ManifestError as exc:
                self._reporter.report([str(exc)], self._problems[1])
                self._staleness.failed(str(exc))
                return False
            pods = self._first_seen.stamp(pods)
            self._first_seen.retain({pod.uid for pod in pods})
            self._body, self._pods, self._problems = body, pods, (duplicates, warnings)
        self._reporter.report(*self._problems)
        # Every good poll, changed or not: the cache ignores what it has, and takes a pod it
        # refused earlier because another source held its uid, once that uid is free.
        sink.replace(self._pods)
        sink.mark_synced()
        self._staleness.current()
        return True

    def _decode(self, body: bytes, warnings: list[str]) -> tuple[list[PodVersion], list[str]]:
        """The pods of a body, and the duplicates dropped from it (the kubelet serves the first)."""
        if not body.strip():
            # As the kubelet: an empty 200 is the server saying "no pods" (it logs and serves none).
            warnings.append(f"{self.name}: empty body; serving no pods from it")
            return [], []
        objects = pod_objects(body, self.name, MANIFEST_URL_FORMAT)
        built = [self._rules.build(obj, where, self.name, self.url, warnings) for where, obj in objects]
        return unique_pods([(self.name, built)], by_name=True)


def url_source_name(url: str) -> str:
    """The source's name for `url`, fit for logs and metric labels: "url:" and the URL with any
    password in it masked."""
    return f"url:{shown_url(url)}"


SOURCE_FLAGS: tuple[str, ...] = ("--manifest-url URL",)


def add_flags(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add(
        "--manifest-url",
        action="append",
        default=[],
        metavar="URL",
        help="a static pod manifest URL, as the kubelet's --manifest-url (repeatable)",
    )
    add(
        "--manifest-url-header",
        action="append",
        default=[],
        type=argtypes.header,
        metavar="'NAME: VALUE'",
        help="a header sent with every manifest URL request (repeatable)",
    )
    add(
        "--manifest-url-header-file",
        action="append",
        default=[],
        type=header_file,
        metavar="'NAME: PATH'",
        help="a header sent with every manifest URL request, its value read from PATH at each poll "
        "(a token: kept off the command line; repeatable)",
    )
    add(
        "--manifest-url-interval",
        type=argtypes.positive,
        default=DEFAULT_INTERVAL,
        metavar="SECONDS",
        help=f"poll the manifest URL this often (default {DEFAULT_INTERVAL:g})",
    )


def header_file(text: str) -> tuple[str, Path]:
    """'Name: /path/to/file' for --manifest-url-header-file; the file must be readable now."""
    name, sep, path = text.partition(":")
    if not sep or not name.strip() or not path.strip():
        raise argparse.ArgumentTypeError("expected 'Name: /path/to/file'")
    try:
        read_header_files([(name.strip(), Path(path.strip()))])
    except PollError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return name.strip(), Path(path.strip())


def from_args(args: argparse.Namespace, context: SourceContext) -> list[Source]:
    return [
        ManifestURLSource(
            url,
            node_name=context.node_name,
            headers=args.manifest_url_header,
            header_files=args.manifest_url_header_file,
            interval=args.manifest_url_interval,
            on_error=context.on_error,
            on_connected=connected_gauge(context, url_source_name(url)),
        )
        for url in args.manifest_url
    ]
