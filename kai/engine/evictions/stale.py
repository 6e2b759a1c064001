"""Stale-gang eviction: a gang that runs below its minimum longer than its grace period is evicted whole.

A gang is stale when some of its pods hold nodes but fewer than its minimum (or a
sub-group's) do, and none of its pods has succeeded: a gang whose pods are
completing is finishing, not stuck (KAI#1968). The first cycle that sees it stale
records the time; once the grace period (per PodGroup, else the scheduler's
default; negative disables) has passed, every running pod of the gang is evicted
(kai-semantics §8.5). A gang that is no longer stale forgets the time.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from kai.engine.evictions.decisions import (
    STALE_GRACE_EXPIRED,
    Action,
    Eviction,
    EvictionDecision,
)
from kai.engine.model import Pod, PodGroup, PodPhase
from kai.engine.subgroups import holds, may_run_below_minimum


@dataclass(frozen=True)
class StaleOutcome:
    decisions: tuple[EvictionDecision, ...]
    stale_since: dict[str, datetime | None]  # only gangs whose stale time changes


def grace_seconds(group: PodGroup, default_grace_seconds: float) -> float:
    """How long the gang may stay below its minimum: its own grace, else the default
    (negative: never evicted for it)."""
    grace = group.staleness_grace_period_seconds
    return default_grace_seconds if grace is None else grace


def stale_gangs(
    groups: Iterable[PodGroup],
    members: Mapping[str, Collection[Pod]],
    placed: Collection[str],
    evicted: Collection[str],
    default_grace_seconds: float,
    now: datetime,
) -> StaleOutcome:
    """`groups`: at least those that `may_be_stale`; `members`: our pods by PodGroup;
    `placed`: pods bound or pipelined this cycle; `evicted`: pods this cycle already evicts."""
    decisions: list[EvictionDecision] = []
    stale_since: dict[str, datetime | None] = {}
    for group in groups:
        if not may_be_stale(group):
            continue
        mine = list(members.get(group.key, ()))
        if not may_run_below_minimum(group) or not _is_stale(group, mine, placed):
            if group.stale_since is not None:
                stale_since[group.key] = None
            continue
        since = group.stale_since or now
        if group.stale_since is None:
            stale_since[group.key] = since
        grace = grace_seconds(group, default_grace_seconds)
        if grace < 0 or now - since < timedelta(seconds=grace):
            continue
        running = [
            pod
            for pod in mine
            if pod.phase is PodPhase.BOUND and pod.node is not None and pod.key not in evicted
        ]
        if running:
            evictions = tuple(
                Eviction(
                    pod.key, group.key, pod.node or "", Action.STALE_GANG, STALE_GRACE_EXPIRED, None
                )
                for pod in sorted(running, key=lambda p: p.key)
            )
            decisions.append(EvictionDecision(Action.STALE_GANG, None, evictions, (), "rule"))
    return StaleOutcome(tuple(decisions), stale_since)


def may_be_stale(group: PodGroup) -> bool:
    """Whether the check must look at the group: only a gang that may run below its minimum
    can be stale, and only one with a stale time can forget it (most groups are neither)."""
    return group.stale_since is not None or may_run_below_minimum(group)


def _is_stale(group: PodGroup, pods: list[Pod], placed: Collection[str]) -> bool:
    if any(pod.phase is PodPhase.SUCCEEDED for pod in pods):
        return False
    used = [pod for pod in pods if pod.phase.occupies_node or pod.key in placed]
    if not used:
        return False
    return not holds(group, used)
