"""Lexicographic tiers: folded while the weights fit, solved in stages when they do not."""

from __future__ import annotations

from ortools.sat.python import cp_model

from kai.engine.solver.lexicographic import Tier, stages


def test_small_tiers_fold_into_one_stage_and_large_ones_split() -> None:
    small = [Tier("a", 0, 100), Tier("b", 0, 100), Tier("c", 0, 100)]
    assert len(stages(small)) == 1
    huge = [Tier("a", 0, 2**40), Tier("b", 0, 2**40)]
    assert [len(s.tiers) for s in stages(huge)] == [1, 1]


def test_one_unit_of_a_higher_tier_beats_everything_below() -> None:
    model = cp_model.CpModel()
    x = model.new_int_var(0, 1, "x")
    y = model.new_int_var(0, 10, "y")
    model.add(10 * x + y <= 10)  # x = 1 forces y = 0
    (stage,) = stages([Tier("x", x, 1), Tier("y", y, 10)])
    model.maximize(stage.objective())
    solver = cp_model.CpSolver()
    assert solver.solve(model) == cp_model.OPTIMAL
    assert (solver.value(x), solver.value(y)) == (1, 0)
