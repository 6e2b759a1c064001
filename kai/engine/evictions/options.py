"""What the rules work with: the victims an action may take, and the verdict on a set of them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kai.engine.evictions.gangs import RunningGang


@dataclass(frozen=True)
class VictimOption:
    gang: RunningGang
    whole_allowed: bool  # False: min-runtime protects the gang's core; only surplus pods may go


@dataclass(frozen=True)
class Verdict:
    rules: dict[str, str]  # evicted pod -> the rule that allowed it
    problem: str | None = None
    final: bool = False  # the problem stays with any larger victim set

    @property
    def ok(self) -> bool:
        return self.problem is None


Evicted = Mapping[str, frozenset[str]]
"""Victim gang key -> keys of its pods the scenario evicts."""
