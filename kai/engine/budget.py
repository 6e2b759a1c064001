"""Queue capacity checks: limits and non-preemptible quota at every ancestor (kai-semantics §10.5).

`QueueBudget` holds what each queue has allocated this cycle (its subtree totals)
and answers whether a request may still be added under a leaf queue. Allocation
passes record what they admit so that later gangs see it. A refused check returns
the reason code and a message with the numbers, the way users need to read it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from fractions import Fraction

from kai.engine.model import UNLIMITED, PodGroup, Queue
from kai.engine.resources import NO_RESOURCES, RESOURCE_NAMES, ResourceName, Resources, ResourceSum

OVER_LIMIT = "OverLimit"
NON_PREEMPTIBLE_OVER_QUOTA = "NonPreemptibleOverQuota"

_NOTHING = Resources()

_UNITS: dict[ResourceName, str] = {"gpu": "GPUs", "cpu": "millicores", "memory": "bytes"}


@dataclass(frozen=True)
class Refusal:
    reason: str
    message: str


@dataclass(frozen=True)
class Cap:
    """One finite cap on a queue: its limit (every pod) or its deserved quota (non-preemptible pods).

    The greedy pass, the CP-SAT model, the eviction searches and the explanations all read
    the caps from here, so the rule and its numbers are written once.
    """

    queue: Queue
    resource: ResourceName
    reason: str  # OVER_LIMIT or NON_PREEMPTIBLE_OVER_QUOTA
    bound: Fraction  # the limit, or the deserved quota
    used: Fraction  # what counts against it now: all allocation, or non-preemptible only

    @property
    def room(self) -> Fraction:
        return self.bound - self.used

    def applies_to(self, preemptible: bool) -> bool:
        return _applies(self.reason, preemptible)

    def refusal(self, need: Fraction) -> Refusal:
        name, queue = self.resource, self.queue.name
        if self.reason == OVER_LIMIT:
            return Refusal(
                OVER_LIMIT,
                f"queue {queue}: limit {describe_amount(name, self.bound)}, allocated "
                f"{describe_amount(name, self.used)}, this gang needs {describe_amount(name, need)}",
            )
        return Refusal(
            NON_PREEMPTIBLE_OVER_QUOTA,
            f"queue {queue}: non-preemptible work may use only deserved quota; "
            f"deserved {describe_amount(name, self.bound)}, non-preemptible allocated "
            f"{describe_amount(name, self.used)}, this gang needs {describe_amount(name, need)}",
        )


def _applies(reason: str, preemptible: bool) -> bool:
    """A limit caps every pod; the deserved quota caps non-preemptible pods only."""
    return reason == OVER_LIMIT or not preemptible


def describe_amount(name: ResourceName, value: Fraction) -> str:
    number = int(value) if value.denominator == 1 else round(float(value), 3)
    return f"{number} {_UNITS[name]}" if name != "gpu" else f"{number} GPUs"


class QueueBudget:
    """Allocation per queue subtree, checked against limits and (for non-preemptible work) quota."""

    def __init__(
        self,
        queues: Mapping[str, Queue],
        allocated: Mapping[str, Resources],
        allocated_non_preemptible: Mapping[str, Resources],
    ) -> None:
        self._queues = queues
        self.allocated: dict[str, Resources] = dict(allocated)
        self.allocated_np: dict[str, Resources] = dict(allocated_non_preemptible)
        # What depends on the queues only, asked at every attempt of a pass: shared by copies.
        self._ancestries: dict[str, list[Queue]] = {}
        self._bounds: dict[str, list[tuple[ResourceName, str, Fraction]]] = {}

    def copy(self) -> QueueBudget:
        """An independent ledger starting from this one's allocations."""
        ledger = QueueBudget(self._queues, self.allocated, self.allocated_np)
        ledger._ancestries, ledger._bounds = self._ancestries, self._bounds
        return ledger

    def counting(self, releasing: Mapping[str, Resources]) -> QueueBudget:
        """A ledger whose limits also count what each leaf queue's pods being deleted hold.

        A bind must fit under a limit with them (they still hold their devices); a gang
        that fits only once they are gone is pipelined there, as onto Releasing capacity,
        so evictions and pipelining keep the ledger without them (else they would evict
        more to make room that is already being freed).
        """
        ledger = self.copy()
        for leaf, amount in releasing.items():
            for queue in ledger.ancestry(leaf):
                ledger.allocated[queue.name] = (
                    ledger.allocated.get(queue.name, NO_RESOURCES) + amount
                )
        return ledger

    def ancestry(self, leaf: str) -> list[Queue]:
        """The leaf and its ancestors, leaf first."""
        chain = self._ancestries.get(leaf)
        if chain is None:
            chain = self._ancestries[leaf] = []
            name: str | None = leaf
            while name is not None and name in self._queues and len(chain) <= len(self._queues):
                queue = self._queues[name]
                chain.append(queue)
                name = queue.parent
        return chain

    def caps(self, queue: Queue) -> Iterator[Cap]:
        """Every finite cap on `queue` with what counts against it now: limits, then quotas."""
        for resource, reason, bound in self._finite_bounds(queue):
            yield Cap(queue, resource, reason, bound, self._used(queue, reason).get(resource))

    def check(
        self, leaf: str, request: Resources, preemptible: bool, only: str | None = None
    ) -> Refusal | None:
        """The first cap the request would break, at the leaf or an ancestor; `only` limits
        the check to one reason (preempting may free room under a limit, never quota)."""
        broken = self._first_broken(leaf, request, preemptible, only)
        return None if broken is None else broken[0].refusal(broken[1])

    def fits(self, leaf: str, request: Resources, preemptible: bool) -> bool:
        """`check` without its message: whether the request breaks no cap."""
        return self._first_broken(leaf, request, preemptible, None) is None

    def breaking(self, leaf: str, request: Resources, preemptible: bool) -> str | None:
        """The queue whose cap the request breaks first (as `check` finds it), or None."""
        broken = self._first_broken(leaf, request, preemptible, None)
        return None if broken is None else broken[0].queue.name

    def _first_broken(
        self, leaf: str, request: Resources, preemptible: bool, only: str | None
    ) -> tuple[Cap, Fraction] | None:
        for queue in self.ancestry(leaf):
            for resource, reason, bound in self._finite_bounds(queue):
                if (only is not None and reason != only) or not _applies(reason, preemptible):
                    continue
                need = request.get(resource)
                if not need:
                    continue
                used = self._used(queue, reason).get(resource)
                if _exceeds(need, used, bound):
                    return Cap(queue, resource, reason, bound, used), need
        return None

    def _finite_bounds(self, queue: Queue) -> list[tuple[ResourceName, str, Fraction]]:
        """The queue's finite limits, then its finite quotas, as (resource, reason, bound)."""
        bounds = self._bounds.get(queue.name)
        if bounds is None:
            bounds = self._bounds[queue.name] = [
                (name, OVER_LIMIT, queue.resource(name).limit)
                for name in RESOURCE_NAMES
                if queue.resource(name).limit != UNLIMITED
            ] + [
                (name, NON_PREEMPTIBLE_OVER_QUOTA, queue.resource(name).quota)
                for name in RESOURCE_NAMES
                if queue.resource(name).quota != UNLIMITED
            ]
        return bounds

    def _used(self, queue: Queue, reason: str) -> Resources:
        """What counts against a cap of this reason: all allocation, or non-preemptible only."""
        held = self.allocated if reason == OVER_LIMIT else self.allocated_np
        return held.get(queue.name, _NOTHING)

    def add_many(self, entries: Iterable[tuple[PodGroup, Resources]]) -> None:
        """`add` for each (group, request) under the group's queue, summed per leaf first: a
        cycle's thousands of placements go up their queues once per leaf, not once per pod."""
        sums: dict[tuple[str, bool], ResourceSum] = {}
        for group, request in entries:
            key = (group.queue, group.preemptible)
            found = sums.get(key)
            if found is None:
                found = sums[key] = ResourceSum()
            found.add(request)
        for (leaf, preemptible), total in sums.items():
            self.add(leaf, total.total(), preemptible)

    def add(self, leaf: str, request: Resources, preemptible: bool) -> None:
        for queue in self.ancestry(leaf):
            self.allocated[queue.name] = self.allocated.get(queue.name, NO_RESOURCES) + request
            if not preemptible:
                self.allocated_np[queue.name] = (
                    self.allocated_np.get(queue.name, NO_RESOURCES) + request
                )


def _exceeds(need: Fraction, used: Fraction, bound: Fraction) -> bool:
    """need > bound - used, in ints when all three are whole (nearly always): every attempt
    of every pass asks this of each cap up its queue chain."""
    if need.denominator == 1 == used.denominator == bound.denominator:
        return need.numerator > bound.numerator - used.numerator
    return need > bound - used


def leaf_names(queues: Iterable[Queue]) -> set[str]:
    queue_list = list(queues)
    parents = {q.parent for q in queue_list if q.parent}
    return {q.name for q in queue_list if q.name not in parents}
