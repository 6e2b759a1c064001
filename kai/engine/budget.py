"""Queue capacity checks: limits and non-preemptible quota at every ancestor (kai-semantics §10.5).

`QueueBudget` holds what each queue has allocated this cycle (its subtree totals)
and answers whether a request may still be added under a leaf queue. Allocation
passes record what they admit so that later gangs see it. A refused check returns
the reason code and a message with the numbers, the way users need to read it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
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

    def ancestry(self, leaf: str) -> list[Queue]:
        """The leaf and its ancestors, leaf first."""
        chain: list[Queue] = []
        name: str | None = leaf
        while name is not None and name in self._queues and len(chain) <= len(self._queues):
            queue = self._queues[name]
            chain.append(queue)
            name = queue.parent
        return chain

    def check(self, leaf: str, request: Resources, preemptible: bool) -> Refusal | None:
        for queue in self.ancestry(leaf):
            used = self.allocated.get(queue.name, Resources())
            for name in RESOURCE_NAMES:
                need = request.get(name)
                if not need:
                    continue
                limit = queue.resource(name).limit
                if limit != UNLIMITED and used.get(name) + need > limit:
                    return Refusal(
                        OVER_LIMIT,
                        f"queue {queue.name}: limit {describe_amount(name, limit)}, allocated "
                        f"{describe_amount(name, used.get(name))}, this gang needs "
                        f"{describe_amount(name, need)}",
                    )
            if preemptible:
                continue
            used_np = self.allocated_np.get(queue.name, Resources())
            for name in RESOURCE_NAMES:
                need = request.get(name)
                quota = queue.resource(name).quota
                if not need or quota == UNLIMITED:
                    continue
                if used_np.get(name) + need > quota:
                    return Refusal(
                        NON_PREEMPTIBLE_OVER_QUOTA,
                        f"queue {queue.name}: non-preemptible work may use only deserved quota; "
                        f"deserved {describe_amount(name, quota)}, non-preemptible allocated "
                        f"{describe_amount(name, used_np.get(name))}, this gang needs "
                        f"{describe_amount(name, need)}",
                    )
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
