"""Min-runtime: how long a gang must have run before it may be preempted or reclaimed (kai-semantics §11.1).

The runtime clock is the gang's last start. Preempt looks the minimum up from the
victim's queue towards the root. Reclaim by default takes the queue one level
below the reclaimer's and victim's lowest common ancestor, on the victim's side,
and walks up from there, so a department can protect its projects from other
departments longer than from each other. A gang with no recorded start is not
protected, as in KAI.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta

from kai.engine.model import PodGroup, Queue, ReclaimResolveMethod


def path_from_root(queues: Mapping[str, Queue], leaf: str) -> list[Queue]:
    """The queue's ancestors from its top-level queue down to the queue itself."""
    chain: list[Queue] = []
    name: str | None = leaf
    while name is not None and name in queues and len(chain) <= len(queues):
        chain.append(queues[name])
        name = queues[name].parent
    return chain[::-1]


def preempt_min_runtime(queues: Mapping[str, Queue], victim_queue: str, default: float) -> float:
    """The first preemptMinRuntime set on the victim's queue or an ancestor, else the default."""
    for queue in reversed(path_from_root(queues, victim_queue)):
        if queue.preempt_min_runtime_seconds is not None:
            return queue.preempt_min_runtime_seconds
    return default


def reclaim_min_runtime(
    queues: Mapping[str, Queue],
    reclaimer_queue: str,
    victim_queue: str,
    method: ReclaimResolveMethod,
    default: float,
) -> float:
    """reclaimMinRuntime for this pair of queues, by the LCA method or from the victim's queue."""
    victim_path = path_from_root(queues, victim_queue)
    start = len(victim_path) - 1
    if method is ReclaimResolveMethod.LCA:
        reclaimer_path = path_from_root(queues, reclaimer_queue)
        common = 0
        while (
            common < min(len(victim_path), len(reclaimer_path))
            and victim_path[common].name == reclaimer_path[common].name
        ):
            common += 1
        # victim_path[common] is one step below the common ancestor (or the top-level queue
        # when the two share none: top-level queues are siblings under an implicit root).
        start = min(common, len(victim_path) - 1)
    for queue in reversed(victim_path[: start + 1]):
        if queue.reclaim_min_runtime_seconds is not None:
            return queue.reclaim_min_runtime_seconds
    return default


def protected(group: PodGroup, min_runtime_seconds: float, now: datetime) -> bool:
    """The gang started less than the minimum runtime ago."""
    if group.last_start is None or min_runtime_seconds <= 0:
        return False
    return now < group.last_start + timedelta(seconds=min_runtime_seconds)


def preemption_delayed(group: PodGroup, now: datetime) -> bool:
    """Within its preemption delay the gang may use free capacity but may not cause evictions (§11.2)."""
    return preemption_delay_end(group, now) is not None


def preemption_delay_end(group: PodGroup, now: datetime) -> datetime | None:
    """When the gang's preemption delay ends, if it has not yet."""
    end = preemption_delay_until(group)
    return end if end is not None and now < end else None


def preemption_delay_until(group: PodGroup) -> datetime | None:
    """When the gang's preemption delay ends (or ended): it counts from the later of its
    creation and its last eviction; None: it has none."""
    delay = group.preemption_delay_seconds
    if not delay or delay <= 0:
        return None
    moments = [m for m in (group.created, group.last_eviction) if m is not None]
    if not moments:
        return None
    return max(moments) + timedelta(seconds=delay)
