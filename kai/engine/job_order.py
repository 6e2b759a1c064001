"""The order in which pending gangs are offered resources: KAI's `JobsOrderByQueues` (kai-semantics §7.3).

Within a leaf queue, gangs go by PodGroup priority, gangs below their minimum
before elastic growth, then age, then name. Across queues the walk starts at the
root and, at each level, follows the sibling that the queue order (§10.6) ranks
first given its best gang, re-evaluated after every admission, so queues
interleave the way KAI's do. The greedy pass follows this order; decoding uses it.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime

from kai.engine.fairshare import QueueShare
from kai.engine.gangs import GangRequest
from kai.engine.model import Queue
from kai.engine.queue_order import queue_order_key
from kai.engine.resources import Resources

_EPOCH = datetime(1970, 1, 1).astimezone()


def gang_order_key(request: GangRequest) -> tuple[int, int, datetime, str]:
    group = request.group
    return (
        -group.priority,
        0 if request.core and not request.growth else 1,
        group.created or _EPOCH,
        group.key,
    )


def ordered_gangs(
    requests: list[GangRequest],
    queues: Mapping[str, Queue],
    shares: Mapping[str, QueueShare],
    allocated: Callable[[str], Resources],
    job_size: Callable[[GangRequest], Resources],
    total: Resources,
) -> Iterator[GangRequest]:
    """Yield gangs in KAI's order. `allocated` is read at each step, so admissions re-rank queues."""
    waiting: dict[str, list[GangRequest]] = defaultdict(list)
    for request in sorted(requests, key=gang_order_key, reverse=True):
        waiting[request.group.queue].append(request)
    children: dict[str | None, list[str]] = defaultdict(list)
    for queue in sorted(queues.values(), key=lambda q: q.name):
        children[queue.parent if queue.parent in queues else None].append(queue.name)

    # Each queue's (key, leaf, gang) is cached: an admission changes only the popped
    # leaf and its ancestors, so only their entries are recomputed on the next pop.
    cache: dict[str, tuple[object, str, GangRequest] | None] = {}
    parent_of = {name: queue.parent for name, queue in queues.items()}

    def entry(name: str) -> tuple[object, str, GangRequest] | None:
        if name not in cache:
            head = (name, waiting[name][-1]) if waiting.get(name) else best_under(name)
            share = shares.get(name)
            if head is None or share is None:
                cache[name] = None
            else:
                current = dataclasses.replace(share, allocated=allocated(name))
                key = queue_order_key(current, queues[name], job_size(head[1]), total)
                cache[name] = (key, head[0], head[1])
        return cache[name]

    def best_under(parent: str | None) -> tuple[str, GangRequest] | None:
        candidates = [c for c in (entry(name) for name in children.get(parent, [])) if c]
        if not candidates:
            return None
        _, leaf, gang = min(candidates, key=lambda c: c[0])  # type: ignore[arg-type, return-value]
        return leaf, gang

    while True:
        picked = best_under(None)
        if picked is None:
            return
        leaf, gang = picked
        waiting[leaf].pop()
        if not waiting[leaf]:
            del waiting[leaf]
        name: str | None = leaf
        while name is not None:
            cache.pop(name, None)
            name = parent_of.get(name)
        yield gang
