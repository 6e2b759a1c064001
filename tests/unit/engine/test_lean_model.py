"""The models kai builds skip OR-Tools' camelCase aliases and still solve as any model does."""

from __future__ import annotations

from ortools.sat.python import cp_model

from kai.engine.solver.lean import LeanCpModel


def test_a_lean_model_has_no_aliases_and_solves() -> None:
    model = LeanCpModel()
    assert not hasattr(model, "NewIntVar")  # the per-model alias binding was skipped
    assert hasattr(cp_model.CpModel(), "NewIntVar")  # which a plain model still does
    x = model.new_int_var(0, 5, "x")
    y = model.new_bool_var("y")
    model.add(x + 3 * y >= 4)
    model.minimize(x + 2 * y)
    solver = cp_model.CpSolver()
    assert solver.solve(model) == cp_model.OPTIMAL
    assert (solver.value(x), solver.value(y)) == (1, 1)
    copy = model.clone()
    assert cp_model.CpSolver().solve(copy) == cp_model.OPTIMAL
