"""Lexicographic tiers: folded while the weights fit, solved in stages when they do not."""

from __future__ import annotations

from ortools.sat.python import cp_model

from kai.engine.solver.lexicographic import Tier, stages
from kai.engine.solver.solve import solve
from tests.unit.engine.staged import Staged


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


def test_a_stage_is_fixed_at_its_exact_integer_optimum_above_two_to_the_53() -> None:
    # 2**60 - 1 has no exact float: fixing the first stage at the solver's float objective
    # (2**60) would make the second stage infeasible and leave its tier unoptimised.
    model = cp_model.CpModel()
    x = model.new_int_var(0, 2**60, "x")
    y = model.new_int_var(0, 1, "y")
    model.add(x <= 2**60 - 1)
    tiers = [Tier("x", x, 2**60), Tier("y", y, 1)]
    assert len(stages(tiers)) == 2
    answer = solve(Staged(model, tiers), 2.0, 1, 0)  # type: ignore[arg-type]
    assert answer is not None
    assert (answer.stages_solved, answer.stages_planned) == (2, 2)
    assert (answer.value(x), answer.value(y)) == (2**60 - 1, 1)


def test_every_stage_is_solved_within_the_cycle_limit() -> None:
    model = cp_model.CpModel()
    tiers = []
    for i in range(5):
        v = model.new_int_var(0, 2**40, f"v{i}")
        model.add(v <= 2**40 - i)
        tiers.append(Tier(f"v{i}", v, 2**40))
    answer = solve(Staged(model, tiers), 1.0, 1, 0)  # type: ignore[arg-type]
    assert answer is not None
    assert answer.stages_solved == answer.stages_planned == 5
    assert [answer.value(t.expr) for t in tiers] == [2**40 - i for i in range(5)]  # type: ignore[arg-type]
