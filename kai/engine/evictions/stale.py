"""Stale-gang eviction: a gang that runs below its minimum longer than its grace period is evicted whole.

A gang is stale when some of its pods hold nodes but fewer than its minimum (or a
sub-group's) do, and none of its pods has succeeded: a gang whose pods are
completing is finishing, not stuck (KAI#1968). The first cycle that sees it stale
records the time; once the grace period (per PodGroup, else the scheduler's
default; negative disables) has passed, every running pod of the gang is evicted
(kai-semantics §8.5). A gang that is no longer stale forgets the time.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable
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


def stale_gangs(
    groups: Iterable[PodGroup],
    pods: Iterable[Pod],
    placed: Collection[str],
    evicted: Collection[str],
    default_grace_seconds: float,
    now: datetime,
) -> StaleOutcome:
    """`placed`: pods bound or pipelined this cycle; `evicted`: pods this cycle already evicts."""
    groups = list(groups)
    watched = {group.key for group in groups if may_run_below_minimum(group)}
    members: dict[str, list[Pod]] = defaultdict(list)
    for pod in pods:
        if pod.scheduler_is_ours and pod.group in watched:
            members[pod.group].append(pod)
    decisions: list[EvictionDecision] = []
    stale_since: dict[str, datetime | None] = {}
    for group in groups:
        mine = members.get(group.key, [])
        if group.key not in watched or not _is_stale(group, mine, placed):
            if group.stale_since is not None:
                stale_since[group.key] = None
            continue
        since = group.stale_since or now
        if group.stale_since is None:
            stale_since[group.key] = since
        grace = group.staleness_grace_period_seconds
        grace = default_grace_seconds if grace is None else grace
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


def _is_stale(group: PodGroup, pods: list[Pod], placed: Collection[str]) -> bool:
    if any(pod.phase is PodPhase.SUCCEEDED for pod in pods):
        return False
    used = [pod for pod in pods if pod.phase.occupies_node or pod.key in placed]
    if not used:
        return False
    return not holds(group, used)
