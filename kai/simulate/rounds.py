"""Scheduling rounds on a snapshot, with each round's decisions applied the way a cluster would carry them out.

A bound pod becomes Running on its node; the next round sees the result. Evicted
and pipelined pods (once the eviction actions run) follow the rules of the
`kai simulate` contract. Only the engine decides; this module only applies.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from kai.engine.cycle import CycleResult, run_cycle
from kai.engine.model import EngineConfig, PodPhase, Snapshot


@dataclass(frozen=True)
class Simulation:
    rounds: tuple[CycleResult, ...]
    final: Snapshot


def simulate(snapshot: Snapshot, rounds: int, config: EngineConfig) -> Simulation:
    results: list[CycleResult] = []
    state = snapshot
    for _ in range(rounds):
        result = run_cycle(state, config)
        results.append(result)
        state = apply(state, result)
    return Simulation(tuple(results), state)


def apply(snapshot: Snapshot, result: CycleResult) -> Snapshot:
    """The snapshot after the cycle's bindings took effect."""
    bound = {binding.pod: binding for binding in result.bindings}
    pods = tuple(
        dataclasses.replace(
            pod,
            phase=PodPhase.BOUND,
            node=bound[pod.key].node,
            gpu_groups=bound[pod.key].gpu_groups,
        )
        if pod.key in bound
        else pod
        for pod in snapshot.pods
    )
    return dataclasses.replace(snapshot, pods=pods)
