"""Kubernetes Duration strings, exactly as Go's time.ParseDuration reads them."""

from __future__ import annotations

from fractions import Fraction

import pytest

from kai.api.durations import DurationError, parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90s", Fraction(90)),
        ("1h30m", Fraction(5400)),
        ("500ms", Fraction(1, 2)),
        ("1.5h", Fraction(5400)),
        ("2m0.5s", Fraction(241, 2)),
        ("100us", Fraction(1, 10_000)),
        ("100µs", Fraction(1, 10_000)),
        ("7ns", Fraction(7, 10**9)),
        ("0", Fraction(0)),
        ("-1m", Fraction(-60)),
        ("+5s", Fraction(5)),
    ],
)
def test_valid_durations(text: str, seconds: Fraction) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("value", ["", "1", "1d", "h", "1hm", "1 h", "+", "-", "1.2.3s", 90, None])
def test_invalid_durations_are_rejected(value: object) -> None:
    with pytest.raises(DurationError):
        parse_duration(value)
