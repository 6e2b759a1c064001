"""Kubernetes resource quantities, parsed exactly.

Quantities arrive as strings in every manifest (`500m`, `16Gi`, `1e3`). The engine
compares sums of them against limits and quotas, so they are parsed into exact
`Fraction`s: a float would reproduce KAI#2209 (0.1 + 0.2 rejected against 0.3).
The grammar is the one `k8s.io/apimachinery/pkg/api/resource` accepts; anything
else is an error, never a silent zero.
"""

from __future__ import annotations

import functools
import math
import re
from fractions import Fraction

_BINARY_SUFFIXES = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL_SUFFIXES = {
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
_QUANTITY = re.compile(
    r"^(?P<sign>[+-]?)(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?:(?P<binary>Ki|Mi|Gi|Ti|Pi|Ei)|(?P<exp>[eE][+-]?[0-9]+)|(?P<decimal>[numkMGTPE]?))$"
)


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""


def parse_quantity(value: str | int | float) -> Fraction:
    """Parse a Kubernetes quantity into an exact number of base units.

    Integers are accepted as they are (YAML often carries `cpu: 2`); floats only when
    they are finite, since YAML turns `0.5` into a float before we see it.
    """
    if isinstance(value, bool):
        raise QuantityError(f"{value!r} is not a quantity")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(f"{value!r} is not a quantity")
        return Fraction(str(value))
    if not isinstance(value, str):
        raise QuantityError(f"{value!r} is not a quantity")
    return _parse_text(value)


@functools.lru_cache(maxsize=4096)
def _parse_text(value: str) -> Fraction:
    """Cached: a cluster's pods repeat a few quantities (`500m`, `16Gi`) thousands of times,
    and the live scheduler parses every pod again when it changes. A Fraction is immutable,
    so one parse can be shared; a refused text is not cached and raises every time."""
    match = _QUANTITY.match(value.strip())
    if match is None:
        raise QuantityError(f"{value!r} is not a quantity (expected e.g. 500m, 16Gi, 1e3)")
    number = Fraction(match["number"])
    if match["sign"] == "-":
        number = -number
    if match["binary"]:
        return number * _BINARY_SUFFIXES[match["binary"]]
    if match["exp"]:
        return number * Fraction(10) ** int(match["exp"][1:])
    return number * _DECIMAL_SUFFIXES[match["decimal"] or ""]


def parse_millis(value: str | int | float) -> int:
    """A cpu-like quantity in millicores, rounded up as the kubelet does."""
    return _ceil(parse_quantity(value) * 1000)


def parse_units(value: str | int | float) -> int:
    """A count-like quantity (bytes, pods, devices) in whole units, rounded up."""
    return _ceil(parse_quantity(value))


def _ceil(value: Fraction) -> int:
    return -((-value.numerator) // value.denominator)
