"""A stand-in for the AllocationModel that `solve` takes, for tests that solve hand-made staged models."""

from __future__ import annotations

from ortools.sat.python import cp_model

from kai.engine.solver.lexicographic import Tier, stages

HIGH = 2**40  # two tiers this wide cannot share a stage


class Staged:
    """Just what `solve` reads of an AllocationModel: the CP-SAT model and its tiers."""

    def __init__(self, model: cp_model.CpModel, tiers: list[Tier]) -> None:
        self.model, self.tiers = model, tiers


def two_stages(first_hint: int | None) -> tuple[Staged, cp_model.IntVar, cp_model.IntVar]:
    """`first` at most 5, then `second` at most 7, each a stage of its own; both hinted
    (`second` with 0) unless `first_hint` is None, when the hint proves nothing."""
    model = cp_model.CpModel()
    first = model.new_int_var(0, HIGH, "first")
    second = model.new_int_var(0, HIGH, "second")
    model.add(first <= 5)
    model.add(second <= 7)
    tiers = [Tier("first", first, HIGH), Tier("second", second, HIGH)]
    assert len(stages(tiers)) == 2
    if first_hint is not None:
        model.add_hint(first, first_hint)
    model.add_hint(second, 0)
    return Staged(model, tiers), first, second
