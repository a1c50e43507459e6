"""Every kind of pod source, in one list: the command line takes their flags from here, and the
server builds them from here. A new source joins by adding its module below (see
`pods_api/sources/__init__.py` for what the module provides)."""

from __future__ import annotations

import argparse

from pods_api.sources import (
    CanOverlay,
    Source,
    SourceContext,
    SourceModule,
    StatusOverlay,
    apiserver,
    fixtures,
    kubelet_pods,
    kubelet_socket,
    manifests,
    url,
)
from pods_api.sources.cri import flags as cri

# In the order their flags are listed in `--help` and in the "no pod source" message.
SOURCE_MODULES: tuple[SourceModule, ...] = (
    fixtures,
    manifests,
    url,
    kubelet_socket,
    kubelet_pods,
    apiserver,
    cri,
)


def add_flags(parser: argparse.ArgumentParser) -> None:
    """Every source's flags."""
    for module in SOURCE_MODULES:
        module.add_flags(parser)


def source_flags() -> str:
    """The flags that turn a source on, for messages: "--fixtures DIR, --manifests DIR, ..."."""
    return ", ".join(flag for module in SOURCE_MODULES for flag in module.SOURCE_FLAGS)


def from_args(args: argparse.Namespace, context: SourceContext) -> list[Source]:
    """The sources the flags ask for; ValueError (one line naming the flag) for a bad value."""
    sources = [source for module in SOURCE_MODULES for source in module.from_args(args, context)]
    names: set[str] = set()
    for source in sources:
        if source.name in names:
            raise ValueError(f"pod source {source.name} is given twice")
        names.add(source.name)
    return sources


def split_overlays(sources: list[Source]) -> tuple[list[Source], list[StatusOverlay]]:
    """The sources that own pods, and the overlays: a source that can be an overlay (CanOverlay)
    becomes one when another source owns pods, and stays a source of pods when alone."""
    owners = [source for source in sources if not isinstance(source, CanOverlay)]
    if not owners:
        return sources, []
    return owners, [source.as_overlay() for source in sources if isinstance(source, CanOverlay)]
