"""Which sibling queue goes next: KAI's queue order and the quantities behind it (§10.4, §10.6).

Every action picks the next queue among siblings by comparing fair-share state.
KAI writes that as a pairwise comparison; the engine needs a sort key, so the
comparison is restated here as a tuple whose natural order is KAI's order
(smaller = served first). A component of -1 (UNLIMITED) in an allocatable share or
a limit means "no cap" throughout.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from fractions import Fraction

from kai.engine.fairshare import QueueShare
from kai.engine.model import UNLIMITED, Queue
from kai.engine.queue_tree import creation_order
from kai.engine.resources import RESOURCE_NAMES, ZERO, Resources, with_value

ZERO_SHARE_PENALTY = 1000
"""KAI's dominant-share multiplier for a resource a queue holds but may not have."""


class ShareRatio:
    """An exact rational (denominator > 0), compared by cross-multiplying.

    The queue order compares dominant shares at every attempt of every pass; `Fraction`
    reduces by a gcd at each construction and compares through the numeric tower, which
    was a sixth of the eviction actions' look at the next cycle. Equal to a `Fraction` or
    an int of the same value.
    """

    __slots__ = ("denominator", "numerator")

    def __init__(self, numerator: int, denominator: int) -> None:
        self.numerator, self.denominator = numerator, denominator

    def __eq__(self, other: object) -> bool:
        # Keys are compared as tuples, so every comparison of two queues asks for equality
        # first: the exact type is tested before the slower union.
        if type(other) is not ShareRatio and not isinstance(other, Fraction | int):
            return NotImplemented
        return self.numerator * other.denominator == other.numerator * self.denominator

    def __lt__(self, other: ShareRatio | Fraction | int) -> bool:
        return self.numerator * other.denominator < other.numerator * self.denominator

    def __le__(self, other: ShareRatio | Fraction | int) -> bool:
        return self.numerator * other.denominator <= other.numerator * self.denominator

    def __gt__(self, other: ShareRatio | Fraction | int) -> bool:
        return self.numerator * other.denominator > other.numerator * self.denominator

    def __ge__(self, other: ShareRatio | Fraction | int) -> bool:
        return self.numerator * other.denominator >= other.numerator * self.denominator

    def __hash__(self) -> int:
        return hash(Fraction(self.numerator, self.denominator))

    def __repr__(self) -> str:
        return f"ShareRatio({self.numerator}, {self.denominator})"


QueueOrderKey = tuple[
    bool,
    bool,
    int,
    bool,
    ShareRatio,
    ShareRatio,
    tuple[tuple[bool, Fraction], ...],
    tuple[bool, datetime, str],
]


def allocatable_share(share: QueueShare, queue: Queue) -> Resources:
    """max(deserved, fair share) capped at the limit; the limit itself where the quota is -1.

    `queue` is needed because `share.deserved` has -1 already resolved, and KAI treats an
    unlimited quota as "allocatable up to the limit" rather than up to the resolved amount.
    """
    allocatable = Resources()
    for resource in RESOURCE_NAMES:
        limit = share.limit.get(resource)
        if queue.resource(resource).quota == UNLIMITED:
            value = limit
        else:
            value = max(share.deserved.get(resource), share.fair_share.get(resource))
            if limit != UNLIMITED:
                value = min(value, limit)
        allocatable = with_value(allocatable, resource, value)
    return allocatable


def dominant_resource_share(
    allocated: Resources, allocatable: Resources, total: Resources
) -> ShareRatio:
    """max over resources of allocated / allocatable (DRS).

    An unlimited allocatable share is measured against the cluster total; where the
    denominator is 0, holding anything costs allocated x 1000 instead of a division by zero.
    The result is never below 0 (victim ordering may pass negative allocations).
    """
    return DominantShare(allocatable, total).of(allocated)


class DominantShare:
    """`dominant_resource_share` against one queue's allocatable share, worked out once:
    the victim order asks for it at every re-rank of a queue while victims are taken."""

    __slots__ = ("_inverses",)

    def __init__(self, allocatable: Resources, total: Resources) -> None:
        self._inverses = _ratios(allocatable, total)

    def of(self, allocated: Resources) -> ShareRatio:
        return _dominant(self._inverses, _amounts(allocated))

    def of_remainder(self, held: Resources, *away: Resources) -> ShareRatio:
        """`of(held - sum(away))`, without building the Resources in between."""
        return _dominant(
            self._inverses,
            (
                _remainder(held.gpu, [amount.gpu for amount in away]),
                _remainder(held.cpu, [amount.cpu for amount in away]),
                _remainder(held.memory, [amount.memory for amount in away]),
            ),
        )


Ratio = tuple[int, int]
"""An exact rational as (numerator, denominator > 0), not normalised: the queue order is
worked out for every attempt of a pass, and `Fraction` arithmetic (a gcd and a new object
per step) was most of that."""


def _amounts(resources: Resources) -> tuple[Ratio, Ratio, Ratio]:
    gpu, cpu, memory = resources.gpu, resources.cpu, resources.memory
    return (
        (gpu.numerator, gpu.denominator),
        (cpu.numerator, cpu.denominator),
        (memory.numerator, memory.denominator),
    )


def _remainder(value: Fraction, away: list[Fraction]) -> Ratio:
    numerator, denominator = value.numerator, value.denominator
    for amount in away:
        numerator = numerator * amount.denominator - amount.numerator * denominator
        denominator *= amount.denominator
    return numerator, denominator


def _ratios(allocatable: Resources, total: Resources) -> tuple[Ratio | None, ...]:
    """Per resource, the share's denominator (an unlimited share counts the cluster total);
    None where it is 0, so that holding anything there costs ZERO_SHARE_PENALTY per unit."""
    ratios: list[Ratio | None] = []
    for resource in RESOURCE_NAMES:
        denominator = allocatable.get(resource)
        if denominator == UNLIMITED:
            denominator = total.get(resource)
        if denominator == 0:
            ratios.append(None)
        elif denominator > 0:
            ratios.append((denominator.denominator, denominator.numerator))  # its inverse
        else:
            ratios.append((-denominator.denominator, -denominator.numerator))
    return tuple(ratios)


def _dominant(inverses: tuple[Ratio | None, ...], held: Sequence[Ratio]) -> ShareRatio:
    best_numerator, best_denominator = 0, 1
    for inverse, (amount, unit) in zip(inverses, held, strict=True):
        if inverse is None:
            numerator, denominator = amount * ZERO_SHARE_PENALTY, unit
        else:
            numerator, denominator = amount * inverse[0], unit * inverse[1]
        if numerator * best_denominator > best_numerator * denominator:
            best_numerator, best_denominator = numerator, denominator
    return ShareRatio(best_numerator, best_denominator)


def queue_order_key(
    share: QueueShare,
    queue: Queue,
    job_request: Resources,
    total: Resources,
    allocatable: Resources | None = None,
) -> QueueOrderKey:
    """Sort key for sibling queues given each one's next job: smaller is served first (§10.6).

    In order: not over fair share; stays within deserved with the job; higher priority;
    holds nothing where its allocatable share is 0; lower DRS with the job; lower DRS
    without it; smaller allocatable share; older, then by name.

    `job_request` is the job's initial (gang) request; for victim ordering in reclaim pass
    the victims' resources negated, as KAI subtracts victims there. KAI compares allocatable
    shares component-wise and treats shares where neither dominates as equal; a sort key
    needs a total order, so they are compared lexicographically (gpu, cpu, memory, with
    unlimited largest), which agrees with KAI whenever one share dominates the other.
    `allocatable` is `allocatable_share(share, queue)` when the caller has it already.
    """
    return QueueRanking(share, queue, total, allocatable).key(share.allocated, job_request)


class QueueRanking:
    """One queue's order key with what a pass does not change worked out once.

    Within a pass a queue's deserved and fair share, its allocatable share and its place
    among equals stay fixed; only what it holds and the size of its next job change, and
    the key is asked for at every attempt of the pass.
    """

    __slots__ = ("_held", "_inverses", "_priority", "_tail", "_terms")

    def __init__(
        self,
        share: QueueShare,
        queue: Queue,
        total: Resources,
        allocatable: Resources | None = None,
    ) -> None:
        if allocatable is None:
            allocatable = allocatable_share(share, queue)
        # Per resource: its fair share, its deserved (None under an unlimited quota) and
        # whether its allocatable share is 0.
        self._terms = tuple(
            (
                fair,
                None if queue.resource(resource).quota == UNLIMITED else deserved,
                allocatable.get(resource) == 0,
            )
            for resource, fair, deserved in zip(
                RESOURCE_NAMES, _amounts(share.fair_share), _amounts(share.deserved), strict=True
            )
        )
        self._inverses = _ratios(allocatable, total)
        self._priority = -queue.priority
        self._tail = (
            tuple(
                (value == UNLIMITED, ZERO if value == UNLIMITED else value)
                for _, value in allocatable.items()
            ),
            creation_order(queue),
        )
        # The DRS without the job, for the last `allocated` asked about: it changes only
        # when the queue is given something, while the next job changes at every attempt.
        self._held: tuple[Resources, ShareRatio] | None = None

    def key(self, allocated: Resources, job_request: Resources) -> QueueOrderKey:
        """The queue's order key while it holds `allocated` and its next job asks `job_request`."""
        over_fair_share, exceeds_deserved, holds_unallowed = True, False, False
        with_job: list[Ratio] = []
        for value, extra, (fair, deserved, unallowed) in zip(
            (allocated.gpu, allocated.cpu, allocated.memory),
            (job_request.gpu, job_request.cpu, job_request.memory),
            self._terms,
            strict=True,
        ):
            numerator, denominator = value.numerator, value.denominator
            if over_fair_share and numerator * fair[1] <= fair[0] * denominator:
                over_fair_share = False
            numerator = numerator * extra.denominator + extra.numerator * denominator
            denominator *= extra.denominator
            if deserved is not None and numerator * deserved[1] > deserved[0] * denominator:
                exceeds_deserved = True
            if unallowed and numerator > 0:
                holds_unallowed = True
            with_job.append((numerator, denominator))
        held = self._held
        if held is None or held[0] is not allocated:
            held = self._held = (allocated, _dominant(self._inverses, _amounts(allocated)))
        return (
            over_fair_share,
            exceeds_deserved,
            self._priority,
            holds_unallowed,
            _dominant(self._inverses, with_job),
            held[1],
            *self._tail,
        )
