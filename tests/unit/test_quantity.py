"""Kubernetes quantity grammar: exact values for valid strings, an error for anything else."""

from __future__ import annotations

from fractions import Fraction

import pytest

from kai.api.quantity import QuantityError, parse_millis, parse_quantity, parse_units


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("500m", Fraction(1, 2)),
        ("16Gi", Fraction(16 * 1024**3)),
        ("1e3", Fraction(1000)),
        ("1E3", Fraction(1000)),
        ("1.5", Fraction(3, 2)),
        (".5", Fraction(1, 2)),
        ("2", Fraction(2)),
        ("1k", Fraction(1000)),
        ("1M", Fraction(1_000_000)),
        ("1Mi", Fraction(1_048_576)),
        ("100n", Fraction(1, 10_000_000)),
        ("-1", Fraction(-1)),
        ("+3", Fraction(3)),
        (2, Fraction(2)),
        (0.5, Fraction(1, 2)),
    ],
)
def test_valid_quantities_parse_to_exact_values(
    text: str | int | float, expected: Fraction
) -> None:
    assert parse_quantity(text) == expected


def test_decimal_fractions_add_up_exactly() -> None:
    # KAI#2209: with floats 0.1 + 0.2 != 0.3 and an exact-quota request was refused.
    assert parse_quantity("0.1") + parse_quantity("0.2") == parse_quantity("0.3")


@pytest.mark.parametrize(
    "text", ["abc", "1.5.5", "16GB", "", "Gi", "1e", "1 Gi", "1.5x", "--1", "0x10", "1e3Mi"]
)
def test_invalid_strings_are_rejected(text: str) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(text)


@pytest.mark.parametrize("value", [True, None, float("nan"), float("inf"), [1]])
def test_values_that_are_not_quantities_are_rejected(value: object) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(value)  # type: ignore[arg-type]


def test_millis_and_units_round_up_like_the_kubelet() -> None:
    assert parse_millis("500m") == 500
    assert parse_millis("0.1") == 100
    assert parse_millis("1n") == 1
    assert parse_units("1.5") == 2
    assert parse_units("1Ki") == 1024


def test_a_text_parses_the_same_every_time_and_a_refused_one_is_refused_every_time() -> None:
    """Parses are cached by text: the cache hands back the same value, never a refusal."""
    assert [parse_quantity("750m") for _ in range(3)] == [Fraction(3, 4)] * 3
    for _ in range(2):
        with pytest.raises(QuantityError):
            parse_quantity("12 apples")
