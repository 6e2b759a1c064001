"""Reclaim takes back the gang consolidation pipelined earlier in the same cycle.

KAI's later actions see the tasks its consolidation pipelined as allocated, and its
reclaim takes them for a reclaimer (KAI's case "4 jobs of queue0 - 3 running 1 pending
will consolidate, 1 pending job from queue1 - reclaim"). kai's reclaim took running pods
only: the consolidated gang bound, and was evicted two cycles later for the reclaimer, a
job started only to be killed. Now it is taken back before it binds (`EvictionState.promised`).
"""

from __future__ import annotations

from kai.engine.cycle import run_cycle
from kai.engine.evictions.decisions import (
    MAINTAIN_FAIR_SHARE,
    MOVED,
    Action,
    Eviction,
    EvictionDecision,
    PipelinedPod,
)
from kai.engine.greedy import UNSCHEDULABLE
from kai.engine.model import EngineConfig, Snapshot
from kai.engine.validator import EvictionAudit
from tests.unit.engine.builders import group, node, pod, queue, snapshot

CONFIG = EngineConfig(time_limit_seconds=0)


def _cluster() -> Snapshot:
    """Two nodes of 4 GPUs. `borrower` (quota 4, no share beyond it) runs 5 GPUs: `a` (2)
    on n0, `b` (2) and `c` (1) on n1, and waits with `wide` (3 GPUs), which fits once `b`
    moves to n0. `owner` (quota 4) waits with `claim` (4 GPUs)."""
    return snapshot(
        [node("n0", gpus=4), node("n1", gpus=4)],
        [
            pod("a-0", "a", 2, node_name="n0"),
            pod("b-0", "b", 2, node_name="n1"),
            pod("c-0", "c", 1, node_name="n1"),
            pod("wide-0", "wide", 3),
            pod("claim-0", "claim", 4),
        ],
        [
            group("a", "borrower"),
            group("b", "borrower"),
            group("c", "borrower"),
            group("wide", "borrower"),
            group("claim", "owner"),
        ],
        [queue("borrower", gpu_quota=4, weight=0), queue("owner", gpu_quota=4, weight=0)],
    )


def test_reclaim_takes_back_the_gang_consolidation_pipelined_before_it_binds() -> None:
    result = run_cycle(_cluster(), CONFIG)
    assert [(e.pod, e.action) for e in result.evictions] == [
        ("ns/b-0", Action.CONSOLIDATE),
        ("ns/c-0", Action.RECLAIM),
    ]
    assert [(e.pod, e.action, e.preemptor) for e in result.taken_back] == [
        ("ns/wide-0", Action.RECLAIM, "ns/claim")
    ]
    assert sorted((p.pod, p.node) for p in result.pipelined) == [
        ("ns/b-0", "n0"),
        ("ns/claim-0", "n1"),
    ]
    assert result.bindings == ()
    wide = result.groups["ns/wide"]
    assert wide.reason == UNSCHEDULABLE
    assert "taken back before binding by reclaim for ns/claim" in wide.message
    # The one pod leaving is c's: wide's was never started.
    assert "1 pods evicted by reclaim are still leaving" in result.groups["ns/claim"].message


def _consolidation() -> EvictionDecision:
    return EvictionDecision(
        Action.CONSOLIDATE,
        "ns/wide",
        (Eviction("ns/b-0", "ns/b", "n1", Action.CONSOLIDATE, MOVED, "ns/wide"),),
        (
            PipelinedPod("ns/wide-0", "ns/wide", "n1", ()),
            PipelinedPod("ns/b-0", "ns/b", "n0", ()),
        ),
        "greedy",
    )


def _taking_back(action: Action) -> EvictionDecision:
    return EvictionDecision(
        action,
        "ns/claim",
        (
            Eviction("ns/wide-0", "ns/wide", "n1", action, MAINTAIN_FAIR_SHARE, "ns/claim"),
            Eviction("ns/c-0", "ns/c", "n1", action, MAINTAIN_FAIR_SHARE, "ns/claim"),
        ),
        (PipelinedPod("ns/claim-0", "ns/claim", "n1", ()),),
        "greedy",
    )


def test_the_audit_lets_reclaim_take_back_what_consolidation_pipelined() -> None:
    audit = EvictionAudit(_cluster(), CONFIG, [])
    assert audit.check(_consolidation()) == []
    audit.commit(_consolidation())
    assert audit.check(_taking_back(Action.RECLAIM)) == []


def test_the_audit_lets_no_action_take_a_pipelined_pod_before_consolidation_promised_it() -> None:
    audit = EvictionAudit(_cluster(), CONFIG, [])
    problems = audit.check(_taking_back(Action.RECLAIM))
    assert any("evicted pod ns/wide-0 is not on n1" in p for p in problems)


def test_the_audit_refuses_a_consolidation_that_moves_a_pod_it_promised() -> None:
    audit = EvictionAudit(_cluster(), CONFIG, [])
    audit.commit(_consolidation())
    moving = EvictionDecision(
        Action.CONSOLIDATE,
        "ns/claim",
        (Eviction("ns/wide-0", "ns/wide", "n1", Action.CONSOLIDATE, MOVED, "ns/claim"),),
        (
            PipelinedPod("ns/claim-0", "ns/claim", "n1", ()),
            PipelinedPod("ns/wide-0", "ns/wide", "n0", ()),
        ),
        "greedy",
    )
    problems = audit.check(moving)
    assert any("ns/wide-0, pipelined this cycle, may not be taken back" in p for p in problems)
