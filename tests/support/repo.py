"""Where the repository's own files are, for tests that read or run them."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
# The documentation beside README.md: each topic's text, which tests run as written.
DOCS = ROOT / "docs"
