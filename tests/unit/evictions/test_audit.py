"""The validator's eviction audit: each rule, broken by a hand-made decision, is reported."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from kai.engine.evictions.decisions import (
    GUARANTEE_DESERVED_QUOTA,
    LOWER_PRIORITY,
    MAINTAIN_FAIR_SHARE,
    MOVED,
    STALE_GRACE_EXPIRED,
    Action,
    Eviction,
    EvictionDecision,
    PipelinedPod,
)
from kai.engine.model import EngineConfig, PlacementStrategy, Snapshot
from kai.engine.validator import EvictionAudit
from tests.unit.engine.builders import NOW, group, node, pod, queue, snapshot
from tests.unit.evictions.clusters import chunk_cluster, inside_deserved_cluster, priority_cluster

CONFIG = EngineConfig()


def evict(
    snap: Snapshot, action: Action, rule: str, preemptor: str | None, *pods: str
) -> tuple[Eviction, ...]:
    where = {p.key: p for p in snap.pods}
    return tuple(
        Eviction(key, where[key].group, where[key].node or "", action, rule, preemptor)
        for key in pods
    )


def wait(snap: Snapshot, *placed: tuple[str, str]) -> tuple[PipelinedPod, ...]:
    groups = {p.key: p.group for p in snap.pods}
    return tuple(PipelinedPod(key, groups[key], node_name, ()) for key, node_name in placed)


def audit(snap: Snapshot, decision: EvictionDecision, config: EngineConfig = CONFIG) -> list[str]:
    return EvictionAudit(snap, config, []).check(decision)


def test_a_valid_reclaim_passes_and_is_replayed() -> None:
    snap = inside_deserved_cluster()
    victims = [f"ns/borrow-{i}" for i in range(4)]
    decision = EvictionDecision(
        Action.RECLAIM,
        "ns/claim",
        evict(snap, Action.RECLAIM, MAINTAIN_FAIR_SHARE, "ns/claim", *victims),
        wait(snap, *((f"ns/claim-{i}", "n1") for i in range(4))),
        "cp-sat",
    )
    checker = EvictionAudit(snap, CONFIG, [])
    assert checker.check(decision) == []
    checker.commit(decision)
    again = checker.check(decision)  # the same pods cannot go twice, nor wait twice
    assert any("not running" in p for p in again) and any("not pending" in p for p in again)


def test_reclaiming_from_a_queue_inside_its_deserved_quota_is_reported() -> None:
    snap = inside_deserved_cluster()
    keepers = [f"ns/keep-{i}" for i in range(4)]
    decision = EvictionDecision(
        Action.RECLAIM,
        "ns/claim",
        evict(snap, Action.RECLAIM, GUARANTEE_DESERVED_QUOTA, "ns/claim", *keepers),
        wait(snap, *((f"ns/claim-{i}", "n0") for i in range(4))),
        "cp-sat",
    )
    assert any("queue keeper would fall" in p for p in audit(snap, decision))


def test_taking_a_victim_below_its_deserved_quota_is_reported() -> None:
    snap = chunk_cluster()  # b: deserved 2, holds 6; four may go, not five
    five = [f"ns/b-{i}" for i in range(5)]
    decision = EvictionDecision(
        Action.RECLAIM,
        "ns/gang",
        evict(snap, Action.RECLAIM, GUARANTEE_DESERVED_QUOTA, "ns/gang", *five),
        wait(snap, ("ns/gang-0", "n0"), ("ns/gang-1", "n1")),
        "greedy",
    )
    assert any("queue b would fall" in p for p in audit(snap, decision))


def test_preempting_equal_priority_or_protected_work_is_reported() -> None:
    snap = priority_cluster()
    for victim, problem in (("ns/peer", "strictly lower"), ("ns/young", "preemptMinRuntime")):
        decision = EvictionDecision(
            Action.PREEMPT,
            "ns/urgent",
            evict(snap, Action.PREEMPT, LOWER_PRIORITY, "ns/urgent", victim),
            wait(snap, ("ns/urgent-0", "n0")),
            "greedy",
        )
        assert any(problem in p for p in audit(snap, decision)), victim


def test_a_half_bound_preemptor_and_a_broken_victim_gang_are_reported() -> None:
    snap = snapshot(
        [node("n0", gpus=4)],
        [
            pod("v-0", "victim", 2, node_name="n0"),
            pod("v-1", "victim", 2, node_name="n0"),
            pod("p-0", "pair", 2),
            pod("p-1", "pair", 2),
        ],
        [
            group("victim", "q", min_member=2, priority=10),
            group("pair", "q", min_member=2, priority=60),
        ],
        [queue("q")],
    )
    decision = EvictionDecision(
        Action.PREEMPT,
        "ns/pair",
        evict(snap, Action.PREEMPT, LOWER_PRIORITY, "ns/pair", "ns/v-0"),
        wait(snap, ("ns/p-0", "n0")),
        "greedy",
    )
    problems = audit(snap, decision)
    assert any("below its minimum" in p for p in problems)
    assert any("below minMember" in p for p in problems)


def test_consolidation_that_kills_or_runs_under_spread_is_reported() -> None:
    snap = snapshot(
        [node("n0", gpus=4), node("n1", gpus=4)],
        [
            pod("stay-0", "stay", 2, node_name="n0"),
            pod("move-0", "move", 2, node_name="n1"),
            pod("wide-0", "wide", 4),
        ],
        [group("stay", "q"), group("move", "q"), group("wide", "q")],
        [queue("q")],
    )
    moved = evict(snap, Action.CONSOLIDATE, MOVED, "ns/wide", "ns/move-0")
    killed = EvictionDecision(
        Action.CONSOLIDATE, "ns/wide", moved, wait(snap, ("ns/wide-0", "n1")), "greedy"
    )
    assert any("killed, not moved" in p for p in audit(snap, killed))
    sound = dataclasses.replace(
        killed, pipelined=wait(snap, ("ns/wide-0", "n1"), ("ns/move-0", "n0"))
    )
    assert audit(snap, sound) == []
    spread = EngineConfig(placement_strategy=PlacementStrategy.SPREAD)
    assert any("consolidation is off" in p for p in audit(snap, sound, spread))


def test_stale_eviction_within_the_grace_period_is_reported() -> None:
    recent = dataclasses.replace(
        group("g", "q", min_member=4), stale_since=NOW - timedelta(seconds=10)
    )
    snap = snapshot(
        [node("n0")],
        [pod("g-0", "g", 1, node_name="n0"), pod("g-1", "g", 1, node_name="n0")],
        [recent],
        [queue("q")],
    )
    decision = EvictionDecision(
        Action.STALE_GANG,
        None,
        evict(snap, Action.STALE_GANG, STALE_GRACE_EXPIRED, None, "ns/g-0", "ns/g-1"),
        (),
        "rule",
    )
    assert any("grace period" in p for p in audit(snap, decision))
    aged = dataclasses.replace(recent, stale_since=NOW - timedelta(minutes=5))
    assert audit(dataclasses.replace(snap, pod_groups=(aged,)), decision) == []
