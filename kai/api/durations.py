"""Kubernetes Duration strings (`90s`, `1h30m`, `500ms`), parsed as Go's time.ParseDuration does.

KAI's min-runtime, preemption-delay and staleness fields are `metav1.Duration`, which
reads exactly Go's grammar: an optional sign, then one or more decimal numbers each
followed by a unit, or the bare `0`. Parsing is exact so that `0.1s` is 100 ms, not a
float that is off by a rounding error.
"""

from __future__ import annotations

import re
from fractions import Fraction

_UNIT_SECONDS = {
    "ns": Fraction(1, 10**9),
    "us": Fraction(1, 10**6),
    "µs": Fraction(1, 10**6),  # U+00B5 micro sign
    "μs": Fraction(1, 10**6),  # U+03BC greek mu
    "ms": Fraction(1, 10**3),
    "s": Fraction(1),
    "m": Fraction(60),
    "h": Fraction(3600),
}
_TERM = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)")


class DurationError(ValueError):
    """A value that is not a Kubernetes Duration string."""


def parse_duration(value: object) -> Fraction:
    """Seconds in a Duration string; negative durations are allowed, as in Go."""
    if not isinstance(value, str):
        raise DurationError(f"{value!r} is not a duration (expected a string such as 90s or 1h30m)")
    text = value
    sign = 1
    if text[:1] in ("+", "-"):
        sign = -1 if text[0] == "-" else 1
        text = text[1:]
    if text == "0":
        return Fraction(0)
    seconds = Fraction(0)
    position = 0
    while position < len(text):
        term = _TERM.match(text, position)
        if term is None:
            break
        seconds += Fraction(term[1]) * _UNIT_SECONDS[term[2]]
        position = term.end()
    if not text or position != len(text):
        raise DurationError(f"{value!r} is not a duration (expected e.g. 90s, 1h30m, 500ms)")
    return sign * seconds


def as_seconds(duration: Fraction | None) -> float | None:
    """A parsed duration as the float seconds the engine's objects carry; None stays unset."""
    return None if duration is None else float(duration)
