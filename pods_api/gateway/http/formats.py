"""What a client asked for: compact JSON (the default), indented JSON (`?pretty=true`), YAML
(`Accept: application/yaml`) or, on the pods collection, an event stream."""

from __future__ import annotations

import functools
from enum import Enum
from typing import Any

import orjson
import yaml

# libyaml's emitter when PyYAML was built with it: twice as fast as the pure-Python one here.
_YAML_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

JSON = "application/json"
YAML = "application/yaml"
EVENT_STREAM = "text/event-stream"
# What people and tools send for YAML; the answer always says application/yaml.
_YAML_ALIASES = {"application/x-yaml": YAML, "text/yaml": YAML, "text/x-yaml": YAML}


class Format(Enum):
    JSON = "json"
    PRETTY = "pretty"
    YAML = "yaml"

    @property
    def media_type(self) -> str:
        return YAML if self is Format.YAML else JSON


# Rankings remembered: clients send the same few Accept headers, and ranking one costs more than
# the rest of a Get (~10 µs). A client inventing headers only evicts; long ones are not kept, so
# the cache holds at most ~64 KiB of them.
_ACCEPT_CACHE = 256
_ACCEPT_CACHED_LENGTH = 256


def preferred(accept: str | None, offered: tuple[str, ...]) -> str:
    """The offered media type the Accept header ranks highest; ties go to the earlier offer.

    Nothing acceptable, or no header, gives the first offer: a client that asks for text/html
    still gets JSON rather than a 406 it cannot use either.
    """
    best, best_q = offered[0], 0.0
    for media, q in zip(offered, qualities(accept, offered), strict=True):
        if q > best_q:
            best, best_q = media, q
    return best


def answer(accept: str | None, pretty: bool) -> Format | None:
    """The form of an answer on the pods collection, from one ranking of Accept: None for an
    event stream (ranked above JSON), else as `choose`."""
    json_q, yaml_q, stream_q = qualities(accept, _COLLECTION_OFFERS)
    if stream_q > json_q:
        return None
    if yaml_q > json_q:
        return Format.YAML
    return Format.PRETTY if pretty else Format.JSON


def qualities(accept: str | None, offered: tuple[str, ...]) -> tuple[float, ...]:
    """How much the Accept header wants each offered media type (no header: the first, fully)."""
    if not accept:
        return (1.0,) + (0.0,) * (len(offered) - 1)
    if len(accept) > _ACCEPT_CACHED_LENGTH:
        return _rank(accept, offered)
    return _cached_rank(accept, offered)


def _rank(accept: str, offered: tuple[str, ...]) -> tuple[float, ...]:
    ranges = [_media_range(part) for part in accept.split(",") if part.strip()]
    ranked = []
    for media in offered:
        # The most specific matching range decides (RFC 9110 12.5.1): json;q=0 beats */*.
        matching = [(_specificity(pattern, media), q) for pattern, q in ranges]
        ranked.append(max((m for m in matching if m[0] >= 0), default=(0, 0.0))[1])
    return tuple(ranked)


_cached_rank = functools.lru_cache(maxsize=_ACCEPT_CACHE)(_rank)
_COLLECTION_OFFERS = (JSON, YAML, EVENT_STREAM)


def _media_range(part: str) -> tuple[str, float]:
    media, *params = (p.strip() for p in part.split(";"))
    q = 1.0
    for param in params:
        name, _, value = param.partition("=")
        if name.strip().lower() == "q":
            try:
                q = float(value)
            except ValueError:
                q = 0.0
    media = media.lower()
    return _YAML_ALIASES.get(media, media), q


def _specificity(pattern: str, media: str) -> int:
    """2 for an exact match, 1 for type/*, 0 for */*, -1 for no match."""
    if pattern == media:
        return 2
    if pattern == "*/*":
        return 0
    kind, _, sub = pattern.partition("/")
    return 1 if sub == "*" and media.startswith(kind + "/") else -1


def choose(accept: str | None, pretty: bool) -> Format:
    if preferred(accept, (JSON, YAML)) == YAML:
        return Format.YAML
    return Format.PRETTY if pretty else Format.JSON


def render(obj: Any, fmt: Format) -> bytes:
    """An object as the slow formats print it; compact JSON is assembled from cached bytes instead."""
    if fmt is Format.YAML:
        # Kubernetes key order, not sorted: metadata before spec before status, as kubectl shows.
        text = yaml.dump(
            obj, Dumper=_YAML_DUMPER, sort_keys=False, allow_unicode=True, default_flow_style=False
        )
        return text.encode()
    return orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)
