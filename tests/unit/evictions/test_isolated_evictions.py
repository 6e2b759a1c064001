"""The eviction actions in a forked child: the same decisions, and an abort in a victim model
costs its answers, not the process.

`kai run` sets `EngineConfig.isolate_solver`: the victim models' OR-Tools then runs in a
child, and if it aborts (as OR-Tools does when one of its own checks fails) the actions run
again in the process on the greedy victim search alone.
"""

from __future__ import annotations

import dataclasses
import faulthandler
import os
import resource
from collections.abc import Callable
from typing import Any

import pytest

from kai.engine import validator
from kai.engine.cycle import run_cycle
from kai.engine.evictions import actions, victim_model
from kai.engine.evictions.decisions import EvictionDecision
from kai.engine.forked import Child
from kai.engine.model import EngineConfig, EvictionConfig
from tests.unit.evictions.clusters import fragmented

CONFIG = EngineConfig(time_limit_seconds=2.0, solver_workers=1)
ISOLATED = dataclasses.replace(CONFIG, isolate_solver=True)


def test_in_a_child_the_actions_decide_as_in_the_process() -> None:
    here = run_cycle(fragmented(), CONFIG)
    there = run_cycle(fragmented(), ISOLATED)
    assert here.eviction_report is not None and there.eviction_report is not None
    assert here.eviction_report.cp_sat_answers == there.eviction_report.cp_sat_answers == 1
    assert there.evictions == here.evictions and there.pipelined == here.pipelined
    assert there.stamps == here.stamps and there.groups == here.groups


def test_an_abort_in_a_victim_model_leaves_the_greedy_searchs_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_search = victim_model.cp_sat_search
    parent = os.getpid()

    def aborting(*args: Any) -> victim_model.Answer:
        if os.getpid() != parent:  # in the child, as OR-Tools' failed check would
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core file left behind
            faulthandler.disable()  # nor pytest's traceback of the abort
            os.abort()
        return real_search(*args)

    monkeypatch.setattr(victim_model, "cp_sat_search", aborting)
    survived = run_cycle(fragmented(), ISOLATED)
    greedy_only = dataclasses.replace(CONFIG, evictions=EvictionConfig(time_limit_seconds=0.0))
    expected = run_cycle(fragmented(), greedy_only)
    assert survived.eviction_report is not None
    assert survived.eviction_report.cp_sat_answers == 0
    assert survived.eviction_report.greedy_answers == 1
    assert survived.evictions == expected.evictions
    assert survived.pipelined == expected.pipelined
    assert [e.pod for e in survived.evictions] == ["ns/d", "ns/e", "ns/f"]  # the greedy set


def test_a_decision_the_audit_rejects_is_decided_again_as_in_the_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The child commits without the audit; the parent audits each decision it reads and,
    on a rejection, decides again with every decision audited first, as in the process."""
    real_check = validator.EvictionAudit.check

    def refusing(self: validator.EvictionAudit, decision: EvictionDecision) -> list[str]:
        if decision.preemptor == "ns/urgent":  # as an engine bug would show
            return ["refused for the test"]
        return real_check(self, decision)

    monkeypatch.setattr(validator.EvictionAudit, "check", refusing)
    children: list[int] = []

    class Counted(Child):
        def __init__(self, work: Callable[[], bytes], seconds: float) -> None:
            super().__init__(work, seconds)
            children.append(1)

    monkeypatch.setattr(actions, "Child", Counted)
    here = run_cycle(fragmented(), CONFIG)
    there = run_cycle(fragmented(), ISOLATED)
    assert len(children) == 2  # the second decides again in a child too: models stay isolated
    assert here.eviction_report is not None and there.eviction_report is not None
    assert here.eviction_report.validator_violations > 0
    assert there.eviction_report == here.eviction_report
    assert there.evictions == here.evictions == ()
    assert there.pipelined == here.pipelined and there.groups == here.groups
