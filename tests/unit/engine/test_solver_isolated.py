"""A solve in a forked child: the same answer as in the process, and none when the child dies."""

from __future__ import annotations

import dataclasses
import os
import random
import signal

from ortools.sat.python import cp_model
from ortools.sat.python import cp_model_helper as helper

from kai.engine import cycle
from kai.engine.model import EngineConfig
from kai.engine.solver.isolated import solve_in_child
from kai.engine.solver.solve import in_process
from tests.unit.engine.builders import group, node, pod, queue, snapshot


def _knapsack(items: int, seed: int) -> tuple[cp_model.CpModel, cp_model.LinearExprT]:
    """Bool picks under a few random knapsack rows: enough search to take a while."""
    rng = random.Random(seed)
    model = cp_model.CpModel()
    picks = [model.new_bool_var(f"x{i}") for i in range(items)]
    for _ in range(items // 4):
        weights = [rng.randint(1, 60) for _ in picks]
        model.add(sum(w * x for w, x in zip(weights, picks, strict=True)) <= sum(weights) // 3)
    objective = sum(rng.randint(1, 100) * x for x in picks)
    model.maximize(objective)
    return model, objective


def _parameters(seconds: float) -> helper.SatParameters:
    parameters = helper.SatParameters()
    parameters.max_time_in_seconds = seconds
    parameters.num_workers = 1
    parameters.random_seed = 0
    return parameters


def test_a_child_answers_what_the_solver_in_the_process_answers() -> None:
    model, objective = _knapsack(12, seed=3)  # small enough to be proved optimal at once
    here = in_process(model, _parameters(10))
    there = solve_in_child(model, _parameters(10))
    assert there is not None
    assert here.status == there.status == cp_model.OPTIMAL
    assert helper.ResponseHelper.value(there, objective) == here.objective_value
    assert list(there.solution) == list(here.solution)
    assert there.wall_time > 0 and there.deterministic_time > 0


def test_a_child_that_dies_gives_no_answer_and_is_reaped() -> None:
    model, _ = _knapsack(400, seed=5)
    children: list[int] = []

    def kill(pid: int) -> None:
        children.append(pid)
        os.kill(pid, signal.SIGKILL)  # as an OR-Tools abort would end it, mid-solve

    assert solve_in_child(model, _parameters(30), started=kill) is None
    assert len(children) == 1
    try:  # reaped: no zombie is left behind
        os.waitpid(children[0], os.WNOHANG)
        raise AssertionError(f"child {children[0]} was not reaped")
    except ChildProcessError:
        pass


def test_a_cycle_with_the_solver_in_a_child_decides_as_one_without() -> None:
    """The cycle the solver wins (4, 4, 3, 3, 3, 3 GPUs on two nodes of 10: greedy strands a 3)."""
    cramped = snapshot(
        [node("a", gpus=10), node("b", gpus=10)],
        [pod(f"x{i}", "gang", gpus=g) for i, g in enumerate((4, 4, 3, 3, 3, 3))],
        [group("gang", "q", min_member=6)],
        [queue("q")],
    )
    config = EngineConfig(time_limit_seconds=2, solver_workers=1)
    here = cycle.run_cycle(cramped, config)
    there = cycle.run_cycle(cramped, dataclasses.replace(config, isolate_solver=True))
    assert there.report.answer == here.report.answer == "cp-sat"
    assert len(there.bindings) == 6
    assert [(b.pod, b.node) for b in there.bindings] == [(b.pod, b.node) for b in here.bindings]
