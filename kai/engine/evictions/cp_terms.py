"""The small vocabulary the victim models share: integer units, and how auxiliary variables follow.

CP-SAT works in integers: amounts are scaled to units small enough that products of
two of them stay far from 64 bits. Many of a model's variables only record what the
others imply (is something taken from this queue, is a device freed); the model
lists how each follows, so a warm start can give every variable its value.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from fractions import Fraction
from math import ceil, floor

from ortools.sat.python import cp_model

from kai.engine.resources import ResourceName

RULE_UNITS: dict[ResourceName, Fraction] = {
    "gpu": Fraction(1000),  # thousandths of a GPU
    "cpu": Fraction(1),  # millicores
    "memory": Fraction(1, 2**26),  # 64 MiB: products of two amounts stay far from 2**63
}

Value = Callable[[cp_model.IntVar], int]
"""A variable's value in a given solution."""
Derivation = Callable[[Value], int]
"""How an auxiliary variable's value follows from the others' in a solution."""


def scaled(name: ResourceName, value: Fraction, up: bool) -> int:
    amount = value * RULE_UNITS[name]
    return ceil(amount) if up else floor(amount)


def any_of(literals: Sequence[cp_model.IntVar]) -> Derivation:
    return lambda value: int(any(value(literal) for literal in literals))


def all_of(literals: Sequence[cp_model.IntVar]) -> Derivation:
    return lambda value: int(all(value(literal) for literal in literals))


def exceeds(held: int, freed: Sequence[tuple[int, cp_model.IntVar]], bound: int) -> Derivation:
    """1 when what is held, less what the chosen victims free, is above the bound."""
    return lambda value: int(held - sum(c * value(v) for c, v in freed) > bound)


def distinct(literals: Iterable[cp_model.IntVar]) -> list[cp_model.IntVar]:
    """Each variable once (CP-SAT variables overload ==, so sets of them are not safe)."""
    seen: dict[int, cp_model.IntVar] = {}
    for literal in literals:
        seen.setdefault(literal.index, literal)
    return list(seen.values())
