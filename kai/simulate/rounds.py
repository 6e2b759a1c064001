"""Scheduling rounds on a snapshot, with each round's decisions applied the way a cluster would carry them out.

Per the `kai simulate` contract: a bound pod becomes Running on its node; an
evicted pod becomes Pending again with no node, in the same PodGroup (its owner
re-creates it); a pipelined pod stays Pending. The PodGroup timestamps the cycle
asks to write (last start, stale since, last eviction) are written, so min-runtime,
staleness and preemption delay see them in the next round. Only the engine
decides; this module only applies.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from kai.engine.cycle import Binding, CycleResult, run_cycle
from kai.engine.memo import SnapshotMemo
from kai.engine.model import EngineConfig, Pod, PodPhase, Snapshot


@dataclass(frozen=True)
class Simulation:
    rounds: tuple[CycleResult, ...]
    final: Snapshot


def simulate(snapshot: Snapshot, rounds: int, config: EngineConfig) -> Simulation:
    results: list[CycleResult] = []
    state = snapshot
    memo = SnapshotMemo()  # a round pays for the pods the last one changed, as `kai run` does
    for _ in range(rounds):
        result = run_cycle(state, config, memo)
        results.append(result)
        state = apply(state, result)
    return Simulation(tuple(results), state)


def apply(snapshot: Snapshot, result: CycleResult) -> Snapshot:
    """The snapshot after the cycle's bindings, evictions and timestamps took effect."""
    bound = {binding.pod: binding for binding in result.bindings}
    evicted = {eviction.pod for eviction in result.evictions}
    pods = tuple(_applied(pod, bound, evicted) for pod in snapshot.pods)
    groups = tuple(
        dataclasses.replace(
            group,
            last_start=result.stamps[group.key].last_start,
            stale_since=result.stamps[group.key].stale_since,
            last_eviction=result.stamps[group.key].last_eviction,
        )
        if group.key in result.stamps
        else group
        for group in snapshot.pod_groups
    )
    return dataclasses.replace(snapshot, pods=pods, pod_groups=groups)


def _applied(pod: Pod, bound: Mapping[str, Binding], evicted: Collection[str]) -> Pod:
    if pod.key in bound:
        binding = bound[pod.key]
        return dataclasses.replace(
            pod, phase=PodPhase.BOUND, node=binding.node, gpu_groups=binding.gpu_groups
        )
    if pod.key in evicted:
        return dataclasses.replace(pod, phase=PodPhase.PENDING, node=None, gpu_groups=())
    return pod
