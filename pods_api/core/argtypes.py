"""Types for command-line flags (argparse `type=`): each names what was wrong with the value.
Shared by the command line and the pod sources, which declare their own flags."""

from __future__ import annotations

import argparse


def positive(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number")
    return value


def non_negative(text: str) -> float:
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is negative")
    return value


def positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return int(text)


def mode(text: str) -> int:
    try:
        value = int(text, 8)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an octal mode like 0600") from None
    if value & ~0o777:
        raise argparse.ArgumentTypeError(f"{text!r} has bits beyond 0777")
    return value


def header(text: str) -> tuple[str, str]:
    name, sep, value = text.partition(":")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError("expected 'Name: value'")  # not echoed: it may hold a token
    return name.strip(), value.strip()
