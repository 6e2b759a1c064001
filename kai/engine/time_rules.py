"""When a cycle's decisions can next change by the clock alone.

The engine reads no clock, but three of its rules compare the snapshot's `now`
with a group's timestamps: min-runtime (a running gang may not be preempted or
reclaimed until its last start plus the minimum, `minruntime`), the preemption
delay (a pending gang may not evict before its creation or last eviction plus
the delay) and the stale-gang grace (a gang below its minimum is evicted once
its stale time plus the grace has passed, `stale`); and one compares it with a
pod's: a running pod being deleted is stuck once its deletion is older than the
threshold (`Pod.stuck`), and its room is no longer offered. With the same snapshot and a
later `now` that is still before the earliest of those instants, a cycle decides
the same. The live loop uses this to let a quiet cluster be: it skips cycles
while nothing in the cache changed and no such instant has come.

The instants are taken generously: a running gang's min-runtime ends are tried
for every minimum any queue or the defaults set, whichever pair of queues would
use it, so an instant may come with nothing changing (a cycle runs for nothing)
but none is missed. A rule that makes the engine read `now` belongs here too.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from datetime import datetime, timedelta
from operator import attrgetter

from kai.engine.evictions.minruntime import preemption_delay_until
from kai.engine.evictions.stale import grace_seconds
from kai.engine.model import EvictionConfig, PodGroup, Queue, Snapshot
from kai.engine.snapshot_changes import brought


def next_time_change(snapshot: Snapshot, config: EvictionConfig) -> datetime | None:
    """The earliest instant after `snapshot.now` at which a time rule may flip for some
    group of the snapshot; None: never. (A cycle that changes a group's timestamps
    writes them, and the next cycle's snapshot has them.)"""
    minimums = _min_runtimes(snapshot.queues, config)
    return _earliest(
        min(
            (
                instant
                for group in snapshot.pod_groups
                for instant in _instants(group, minimums, config)
                if instant > snapshot.now
            ),
            default=None,
        ),
        _first_stuck(snapshot, config),
    )


class TimeRuleInstants:
    """`next_time_change` kept from snapshot to snapshot, for the live loop: a group's
    instants are worked out again only when its object changed (by the snapshot's
    account of its changes, else by identity), and kept in order, so that the first
    after `now` is found by bisection. Worked out anew for every group, it was 6% of
    kai's CPU while pods came one at a time beside 8,000."""

    def __init__(self) -> None:
        self._start_over(None)

    def _start_over(self, basis: object) -> None:
        self._basis = basis
        self._groups: dict[str, PodGroup] = {}
        self._instants: dict[str, tuple[datetime, ...]] = {}
        self._ordered: list[tuple[datetime, str]] = []
        self._seen: tuple[PodGroup, ...] | None = None

    def next_change(self, snapshot: Snapshot, config: EvictionConfig) -> datetime | None:
        """As `next_time_change(snapshot, config)`."""
        minimums = _min_runtimes(snapshot.queues, config)
        basis = (frozenset(minimums), config.staleness_grace_seconds)
        if basis != self._basis:
            self._start_over(basis)
        told = snapshot.changes.pod_groups if snapshot.changes else None
        changed = brought(self._groups, snapshot.pod_groups, told, self._seen, attrgetter("key"))
        self._seen = snapshot.pod_groups
        for key in changed:
            for instant in self._instants.pop(key, ()):
                del self._ordered[bisect.bisect_left(self._ordered, (instant, key))]
            group = self._groups.get(key)
            if group is not None:
                instants = self._instants[key] = _instants(group, minimums, config)
                for instant in instants:
                    bisect.insort(self._ordered, (instant, key))
        after = bisect.bisect_right(self._ordered, (snapshot.now, _AFTER_EVERY_KEY))
        first = self._ordered[after][0] if after < len(self._ordered) else None
        return _earliest(first, _first_stuck(snapshot, config))


_AFTER_EVERY_KEY = "\U0010ffff"
"""Sorts after any group key: (now, this) is after every (now, key)."""


def _first_stuck(snapshot: Snapshot, config: EvictionConfig) -> datetime | None:
    """The first instant after `now` at which a pod being deleted becomes stuck. A pod is
    stuck strictly after the threshold, as in KAI: the instant is a microsecond past it."""
    after = timedelta(seconds=config.stuck_in_releasing_seconds, microseconds=1)
    return min(
        (
            instant
            for pod in snapshot.pods
            if pod.deleting_since is not None
            and (instant := pod.deleting_since + after) > snapshot.now
        ),
        default=None,
    )


def _earliest(first: datetime | None, second: datetime | None) -> datetime | None:
    return second if first is None else first if second is None else min(first, second)


def _instants(
    group: PodGroup, minimums: Iterable[timedelta], config: EvictionConfig
) -> tuple[datetime, ...]:
    """Every instant at which a time rule may flip for the group, past ones too, in order."""
    found: list[datetime] = []
    if group.last_start is not None:
        found.extend(group.last_start + minimum for minimum in minimums)
    delay_until = preemption_delay_until(group)
    if delay_until is not None:
        found.append(delay_until)
    grace = grace_seconds(group, config.staleness_grace_seconds)
    if group.stale_since is not None and grace >= 0:
        found.append(group.stale_since + timedelta(seconds=grace))
    return tuple(sorted(found))


def _min_runtimes(queues: Iterable[Queue], config: EvictionConfig) -> list[timedelta]:
    """Every positive minimum runtime some pair of queues may use."""
    seconds: set[float | None] = {
        config.preempt_min_runtime_seconds,
        config.reclaim_min_runtime_seconds,
    }
    for queue in queues:
        seconds.update((queue.preempt_min_runtime_seconds, queue.reclaim_min_runtime_seconds))
    return [timedelta(seconds=s) for s in seconds if s is not None and s > 0]
