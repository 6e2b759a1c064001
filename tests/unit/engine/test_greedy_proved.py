"""The later stages are not run once the first proves that nothing beats the greedy answer there.

The first stage holds KAI's order over the attempts from the greedy pass's first refusal
on. When it is solved to optimality at the value of the greedy answer it was hinted
with, the solver stops (`GREEDY_PROVED`) and the cycle keeps greedy's answer: on the
engine benchmark the later stages never made an answer better than greedy's and took
0.5-0.9 s of a cycle. These tests solve two-stage models with a hint, as the cycle
does, and count the stages run.
"""

from __future__ import annotations

import pytest
from ortools.sat.python import cp_model
from ortools.sat.python import cp_model_helper as helper

from bench.synthetic import ClusterSpec, synthetic_cluster
from kai.engine.cycle import run_cycle
from kai.engine.model import EngineConfig
from kai.engine.solver import optimize
from kai.engine.solver.lexicographic import Tier, stages
from kai.engine.solver.solve import GREEDY_PROVED, in_process, solve
from tests.unit.engine.staged import Staged, two_stages


class _Counted:
    """`in_process`, counting the stages it solves."""

    def __init__(self) -> None:
        self.stages = 0

    def __call__(
        self, model: cp_model.CpModel, parameters: helper.SatParameters
    ) -> helper.CpSolverResponse:
        self.stages += 1
        return in_process(model, parameters)


def test_a_first_stage_proved_at_the_hints_value_ends_the_solve() -> None:
    staged, first, _ = two_stages(first_hint=5)
    counted = _Counted()
    answer = solve(staged, 2.0, 1, 0, counted)  # type: ignore[arg-type]
    assert answer is not None
    assert answer.status == GREEDY_PROVED
    assert counted.stages == 1
    assert answer.value(first) == 5


def test_a_first_stage_that_beats_the_hint_goes_on_to_the_next() -> None:
    staged, first, second = two_stages(first_hint=3)
    counted = _Counted()
    answer = solve(staged, 2.0, 1, 0, counted)  # type: ignore[arg-type]
    assert answer is not None
    assert answer.status == "OPTIMAL"
    assert counted.stages == 2
    assert (answer.value(first), answer.value(second)) == (5, 7)


def test_without_a_complete_hint_nothing_is_proved_and_every_stage_runs() -> None:
    staged, _, second = two_stages(first_hint=None)
    counted = _Counted()
    answer = solve(staged, 2.0, 1, 0, counted)  # type: ignore[arg-type]
    assert answer is not None
    assert counted.stages == 2
    assert answer.value(second) == 7


def test_a_cycle_whose_greedy_answer_the_first_stage_proves_keeps_it_after_one_stage(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Seed 4 is one where the first stage proves greedy's answer (seeds 1-3 find no proof
    # in the first stage's budget and run every stage). Its window's refusals are all over
    # queue caps, so the cycle would not build the model (`cap_refusals`): that is turned
    # off here, to see the first stage prove it.
    counted = _Counted()
    monkeypatch.setattr(optimize, "in_process", counted)
    monkeypatch.setattr(optimize, "refused_only_by_caps", lambda *args: False)
    snapshot = synthetic_cluster(ClusterSpec(100, 1000, 4))
    result = run_cycle(snapshot, EngineConfig(time_limit_seconds=5.0, solver_workers=1))
    assert result.report.status == GREEDY_PROVED
    assert counted.stages == 1
    assert result.report.answer == "greedy"
    greedy_only = run_cycle(snapshot, EngineConfig(time_limit_seconds=0.0))
    assert result.bindings == greedy_only.bindings


def test_an_optimum_one_above_the_hint_beyond_float_precision_is_not_taken_for_a_proof() -> None:
    # Folded stage objectives pass 2**53; as floats, 2**60 - 2 and 2**60 - 1 are equal.
    model = cp_model.CpModel()
    first = model.new_int_var(0, 2**60, "first")
    second = model.new_int_var(0, 1, "second")
    model.add(first <= 2**60 - 1)
    tiers = [Tier("first", first, 2**60), Tier("second", second, 1)]
    assert len(stages(tiers)) == 2
    model.add_hint(first, 2**60 - 2)
    model.add_hint(second, 0)
    counted = _Counted()
    answer = solve(Staged(model, tiers), 2.0, 1, 0, counted)  # type: ignore[arg-type]
    assert answer is not None
    assert answer.status != GREEDY_PROVED
    assert counted.stages == 2
    assert (answer.value(first), answer.value(second)) == (2**60 - 1, 1)
