"""Kubernetes ``resource.Quantity`` parsing and canonical printing.

The canonical form must be byte-identical to what Go's
``k8s.io/apimachinery/pkg/api/resource`` emits from ``Quantity.CanonicalizeBytes``
(what ``MarshalJSON`` writes for a quantity without a cached string), because
clients diff and hash these strings and a one-byte difference is a spurious change.

Go behaviour reproduced on purpose (checked against the apimachinery sources and
its golden serialization tests):

* Values are exact; a value finer than 1n is rounded to a multiple of 1n *away
  from zero* (``inf.RoundUp`` on the magnitude), so ``-0.0000000001`` is ``-1n``,
  not ``0``.
* A binary-SI value whose magnitude exceeds 2^63-1 is silently capped to
  +/-(2^63-1) at parse time (``8Ei`` -> ``9223372036854775807``); decimal values
  are not capped.
* A DecimalSI value whose exponent is above 18 has no SI letter, so it falls back to
  exponent notation (``1000E`` -> ``1e21``, ``1e100`` -> ``10e99``). Older
  apimachinery releases dropped the suffix here (printing ``1000E`` as ``1``),
  which corrupts the value; we follow the fixed behaviour.

Deliberate deviations from Go, all on inputs Go handles by accident:

* Go's ``Quantity.String()`` on a freshly parsed quantity can echo the input
  verbatim (``"1.441"``, ``"+1"``, ``"1E3"``, ``"01"``) because ``ParseQuantity``
  caches it when it looks canonical. That is tracked upstream as a bug
  (kubernetes #138165/#138166); the agreed fix is the canonical form, which is
  what we always return (``"1441m"``, ``"1"``, ``"1e3"``, ``"1"``).
* Go's scanner accepts inputs with no digits at all (``"."``, ``"m"``, ``"Ki"``
  parse as zero, yet ``"Pi"`` is an error); we require at least one digit.
* Go truncates an exponent to int32, so ``1e4294967296`` silently becomes ``1``
  and some exponents near -2^31 hang the parser; we reject exponents outside the
  int32 range and evaluate every in-range exponent exactly.
"""

from __future__ import annotations

import functools
import json
import math
import re
from decimal import MAX_EMAX, MAX_PREC, MIN_EMIN, ROUND_UP, Context, Decimal, InvalidOperation
from enum import Enum
from typing import Final

__all__ = [
    "QuantityError",
    "add_quantities",
    "binary_quantity",
    "canonical_quantity",
    "quantity_value",
    "round_up_to_milli",
]


class QuantityError(ValueError):
    """A value that is not a valid Kubernetes quantity."""

    def __init__(self, quantity: object, reason: str) -> None:
        self.quantity = quantity
        self.reason = reason
        super().__init__(f"invalid quantity {_describe(quantity)}: {reason}")


class _Format(Enum):
    DECIMAL_SI = "DecimalSI"
    BINARY_SI = "BinarySI"
    DECIMAL_EXPONENT = "DecimalExponent"


_DECIMAL_SI_EXPONENTS: Final[dict[str, int]] = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
_DECIMAL_SI_SUFFIXES: Final[dict[int, str]] = {exp: suffix for suffix, exp in _DECIMAL_SI_EXPONENTS.items()}
_BINARY_SI_SUFFIXES: Final[tuple[str, ...]] = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
_BINARY_SI_POWERS: Final[dict[str, int]] = {s: i for i, s in enumerate(_BINARY_SI_SUFFIXES) if s}

# [0-9] rather than \d: Python's \d and int() accept non-ASCII digits, Go does not.
_QUANTITY_RE: Final = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?(.*)", re.ASCII | re.DOTALL)
_EXPONENT_RE: Final = re.compile(r"[eE]([+-]?)([0-9]+)", re.ASCII)

# Go keeps exponents in an int32; outside it Go wraps around or hangs, so refuse.
_MIN_EXPONENT: Final = -(2**31)
_MAX_EXPONENT: Final = 2**31 - 1

_NANO: Final = Decimal("1E-9")
_MAX_BINARY: Final = Decimal(2**63 - 1)
_BINARY_THRESHOLD: Final = Decimal(1024)

# Every operation we do (multiply by a power of two, quantize, integral check) is
# exact given unbounded precision, so this never rounds except where we ask it to.
_EXACT: Final = Context(prec=MAX_PREC, Emax=MAX_EMAX, Emin=MIN_EMIN, traps=[InvalidOperation])

# Bounds what an error message echoes back, since inputs come from untrusted clients.
_MAX_ECHO: Final = 64

_CACHE_SIZE: Final = 4096


def _describe(quantity: object) -> str:
    if isinstance(quantity, str):
        if len(quantity) > _MAX_ECHO:
            return json.dumps(quantity[:_MAX_ECHO], ensure_ascii=False) + "..."
        return json.dumps(quantity, ensure_ascii=False)
    try:
        text = repr(quantity)
    except ValueError:  # ints beyond sys.get_int_max_str_digits() refuse repr()
        text = f"<{type(quantity).__name__}>"
    return text if len(text) <= _MAX_ECHO else text[:_MAX_ECHO] + "..."


def canonical_quantity(value: str | int | float) -> str:
    """Return the canonical Kubernetes string for a quantity.

    ``value`` is a quantity string as found in YAML/JSON, or a JSON number, which
    stands for its decimal text. A float has already lost the spelling of the
    original JSON number, so it is read as its shortest positional decimal
    (``1e-07`` -> ``0.0000001``) and therefore always has DecimalSI format; pass
    the raw text instead when exponent notation must be preserved.

    Raises ``QuantityError`` for anything Kubernetes would reject.
    """
    # bool is an int subclass, but True is not a quantity in JSON or YAML.
    if isinstance(value, bool):
        raise QuantityError(value, "expected a string or a number, not bool")
    if isinstance(value, str):
        return _canonical_string(value)
    if isinstance(value, int):
        # Via Decimal, not str(): str() of an int refuses more than 4300 digits.
        return _canonical_string(format(Decimal(int(value)), "f"))
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(value, "not a finite number")
        # repr() is the shortest text that round-trips, i.e. what a JSON encoder
        # wrote; Decimal(value) would expose binary noise (0.1 -> 0.1000000000000000055...).
        return _canonical_string(format(Decimal(repr(float(value))), "f"))
    raise QuantityError(value, f"expected a string or a number, not {type(value).__name__}")


def quantity_value(text: str) -> Decimal:
    """The exact value of a quantity string (what Quantity.Cmp compares); QuantityError if bad."""
    return _parse(text)[0]


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _canonical_string(text: str) -> str:
    value, fmt = _parse(text)
    return _format(value, fmt)


def _parse(text: str) -> tuple[Decimal, _Format]:
    if not text:
        raise QuantityError(text, "empty string")
    if text != text.strip():
        raise QuantityError(text, "leading or trailing whitespace")
    match = _QUANTITY_RE.fullmatch(text)
    if match is None:  # the pattern matches every string; kept for the type checker
        raise QuantityError(text, "malformed number")
    sign, whole, fraction, suffix = match.groups()
    fraction = fraction or ""
    if not whole and not fraction:
        raise QuantityError(text, "missing number")

    fmt, exponent, binary_power = _interpret_suffix(text, suffix)

    digits = (whole + fraction).lstrip("0") or "0"
    # Constructing from text is exact and ignores the context, whatever the size.
    value = Decimal(f"{sign}{digits}E{exponent - len(fraction)}")
    if value.is_zero():
        return Decimal(0), fmt
    # A private copy: contexts record signal flags, and this runs on many threads.
    context = _EXACT.copy()
    if binary_power:
        value = context.multiply(value, Decimal(1024**binary_power))

    if _exponent_of(value) < -9:
        # Kubernetes rounds sub-nano requests up so asking for "some" never yields nothing.
        value = value.quantize(_NANO, rounding=ROUND_UP, context=context)
    if fmt is _Format.BINARY_SI and value.copy_abs() > _MAX_BINARY:
        value = _MAX_BINARY.copy_sign(value)
    return value, fmt


def _interpret_suffix(text: str, suffix: str) -> tuple[_Format, int, int]:
    """Return (format, power of ten, power of 1024) for a suffix."""
    # SI letters win over exponent syntax, so a bare "E" means exa.
    if suffix in _DECIMAL_SI_EXPONENTS:
        return _Format.DECIMAL_SI, _DECIMAL_SI_EXPONENTS[suffix], 0
    if suffix in _BINARY_SI_POWERS:
        return _Format.BINARY_SI, 0, _BINARY_SI_POWERS[suffix]
    match = _EXPONENT_RE.fullmatch(suffix)
    if match is None:
        # A leftover that starts like a number means the number itself was bad ("1.2.3").
        if suffix[0] in "+-.0123456789":
            raise QuantityError(text, "malformed number")
        raise QuantityError(text, f"unknown suffix {_describe(suffix)}")
    exp_sign, exp_digits = match.groups()
    exp_digits = exp_digits.lstrip("0") or "0"
    # Checked on length first so a megabyte of digits never reaches int().
    exponent = int(exp_sign + exp_digits) if len(exp_digits) <= 10 else None
    if exponent is None or not _MIN_EXPONENT <= exponent <= _MAX_EXPONENT:
        raise QuantityError(text, f"exponent {_describe(suffix[1:])} out of range")
    return _Format.DECIMAL_EXPONENT, exponent, 0


def _exponent_of(value: Decimal) -> int:
    exponent = value.as_tuple().exponent
    if not isinstance(exponent, int):  # only NaN/Infinity, which the grammar cannot produce
        raise ValueError(f"non-finite decimal {value}")
    return exponent


def _format(value: Decimal, fmt: _Format) -> str:
    if value.is_zero():
        return "0"
    if fmt is _Format.BINARY_SI:
        # Go shows small or fractional binary values in decimal, since 1.5 or 0.5Ki
        # has no exact power-of-1024 spelling with an integer mantissa.
        small = -_BINARY_THRESHOLD < value < _BINARY_THRESHOLD
        if not small and value == value.to_integral_value(context=_EXACT.copy()):
            return _format_binary(int(value))
        fmt = _Format.DECIMAL_SI
    return _format_decimal(value, fmt)


def _format_binary(mantissa: int) -> str:
    power = 0
    # |mantissa| <= 2^63-1 < 1024^7, so power never runs past "Ei".
    while mantissa % 1024 == 0:
        mantissa //= 1024
        power += 1
    return f"{mantissa}{_BINARY_SI_SUFFIXES[power]}"


def _format_decimal(value: Decimal, fmt: _Format) -> str:
    sign, digit_tuple, _ = value.as_tuple()
    exponent = _exponent_of(value)
    # Joined from the digit tuple rather than int(): no 4300-digit str limit.
    digits = "".join(map(str, digit_tuple))
    stripped = digits.rstrip("0")
    exponent += len(digits) - len(stripped)
    # Python's % is non-negative, so this lowers the exponent to the multiple of 3
    # at or below it, exactly like Go's loop multiplying the mantissa by 10.
    pad = exponent % 3
    mantissa = ("-" if sign else "") + stripped + "0" * pad
    exponent -= pad
    if fmt is _Format.DECIMAL_SI and exponent in _DECIMAL_SI_SUFFIXES:
        return mantissa + _DECIMAL_SI_SUFFIXES[exponent]
    return mantissa if exponent == 0 else f"{mantissa}e{exponent}"


def add_quantities(a: str, b: str) -> str:
    """Go's `a.Add(b)`, canonical: the exact sum in `a`'s format (in `b`'s when `a` is zero)."""
    value_a, fmt = _parse(a)
    value_b, fmt_b = _parse(b)
    return _format(_EXACT.copy().add(value_a, value_b), fmt_b if value_a.is_zero() else fmt)


def binary_quantity(count: int) -> str:
    """Go's `resource.NewQuantity(count, resource.BinarySI)`, canonical: `67108864` is `64Mi`."""
    return _format(Decimal(count), _Format.BINARY_SI)


_MILLI: Final = Decimal("1E-3")


def round_up_to_milli(text: str) -> str:
    """Go's `q.RoundUp(resource.Milli)`, canonical: a value finer than 1m goes up to the next
    1m, away from zero (`0.0001` is `1m`), in the quantity's own format."""
    value, fmt = _parse(text)
    if _exponent_of(value) < -3:
        value = value.quantize(_MILLI, rounding=ROUND_UP, context=_EXACT.copy())
    return _format(value, fmt)
