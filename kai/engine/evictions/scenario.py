"""A candidate answer for one preemptor: which pods go, where its pods wait, and what that costs.

Both searches (greedy and CP-SAT) produce scenarios; the cheaper valid one is
committed. Disruption is measured the same way for both, per evicted pod, and
compared lexicographically as the issue orders it: fewest evicted GPUs, then the
lowest priorities (weighted by the GPUs they hold), then the most recently started.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from math import ceil

from kai.engine.evictions.room import Seat
from kai.engine.evictions.rules import Verdict, VictimOption
from kai.engine.evictions.state import EvictionState

GPU_UNITS = 100  # disruption counts hundredths of a GPU


@dataclass(frozen=True)
class PodCost:
    gpus: int  # hundredths of a GPU
    priority: int  # (gpus + 1) x rank of the gang's priority among the candidates, lowest = 0
    recency: int  # rank of the gang's start among the candidates, most recent = 0


@dataclass(frozen=True)
class Scenario:
    evicted: dict[str, frozenset[str]]  # victim gang -> its evicted pods
    seats: tuple[Seat, ...]  # the preemptor's pods on the room the victims leave
    moves: tuple[Seat, ...]  # consolidation: each evicted pod's new place
    verdict: Verdict
    answer: str  # "greedy" or "cp-sat"


def pod_costs(state: EvictionState, options: Iterable[VictimOption]) -> dict[str, PodCost]:
    gangs = [option.gang for option in options]
    priorities = sorted({gang.group.priority for gang in gangs})
    starts = sorted(
        {gang.group.last_start.timestamp() if gang.group.last_start else 0.0 for gang in gangs},
        reverse=True,
    )
    costs: dict[str, PodCost] = {}
    for gang in gangs:
        start = gang.group.last_start.timestamp() if gang.group.last_start else 0.0
        for pod in gang.pods:
            gpus = ceil(state.usage[pod.key].gpu * GPU_UNITS)
            costs[pod.key] = PodCost(
                gpus,
                (gpus + 1) * priorities.index(gang.group.priority),
                starts.index(start),
            )
    return costs


def disruption(scenario: Scenario, costs: Mapping[str, PodCost]) -> tuple[int, int, int]:
    """Smaller is better."""
    chosen = [costs[pod] for pods in scenario.evicted.values() for pod in pods]
    return (
        sum(c.gpus for c in chosen),
        sum(c.priority for c in chosen),
        sum(c.recency for c in chosen),
    )
