"""Lexicographic objectives in CP-SAT without overflowing 64-bit weights.

Each tier is a non-negative expression with a known upper bound. Consecutive tiers
are folded into one weighted objective while the product of their ranges fits in
CP-SAT's integer range, so that one unit of a higher tier outweighs every lower
tier. When it does not fit, tiers are solved in stages: each stage is optimised,
then fixed at the value found (with the solution kept as the next stage's hint).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ortools.sat.python import cp_model

_MAX_WEIGHT = 2**61


@dataclass(frozen=True)
class Tier:
    name: str
    expr: cp_model.LinearExprT
    bound: int


@dataclass(frozen=True)
class Stage:
    tiers: tuple[Tier, ...]

    def objective(self) -> cp_model.LinearExprT:
        expressions: list[cp_model.LinearExprT] = []
        weights: list[int] = []
        weight = 1
        for tier in reversed(self.tiers):
            expressions.append(tier.expr)
            weights.append(weight)
            weight *= tier.bound + 1
        return cp_model.LinearExpr.weighted_sum(expressions, weights)


def stages(tiers: Sequence[Tier]) -> list[Stage]:
    """Group tiers, highest first, into stages whose folded weights fit in 64 bits."""
    result: list[list[Tier]] = []
    span = 0
    for tier in tiers:
        width = tier.bound + 1
        if result and span * width < _MAX_WEIGHT:
            result[-1].append(tier)
            span *= width
        else:
            result.append([tier])
            span = width
    return [Stage(tuple(group)) for group in result]
