"""The greedy pass can be ended early, and a failed attempt is never offered again.

The eviction searches' look at the next cycle (`evictions/next_cycle.py`) needs only
whether a victim is bound back before its preemptor. It stops the pass once that is
known, which is sound only because an attempt that fails is not pushed back: once the
preemptor's attempt has failed, it stays unplaced. At 1,000 nodes (bench/engine.py) the
full passes made a cycle 13 s long, stopping early 4.9 s (one run each, same load).
"""

from __future__ import annotations

from collections import Counter

from kai.engine.accounting import pods_by_group
from kai.engine.capacity import initial_capacity
from kai.engine.gangs import build_gang_requests
from kai.engine.greedy import AllocationOutcome, Settled, allocate_in_kai_order
from kai.engine.job_order import Offer
from kai.engine.model import Snapshot
from tests.unit.engine.builders import group, node, pod, queue, snapshot
from tests.unit.engine.passes import order_and_ledger


def _cluster() -> Snapshot:
    return snapshot(
        [node("n1", gpus=4)],
        [pod("big-0", "big", gpus=8), *(pod(f"s{i}-0", f"s{i}", gpus=1) for i in range(6))],
        [group("big", "q", priority=100), *(group(f"s{i}", "q") for i in range(6))],
        [queue("q")],
    )


def _allocate(snap: Snapshot, settled: Settled | None = None) -> AllocationOutcome:
    order, ledger = order_and_ledger(snap)
    gangs = build_gang_requests(snap.pod_groups, pods_by_group(snap))
    capacity = initial_capacity(snap.nodes, snap.pods)
    return allocate_in_kai_order(gangs, capacity, ledger, order, settled)


def test_a_failed_attempt_is_not_offered_again() -> None:
    outcome = _allocate(_cluster())
    assert "ns/big" not in outcome.admitted  # 8 GPUs on a 4-GPU node: it fails first ...
    assert Counter(gang for gang, _ in outcome.offers)["ns/big"] == 1  # ... and only once
    assert len(outcome.placements) == 4


def test_the_pass_ends_when_settled_says_so() -> None:
    def after_two_placed(offer: Offer, outcome: AllocationOutcome) -> bool:
        return len(outcome.placements) >= 2

    outcome = _allocate(_cluster(), after_two_placed)
    assert len(outcome.placements) == 2
    assert len(outcome.offers) == 3  # the failed big gang, then two small ones
