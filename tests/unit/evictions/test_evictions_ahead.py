"""With the solver isolated, the eviction actions start on greedy's answer beside the allocation solver.

Their outcome is used when the solver keeps greedy's answer; when the solver's answer
is used instead, the early actions are given up and the actions run on the answer the
cycle keeps. Either way the cycle decides as it does with the solver in the process.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import Any

import pytest

from kai.engine.cycle import run_cycle
from kai.engine.evictions import actions
from kai.engine.forked import Child
from kai.engine.model import EngineConfig, Snapshot
from kai.engine.solver import optimize
from tests.unit.engine.builders import group, node, pod, queue, snapshot
from tests.unit.evictions.clusters import inside_deserved_cluster, running

CONFIG = EngineConfig(time_limit_seconds=2.0, solver_workers=1)
ISOLATED = dataclasses.replace(CONFIG, isolate_solver=True)


class _Recorded(Child):
    """A child of the eviction actions, with what the cycle did with it."""

    started: list[_Recorded] = []

    def __init__(self, work: Callable[[], bytes], seconds: float) -> None:
        super().__init__(work, seconds)
        self.pid = self._pid
        self.read = self.stopped = False
        _Recorded.started.append(self)

    def answer(self) -> bytes | None:
        self.read = True
        return super().answer()

    def stop(self) -> None:
        self.stopped = True
        super().stop()


@pytest.fixture
def children(monkeypatch: pytest.MonkeyPatch) -> list[_Recorded]:
    monkeypatch.setattr(actions, "Child", _Recorded)
    monkeypatch.setattr(_Recorded, "started", [])
    return _Recorded.started


def _reaped(pid: int | None) -> bool:
    assert pid is not None
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


def _solver_wins_and_greedy_would_evict() -> Snapshot:
    """Gang (4, 4, 3, 3, 3, 3) fits nodes a and b (10 GPUs each) only as the solver packs it;
    greedy strands a 3 and leaves it waiting, and on greedy's answer reclaim would take the
    borrower's 3 GPUs on node c (borrower deserves none) to seat it."""
    borrowed, borrowed_pod = running("borrowed", "borrower", 3, "c")
    return snapshot(
        [node("a", gpus=10), node("b", gpus=10), node("c", gpus=3)],
        [pod(f"x{i}", "gang", gpus=g) for i, g in enumerate((4, 4, 3, 3, 3, 3))] + [borrowed_pod],
        [group("gang", "q", min_member=6), borrowed],
        [queue("q", gpu_quota=23), queue("borrower", gpu_quota=0)],
    )


def test_the_actions_run_beside_the_solver_and_their_outcome_is_the_cycles(
    children: list[_Recorded], monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = inside_deserved_cluster()  # the claimant's gang waits; reclaim takes the borrower's
    solving_beside: list[bool] = []
    real_optimize = optimize.optimize

    def watched(*args: Any) -> Any:
        solving_beside.append(bool(children) and not children[0].read)
        return real_optimize(*args)

    monkeypatch.setattr(optimize, "optimize", watched)
    there = run_cycle(cluster, ISOLATED)
    here = run_cycle(cluster, CONFIG)
    assert solving_beside == [True, False]  # the isolated cycle's actions had started, unread
    assert len(children) == 1 and children[0].read and _reaped(children[0].pid)
    assert there.report.answer == here.report.answer == "greedy"
    assert there.eviction_report is not None and there.eviction_report.cp_sat_answers == 1
    assert there.evictions == here.evictions and len(there.evictions) == 4
    assert there.pipelined == here.pipelined and there.groups == here.groups


def test_a_solver_answer_that_is_used_gives_the_early_actions_up(
    children: list[_Recorded],
) -> None:
    cluster = _solver_wins_and_greedy_would_evict()
    on_greedy = run_cycle(cluster, dataclasses.replace(CONFIG, time_limit_seconds=0))
    assert [e.pod for e in on_greedy.evictions] == ["ns/borrowed"]
    there = run_cycle(cluster, ISOLATED)
    assert len(children) == 1 and children[0].stopped and not children[0].read
    assert _reaped(children[0].pid)
    assert there.report.answer == "cp-sat" and len(there.bindings) == 6
    assert there.evictions == ()


def test_a_solver_that_fails_stops_the_actions_child(
    children: list[_Recorded], monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing(*args: Any) -> Any:
        raise RuntimeError("solver failed")

    monkeypatch.setattr(optimize, "optimize", failing)
    with pytest.raises(RuntimeError, match="solver failed"):
        run_cycle(inside_deserved_cluster(), ISOLATED)
    assert len(children) == 1 and children[0].stopped and _reaped(children[0].pid)
