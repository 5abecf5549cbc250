"""Quantities: exact milli-unit arithmetic, as properties over many values."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pykueue.api import quantity
from pykueue.api.meta import milli

milli_values = st.integers(min_value=-(10**15), max_value=10**15)
suffixes = st.sampled_from(["", "m", "k", "M", "G", "Ki", "Mi", "Gi", "Ti"])


@given(milli_values)
def test_parse_of_format_is_identity(value: int) -> None:
    assert quantity.parse(quantity.format_milli(value)) == value


@given(milli_values)
def test_canonical_is_idempotent(value: int) -> None:
    text = quantity.format_milli(value)
    assert quantity.canonical(text) == text


@given(
    st.integers(min_value=0, max_value=10**6), suffixes, st.integers(min_value=0, max_value=10**6), suffixes
)
def test_order_of_texts_is_the_order_of_values(a: int, sa: str, b: int, sb: str) -> None:
    left, right = f"{a}{sa}", f"{b}{sb}"
    if quantity.parse_exact(left) <= quantity.parse_exact(right):
        assert quantity.parse(left) <= quantity.parse(right)
    assert (quantity.parse(left) == quantity.parse(right)) == (
        quantity.canonical(left) == quantity.canonical(right)
    )


@given(milli_values, milli_values)
def test_sums_are_exact(a: int, b: int) -> None:
    assert quantity.parse(quantity.format_milli(a)) + quantity.parse(quantity.format_milli(b)) == a + b


@given(st.integers(min_value=0, max_value=10**9))
def test_whole_units_written_as_milli_are_the_same_quantity(units: int) -> None:
    assert quantity.parse(f"{units * 1000}m") == quantity.parse(str(units))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("40000m", 40_000),
        ("40", 40_000),
        ("1.5", 1_500),
        ("1Ki", 1024_000),
        ("1Gi", 2**30 * 1000),
        ("1e3", 1_000_000),
        ("2k", 2_000_000),
        ("1n", 1),  # below a milli-unit rounds up
        ("0", 0),
        (7, 7_000),
        (0.5, 500),
    ],
)
def test_known_values(text: str | int | float, expected: int) -> None:
    assert milli(str(text)) == expected if isinstance(text, str) else quantity.parse(text) == expected


def test_40000m_equals_40() -> None:
    assert quantity.canonical("40000m") == quantity.canonical("40") == "40"


@pytest.mark.parametrize("text", ["", "abc", "1.2.3", "1Gb", "--1", "1e999", "Gi", "1 Gi x"])
def test_invalid_texts(text: str) -> None:
    with pytest.raises(quantity.QuantityError):
        quantity.parse(text)


def test_booleans_are_not_quantities() -> None:
    with pytest.raises(quantity.QuantityError):
        quantity.parse(True)
