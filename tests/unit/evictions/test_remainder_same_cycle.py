"""A gang the allocation placed in part looks for room for the rest in the same cycle.

KAI's reclaim and preempt take every job that still has pending tasks after allocate,
so an elastic gang whose core allocate placed may reclaim for its next pod at once
(KAI's "Reclaim only over quota task from elastic Job"). kai waited a cycle. The
audit then judged such a gang by its running pods alone, not those bound this cycle,
and refused every decision for a gang of minMember 2 or more.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

from kai.engine.cycle import CycleResult, run_cycle
from kai.engine.greedy import UNSCHEDULABLE
from kai.engine.model import EngineConfig
from tests.unit.engine.builders import NOW, group, node, pod, queue, snapshot


def _cycle(min_member: int, **claim_fields: Any) -> CycleResult:
    """A node of 2 + `min_member` GPUs. owner (quota 1, no share of the rest) runs an elastic
    gang of two 1-GPU pods; claimant (quota 3) waits for a gang of `min_member` + 1 pods of
    1 GPU each: the core fits on the idle GPUs, the last pod only on one of owner's."""
    holder = group("holder", "owner")
    claim = dataclasses.replace(group("claim", "claimant", min_member=min_member), **claim_fields)
    pods = [pod(f"holder-{i}", "holder", 1, cpu=0, memory=0, node_name="n0") for i in range(2)]
    pods += [pod(f"claim-{i}", "claim", 1, cpu=0, memory=0) for i in range(min_member + 1)]
    queues = [queue("owner", gpu_quota=1, weight=0), queue("claimant", gpu_quota=3)]
    snap = snapshot([node("n0", gpus=2 + min_member)], pods, [holder, claim], queues)
    return run_cycle(snap, EngineConfig(time_limit_seconds=0))


def test_the_pod_left_after_the_core_reclaims_in_the_same_cycle() -> None:
    for min_member in (1, 2):
        result = _cycle(min_member)
        bound = {binding.pod for binding in result.bindings}
        assert len(bound) == min_member and bound <= {f"ns/claim-{i}" for i in range(3)}
        assert [e.group for e in result.evictions] == ["ns/holder"]
        (waiting,) = result.pipelined
        assert waiting.pod.startswith("ns/claim-") and waiting.pod not in bound
        assert result.eviction_report is not None
        assert result.eviction_report.validator_violations == 0
        # Its core is bound this cycle: the gang runs, and its PodGroup says so.
        decision = result.groups["ns/claim"]
        assert decision.scheduled and decision.reason == "Pipelined"
        assert decision.message == (
            "the gang runs; 1 pods pipelined: 1 pods evicted by reclaim are still leaving; "
            "the pods bind once they have left"
        )


def test_the_pod_left_names_the_preemption_delay_that_holds_it_back() -> None:
    result = _cycle(
        2,
        created=NOW - timedelta(hours=1),
        last_eviction=NOW - timedelta(seconds=60),
        preemption_delay_seconds=300.0,
    )
    assert len(result.bindings) == 2 and result.evictions == () and result.pipelined == ()
    decision = result.groups["ns/claim"]
    assert decision.scheduled and decision.reason == UNSCHEDULABLE
    assert decision.message.startswith("the gang runs; 1 pod(s) beyond its minimum wait: ")
    assert decision.message.endswith(
        "; it may not evict others before 2026-06-01T00:04:00Z: its preemptionDelay of 300s "
        "counts from its last eviction"
    )
