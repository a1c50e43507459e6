"""Tests for core.quantity against Go's k8s.io/apimachinery/pkg/api/resource.

Expected strings marked "Go" come from apimachinery's own tests (quantity_test.go,
quantity_golden_test.go's canonical column); the rest follow from its rules.
"""

from __future__ import annotations

import json
import re
from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from pods_api.core.api import quantity
from pods_api.core.api.quantity import QuantityError, canonical_quantity

MAX_INT64 = 2**63 - 1

CANONICAL_CASES: list[tuple[str, str]] = [
    # --- examples from the brief ---
    ("1000m", "1"),
    ("0.5", "500m"),
    ("1000", "1k"),
    ("100M", "100M"),
    ("1e3", "1e3"),
    ("1500e0", "1500"),
    ("1.5", "1500m"),
    ("1.5k", "1500"),
    ("12e6", "12e6"),
    ("-1.5", "-1500m"),
    ("0.1", "100m"),
    ("1E3", "1e3"),
    ("+1", "1"),
    ("0.000001", "1u"),
    ("1000000", "1M"),
    ("1Ki", "1Ki"),
    ("0", "0"),
    ("0Mi", "0"),
    ("-0", "0"),
    ("1024Mi", "1Gi"),
    ("1.5Gi", "1536Mi"),
    ("2048Ki", "2Mi"),
    ("0.5Gi", "512Mi"),
    ("0.5Ki", "512"),
    ("1536", "1536"),
    ("0.0000000001", "1n"),
    # --- Go: TestQuantityString alternates and TestQuantityParseEmit ---
    ("1Mi", "1Mi"),
    ("1Gi", "1Gi"),
    ("1000M", "1G"),
    ("307200Ki", "300Mi"),
    ("1025024Mi", "1001Gi"),
    ("1024Gi", "1Ti"),
    ("5000m", "5"),
    ("0.001T", "1G"),
    ("1000u", "1m"),
    ("1.08", "1080m"),
    ("1080000000n", "1080m"),
    (".001e12", "1e9"),
    ("0.001e0", "1e-3"),
    ("1000e-12", "1e-9"),
    ("00", "0"),
    (".001Ki", "1024m"),
    (".000001Ki", "1024u"),
    (".000000001Ki", "1024n"),
    (".000000000001Ki", "2n"),
    ("-.001Ki", "-1024m"),
    ("-.000000000001Ki", "-2n"),
    # --- Go: TestQuantityParse values, printed canonically ---
    ("50k", "50k"),
    ("40T", "40T"),
    ("300T", "300T"),
    ("12E", "12E"),
    ("1.01E", "1010P"),
    ("100.035k", "100035"),
    ("10.035M", "10035k"),
    ("6.987654321G", "6987654321"),
    ("0.0005k", "500m"),
    ("0.00050k", "500m"),
    ("0.50000", "500m"),
    ("0.5e-1", "50e-3"),
    ("1.2e3", "1200"),
    ("1.3E+6", "1300e3"),
    ("1.40e9", "1400e6"),
    ("1.7E18", "1700e15"),
    ("1e14", "100e12"),
    ("100.035Ki", "102435840m"),
    ("0.05Gi", "53687091200m"),
    ("0.025Ti", "27487790694400m"),
    (".0001k", "100m"),
    ("1.", "1"),
    ("1.G", "1G"),
    # --- Go: rounding to nano, away from zero ---
    ("3.001n", "4n"),
    ("1.1E-9", "2e-9"),
    ("0.0000000005", "1n"),
    ("0.5e-9", "1e-9"),
    ("0.9n", "1n"),
    ("0.00000012345", "124n"),
    ("0.00000012354", "124n"),
    ("-0.0000000001", "-1n"),
    ("-3.001n", "-4n"),
    ("0.000000000000001", "1n"),
    ("1e-10", "1e-9"),
    ("1e-1000", "1e-9"),
    # --- Go golden: the #138165 class (Go's String() echoes these; its canonical form is this) ---
    ("1.441", "1441m"),
    ("1.000001", "1000001u"),
    ("1.000000001", "1000000001n"),
    ("01", "1"),
    ("+1Ki", "1Ki"),
    ("12e+6", "12e6"),
    ("1e03", "1e3"),
    # --- Go golden: int64 boundaries are not a limit for decimal values ---
    ("9223372036854775807", "9223372036854775807"),
    ("9223372036854775808", "9223372036854775808"),
    ("18446744073709551616", "18446744073709551616"),
    ("-9223372036854775809", "-9223372036854775809"),
    # --- Go golden: beyond the largest SI suffix falls back to exponent notation ---
    ("1E", "1E"),
    ("100E", "100E"),
    ("1000E", "1e21"),
    ("1e100", "10e99"),
    ("1e21", "1e21"),
    # --- Go golden: binary values are capped at +/-(2^63-1) ---
    ("8Ei", "9223372036854775807"),
    ("9Ei", "9223372036854775807"),
    ("-20Ei", "-9223372036854775807"),
    ("9223372036854775807Ki", "9223372036854775807"),
    ("7Ei", "7Ei"),
    ("1024Pi", "1Ei"),
    # --- Go golden: negative binary rounding ---
    ("-9.5Gi", "-9728Mi"),
    ("-9.5000000001Gi", "-10200547328107374183n"),
    # --- binary rules: |v| < 1024 or fractional prints as DecimalSI ---
    ("1.5Ki", "1536"),
    ("-1.5Ki", "-1536"),
    ("-0.5Ki", "-512"),
    ("1023Ki", "1023Ki"),
    ("0.5Mi", "512Ki"),
    ("1.0000000001Ki", "1024000000103n"),
    ("1.1Ki", "1126400m"),
    # --- exponent format keeps exponent notation, never SI letters ---
    ("1e0", "1"),
    ("1E-3", "1e-3"),
    ("-1e-3", "-1e-3"),
    ("0e5", "0"),
    ("1.5e1", "15"),
    ("1e2147483647", "10e2147483646"),
]


@pytest.mark.parametrize(("text", "expected"), CANONICAL_CASES)
def test_canonical_table(text: str, expected: str) -> None:
    assert canonical_quantity(text) == expected


@pytest.mark.parametrize(("text", "expected"), CANONICAL_CASES)
def test_canonical_form_is_a_fixed_point(text: str, expected: str) -> None:
    assert canonical_quantity(expected) == expected


def test_exponent_near_int32_min_is_evaluated_exactly() -> None:
    # Go hangs on these (its corpus marks them "hang"); the exact answer is 1n.
    assert canonical_quantity("1e-2147483648") == "1e-9"
    assert canonical_quantity("-5e-2147483000") == "-1e-9"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1, "1"),
        (0, "0"),
        (-7, "-7"),
        (1000, "1k"),
        (1024, "1024"),  # a JSON number is DecimalSI, never BinarySI
        (2**70, "1180591620717411303424"),
        (0.5, "500m"),
        (1.5, "1500m"),
        (0.1, "100m"),  # shortest repr, not the float's binary expansion
        (3.0, "3"),
        (-0.0, "0"),
        (1e-7, "100n"),
        (1e22, "10e21"),
        (-2.5e-10, "-1n"),
    ],
)
def test_json_numbers_mean_their_decimal_text(value: int | float, expected: str) -> None:
    assert canonical_quantity(value) == expected


def test_json_integer_beyond_int_str_digit_limit() -> None:
    # str(10**5000) raises in Python >= 3.11; the quantity is still valid.
    assert canonical_quantity(10**5000) == "100e4998"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "empty string"),
        ("abc", "missing number"),
        ("aoeu", "missing number"),
        ("1x", 'unknown suffix "x"'),
        ("1.2.3", "malformed number"),
        ("1.1.M", "malformed number"),
        ("1+1.0M", "malformed number"),
        (" 1", "leading or trailing whitespace"),
        ("1 ", "leading or trailing whitespace"),
        ("1\n", "leading or trailing whitespace"),
        ("0.1mi", 'unknown suffix "mi"'),
        ("0.1am", 'unknown suffix "am"'),
        (".5i", 'unknown suffix "i"'),
        ("1i", 'unknown suffix "i"'),
        ("-3.01i", 'unknown suffix "i"'),
        ("-3.01e-", 'unknown suffix "e-"'),
        ("1e", 'unknown suffix "e"'),
        ("1e+", 'unknown suffix "e+"'),
        ("1ki", 'unknown suffix "ki"'),
        ("1KI", 'unknown suffix "KI"'),
        ("1K", 'unknown suffix "K"'),
        ("1 Ki", 'unknown suffix " Ki"'),
        ("0x10", 'unknown suffix "x10"'),
        ("1_000", 'unknown suffix "_000"'),
        ("--1", "missing number"),
        ("+", "missing number"),
        # Go's scanner lets these digitless forms through as zero; we do not.
        (".", "missing number"),
        ("-.", "missing number"),
        ("m", "missing number"),
        ("Ki", "missing number"),
        ("e3", "missing number"),
        ("\u0661", "missing number"),  # ARABIC-INDIC DIGIT ONE: not an ASCII digit
        ("inf", "missing number"),
        ("nan", "missing number"),
        # Go would wrap these into int32 and silently change the value.
        ("1e2147483648", 'exponent "2147483648" out of range'),
        ("1e-2147483649", 'exponent "-2147483649" out of range'),
        ("1e4294967296", 'exponent "4294967296" out of range'),
        ("1e" + "9" * 40, "out of range"),
    ],
)
def test_invalid_strings(text: str, reason: str) -> None:
    with pytest.raises(QuantityError) as info:
        canonical_quantity(text)
    message = str(info.value)
    assert message.startswith(f"invalid quantity {json.dumps(text, ensure_ascii=False)}: ")
    assert reason in message
    assert info.value.quantity == text


def test_error_message_format() -> None:
    with pytest.raises(QuantityError, match=r'^invalid quantity "12x": unknown suffix "x"$'):
        canonical_quantity("12x")


def test_error_is_a_value_error() -> None:
    with pytest.raises(ValueError, match='"abc"'):
        canonical_quantity("abc")


def test_error_message_truncates_long_input() -> None:
    text = "1" * 10_000 + "x"
    with pytest.raises(QuantityError) as info:
        canonical_quantity(text)
    assert len(str(info.value)) < 200
    assert str(info.value).startswith('invalid quantity "111')


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (True, "True"),
        (False, "False"),
        (None, "None"),
        ([1], "[1]"),
        (b"1", "b'1'"),
        (Decimal("1"), "Decimal('1')"),
        (float("nan"), "nan"),
        (float("inf"), "inf"),
        (float("-inf"), "-inf"),
    ],
)
def test_invalid_types(value: object, shown: str) -> None:
    with pytest.raises(QuantityError) as info:
        canonical_quantity(value)  # type: ignore[arg-type]
    assert str(info.value).startswith(f"invalid quantity {shown}: ")


def test_string_results_are_cached() -> None:
    cache_info = quantity._canonical_string.cache_info
    assert cache_info().maxsize == 4096
    canonical_quantity("123Mi")
    hits = cache_info().hits
    canonical_quantity("123Mi")
    assert cache_info().hits == hits + 1


# --- property tests -------------------------------------------------------------------

DECIMAL_SI = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
BINARY_SI = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
NANO = Fraction(1, 10**9)

# An independent reader for the tests' own oracle; deliberately not core.quantity's parser.
QUANTITY_RE = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?(|[numkMGTPE]|[KMGTPE]i|[eE][+-]?[0-9]+)")
CANONICAL_RE = re.compile(r"0|-?[1-9][0-9]*(|[numkMGTPE]|[KMGTPE]i|e-?[1-9][0-9]*)")


def exact_value(text: str) -> tuple[Fraction, str]:
    """Return the exact value written and its format name, with no rounding."""
    match = QUANTITY_RE.fullmatch(text)
    assert match is not None, text
    sign, whole, fraction, suffix = match.groups()
    fraction = fraction or ""
    value = Fraction(int((whole + fraction) or "0"), 10 ** len(fraction))
    if suffix in DECIMAL_SI:
        value *= Fraction(10) ** DECIMAL_SI[suffix]
        fmt = "DecimalSI"
    elif suffix in BINARY_SI:
        value *= 1024 ** BINARY_SI[suffix]
        fmt = "BinarySI"
    else:
        value *= Fraction(10) ** int(suffix[1:])
        fmt = "DecimalExponent"
    return (-value if sign == "-" else value), fmt


def go_value(text: str) -> Fraction:
    """The value Go stores: rounded away from zero to 1n, binary capped at 2^63-1."""
    value, fmt = exact_value(text)
    magnitude = abs(value)
    nanos = magnitude / NANO
    magnitude = Fraction(-(-nanos.numerator // nanos.denominator)) * NANO  # ceiling
    if fmt == "BinarySI":
        magnitude = min(magnitude, Fraction(MAX_INT64))
    return -magnitude if value < 0 else magnitude


def has_digits(text: str) -> bool:
    match = QUANTITY_RE.fullmatch(text)
    return match is not None and bool(match.group(2) or match.group(3))


quantity_strings = st.builds(
    lambda sign, whole, dot, fraction, suffix: f"{sign}{whole}{dot}{fraction}{suffix}",
    st.sampled_from(["", "+", "-"]),
    st.text("0123456789", max_size=12),
    st.sampled_from(["", "."]),
    st.text("0123456789", max_size=12),
    st.one_of(
        st.sampled_from(sorted(DECIMAL_SI) + sorted(BINARY_SI)),
        st.builds(
            lambda e, sign, exp: f"{e}{sign}{exp}",
            st.sampled_from(["e", "E"]),
            st.sampled_from(["", "+", "-"]),
            st.integers(min_value=0, max_value=40),
        ),
    ),
).filter(has_digits)


@given(quantity_strings)
@example("1.5Gi")
@example("-9.5000000001Gi")
@example("1000E")
@example("9Ei")
@example(".000000000001Ki")
def test_canonical_is_idempotent_and_preserves_value(text: str) -> None:
    out = canonical_quantity(text)
    assert CANONICAL_RE.fullmatch(out), out
    assert canonical_quantity(out) == out
    assert exact_value(out)[0] == go_value(text)


@given(quantity_strings)
def test_canonical_keeps_the_format_family(text: str) -> None:
    out = canonical_quantity(text)
    _, fmt = exact_value(text)
    suffix = re.sub(r"^-?[0-9]+", "", out)
    if fmt == "DecimalExponent":
        assert suffix == "" or suffix.startswith("e")
    elif fmt == "DecimalSI":
        assert suffix in DECIMAL_SI or suffix.startswith("e")
    else:
        assert suffix in DECIMAL_SI or suffix in BINARY_SI


@given(quantity_strings)
def test_mantissa_is_as_small_as_possible(text: str) -> None:
    out = canonical_quantity(text)
    match = re.fullmatch(r"(-?[0-9]+)(.*)", out)
    assert match is not None
    mantissa, suffix = match.groups()
    if suffix in BINARY_SI:
        assert int(mantissa) % 1024 != 0
    elif out != "0":
        assert not mantissa.endswith("000")


@given(quantity_strings)
def test_negation_only_adds_a_sign(text: str) -> None:
    # Go's tests check the same symmetry: rounding and capping act on the magnitude.
    unsigned = text.lstrip("+-")
    positive = canonical_quantity(unsigned)
    negative = canonical_quantity("-" + unsigned)
    assert negative == ("0" if positive == "0" else "-" + positive)


@given(st.integers(min_value=-(10**30), max_value=10**30))
def test_json_integer_matches_its_text(value: int) -> None:
    assert canonical_quantity(value) == canonical_quantity(str(value))


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_json_float_matches_its_positional_text(value: float) -> None:
    assert canonical_quantity(value) == canonical_quantity(format(Decimal(repr(value)), "f"))
