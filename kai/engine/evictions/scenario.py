"""A candidate answer for one preemptor: which pods go and where its pods wait.

Both searches (greedy and CP-SAT) produce scenarios; the less disruptive valid one
is committed, measured for both by `victim_order.VictimOrder.disruption`.
"""

from __future__ import annotations

from dataclasses import dataclass

from kai.engine.evictions.options import Verdict
from kai.engine.evictions.room import Seat


@dataclass(frozen=True)
class Scenario:
    evicted: dict[str, frozenset[str]]  # victim gang -> its evicted pods
    seats: tuple[Seat, ...]  # the preemptor's pods on the room the victims leave
    moves: tuple[Seat, ...]  # consolidation: each evicted pod's new place
    verdict: Verdict
    answer: str  # "greedy" or "cp-sat"
