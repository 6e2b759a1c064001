"""KAI's victim order, in one place: which running pods go first, and what a victim set costs.

KAI pops victims from a victim queue: the queue tree walked in the reverse of the queue
order (§10.6; a queue's dominant share counts the victims already taken from it and its
next one), and inside a leaf queue the reverse of the job order (§7.3): lowest priority
first, then jobs above their minimum, then at it, then the newest creation, then the
highest UID. Each pop gives one unit (kai-semantics §8.6): a job above its minimum gives
one surplus pod, the last in task order (from the sub-group furthest above its minimum),
and goes back into the queue with the rest; otherwise its remaining pods go together.

Both victim searches read this module: the greedy search takes units in this order,
and the CP-SAT model and the comparison of answers use the same costs. A victim set is
compared, smaller first, by: the latest victim class it touches (class: a leaf queue and
a priority, numbered in victim order, so a more protected queue or priority is never
taken while a less protected one can give); then evicted GPUs; then evicted pods; then
the classes it takes from, weighted by GPUs; then the victims' places in the order
(newest job, last task first). Consolidation moves its victims, which keep their GPUs:
there a victim set costs its pods and their places, not GPUs, so among sets that move
as many pods KAI's order decides (the first working victims in the order are moved).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from datetime import datetime
from math import ceil
from typing import Any

from kai.engine.evictions.gangs import RunningGang, subgroup_members
from kai.engine.evictions.options import Evicted, VictimOption
from kai.engine.evictions.state import EvictionState
from kai.engine.model import Pod
from kai.engine.queue_order import DominantShare, queue_order_key
from kai.engine.resources import NO_RESOURCES, Resources

GPU_UNITS = 100  # costs count hundredths of a GPU

_EPOCH = datetime(1970, 1, 1).astimezone()

QueueKey = tuple[Any, ...]
"""KAI's queue order key (`queue_order.queue_order_key`) with the victims' dominant share."""

Disruption = tuple[int, int, int, int, int]
"""(latest class, GPU units, pods, classes weighted by GPU units, places in the order)."""


@dataclass(frozen=True)
class VictimUnit:
    option: VictimOption
    pods: tuple[Pod, ...]  # the pods this pop evicts: one surplus pod, or the rest of the gang
    position: int  # place in the victim order, 0 = first to go
    klass: int  # the (leaf queue, priority) class, numbered in order of first appearance


@dataclass(frozen=True)
class PodCost:
    gpus: int  # hundredths of a GPU
    klass: int
    position: int


def eviction_order(gang: RunningGang) -> tuple[Pod, ...]:
    """The gang's pods in the reverse of KAI's task order: the first to be evicted first."""
    return tuple(reversed(gang.pods))


class VictimOrder:
    """The victim queue for one preemptor's candidate victims; units are produced lazily."""

    def __init__(
        self, state: EvictionState, options: Iterable[VictimOption], moves: bool = False
    ) -> None:
        """`moves`: the victims are moved, not killed (consolidation); see `cost`."""
        self._state = state
        self._moves = moves
        self._options = list(options)
        queues = state.inputs.queues
        self._parent = {name: queue.parent for name, queue in queues.items()}
        # Newest creation first, then the highest UID: a rank, so heap keys stay ascending.
        newest = sorted(
            self._options,
            key=lambda o: (o.gang.group.created or _EPOCH, o.gang.group.uid, o.gang.key),
            reverse=True,
        )
        self._age_rank = {option.gang.key: rank for rank, option in enumerate(newest)}
        self._leaves: dict[str, list[tuple[tuple[int, int, int], str]]] = {}
        self._remaining: dict[str, tuple[Pod, ...]] = {}
        # What each gang's remaining pods hold, kept as pods are taken: the queue order asks
        # for the next victim job's at every re-rank, and a large gang's sum was most of it.
        self._remaining_usage: dict[str, Resources] = {}
        self._taken_pods: dict[str, set[str]] = {}
        self._by_key = {option.gang.key: option for option in self._options}
        for option in self._options:
            key = option.gang.key
            self._remaining[key] = eviction_order(option.gang)
            self._taken_pods[key] = set()
            heapq.heappush(
                self._leaves.setdefault(option.gang.queue, []), (self._job_key(key), key)
            )
        self._children: dict[str | None, set[str]] = {}
        for leaf in self._leaves:
            self._link(leaf)
        self._taken: dict[str, Resources] = {}  # queue -> what the units so far take from it
        self._queue_keys: dict[str, QueueKey] = {}
        self._static_keys: dict[str, tuple[QueueKey, Resources, DominantShare | None]] = {}
        self._classes: dict[tuple[str, int], int] = {}
        self._units: list[VictimUnit] = []
        self._source = self._produce()
        self._positions: dict[str, int] = {}
        self._klass_of: dict[str, int] = {}
        self._recorded = 0  # units whose pods have their places recorded

    # -- the order -----------------------------------------------------------------------
    def units(self) -> Iterator[VictimUnit]:
        """Every unit in victim order (a second walk replays the first)."""
        index = 0
        while True:
            while index >= len(self._units):
                if next(self._source, None) is None:
                    return
            yield self._units[index]
            index += 1

    def all_units(self) -> list[VictimUnit]:
        for _ in self.units():
            pass
        return self._units

    def cost(self, pod: Pod) -> PodCost:
        """The pod's cost; the order is walked only as far as the pod's place in it."""
        while pod.key not in self._positions:
            if self._recorded >= len(self._units) and next(self._source, None) is None:
                break
            while self._recorded < len(self._units):
                unit = self._units[self._recorded]
                self._recorded += 1
                for member in unit.pods:
                    # Moves may take part of a unit: then each pod's own place in the order counts.
                    self._positions[member.key] = (
                        len(self._positions) if self._moves else unit.position
                    )
                    self._klass_of[member.key] = unit.klass
        # A moved pod keeps its GPUs: consolidation costs restarts, so only pods and places count.
        gpus = 0 if self._moves else ceil(self._state.usage[pod.key].gpu * GPU_UNITS)
        # A pod no pop reaches (a protected core) would go after everything else.
        klass = self._klass_of.get(pod.key, len(self._classes))
        unreached = len(self._positions) if self._moves else len(self._units)
        return PodCost(gpus, klass, self._positions.get(pod.key, unreached))

    def disruption(self, evicted: Evicted) -> Disruption:
        """How much a victim set disrupts, compared lexicographically; smaller is better."""
        costs = [
            self.cost(pod)
            for key, keys in evicted.items()
            for pod in self._by_key[key].gang.pods
            if pod.key in keys
        ]
        return (
            max((c.klass for c in costs), default=0),
            sum(c.gpus for c in costs),
            len(costs),
            sum((c.gpus + 1) * c.klass for c in costs),
            sum(c.position for c in costs),
        )

    def _produce(self) -> Iterator[bool]:
        while True:
            leaf = self._next_leaf(None)
            if leaf is None:
                return
            heap = self._leaves[leaf]
            _, key = heapq.heappop(heap)
            option = self._by_key[key]
            pods, more = self._next_pods(option)
            if pods:
                klass = self._classes.setdefault(
                    (leaf, option.gang.group.priority), len(self._classes)
                )
                self._units.append(VictimUnit(option, pods, len(self._units), klass))
                self._taken_pods[key].update(pod.key for pod in pods)
                if more:  # one surplus pod; the gang goes back with the rest
                    amount = self._state.usage[pods[0].key]
                    taken = pods[0].key
                    self._remaining[key] = tuple(p for p in self._remaining[key] if p.key != taken)
                    if key in self._remaining_usage:
                        self._remaining_usage[key] -= amount
                else:  # the rest of the gang, whose sum the queue order has usually asked for
                    known = self._remaining_usage.pop(key, None)
                    amount = (
                        known
                        if known is not None
                        else sum((self._state.usage[pod.key] for pod in pods), Resources())
                    )
                    self._remaining[key] = ()
                name: str | None = leaf
                while name is not None:
                    self._taken[name] = self._taken.get(name, NO_RESOURCES) + amount
                    self._queue_keys.pop(name, None)
                    name = self._parent.get(name)
                if more:
                    heapq.heappush(heap, (self._job_key(key), key))
            if not heap:
                self._unlink(leaf)
            else:
                self._forget_keys(leaf)
            yield True

    def _next_pods(self, option: VictimOption) -> tuple[tuple[Pod, ...], bool]:
        """What one pop of this gang evicts, and whether the gang goes back into the queue."""
        gang = option.gang
        taken = self._taken_pods[gang.key]
        remaining = self._remaining[gang.key]
        if len(remaining) > 1:
            surplus = [
                pod
                for pod in remaining
                if gang.allows(taken | {pod.key}) and len(taken) + 1 < len(gang.pods)
            ]
            if surplus:
                ratio = self._subgroup_ratios(gang, remaining)
                best = max(
                    range(len(surplus)), key=lambda i: (ratio.get(surplus[i].subgroup, 0.0), -i)
                )
                return (surplus[best],), True
        if option.whole_allowed and remaining:
            return remaining, False
        return (), False

    @staticmethod
    def _subgroup_ratios(gang: RunningGang, remaining: tuple[Pod, ...]) -> dict[str | None, float]:
        """Each sub-group's running pods over its minimum: the highest ratio gives first."""
        ratios: dict[str | None, float] = {}
        for subgroup in gang.group.subgroups:
            members = subgroup_members(gang.group.subgroups, subgroup)
            count = sum(1 for pod in remaining if pod.subgroup in members)
            ratio = count / subgroup.min_member if subgroup.min_member > 0 else float(count)
            for name in members:  # the innermost sub-group a pod names decides
                if name == subgroup.name or name not in ratios:
                    ratios[name] = ratio
        return ratios

    def _job_key(self, key: str) -> tuple[int, int, int]:
        """Reverse job order inside a leaf queue: smaller goes first."""
        option = self._by_key[key]
        group = option.gang.group
        left = len(self._remaining[key])
        bucket = 0 if left > group.min_member else 1 if left == group.min_member else 2
        return (group.priority, bucket, self._age_rank[key])

    # -- the queue tree ------------------------------------------------------------------
    def _link(self, leaf: str) -> None:
        name: str | None = leaf
        while name is not None:
            parent = self._parent.get(name)
            parent = parent if parent in self._parent else None
            siblings = self._children.setdefault(parent, set())
            if name in siblings:
                return
            siblings.add(name)
            name = parent

    def _unlink(self, leaf: str) -> None:
        del self._leaves[leaf]
        name: str | None = leaf
        while name is not None:
            parent = self._parent.get(name)
            parent = parent if parent in self._parent else None
            self._queue_keys.pop(name, None)
            siblings = self._children.get(parent, set())
            siblings.discard(name)
            if siblings or parent is None:
                self._forget_keys(parent)
                return
            name = parent

    def _forget_keys(self, name: str | None) -> None:
        while name is not None:
            self._queue_keys.pop(name, None)
            name = self._parent.get(name)

    def _next_leaf(self, parent: str | None) -> str | None:
        children = self._children.get(parent)
        if not children:
            return None if parent is None else parent
        chosen = max(children, key=self._queue_key)
        if chosen in self._leaves:
            return chosen
        return self._next_leaf(chosen)

    def _queue_key(self, name: str) -> QueueKey:
        """KAI's queue order key; the victim queue takes the largest (the reverse order) first.

        Only the dominant share changes as victims are taken; the rest is worked out once.
        """
        cached = self._queue_keys.get(name)
        if cached is not None:
            return cached
        state = self._state
        static = self._static_keys.get(name)
        if static is None:
            share = state.inputs.shares.get(name)
            held = state.ledger.allocated.get(name, NO_RESOURCES)
            if share is None:
                static = self._static_keys[name] = ((False,), held, None)
            else:
                current = replace(share, allocated=held)
                key = queue_order_key(
                    current, state.inputs.queues[name], Resources(), state.inputs.total
                )
                dominant = DominantShare(state.allocatable(name), state.inputs.total)
                static = self._static_keys[name] = (key, held, dominant)
        key, held, dominant_share = static
        found: QueueKey = key
        if dominant_share is not None:
            left = dominant_share.of_remainder(
                held, self._taken.get(name, NO_RESOURCES), self._next_job(name)
            )
            found = (*key[:4], left, *key[5:])
        self._queue_keys[name] = found
        return found

    def _next_job(self, name: str) -> Resources:
        """What the next victim job of the queue's best leaf holds (KAI's "next victim")."""
        leaf: str | None = name
        while leaf is not None and leaf not in self._leaves:
            children = self._children.get(leaf)
            if not children:
                return Resources()
            leaf = max(children, key=self._queue_key)
        if leaf is None or not self._leaves.get(leaf):
            return Resources()
        key = self._leaves[leaf][0][1]
        usage = self._remaining_usage.get(key)
        if usage is None:
            usage = sum((self._state.usage[pod.key] for pod in self._remaining[key]), Resources())
            self._remaining_usage[key] = usage
        return usage
