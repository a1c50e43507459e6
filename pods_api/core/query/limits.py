"""How large a selector may be. The API server bounds a request only by its size (1 MiB of
headers); here one event loop answers every client, so a selector is bounded where its cost
is: parsing is linear in its length, and matching costs, per pod, one test per requirement
(set membership is one hash lookup, however many values a set has). At these limits a
selector parses in a few milliseconds and matches 1,000 pods in about as long; real selectors
are a few requirements of a few values each."""

from __future__ import annotations

from pods_api.core.api.statuserrors import SelectorError

# Characters in one selector (labelSelector or fieldSelector): a few hundred requirements'
# worth, parsed in ~5 ms.
MAX_LENGTH = 8192
# Requirements in one selector: each is one test per pod matched.
MAX_REQUIREMENTS = 32
# Values in all the `in`/`notin` sets of one label selector together.
MAX_VALUES = 1024


def check_length(kind: str, text: str) -> None:
    """Raises SelectorError for a selector over MAX_LENGTH, before any parsing."""
    if len(text) > MAX_LENGTH:
        raise SelectorError(
            kind, text, MAX_LENGTH, f"{len(text)} characters long; a selector has at most {MAX_LENGTH}"
        )


def check_requirements(kind: str, text: str, count: int, position: int) -> None:
    """Raises SelectorError when requirement number `count` (at `position`) is one too many."""
    if count > MAX_REQUIREMENTS:
        raise SelectorError(kind, text, position, f"over {MAX_REQUIREMENTS} requirements")
