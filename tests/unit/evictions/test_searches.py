"""Both victim searches on one preempt where KAI's order over-evicts: the model finds the cheaper set."""

from __future__ import annotations

from fractions import Fraction

import pytest

from kai.engine.cycle import run_cycle
from kai.engine.evictions.budget import SearchBudget
from kai.engine.evictions.decisions import Action
from kai.engine.evictions.greedy_search import greedy_search, without_idle_victims
from kai.engine.evictions.room import Overlay, release
from kai.engine.evictions.rules import victim_options
from kai.engine.evictions.scenario import Scenario
from kai.engine.evictions.victim_model import cp_sat_search
from kai.engine.evictions.victim_order import VictimOrder
from kai.engine.model import EngineConfig, Snapshot
from tests.unit.engine.builders import group, node, pod, queue, snapshot
from tests.unit.evictions.clusters import fragmented
from tests.unit.evictions.helpers import eviction_state, preemptor


def evicted(scenario: Scenario | None) -> list[str]:
    assert scenario is not None
    return sorted(pod for pods in scenario.evicted.values() for pod in pods)


def test_the_model_evicts_fewer_gpus_than_kais_order() -> None:
    state = eviction_state(fragmented())
    who = preemptor(state, "ns/urgent")
    options = victim_options(state, Action.PREEMPT, who)
    greedy = greedy_search(state, Action.PREEMPT, who, options, SearchBudget(1.0))
    assert evicted(greedy) == ["ns/d", "ns/e", "ns/f"]
    costs = VictimOrder(state, options)
    answer = cp_sat_search(state, Action.PREEMPT, who, options, costs, greedy, SearchBudget(1.0), 1)
    assert answer.status == "OPTIMAL"
    assert evicted(answer.scenario) == [
        "ns/a",
        "ns/b",
        "ns/c",
    ]  # n0 freed; n1's set costs more priority
    assert answer.scenario is not None and greedy is not None
    assert costs.disruption(answer.scenario.evicted) < costs.disruption(greedy.evicted)
    assert [node for _, node, _ in answer.scenario.seats] == ["n0"]


def test_without_solver_time_only_the_greedy_search_answers() -> None:
    state = eviction_state(fragmented())
    who = preemptor(state, "ns/urgent")
    options = victim_options(state, Action.PREEMPT, who)
    costs = VictimOrder(state, options)
    answer = cp_sat_search(state, Action.PREEMPT, who, options, costs, None, SearchBudget(0.0), 1)
    assert answer.scenario is None and answer.status == "over-budget"


def test_room_leaving_a_shared_device_makes_it_whole_again() -> None:
    state = eviction_state(
        snapshot(
            [node("n0", gpus=2, gpu_memory_mib=40_000)],
            [pod("half", "half", portion=Fraction(1, 2), node_name="n0", gpu_groups=("dev",))],
            [group("half", "q")],
            [queue("q")],
        )
    )
    room = Overlay(state.future)
    assert room["n0"].whole_gpus == 1 and "dev" in room["n0"].shared
    [sharer] = state.running["ns/half"].pods
    release(room.writable("n0"), sharer, sharer.gpu_groups)
    assert room["n0"].whole_gpus == 2 and not room["n0"].shared
    assert state.future["n0"].whole_gpus == 1  # the overlay left the cycle's room alone


def _cpu_bound() -> Snapshot:
    """n0 has 4 idle GPUs but 500m of CPU idle, beside a kept pod and a low-priority 2-core pod
    with no GPU; n1 is full, with a low-priority 1-GPU pod. The urgent pod (1 GPU, 1 core)
    costs least where the CPU-only pod leaves n0."""
    return snapshot(
        [node("n0", gpus=4, cpu=4000), node("n1", gpus=1, cpu=2000)],
        [
            pod("kept", "kept", cpu=1500, node_name="n0"),
            pod("cpu-only", "cpu-only", cpu=2000, node_name="n0"),
            pod("low", "low", gpus=1, cpu=2000, node_name="n1"),
            pod("urgent-0", "urgent", gpus=1, cpu=1000),
        ],
        [
            group("kept", "q", priority=90),
            group("cpu-only", "q", priority=10),
            group("low", "q", priority=10),
            group("urgent", "q", priority=75),
        ],
        [queue("q")],
    )


def test_a_capacity_row_that_binds_is_kept() -> None:
    """The model leaves out a capacity row no seating can break (most resources on most
    nodes); n0's CPU row can, and without it the pod would be seated there for nothing."""
    state = eviction_state(_cpu_bound())
    who = preemptor(state, "ns/urgent")
    options = victim_options(state, Action.PREEMPT, who)
    order = VictimOrder(state, options)
    answer = cp_sat_search(state, Action.PREEMPT, who, options, order, None, SearchBudget(1.0), 1)
    assert answer.status == "OPTIMAL"
    assert evicted(answer.scenario) == ["ns/cpu-only"]
    assert answer.scenario is not None
    assert [node for _, node, _ in answer.scenario.seats] == ["n0"]


def _one_victim_frees_room_for_two(spare: bool) -> Snapshot:
    """keeper fills n0 (its deserved 4); borrower (deserved 0) runs a 4-GPU pod on n1 and,
    if `spare`, a 2-GPU pod on a node n2 of 2 GPUs; claimant (deserved 4) waits with two 2-GPU gangs.
    Reclaiming n1 for the first leaves two of n1's GPUs free, all the second needs."""
    keep = [pod(f"keep-{i}", f"keep-{i}", 1, cpu=0, memory=0, node_name="n0") for i in range(4)]
    spared = [pod("spare", "spare", 2, cpu=0, memory=0, node_name="n2")] if spare else []
    return snapshot(
        [node("n0", gpus=4), node("n1", gpus=4), *([node("n2", gpus=2)] if spare else [])],
        [
            *keep,
            pod("big", "big", 4, cpu=0, memory=0, node_name="n1"),
            *spared,
            pod("first", "first", 2, cpu=0, memory=0),
            pod("second", "second", 2, cpu=0, memory=0),
        ],
        [
            *(group(f"keep-{i}", "keeper") for i in range(4)),
            group("big", "borrower", priority=40),
            *([group("spare", "borrower")] if spare else []),
            group("first", "claimant"),
            group("second", "claimant"),
        ],
        [
            queue("keeper", gpu_quota=4),
            queue("borrower", gpu_quota=0),
            queue("claimant", gpu_quota=4),
        ],
    )


@pytest.mark.parametrize("spare", [True, False])
@pytest.mark.parametrize("solver_seconds", [0.0, 1.0])
def test_room_freed_earlier_in_the_cycle_takes_the_next_gang_without_victims(
    solver_seconds: float, spare: bool
) -> None:
    """The search tries the empty victim set first, even with no victims left to take.
    Before, the greedy search took the spare pod the second gang does not need, and only a
    victim model found that nothing need go; with no spare pod, the second gang waited."""
    result = run_cycle(
        _one_victim_frees_room_for_two(spare),
        EngineConfig(time_limit_seconds=solver_seconds, solver_workers=1),
    )
    assert [eviction.pod for eviction in result.evictions] == ["ns/big"]
    assert sorted((p.pod, p.node) for p in result.pipelined) == [
        ("ns/first", "n1"),
        ("ns/second", "n1"),
    ]
    assert result.groups["ns/second"].message.startswith(
        "1 pods pipelined: 1 pods evicted for other gangs are still leaving its nodes"
    )
    report = result.eviction_report
    assert report is not None  # the second decision is the greedy search's: nothing to model
    assert report.cp_sat_answers + report.greedy_answers == 2 and report.greedy_answers >= 1


def test_no_victim_is_evicted_where_the_preemptor_is_not_seated() -> None:
    """`urgent` needs all of n0's 8 GPUs. First in victim order is a half-GPU pod above
    its elastic gang's minimum, on n1: it frees nothing `urgent` can use, but the greedy
    search's set takes it (trimming tries the eight largest units), and it was evicted
    for nothing. The answer committed leaves it out."""
    pods = [pod(f"low{i}-0", f"low{i}", 1, node_name="n0") for i in range(8)]
    pods += [pod("big-0", "big", 7, node_name="n1")]
    pods += [pod(f"frac-{i}", "frac", portion=Fraction(1, 2), node_name="n1") for i in range(2)]
    pods.append(pod("urgent-0", "urgent", 8))
    groups = [group(f"low{i}", "q", priority=10) for i in range(8)]
    groups += [group("big", "q", priority=100), group("frac", "q", priority=5)]
    groups.append(group("urgent", "q", priority=50))
    snap = snapshot([node("n0", 8), node("n1", 8)], pods, groups, [queue("q")])
    state = eviction_state(snap)
    who = preemptor(state, "ns/urgent")
    options = victim_options(state, Action.PREEMPT, who)
    found = greedy_search(state, Action.PREEMPT, who, options, SearchBudget(1.0))
    assert found is not None and "ns/frac" in found.evicted
    leaner = without_idle_victims(state, Action.PREEMPT, who, options, found, SearchBudget(1.0))
    assert evicted(leaner) == [f"ns/low{i}-0" for i in range(8)]
    for config in (EngineConfig(time_limit_seconds=0), EngineConfig(time_limit_seconds=1.0)):
        result = run_cycle(snap, config)
        assert sorted(e.pod for e in result.evictions) == [f"ns/low{i}-0" for i in range(8)]
