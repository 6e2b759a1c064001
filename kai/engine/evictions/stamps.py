"""The PodGroup timestamps a cycle changes: last start, stale since, last eviction (kai-semantics §4.2).

The engine reads no clock: the snapshot's `now` is the time of every stamp. A gang
that reaches its minimum this cycle (from below) starts its min-runtime clock; a
gang that loses pods records the eviction, which its preemption delay counts from.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from datetime import datetime

from kai.engine.evictions.decisions import GroupStamps
from kai.engine.model import PodGroup, PodPhase, Snapshot


def cycle_stamps(
    snapshot: Snapshot,
    bound: Mapping[str, str],
    evicted: Mapping[str, str],
    stale_since: Mapping[str, datetime | None],
) -> dict[str, GroupStamps]:
    """New stamps for every PodGroup whose stamps change. `bound`/`evicted`: pod -> PodGroup."""
    now = snapshot.now
    gained = Counter(bound.values())
    lost = Counter(evicted.values())
    # A group no pod joined or left and whose stale time stands keeps its stamps: only
    # these few are looked at, not every PodGroup of the cluster.
    touched = set(gained) | set(lost) | set(stale_since)
    running_before: Counter[str] = Counter(
        pod.group
        for pod in snapshot.pods
        if pod.group in touched and pod.phase is PodPhase.BOUND and pod.scheduler_is_ours
    )
    stamps: dict[str, GroupStamps] = {}
    for group in snapshot.pod_groups:
        key = group.key
        if key not in touched:
            continue
        last_start = group.last_start
        if _starts(group, running_before[key], running_before[key] + gained[key] - lost[key]):
            last_start = now
        last_eviction = now if lost[key] else group.last_eviction
        since = stale_since.get(key, group.stale_since)
        new = GroupStamps(last_start, since, last_eviction)
        if new != GroupStamps(group.last_start, group.stale_since, group.last_eviction):
            stamps[key] = new
    return stamps


def _starts(group: PodGroup, before: int, after: int) -> bool:
    needed = max(group.min_member, 1)
    return before < needed <= after
