"""`ResourceSum` adds like `Fraction` does, exactly, whatever the mix of denominators."""

from __future__ import annotations

from fractions import Fraction

from hypothesis import given
from hypothesis import strategies as st

from kai.engine.resources import Resources, ResourceSum

amounts = st.fractions(min_value=-(10**6), max_value=10**12, max_denominator=1000)


@given(st.lists(st.tuples(amounts, amounts, amounts), max_size=40))
def test_the_sum_equals_adding_one_by_one(
    values: list[tuple[Fraction, Fraction, Fraction]],
) -> None:
    expected = Resources()
    total = ResourceSum()
    for gpu, cpu, memory in values:
        expected = expected + Resources(gpu, cpu, memory)
        total.add(Resources(gpu, cpu, memory))
    assert total.total() == expected


def test_thirds_make_a_whole() -> None:
    total = ResourceSum()
    for _ in range(3):
        total.add(Resources(Fraction(1, 3), Fraction(1000), Fraction(1, 2)))
    assert total.total() == Resources(Fraction(1), Fraction(3000), Fraction(3, 2))


@given(st.tuples(amounts, amounts, amounts), st.tuples(amounts, amounts, amounts))
def test_adding_and_subtracting_are_exact_per_resource(
    left: tuple[Fraction, Fraction, Fraction], right: tuple[Fraction, Fraction, Fraction]
) -> None:
    a, b = Resources(*left), Resources(*right)
    assert (a + b).gpu == left[0] + right[0]
    assert (a + b).cpu == left[1] + right[1]
    assert (a + b).memory == left[2] + right[2]
    assert a - b == Resources(*(x - y for x, y in zip(left, right, strict=True)))
    sums = (a + b, a - b)
    assert all(type(value) is Fraction for total in sums for _, value in total.items())


def test_whole_amounts_total_to_fractions() -> None:
    """The whole-number shortcut still hands out Fractions (callers read `.denominator`)."""
    total = ResourceSum()
    total.add(Resources(Fraction(2), Fraction(500), Fraction(10**9)))
    total.add(Resources(Fraction(1), Fraction(250), Fraction(1)))
    summed = total.total()
    assert summed == Resources(Fraction(3), Fraction(750), Fraction(10**9 + 1))
    assert all(type(value) is Fraction for _, value in summed.items())
