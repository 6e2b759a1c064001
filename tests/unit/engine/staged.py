"""A stand-in for the AllocationModel that `solve` takes, for tests that solve hand-made staged models."""

from __future__ import annotations

from ortools.sat.python import cp_model

from kai.engine.solver.lexicographic import Tier


class Staged:
    """Just what `solve` reads of an AllocationModel: the CP-SAT model and its tiers."""

    def __init__(self, model: cp_model.CpModel, tiers: list[Tier]) -> None:
        self.model, self.tiers = model, tiers
