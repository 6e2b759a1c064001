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

from kai.engine.model import UNLIMITED, Queue
from kai.engine.resources import RESOURCE_NAMES, ResourceName, Resources

OVER_LIMIT = "OverLimit"
NON_PREEMPTIBLE_OVER_QUOTA = "NonPreemptibleOverQuota"

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
        return self.reason == OVER_LIMIT or not preemptible

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

    def copy(self) -> QueueBudget:
        """An independent ledger starting from this one's allocations."""
        return QueueBudget(self._queues, self.allocated, self.allocated_np)

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
                    ledger.allocated.get(queue.name, Resources()) + amount
                )
        return ledger

    def ancestry(self, leaf: str) -> list[Queue]:
        """The leaf and its ancestors, leaf first."""
        chain: list[Queue] = []
        name: str | None = leaf
        while name is not None and name in self._queues and len(chain) <= len(self._queues):
            queue = self._queues[name]
            chain.append(queue)
            name = queue.parent
        return chain

    def caps(self, queue: Queue) -> Iterator[Cap]:
        """Every finite cap on `queue` with what counts against it now: limits, then quotas."""
        used = self.allocated.get(queue.name, Resources())
        for name in RESOURCE_NAMES:
            limit = queue.resource(name).limit
            if limit != UNLIMITED:
                yield Cap(queue, name, OVER_LIMIT, limit, used.get(name))
        used_np = self.allocated_np.get(queue.name, Resources())
        for name in RESOURCE_NAMES:
            quota = queue.resource(name).quota
            if quota != UNLIMITED:
                yield Cap(queue, name, NON_PREEMPTIBLE_OVER_QUOTA, quota, used_np.get(name))

    def check(
        self, leaf: str, request: Resources, preemptible: bool, only: str | None = None
    ) -> Refusal | None:
        """The first cap the request would break, at the leaf or an ancestor; `only` limits
        the check to one reason (preempting may free room under a limit, never quota)."""
        for queue in self.ancestry(leaf):
            for cap in self.caps(queue):
                if only is not None and cap.reason != only:
                    continue
                need = request.get(cap.resource)
                if need and cap.applies_to(preemptible) and need > cap.room:
                    return cap.refusal(need)
        return None

    def add(self, leaf: str, request: Resources, preemptible: bool) -> None:
        for queue in self.ancestry(leaf):
            self.allocated[queue.name] = self.allocated.get(queue.name, Resources()) + request
            if not preemptible:
                self.allocated_np[queue.name] = (
                    self.allocated_np.get(queue.name, Resources()) + request
                )


def leaf_names(queues: Iterable[Queue]) -> set[str]:
    queue_list = list(queues)
    parents = {q.parent for q in queue_list if q.parent}
    return {q.name for q in queue_list if q.name not in parents}
