"""An eviction state for unit tests, built from a snapshot the way the cycle builds it after allocation."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import ModuleType

import pytest

from kai.engine.accounting import (
    accounting_device_memory,
    divisible_total,
    pods_by_group,
    queue_shares,
)
from kai.engine.budget import QueueBudget
from kai.engine.cycle import run_cycle
from kai.engine.eligibility import EligibilityIndex
from kai.engine.evictions.preemptors import Preemptor
from kai.engine.evictions.state import EvictionInputs, EvictionState
from kai.engine.gangs import build_gang_requests
from kai.engine.greedy import PodPlacement
from kai.engine.model import EngineConfig, Snapshot

CONFIG = EngineConfig(time_limit_seconds=1.0, solver_workers=1)


def eviction_state(
    snapshot: Snapshot, config: EngineConfig = CONFIG, placed: Mapping[str, str] | None = None
) -> EvictionState:
    """`placed`: pod -> node, the pods this cycle's allocation placed (pending in `snapshot`);
    by default none. Every other pending gang is a would-be preemptor."""
    placed = placed or {}
    pods = {pod.key: pod for pod in snapshot.pods}
    queues = {queue.name: queue for queue in snapshot.queues}
    shares = queue_shares(snapshot)
    ledger = QueueBudget(
        queues,
        {name: share.allocated for name, share in shares.items()},
        {name: share.allocated_non_preemptible for name, share in shares.items()},
    )
    gangs = [
        gang
        for gang in build_gang_requests(snapshot.pod_groups, pods_by_group(snapshot))
        if not any(pod.key in placed for pod in (*gang.core, *gang.elastic))
    ]
    return EvictionState.start(
        EvictionInputs(
            snapshot,
            config,
            queues,
            shares,
            divisible_total(snapshot),
            ledger,
            {key: PodPlacement(pods[key], node, ()) for key, node in placed.items()},
            gangs,
            EligibilityIndex(snapshot.nodes),
            accounting_device_memory(snapshot),
        )
    )


def preemptor(state: EvictionState, key: str) -> Preemptor:
    gang = next(g for g in state.inputs.unplaced if g.key == key)
    return state.preemptor(gang)


def times_taken_with_the_same_decisions(
    monkeypatch: pytest.MonkeyPatch,
    module: ModuleType,
    shortcut: str,
    clusters: Iterable[Snapshot],
    config: EngineConfig,
) -> int:
    """How often `module.shortcut` answered True over the clusters' cycles, each cycle
    asserted to decide the same with the shortcut as with it answering False throughout."""
    found = getattr(module, shortcut)
    taken = 0

    def counted(*args: object) -> bool:
        nonlocal taken
        answer = bool(found(*args))
        taken += answer
        return answer

    for number, cluster in enumerate(clusters):
        monkeypatch.setattr(module, shortcut, counted)
        with_it = run_cycle(cluster, config)
        monkeypatch.setattr(module, shortcut, lambda *args: False)
        without = run_cycle(cluster, config)
        assert with_it.evictions == without.evictions, number
        assert with_it.pipelined == without.pipelined, number
        assert with_it.bindings == without.bindings, number
    return taken
