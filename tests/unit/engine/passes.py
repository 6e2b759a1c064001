"""What a greedy pass over a test snapshot needs: KAI's order over its queues and a ledger of what they hold."""

from __future__ import annotations

from kai.engine.accounting import divisible_total, queue_shares
from kai.engine.budget import QueueBudget
from kai.engine.eligibility import EligibilityIndex
from kai.engine.greedy import KaiOrder
from kai.engine.model import EngineConfig, Snapshot


def order_and_ledger(snap: Snapshot) -> tuple[KaiOrder, QueueBudget]:
    """The default configuration's order, and a ledger of what the snapshot's queues hold."""
    shares = queue_shares(snap)
    queues = {q.name: q for q in snap.queues}
    ledger = QueueBudget(
        queues,
        {name: share.allocated for name, share in shares.items()},
        {name: share.allocated_non_preemptible for name, share in shares.items()},
    )
    order = KaiOrder(
        queues, shares, divisible_total(snap), EngineConfig(), EligibilityIndex(snap.nodes), 40_000
    )
    return order, ledger
