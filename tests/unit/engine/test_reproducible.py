"""With `EngineConfig.reproducible`, every solve ends on its work budget, not on the clock.

The solver's stages and the victim models stop on CP-SAT's deterministic time, but the
wall clock was their backstop at the cycle's limit: on an overloaded machine it ended a
stage first, and the trace benchmark's seed 42 took a solver answer in a run that shared
the machine and none alone. `kai simulate` promises the same bytes for the same input,
and the trace benchmark compares runs, so both set `reproducible`: the clock then only
guards against a hung solve, at `REPRODUCIBLE_WALL_FACTOR` times the limit.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from ortools.sat.python import cp_model
from ortools.sat.python import cp_model_helper as helper

from bench.synthetic_full import FullClusterSpec, full_cluster
from bench.trace import Setup
from kai.cli.main import main
from kai.engine.cycle import run_cycle
from kai.engine.model import REPRODUCIBLE_WALL_FACTOR, EngineConfig
from kai.engine.solver.solve import SolverAnswer, in_process, solve
from kai.simulate import rounds
from tests.unit.engine.staged import two_stages

SOLVE = cp_model.CpSolver.solve
LIMIT = 2.0


def _ten_times_slower(
    model: cp_model.CpModel, parameters: helper.SatParameters
) -> helper.CpSolverResponse:
    """`in_process`, reporting ten times the cycle's limit as the stage's wall time."""
    response = in_process(model, parameters)
    response.wall_time = 10 * LIMIT
    return response


def _solved(wall_factor: float) -> tuple[SolverAnswer, int, int]:
    staged, first, second = two_stages(first_hint=None)
    answer = solve(staged, LIMIT, 1, 0, _ten_times_slower, wall_factor)  # type: ignore[arg-type]
    assert answer is not None
    return answer, answer.value(first), answer.value(second)


def test_a_slow_machine_ends_the_solve_on_the_clock_unless_it_is_reproducible() -> None:
    clocked, _, _ = _solved(1.0)
    assert clocked.stages_solved == 1  # the first stage used up the clock
    reproducible, first, second = _solved(REPRODUCIBLE_WALL_FACTOR)
    assert reproducible.stages_solved == 2
    assert (first, second) == (5, 7)  # what a quiet machine finds


def _solve_limits(monkeypatch: pytest.MonkeyPatch, config: EngineConfig) -> list[float]:
    """Each solve's wall-clock limit over its deterministic one, for a cycle that solves
    the allocation model and several victim models."""
    ratios: list[float] = []

    def recording(self: cp_model.CpSolver, *args: Any, **kwargs: Any) -> Any:
        params = self.parameters
        ratios.append(params.max_time_in_seconds / params.max_deterministic_time)
        return SOLVE(self, *args, **kwargs)

    monkeypatch.setattr(cp_model.CpSolver, "solve", recording)
    result = run_cycle(full_cluster(FullClusterSpec(nodes=100, queues=10, seed=1)), config)
    assert result.eviction_report is not None and result.eviction_report.cp_sat_answers >= 5
    return ratios


def test_a_reproducible_cycle_gives_every_solve_the_clock_only_as_a_guard(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = EngineConfig(time_limit_seconds=1.0, solver_workers=1)
    clocked = _solve_limits(monkeypatch, config)
    assert min(clocked) < 10  # the clock is near the work budget: it can end a solve
    reproducible = _solve_limits(monkeypatch, dataclasses.replace(config, reproducible=True))
    assert len(reproducible) == len(clocked)
    # this machine does a deterministic second in 2-3 wall seconds, and a stage may overrun
    # its work budget threefold: 50 wall seconds per deterministic one is far from both
    assert min(reproducible) >= 50


def test_kai_simulate_and_the_trace_benchmark_are_reproducible(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[EngineConfig] = []
    real = rounds.simulate

    def recording(snapshot: Any, count: int, config: EngineConfig) -> Any:
        seen.append(config)
        return real(snapshot, count, config)

    monkeypatch.setattr(rounds, "simulate", recording)
    demo = Path(__file__).parents[3] / "examples" / "demo-cluster.yaml"
    assert main(["simulate", str(demo), "-o", "json", "--now", "2026-06-01T00:00:00Z"]) == 0
    assert [config.reproducible for config in seen] == [True]
    setup = Setup("openb", (), (), (42,), 1.3, 100, False, 1.0)
    kai_config, greedy_config = setup.configs()
    assert kai_config.reproducible
    assert greedy_config.time_limit_seconds == 0
