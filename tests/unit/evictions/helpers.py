"""An eviction state for unit tests, built from a snapshot the way the cycle builds it after allocation."""

from __future__ import annotations

from kai.engine.accounting import (
    accounting_device_memory,
    divisible_total,
    pods_by_group,
    queue_shares,
)
from kai.engine.budget import QueueBudget
from kai.engine.eligibility import EligibilityIndex
from kai.engine.evictions.preemptors import Preemptor
from kai.engine.evictions.state import EvictionInputs, EvictionState
from kai.engine.gangs import build_gang_requests
from kai.engine.model import EngineConfig, Snapshot

CONFIG = EngineConfig(time_limit_seconds=1.0, solver_workers=1)


def eviction_state(snapshot: Snapshot, config: EngineConfig = CONFIG) -> EvictionState:
    """Nothing was bound this cycle: every pending gang is a would-be preemptor."""
    queues = {queue.name: queue for queue in snapshot.queues}
    shares = queue_shares(snapshot)
    ledger = QueueBudget(
        queues,
        {name: share.allocated for name, share in shares.items()},
        {name: share.allocated_non_preemptible for name, share in shares.items()},
    )
    gangs = build_gang_requests(snapshot.pod_groups, pods_by_group(snapshot))
    return EvictionState.start(
        EvictionInputs(
            snapshot,
            config,
            queues,
            shares,
            divisible_total(snapshot),
            ledger,
            {},
            gangs,
            EligibilityIndex(snapshot.nodes),
            accounting_device_memory(snapshot),
        )
    )


def preemptor(state: EvictionState, key: str) -> Preemptor:
    gang = next(g for g in state.inputs.unplaced if g.key == key)
    return state.preemptor(gang)
