"""The node index the next-cycle checks share stays equal to the eviction state's future room.

Each check gives its victims' room back and runs the next cycle's greedy pass inside a
checkpoint of one index, then rolls back; a committed decision changes that room for
good, in the state and in the index. If the two drifted apart, a later check would judge
a decision against room that is not there.
"""

from __future__ import annotations

from fractions import Fraction

from kai.engine.evictions.budget import SearchBudget
from kai.engine.evictions.decisions import (
    LOWER_PRIORITY,
    Action,
    Eviction,
    EvictionDecision,
    PipelinedPod,
)
from kai.engine.evictions.greedy_search import greedy_search
from kai.engine.evictions.next_cycle import NextCycle, next_cycle
from kai.engine.evictions.preemptors import Preemptor
from kai.engine.evictions.rules import victim_options
from kai.engine.evictions.scenario import Scenario
from kai.engine.evictions.state import EvictionState
from tests.unit.engine.builders import pod
from tests.unit.evictions.clusters import fragmented
from tests.unit.evictions.helpers import eviction_state, preemptor

_PROBES = (
    pod("probe-1", "probe", gpus=1),
    pod("probe-2", "probe", gpus=2),
    pod("probe-4", "probe", gpus=4),
    pod("probe-half", "probe", portion=Fraction(1, 2)),
)


def _decision(state: EvictionState, who: Preemptor, scenario: Scenario) -> EvictionDecision:
    evictions = tuple(
        Eviction(key, gang, pod.node or "", Action.PREEMPT, LOWER_PRIORITY, who.key)
        for gang, keys in scenario.evicted.items()
        for pod in state.running[gang].pods
        for key in sorted(keys)
        if pod.key == key
    )
    pipelined = tuple(
        PipelinedPod(p.key, p.group, node, groups) for p, node, groups in scenario.seats
    )
    return EvictionDecision(Action.PREEMPT, who.key, evictions, pipelined, scenario.answer)


def _finds_as_a_fresh_index(state: EvictionState) -> None:
    shared = state.next_cycle_index()
    fresh = state.order.node_index({name: cap.copy() for name, cap in state.future.items()})
    assert shared.capacity == state.future
    for probe in _PROBES:
        for alone in (False, True):
            assert shared.find(probe, lambda _: True, alone) == fresh.find(
                probe, lambda _: True, alone
            )


def test_checks_leave_the_index_as_the_room_and_a_commit_changes_both() -> None:
    state = eviction_state(fragmented())  # urgent (4 GPUs) waits on a full cluster
    state.next_cycle_index()  # built before any decision, as the first check builds it
    who = preemptor(state, "ns/urgent")
    scenario = greedy_search(
        state, Action.PREEMPT, who, victim_options(state, Action.PREEMPT, who), SearchBudget(1.0)
    )
    assert scenario is not None
    assert (
        next_cycle(state, who, scenario).verdict is NextCycle.KEEPS
    )  # urgent comes before its victims
    _finds_as_a_fresh_index(state)  # the look ahead rolled back what it gave back and placed

    state.commit(_decision(state, who, scenario), scenario.seats)
    _finds_as_a_fresh_index(state)
    # the seats are taken: a node no longer has 4 free GPUs for a second urgent gang
    assert state.next_cycle_index().find(_PROBES[2], lambda _: True) is None
