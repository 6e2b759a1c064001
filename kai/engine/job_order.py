"""The order in which pending gangs are offered resources: KAI's `JobsOrderByQueues` (kai-semantics §7.3).

Within a leaf queue, gangs go by PodGroup priority, gangs below their minimum
before elastic growth, then age, then name. Across queues the walk starts at the
root and, at each level, follows the sibling that the queue order (§10.6) ranks
first given its best gang, re-evaluated after every admission, so queues
interleave the way KAI's do. A gang is offered its core first and then, pushed back
after each success, one elastic pod at a time, as KAI's allocate does. The greedy
pass follows this order and records it; the solver keeps it.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime

from kai.engine.fairshare import QueueShare
from kai.engine.gangs import GangRequest, pod_resources
from kai.engine.model import Pod, Queue
from kai.engine.queue_order import QueueOrderKey, QueueRanking
from kai.engine.resources import Resources

_EPOCH = datetime(1970, 1, 1).astimezone()


BELOW_MINIMUM, AT_MINIMUM, ABOVE_MINIMUM = 0, 1, 2
"""KAI's elastic buckets in the job order: gangs below their minimum first, then at it, then above."""


def gang_order_key(request: GangRequest) -> tuple[int, int, datetime, str]:
    group = request.group
    return (-group.priority, _first_bucket(request), group.created or _EPOCH, group.key)


def _first_bucket(request: GangRequest) -> int:
    if request.core and not request.growth:
        return BELOW_MINIMUM
    return AT_MINIMUM if request.active <= request.group.min_member else ABOVE_MINIMUM


@dataclass(frozen=True)
class Offer:
    """One attempt KAI's allocate makes for a gang: its core, or one more elastic pod."""

    gang: GangRequest
    elastic: int  # 0: the core; n: the gang's n-th elastic pod, gang.elastic[n - 1]
    bucket: int

    @property
    def pods(self) -> tuple[Pod, ...]:
        return self.gang.core if self.elastic == 0 else (self.gang.elastic[self.elastic - 1],)

    def key(self) -> tuple[int, int, datetime, str]:
        group = self.gang.group
        return (-group.priority, self.bucket, group.created or _EPOCH, group.key)

    def size(self, gpu_memory_mib: int) -> Resources:
        """What the attempt asks of its queue: the core's resources, or the one pod's."""
        if self.elastic == 0:
            return self.gang.core_request(gpu_memory_mib)
        return pod_resources(self.pods[0], gpu_memory_mib)

    def next_elastic(self) -> Offer | None:
        """The gang's next attempt once this one succeeded: one more pod, pushed back."""
        if self.elastic >= len(self.gang.elastic):
            return None
        return Offer(
            self.gang, self.elastic + 1, AT_MINIMUM if self.elastic == 0 else ABOVE_MINIMUM
        )


def first_offer(request: GangRequest) -> Offer | None:
    """The gang's first attempt; None when it has nothing to place this cycle."""
    if not request.core and not request.elastic:
        return None
    return Offer(request, 0 if request.core else 1, _first_bucket(request))


_Waiting = tuple[tuple[int, int, datetime, str], int, Offer]
"""A waiting attempt in its leaf queue's heap: (job order key, when pushed, the offer)."""


class PendingOffers:
    """The first offers of a set of gangs, already in heaps per leaf queue, to start many
    passes over the same gangs from: the eviction actions' look at the next cycle runs one
    pass per decision over every gang still pending, and pushing them one by one was a
    fifth of that look."""

    def __init__(self, gangs: Iterable[GangRequest]) -> None:
        self._heaps: dict[str, list[_Waiting]] = defaultdict(list)
        self._leaf_of: dict[str, str] = {}
        for gang in gangs:
            offer = first_offer(gang)
            if offer is not None:
                leaf = gang.group.queue
                self._heaps[leaf].append((offer.key(), len(self._leaf_of), offer))
                self._leaf_of[gang.key] = leaf
        for heap in self._heaps.values():
            heapq.heapify(heap)
        self.pushed = len(self._leaf_of)  # as if pushed one by one: the next push comes after

    def __contains__(self, key: str) -> bool:
        return key in self._leaf_of

    def heaps_without(self, keys: Collection[str]) -> dict[str, list[_Waiting]]:
        """A copy of the heaps, less these gangs' offers (the copy is the caller's to pop)."""
        heaps = {leaf: list(heap) for leaf, heap in self._heaps.items()}
        _remove(heaps, {self._leaf_of[key] for key in keys if key in self._leaf_of}, keys)
        return heaps

    def discard(self, keys: Collection[str]) -> None:
        """No longer offer these gangs (placed since)."""
        _remove(self._heaps, {self._leaf_of.pop(key) for key in keys if key in self._leaf_of}, keys)


def _remove(heaps: dict[str, list[_Waiting]], leaves: set[str], keys: Collection[str]) -> None:
    for leaf in leaves:
        kept = [entry for entry in heaps[leaf] if entry[2].gang.key not in keys]
        heapq.heapify(kept)
        if kept:
            heaps[leaf] = kept
        else:
            del heaps[leaf]


class OfferQueue:
    """KAI's `JobsOrderByQueues` as a queue of attempts: pop the next, push a gang back to grow.

    Within a leaf queue offers go by the job order; across queues the walk starts at the
    root and, at each level, follows the sibling that the queue order (§10.6) ranks first
    given its best offer, re-evaluated after every pop, so queues interleave as KAI's do.
    `allocated` is read at each step, so admissions re-rank queues.
    """

    def __init__(
        self,
        queues: Mapping[str, Queue],
        shares: Mapping[str, QueueShare],
        allocated: Callable[[str], Resources],
        size: Callable[[Offer], Resources],
        total: Resources,
        pending: PendingOffers | None = None,
        without: Collection[str] = (),
        rankings: dict[str, QueueRanking] | None = None,
    ) -> None:
        """`pending`: gangs waiting from the start (less those in `without`), the same as
        pushing each of their first offers. `rankings`: the queues' rankings, kept by the
        caller for passes with the same queues and shares."""
        self._queues, self._shares, self._allocated = queues, shares, allocated
        self._size, self._total = size, total
        self._waiting: dict[str, list[_Waiting]] = defaultdict(list)
        self._pushed = 0
        if pending is not None:
            self._waiting.update(pending.heaps_without(without))
            self._pushed = pending.pushed
        self._children: dict[str | None, list[str]] = defaultdict(list)
        for queue in sorted(queues.values(), key=lambda q: q.name):
            self._children[queue.parent if queue.parent in queues else None].append(queue.name)
        self._parent_of = {name: queue.parent for name, queue in queues.items()}
        # Each queue's (key, leaf, offer) is cached: a pop or push changes only one leaf and
        # its ancestors, so only their entries are recomputed.
        self._cache: dict[str, tuple[QueueOrderKey, str, Offer] | None] = {}
        # Fixed for the pass (not what is allocated): shared when the caller keeps them.
        self._rankings: dict[str, QueueRanking] = {} if rankings is None else rankings

    def push(self, offer: Offer) -> None:
        leaf = offer.gang.group.queue
        self._pushed += 1
        heapq.heappush(self._waiting[leaf], (offer.key(), self._pushed, offer))
        self._forget(leaf)

    def pop(self) -> Offer | None:
        picked = self._best_under(None)
        if picked is None:
            return None
        leaf, offer = picked
        heapq.heappop(self._waiting[leaf])
        if not self._waiting[leaf]:
            del self._waiting[leaf]
        self._forget(leaf)
        return offer

    def __iter__(self) -> Iterator[Offer]:
        while (offer := self.pop()) is not None:
            yield offer

    def _forget(self, leaf: str) -> None:
        # A queue's entry is worked out from its children's, and forgetting one forgets all
        # above it, so above a queue with no entry none has one: the walk stops there.
        name: str | None = leaf
        while name is not None and name in self._cache:
            del self._cache[name]
            name = self._parent_of.get(name)

    def _entry(self, name: str) -> tuple[QueueOrderKey, str, Offer] | None:
        if name not in self._cache:
            waiting = self._waiting.get(name)
            head = (name, waiting[0][2]) if waiting else self._best_under(name)
            share = self._shares.get(name)
            if head is None or share is None:
                self._cache[name] = None
            else:
                ranking = self._rankings.get(name)
                if ranking is None:
                    ranking = QueueRanking(share, self._queues[name], self._total)
                    self._rankings[name] = ranking
                key = ranking.key(self._allocated(name), self._size(head[1]))
                self._cache[name] = (key, head[0], head[1])
        return self._cache[name]

    def _best_under(self, parent: str | None) -> tuple[str, Offer] | None:
        best: tuple[QueueOrderKey, str, Offer] | None = None
        for name in self._children.get(parent, ()):
            entry = self._entry(name)
            if entry is not None and (best is None or entry[0] < best[0]):
                best = entry  # the first of equal keys stays, as in a sort
        return None if best is None else (best[1], best[2])


def ordered_gangs(
    requests: list[GangRequest],
    queues: Mapping[str, Queue],
    shares: Mapping[str, QueueShare],
    allocated: Callable[[str], Resources],
    job_size: Callable[[GangRequest], Resources],
    total: Resources,
) -> Iterator[GangRequest]:
    """Yield each gang once, in KAI's order (the eviction actions take whole gangs)."""
    offers = OfferQueue(queues, shares, allocated, lambda offer: job_size(offer.gang), total)
    for request in requests:
        offer = first_offer(request)
        if offer is not None:
            offers.push(offer)
    for offer in offers:
        yield offer.gang
