"""The PodGroup timestamps a cycle changes: last start, stale since, last eviction (kai-semantics §4.2).

The engine reads no clock: the snapshot's `now` is the time of every stamp. A gang
that reaches its minimum this cycle (from below) starts its min-runtime clock; a
gang that loses pods records the eviction, which its preemption delay counts from.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping
from datetime import datetime

from kai.engine.evictions.decisions import GroupStamps
from kai.engine.model import Pod, PodGroup, PodPhase


def cycle_stamps(
    now: datetime,
    groups: Mapping[str, PodGroup],
    members: Mapping[str, Collection[Pod]],
    bound: Mapping[str, str],
    evicted: Mapping[str, str],
    stale_since: Mapping[str, datetime | None],
) -> dict[str, GroupStamps]:
    """New stamps for every PodGroup whose stamps change. `groups`: by key; `members`: our
    pods by PodGroup; `bound`/`evicted`: pod -> PodGroup."""
    gained = Counter(bound.values())
    lost = Counter(evicted.values())
    # A group no pod joined or left and whose stale time stands keeps its stamps: only
    # these few are looked at, not every PodGroup of the cluster.
    touched = set(gained) | set(lost) | set(stale_since)
    stamps: dict[str, GroupStamps] = {}
    for key in sorted(touched):
        group = groups.get(key)
        if group is None:
            continue
        before = sum(1 for pod in members.get(key, ()) if pod.phase is PodPhase.BOUND)
        last_start = group.last_start
        if _starts(group, before, before + gained[key] - lost[key]):
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
