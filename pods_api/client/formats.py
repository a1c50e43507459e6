"""The output formats of `pods-api get` and `watch` (kubectl's names), apart from their
rendering (output.py), so that parsing a command line loads no renderer."""

from __future__ import annotations

from typing import Literal

Format = Literal["table", "wide", "json", "yaml", "name"]
FORMATS: tuple[Format, ...] = ("table", "wide", "json", "yaml", "name")
