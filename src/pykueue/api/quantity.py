"""Kubernetes resource quantities as exact integers of milli-units.

A quantity such as ``500m``, ``2``, ``1.5Gi`` or ``1e3`` is parsed into an
``int`` counting thousandths of the unit, so ``40000m`` and ``40`` are the
same number and arithmetic never rounds. Values finer than a milli-unit are
rounded up, as Kubernetes does when it asks for a quantity's milli value.

The text form written back uses the largest suffix that keeps the number
whole, so a value read from ``4Gi`` is written as ``4Gi`` and ``1500m`` stays
``1500m``.
"""

from __future__ import annotations

import functools
import re
from fractions import Fraction
from typing import Final

MILLI: Final = 1000

_BINARY: Final = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL: Final = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_PATTERN: Final = re.compile(
    r"^(?P<sign>[+-]?)(?P<num>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?:(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])|[eE](?P<exp>[+-]?[0-9]+))?$"
)
# Kubernetes refuses quantities beyond what fits its int64 scaled storage; we refuse
# absurd exponents so a typo cannot make us allocate a number with a million digits.
_MAX_EXPONENT: Final = 30


class QuantityError(ValueError):
    """The text is not a Kubernetes quantity."""


def parse(text: str | int | float) -> int:
    """Return the quantity in milli-units, rounding sub-milli fractions up."""
    exact = parse_exact(text)
    milli = exact * MILLI
    return -((-milli.numerator) // milli.denominator)


def parse_exact(text: str | int | float) -> Fraction:
    """Return the quantity as an exact fraction of the unit."""
    if isinstance(text, bool):
        raise QuantityError(f"quantities must be strings or numbers, not {text!r}")
    if isinstance(text, int):
        return Fraction(text)
    if isinstance(text, float):
        return Fraction(str(text))
    if not isinstance(text, str):
        raise QuantityError(f"quantities must be strings or numbers, not {type(text).__name__}")
    match = _PATTERN.match(text.strip())
    if match is None:
        raise QuantityError(f"{text!r} is not a quantity (expected e.g. 500m, 2, 1.5Gi)")
    value = Fraction(match["num"])
    if match["exp"] is not None:
        exponent = int(match["exp"])
        if abs(exponent) > _MAX_EXPONENT:
            raise QuantityError(f"{text!r}: exponent out of range")
        value *= Fraction(10) ** exponent
    else:
        suffix = match["suffix"] or ""
        value *= _BINARY[suffix] if suffix in _BINARY else _DECIMAL[suffix]
    return -value if match["sign"] == "-" else value


# The binary suffixes format_milli may use (Mi and above), largest first.
_LARGE_BINARY: Final = tuple(
    (suffix, factor)
    for suffix, factor in sorted(_BINARY.items(), key=lambda item: -item[1])
    if factor >= 2**20
)


@functools.lru_cache(maxsize=4096)
def format_milli(milli: int) -> str:
    """Write milli-units in Kubernetes notation, with the largest exact suffix."""
    # Cached: queue statuses format the same few amounts hundreds of thousands of times a run.
    if milli % MILLI:
        return f"{milli}m"
    units = milli // MILLI
    if units == 0:
        return "0"
    for suffix, factor in _LARGE_BINARY:
        if units % factor == 0:
            return f"{units // factor}{suffix}"
    return str(units)


_DECIMAL_UP: Final = (("E", 10**18), ("P", 10**15), ("T", 10**12), ("G", 10**9), ("M", 10**6), ("k", 10**3))
_BINARY_UP: Final = tuple(sorted(_BINARY.items(), key=lambda item: -item[1]))


@functools.lru_cache(maxsize=4096)
def format_resource(resource: str, milli: int) -> str:
    """An amount of ``resource`` as Kubernetes prints it in upstream Kueue's messages.

    Upstream's resource formatter: cpu as a decimal milli-quantity (``1500m``, ``50``,
    ``1k``), memory, ephemeral storage and huge pages in binary units (``1Gi``), every
    other resource as a decimal count (``2``, ``1k``), each in Go's canonical form: the
    largest suffix that leaves a whole number.
    """
    if milli == 0:
        return "0"
    sign, magnitude = ("-", -milli) if milli < 0 else ("", milli)
    if resource != "cpu" and magnitude % MILLI == 0:
        units = magnitude // MILLI
        binary = resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-")
        for suffix, factor in _BINARY_UP if binary else _DECIMAL_UP:
            if units % factor == 0:
                return f"{sign}{units // factor}{suffix}"
        return f"{sign}{units}"
    if magnitude % MILLI:
        return f"{sign}{magnitude}m"
    units = magnitude // MILLI
    for suffix, factor in _DECIMAL_UP:
        if units % factor == 0:
            return f"{sign}{units // factor}{suffix}"
    return f"{sign}{units}"


def canonical(text: str | int | float) -> str:
    """The canonical text of a quantity (``40000m`` -> ``40``)."""
    return format_milli(parse(text))
