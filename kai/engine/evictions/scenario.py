"""A candidate answer for one preemptor: which pods go, where its pods wait, and what that costs.

Both searches (greedy and CP-SAT) produce scenarios; the cheaper valid one is
committed. Disruption is measured the same way for both, per evicted pod, and
compared lexicographically as the issue orders it: fewest evicted GPUs, then the
lowest priorities (weighted by the GPUs they hold), then the most recently started.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from math import ceil

from kai.engine.evictions.gangs import RunningGang
from kai.engine.evictions.options import Verdict, VictimOption
from kai.engine.evictions.room import Seat
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


class PodCosts(Mapping[str, PodCost]):
    """Each candidate victim pod's cost, worked out when first asked for (most never are)."""

    def __init__(self, state: EvictionState, options: Iterable[VictimOption]) -> None:
        self._state = state
        self._gang_of: dict[str, RunningGang] = {}
        gangs = [option.gang for option in options]
        for gang in gangs:
            for pod in gang.pods:
                self._gang_of[pod.key] = gang
        self._priorities = _ranks(gang.group.priority for gang in gangs)
        self._starts = _ranks(-_started(gang.group.last_start) for gang in gangs)
        self._known: dict[str, PodCost] = {}

    def __getitem__(self, pod: str) -> PodCost:
        cost = self._known.get(pod)
        if cost is None:
            group = self._gang_of[pod].group
            gpus = ceil(self._state.usage[pod].gpu * GPU_UNITS)
            cost = self._known[pod] = PodCost(
                gpus,
                (gpus + 1) * self._priorities[group.priority],
                self._starts[-_started(group.last_start)],
            )
        return cost

    def __iter__(self) -> Iterator[str]:
        return iter(self._gang_of)

    def __len__(self) -> int:
        return len(self._gang_of)


def _started(moment: datetime | None) -> float:
    return moment.timestamp() if moment is not None else 0.0


def _ranks(values: Iterable[float]) -> dict[float, int]:
    """Each distinct value's rank, smallest first."""
    return {value: rank for rank, value in enumerate(sorted(set(values)))}


def disruption(scenario: Scenario, costs: Mapping[str, PodCost]) -> tuple[int, int, int]:
    """Smaller is better."""
    chosen = [costs[pod] for pods in scenario.evicted.values() for pod in pods]
    return (
        sum(c.gpus for c in chosen),
        sum(c.priority for c in chosen),
        sum(c.recency for c in chosen),
    )
