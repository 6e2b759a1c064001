"""KAI's hierarchical fair share: how much of each resource every queue is entitled to this cycle.

This is the proportion plugin's division (kai-semantics §10.1-10.3), computed once
per cycle in closed form. For each resource independently, the top-level queues
split the cluster total, then every queue's children split that queue's fair share,
down the tree. Among siblings:

1. everyone gets its deserved quota, capped by what it can use (its requestable);
   over-committed quotas are kept as they are, not scaled down;
2. the surplus goes to priority buckets, highest first, by over-quota weight
   adjusted for historical usage; offers are floored to whole units unless they
   cover the queue's whole need;
3. the units lost to flooring go one at a time to the largest remainders.

Where the prose restatement in §10.2 is loose, this follows KAI's
`resource_division.go`: a bucket hands out its own flooring remainders before the
next bucket starts, and another surplus round runs only when a queue's need was
strictly below its offer (so something was actually left over).

All arithmetic is exact (`Fraction`): a float would reproduce KAI#2209.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from fractions import Fraction
from math import floor

from kai.engine.model import UNLIMITED, Queue
from kai.engine.queue_tree import QueueTree, build_queue_tree, creation_order
from kai.engine.resources import RESOURCE_NAMES, ZERO, ResourceName, Resources


@dataclass(frozen=True, slots=True)
class QueueUsage:
    """What one queue's own jobs hold and ask for; subtree totals are summed from these."""

    allocated: Resources
    """Accepted resources of this queue's pods in allocated states."""
    allocated_non_preemptible: Resources
    """The part of `allocated` that belongs to non-preemptible jobs."""
    pending: Resources
    """Requests of this queue's pending pods."""
    usage: Resources = field(default_factory=Resources)
    """Historical usage normalised to cluster capacity (§10.8); per queue, not summed."""
    releasing: Resources = field(default_factory=Resources)
    """What this queue's pods being deleted still hold. Not in `allocated` nor in fair
    share (KAI's way); only the queue's limit counts it (`QueueBudget.counting`)."""


@dataclass(frozen=True)
class QueueShare:
    """The proportion plugin's view of one queue after division."""

    deserved: Resources
    """Effective deserved: a quota of -1 is resolved to the amount its siblings divided."""
    fair_share: Resources
    allocated: Resources
    """Totals over the queue and all its descendants, as are the next two."""
    allocated_non_preemptible: Resources
    request: Resources
    """Allocated plus pending."""
    limit: Resources
    """The queue's limits; a component of -1 (UNLIMITED) means no cap."""


def compute_fair_shares(
    total: Resources,
    queues: Sequence[Queue],
    leaf_usage: Mapping[str, QueueUsage],
    k_value: Fraction = Fraction(1),
) -> dict[str, QueueShare]:
    """Divide `total` over the queue tree; one QueueShare per queue that takes part.

    `leaf_usage` is keyed by queue name; a queue without an entry holds and asks for
    nothing, and entries for queues outside the tree are ignored, as KAI ignores jobs
    of unknown queues. `k_value` is the proportion plugin's kValue (§10.2).
    """
    if k_value < 0:
        raise ValueError(f"fair share k_value must be >= 0, got {k_value}")
    tree = build_queue_tree(queues)
    for queue in tree:
        _validate(queue)
    subtree = _subtree_totals(tree, leaf_usage)

    deserved: dict[str, dict[ResourceName, Fraction]] = {name: {} for name in tree.queues}
    fair: dict[str, dict[ResourceName, Fraction]] = {name: {} for name in tree.queues}
    to_divide: list[tuple[Resources, tuple[Queue, ...]]] = [(total, tree.children_of(None))]
    while to_divide:
        amount, siblings = to_divide.pop()
        for resource in RESOURCE_NAMES:
            part = amount.get(resource)
            claimants = [
                _Claimant.of(queue, resource, subtree[queue.name].request, leaf_usage)
                for queue in siblings
            ]
            _divide(part, claimants, k_value)
            for claimant in claimants:
                deserved[claimant.name][resource] = claimant.effective_deserved(part)
                fair[claimant.name][resource] = claimant.fair
        for queue in siblings:
            children = tree.children_of(queue.name)
            if children:
                to_divide.append((Resources(**fair[queue.name]), children))

    return {
        queue.name: QueueShare(
            deserved=Resources(**deserved[queue.name]),
            fair_share=Resources(**fair[queue.name]),
            allocated=subtree[queue.name].allocated,
            allocated_non_preemptible=subtree[queue.name].allocated_non_preemptible,
            request=subtree[queue.name].request,
            limit=Resources(queue.gpu.limit, queue.cpu.limit, queue.memory.limit),
        )
        for queue in tree
    }


@dataclass(frozen=True, slots=True)
class _SubtreeTotals:
    allocated: Resources = field(default_factory=Resources)
    allocated_non_preemptible: Resources = field(default_factory=Resources)
    request: Resources = field(default_factory=Resources)

    def plus(self, usage: QueueUsage) -> _SubtreeTotals:
        return _SubtreeTotals(
            self.allocated + usage.allocated,
            self.allocated_non_preemptible + usage.allocated_non_preemptible,
            self.request + usage.allocated + usage.pending,
        )


def _subtree_totals(
    tree: QueueTree, leaf_usage: Mapping[str, QueueUsage]
) -> dict[str, _SubtreeTotals]:
    """Each queue's own usage counted for it and every ancestor, as KAI accounts jobs."""
    totals = {name: _SubtreeTotals() for name in tree.queues}
    for name, usage in sorted(leaf_usage.items()):
        if name not in tree:
            continue
        for queue in tree.ancestry(name):
            totals[queue.name] = totals[queue.name].plus(usage)
    return totals


def _validate(queue: Queue) -> None:
    for resource in RESOURCE_NAMES:
        spec = queue.resource(resource)
        for name, value in (("quota", spec.quota), ("limit", spec.limit)):
            if value < 0 and value != UNLIMITED:
                raise ValueError(
                    f"Queue {queue.name}: spec.resources.{resource}.{name} must be >= 0 "
                    f"or -1 (unlimited), got {value}"
                )
        if spec.over_quota_weight < 0:
            raise ValueError(
                f"Queue {queue.name}: spec.resources.{resource}.overQuotaWeight must be >= 0, "
                f"got {spec.over_quota_weight}"
            )


@dataclass
class _Claimant:
    """One sibling's stake in one resource while their parent's amount is being divided."""

    name: str
    priority: int
    order: tuple[bool, datetime, str]
    deserved: Fraction
    limit: Fraction
    weight: Fraction
    request: Fraction
    usage: Fraction
    fair: Fraction = ZERO

    @classmethod
    def of(
        cls,
        queue: Queue,
        resource: ResourceName,
        request: Resources,
        leaf_usage: Mapping[str, QueueUsage],
    ) -> _Claimant:
        spec = queue.resource(resource)
        own = leaf_usage.get(queue.name)
        return cls(
            name=queue.name,
            priority=queue.priority,
            order=creation_order(queue),
            deserved=spec.quota,
            limit=spec.limit,
            weight=spec.over_quota_weight,
            request=request.get(resource),
            usage=own.usage.get(resource) if own else ZERO,
        )

    def effective_deserved(self, amount: Fraction) -> Fraction:
        return amount if self.deserved == UNLIMITED else self.deserved

    @property
    def requestable(self) -> Fraction:
        return self.request if self.limit == UNLIMITED else min(self.limit, self.request)

    @property
    def need(self) -> Fraction:
        """What the queue could still use; positive exactly when KAI calls it unsatisfied."""
        return max(ZERO, self.requestable - self.fair)


def _divide(amount: Fraction, siblings: Sequence[_Claimant], k_value: Fraction) -> None:
    """Set every sibling's `fair` for one resource (the three phases of §10.2)."""
    left = amount
    for sibling in siblings:
        grant = min(sibling.effective_deserved(amount), sibling.requestable)
        sibling.fair += grant
        left -= grant
    for priority in sorted({sibling.priority for sibling in siblings}, reverse=True):
        if left <= 0:
            return
        bucket = [sibling for sibling in siblings if sibling.priority == priority]
        left, remainders = _divide_surplus(left, bucket, k_value)
        left = _hand_out_remainders(left, bucket, remainders)


def _divide_surplus(
    left: Fraction, bucket: Sequence[_Claimant], k_value: Fraction
) -> tuple[Fraction, dict[str, Fraction]]:
    """Phase 2 for one priority bucket: weighted rounds; returns what is left and the remainders.

    Each round offers the pot (frozen for the round) in proportion to s = max(0, n + k(n - usage)),
    n being the queue's weight normalised over the hungry queues. A queue whose need fits its
    offer gets exactly its need; any other gets the offer floored to whole units, and the
    fraction it lost is remembered for phase 3.
    """
    remainders: dict[str, Fraction] = {}
    while True:
        hungry = [sibling for sibling in bucket if sibling.need > 0]
        total_weight = sum((sibling.weight for sibling in hungry), ZERO)
        if total_weight == 0:
            break
        scores = {sibling.name: _score(sibling, total_weight, k_value) for sibling in hungry}
        score_sum = sum(scores.values(), ZERO)
        if score_sum == 0:
            break
        pot = left
        something_left_over = False
        for sibling in hungry:
            if sibling.weight == 0:
                continue
            offer = pot * scores[sibling.name] / score_sum
            need = sibling.need
            if need <= offer:
                grant = need
                remainders.pop(sibling.name, None)
                something_left_over = something_left_over or need < offer
            else:
                grant = Fraction(floor(offer))
                if offer > grant:
                    remainders[sibling.name] = offer - grant
            sibling.fair += grant
            left -= grant
        if not something_left_over or left <= 0:
            break
    return left, remainders


def _score(sibling: _Claimant, total_weight: Fraction, k_value: Fraction) -> Fraction:
    normalised = sibling.weight / total_weight
    return max(ZERO, normalised + k_value * (normalised - sibling.usage))


def _hand_out_remainders(
    left: Fraction, bucket: Sequence[_Claimant], remainders: Mapping[str, Fraction]
) -> Fraction:
    """Phase 3 for one bucket: one unit each, largest remainder first, then oldest, then by name."""
    by_name = {sibling.name: sibling for sibling in bucket}
    for name in sorted(remainders, key=lambda n: (-remainders[n], by_name[n].order)):
        if left <= 0:
            break
        grant = min(Fraction(1), left)
        by_name[name].fair += grant
        left -= grant
    return left
