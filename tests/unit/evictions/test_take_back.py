"""Preempt takes back what the allocation placed in the same cycle, before it binds.

KAI's eviction actions see the tasks its allocate placed in the session as running, and
take them for a preemptor; those tasks never bind (KAI's case "Full subgroup allocate
then evict"). kai bound them, and evicted them a cycle later: a job started only to be
killed seconds after, and the running pods the preemptor also needed stayed until then.
"""

from __future__ import annotations

import dataclasses

from kai.engine.cycle import CycleResult, run_cycle
from kai.engine.evictions.decisions import (
    LOWER_PRIORITY,
    MOVED,
    Action,
    Eviction,
    EvictionDecision,
    PipelinedPod,
)
from kai.engine.evictions.rules import victim_options
from kai.engine.greedy import UNSCHEDULABLE
from kai.engine.model import EngineConfig, PodPhase, Snapshot
from kai.engine.validator import EvictionAudit, ProposedBinding
from tests.unit.engine.builders import group, node, pod, queue, snapshot
from tests.unit.evictions.clusters import inside_deserved_cluster, priority_cluster
from tests.unit.evictions.helpers import eviction_state, preemptor

CONFIG = EngineConfig(time_limit_seconds=0)


def _cluster(growing: bool = False) -> Snapshot:
    """One node of 4 GPUs in one queue. `low` (priority 50) runs two 1-GPU pods; `late`
    (priority 50) waits with two more, or, `growing`, is an elastic gang that runs one and
    waits with one; `urgent` (priority 100) waits for a pod of 4 GPUs. The allocation tries
    urgent first and fails (2 GPUs free), then places late on the 2 free GPUs."""
    pods = [pod(f"low-{i}", "low", 1, cpu=0, memory=0, node_name="n0") for i in range(2)]
    pods += [pod("urgent-0", "urgent", 4, cpu=0, memory=0)]
    if growing:
        pods += [
            pod("late-0", "late", 1, cpu=0, memory=0, node_name="n0"),
            pod("late-1", "late", 1, cpu=0, memory=0),
        ]
        gpus = 5
    else:
        pods += [pod(f"late-{i}", "late", 1, cpu=0, memory=0) for i in range(2)]
        gpus = 4
    groups = [group("low", "q"), group("late", "q"), group("urgent", "q", priority=100)]
    return snapshot([node("n0", gpus=gpus)], pods, groups, [queue("q")])


def _after(snap: Snapshot, result: CycleResult) -> Snapshot:
    """The next cycle's snapshot: the evicted pods gone, the bound ones bound."""
    gone = {eviction.pod for eviction in result.evictions}
    bound = {binding.pod: binding.node for binding in result.bindings}
    pods = tuple(
        dataclasses.replace(item, phase=PodPhase.BOUND, node=bound[item.key])
        if item.key in bound
        else item
        for item in snap.pods
        if item.key not in gone
    )
    return dataclasses.replace(snap, pods=pods)


def test_preempt_takes_back_a_lower_priority_gang_placed_in_the_same_cycle() -> None:
    snap = _cluster()
    result = run_cycle(snap, CONFIG)
    assert result.bindings == ()  # late is not started: nothing of it is deleted later
    assert sorted(e.pod for e in result.evictions) == ["ns/low-0", "ns/low-1"]
    assert [(p.pod, p.node) for p in result.pipelined] == [("ns/urgent-0", "n0")]
    assert result.eviction_report is not None
    assert result.eviction_report.validator_violations == 0
    late = result.groups["ns/late"]
    assert not late.scheduled and late.reason == UNSCHEDULABLE
    assert late.message == (
        "2 pod(s) placed this cycle were taken back before binding by preempt for ns/urgent "
        "(LowerPriority)"
    )
    assert "ns/late" not in result.stamps  # it never started
    assert result.groups["ns/urgent"].message == (
        "1 pods pipelined: 2 pods evicted by preempt are still leaving; "
        "the gang binds as a whole once they have left"
    )

    then = run_cycle(_after(snap, result), CONFIG)
    assert [(b.pod, b.node) for b in then.bindings] == [("ns/urgent-0", "n0")]
    assert then.evictions == ()
    assert not then.groups["ns/late"].scheduled


def test_a_growing_gang_loses_only_the_pods_placed_this_cycle() -> None:
    snap = _cluster(growing=True)  # 5 GPUs: low 2, late 1 run; 2 free, late's second takes one
    result = run_cycle(snap, CONFIG)
    assert "ns/late-1" not in {binding.pod for binding in result.bindings}
    assert "ns/late-0" not in {eviction.pod for eviction in result.evictions}
    assert [(p.pod, p.node) for p in result.pipelined] == [("ns/urgent-0", "n0")]
    late = result.groups["ns/late"]
    assert late.scheduled and late.reason == UNSCHEDULABLE
    assert late.message.endswith(
        "1 pod(s) placed this cycle were taken back before binding by preempt for ns/urgent "
        "(LowerPriority)"
    )


def _audit_of(snap: Snapshot) -> EvictionAudit:
    """The audit of `_cluster()` with late's two pods bound this cycle."""
    bound = [ProposedBinding(f"ns/late-{i}", "n0", ()) for i in range(2)]
    return EvictionAudit(snap, EngineConfig(), bound)


def _taking_late(action: Action, rule: str) -> EvictionDecision:
    late = tuple(
        Eviction(f"ns/late-{i}", "ns/late", "n0", action, rule, "ns/urgent") for i in range(2)
    )
    low = tuple(
        Eviction(f"ns/low-{i}", "ns/low", "n0", action, rule, "ns/urgent") for i in range(2)
    )
    return EvictionDecision(action, "ns/urgent", (*low, *late), (), "greedy")


def test_the_audit_lets_preempt_take_back_pods_bound_this_cycle() -> None:
    snap = _cluster()
    decision = _taking_late(Action.PREEMPT, LOWER_PRIORITY)
    waiting = dataclasses.replace(decision, pipelined=_urgent_waits())
    assert _audit_of(snap).check(waiting) == []
    # Without the bindings the pods are not running: nothing to take.
    problems = EvictionAudit(snap, EngineConfig(), []).check(waiting)
    assert "preempt for ns/urgent: evicted pod ns/late-0 is not on n0" in problems


def test_the_audit_refuses_a_consolidation_that_moves_pods_bound_this_cycle() -> None:
    snap = _cluster()
    decision = _taking_late(Action.CONSOLIDATE, MOVED)
    problems = _audit_of(snap).check(decision)
    assert "consolidate for ns/urgent: ns/late-0, placed this cycle, may not be taken back" in (
        problems
    )


def _urgent_waits() -> tuple[PipelinedPod, ...]:
    return (PipelinedPod("ns/urgent-0", "ns/urgent", "n0", ()),)


def _placed_instead_of_running(snap: Snapshot, prefix: str) -> tuple[Snapshot, dict[str, str]]:
    """`snap` with the running pods whose name starts with `prefix` pending again, and where
    they ran: as if this cycle's allocation had placed them there."""
    placed = {p.key: p.node or "" for p in snap.pods if p.name.startswith(prefix) and p.node}
    pods = tuple(
        dataclasses.replace(p, phase=PodPhase.PENDING, node=None) if p.key in placed else p
        for p in snap.pods
    )
    return dataclasses.replace(snap, pods=pods), placed


def test_preempt_may_take_placements_of_the_cycle_and_reclaim_may_not() -> None:
    """Reclaim takes running pods only, for now (kai.engine.evictions.gangs says why)."""
    snap, placed = _placed_instead_of_running(priority_cluster(), "low")
    state = eviction_state(snap, placed=placed)
    options = victim_options(state, Action.PREEMPT, preemptor(state, "ns/urgent"))
    assert "ns/low" in {option.gang.key for option in options}

    # The borrower's gangs (priority 75) placed this cycle, below a gang waiting in their queue.
    cluster = inside_deserved_cluster()
    cluster = dataclasses.replace(
        cluster,
        pod_groups=(*cluster.pod_groups, group("boss", "borrower", priority=100)),
        pods=(*cluster.pods, pod("boss-0", "boss", 4, cpu=0, memory=0)),
    )
    running = eviction_state(cluster)
    before = victim_options(running, Action.RECLAIM, preemptor(running, "ns/claim"))
    assert len(before) == 4  # the borrower's four gangs, running
    snap, placed = _placed_instead_of_running(cluster, "borrow")
    state = eviction_state(snap, placed=placed)
    assert victim_options(state, Action.RECLAIM, preemptor(state, "ns/claim")) == []
    boss = victim_options(state, Action.PREEMPT, preemptor(state, "ns/boss"))
    assert sorted(option.gang.key for option in boss) == [f"ns/borrow-{i}" for i in range(4)]
