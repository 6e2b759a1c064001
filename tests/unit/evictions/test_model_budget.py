"""The victim models' budget counts CP-SAT's deterministic time, so a slow machine decides the same.

Each eviction action shares half a second of solver time among its victim models. Counted
in wall time, a loaded machine spent it on fewer models and decided differently (a
500-node cycle under two CPU hogs evicted 20-35 pods where a quiet machine evicted 54).
Here the solver is made to report ten times the wall time it took, as a machine ten
times slower would, and the cycle must not change.
"""

from __future__ import annotations

from typing import Any

import pytest
from ortools.sat.python import cp_model

from bench.synthetic_full import FullClusterSpec, full_cluster
from kai.engine.cycle import run_cycle
from kai.engine.evictions import victim_model
from kai.engine.model import EngineConfig

CONFIG = EngineConfig(time_limit_seconds=1.0, solver_workers=1)


def test_a_solver_reporting_ten_times_the_wall_time_decides_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    snap = full_cluster(FullClusterSpec(nodes=100, queues=10, seed=1))
    quick = run_cycle(snap, CONFIG)
    assert quick.eviction_report is not None
    assert quick.eviction_report.cp_sat_answers >= 5  # several models share the budget

    real_wall: Any = cp_model.CpSolver.wall_time  # a property at run time, a method in the stubs

    def slow(self: Any) -> float:
        return float(real_wall.fget(self)) * 10 + 0.2

    monkeypatch.setattr(cp_model.CpSolver, "wall_time", property(slow))
    slowed = run_cycle(snap, CONFIG)
    assert slowed.evictions == quick.evictions
    assert slowed.pipelined == quick.pipelined
    assert slowed.eviction_report == quick.eviction_report


@pytest.mark.parametrize("status", [cp_model.UNKNOWN, cp_model.FEASIBLE])
def test_a_search_cut_short_costs_its_whole_limit_however_far_it_got(
    status: cp_model.CpSolverStatus,
) -> None:
    """Cut by the wall clock, a model reports less deterministic time than cut by its own
    limit (none while still loading); charged as reported, that difference changed the
    budget of every later model (5,000 nodes under two CPU hogs: 42 pods evicted, not 44)."""
    on_the_clock = victim_model._charged(status, 0.0, 0.02)
    on_its_limit = victim_model._charged(status, 0.0118, 0.02)
    assert on_the_clock == on_its_limit == 0.02


@pytest.mark.parametrize("status", [cp_model.OPTIMAL, cp_model.INFEASIBLE])
def test_a_finished_search_costs_its_deterministic_time(status: cp_model.CpSolverStatus) -> None:
    assert victim_model._charged(status, 0.004, 0.02) == pytest.approx(0.008)
    assert victim_model._charged(status, 0.5, 0.02) == 0.02  # never more than its limit
