"""Reclaim's shortcut: when the saturation rule refuses every victim, no victim search runs.

`saturation_forbids_all` bounds the rule from the side it cannot be wrong on; these tests
hold it to the rule itself over random queue trees, and the eviction actions to the same
decisions with the shortcut as without it.
"""

from __future__ import annotations

import itertools

import pytest

from kai.engine.cycle import run_cycle
from kai.engine.evictions import actions
from kai.engine.evictions.decisions import Action
from kai.engine.evictions.options import VictimOption
from kai.engine.evictions.preemptors import Preemptor
from kai.engine.evictions.reclaim_rules import saturation_forbids_all
from kai.engine.evictions.rules import check, victim_options
from kai.engine.evictions.state import EvictionState
from kai.engine.model import EngineConfig
from tests.unit.evictions.clusters import departments, random_departments
from tests.unit.evictions.helpers import (
    eviction_state,
    preemptor,
    times_taken_with_the_same_decisions,
)

CONFIG = EngineConfig(time_limit_seconds=1.0, solver_workers=1, reproducible=True)


def _victim_sets(options: list[VictimOption]) -> list[dict[str, frozenset[str]]]:
    """Every non-empty set of whole victim gangs."""
    return [
        {option.gang.key: frozenset(p.key for p in option.gang.pods) for option in chosen}
        for size in range(1, len(options) + 1)
        for chosen in itertools.combinations(options, size)
    ]


def test_it_forbids_only_what_the_rule_refuses_in_random_cycles(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Asked inside the cycle, after allocation has brought the queues near their fair
    shares (where the rule refuses), every victim set it forbids is one `check` refuses."""
    answers = {True: 0, False: 0}
    refused_for_saturation = 0

    def checked(state: EvictionState, who: Preemptor, options: list[VictimOption]) -> bool:
        nonlocal refused_for_saturation
        forbids = saturation_forbids_all(state, who, options)
        answers[forbids] += 1
        if forbids and len(options) <= 8:
            by_key = {option.gang.key: option for option in options}
            for evicted in _victim_sets(options):
                verdict = check(state, Action.RECLAIM, who, by_key, evicted)
                assert not verdict.ok, (who.key, sorted(evicted))
                refused_for_saturation += "saturated" in (verdict.problem or "")
        return forbids

    monkeypatch.setattr(actions, "saturation_forbids_all", checked)
    for seed in range(200):
        run_cycle(random_departments(seed), CONFIG)
    # Neither answer is vacuous, and the rule itself refused what was forbidden.
    assert answers[True] >= 20 and answers[False] >= 100, answers
    assert refused_for_saturation >= 100, refused_for_saturation


def test_the_departments_cluster_is_forbidden_only_when_the_reclaimer_asks_for_cores() -> None:
    for cpu_ask, forbids in ((2000, True), (0, False)):
        state = eviction_state(departments(cpu_ask))
        who = preemptor(state, "ns/want")
        options = victim_options(state, Action.RECLAIM, who)
        assert options
        assert saturation_forbids_all(state, who, options) is forbids


def test_the_cycle_decides_the_same_with_the_shortcut_as_without(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clusters = (random_departments(seed) for seed in range(200))
    fired = times_taken_with_the_same_decisions(
        monkeypatch, actions, "saturation_forbids_all", clusters, CONFIG
    )
    assert fired >= 10, fired
