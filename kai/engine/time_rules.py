"""When a cycle's decisions can next change by the clock alone.

The engine reads no clock, but three of its rules compare the snapshot's `now`
with a group's timestamps: min-runtime (a running gang may not be preempted or
reclaimed until its last start plus the minimum, `minruntime`), the preemption
delay (a pending gang may not evict before its creation or last eviction plus
the delay) and the stale-gang grace (a gang below its minimum is evicted once
its stale time plus the grace has passed, `stale`). With the same snapshot and a
later `now` that is still before the earliest of those instants, a cycle decides
the same. The live loop uses this to let a quiet cluster be: it skips cycles
while nothing in the cache changed and no such instant has come.

The instants are taken generously: a running gang's min-runtime ends are tried
for every minimum any queue or the defaults set, whichever pair of queues would
use it, so an instant may come with nothing changing (a cycle runs for nothing)
but none is missed. A rule that makes the engine read `now` belongs here too.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from kai.engine.evictions.minruntime import preemption_delay_end
from kai.engine.evictions.stale import grace_seconds
from kai.engine.model import EvictionConfig, Queue, Snapshot


def next_time_change(snapshot: Snapshot, config: EvictionConfig) -> datetime | None:
    """The earliest instant after `snapshot.now` at which a time rule may flip for some
    group of the snapshot; None: never. (A cycle that changes a group's timestamps
    writes them, and the next cycle's snapshot has them.)"""
    now = snapshot.now
    minimums = _min_runtimes(snapshot.queues, config)
    found: list[datetime] = []
    for group in snapshot.pod_groups:
        if group.last_start is not None:
            found.extend(_first_after(now, (group.last_start + m for m in minimums)))
        delay_end = preemption_delay_end(group, now)
        if delay_end is not None:
            found.append(delay_end)
        grace = grace_seconds(group, config.staleness_grace_seconds)
        if group.stale_since is not None and grace >= 0:
            found.extend(_first_after(now, (group.stale_since + timedelta(seconds=grace),)))
    return min(found, default=None)


def _min_runtimes(queues: Iterable[Queue], config: EvictionConfig) -> list[timedelta]:
    """Every positive minimum runtime some pair of queues may use."""
    seconds: set[float | None] = {
        config.preempt_min_runtime_seconds,
        config.reclaim_min_runtime_seconds,
    }
    for queue in queues:
        seconds.update((queue.preempt_min_runtime_seconds, queue.reclaim_min_runtime_seconds))
    return [timedelta(seconds=s) for s in seconds if s is not None and s > 0]


def _first_after(now: datetime, instants: Iterable[datetime]) -> list[datetime]:
    later = [instant for instant in instants if instant > now]
    return [min(later)] if later else []
