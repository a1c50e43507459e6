"""The documents' blocks as the tests that run them read them: by the `<!-- run by FILE::TEST -->`
line before each, so that a test runs the very text it is named as running."""

from __future__ import annotations

import re

from repo import DOCS, ROOT

_RUN_BY = re.compile(r"^<!-- run by [^:\n]+::([^\n]*?) -->\n```\w*\n(.*?)^```$", re.S | re.M)


def run_by(document: str, test: str) -> str:
    """The body of the one block of `document` (README.md, or a name under docs/) that names
    `test` in its `run by` line."""
    path = ROOT / document if document == "README.md" else DOCS / document
    found = [m.group(2) for m in _RUN_BY.finditer(path.read_text()) if test in m.group(1).split(", ")]
    assert len(found) == 1, f"{document} has {len(found)} blocks run by {test}, not one"
    return found[0]
