"""Which sibling queue goes next: KAI's queue order and the quantities behind it (§10.4, §10.6).

Every action picks the next queue among siblings by comparing fair-share state.
KAI writes that as a pairwise comparison; the engine needs a sort key, so the
comparison is restated here as a tuple whose natural order is KAI's order
(smaller = served first). A component of -1 (UNLIMITED) in an allocatable share or
a limit means "no cap" throughout.
"""

from __future__ import annotations

from datetime import datetime
from fractions import Fraction

from kai.engine.fairshare import QueueShare
from kai.engine.model import UNLIMITED, Queue
from kai.engine.queue_tree import creation_order
from kai.engine.resources import RESOURCE_NAMES, ZERO, Resources, with_value

ZERO_SHARE_PENALTY = 1000
"""KAI's dominant-share multiplier for a resource a queue holds but may not have."""

QueueOrderKey = tuple[
    bool,
    bool,
    int,
    bool,
    Fraction,
    Fraction,
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
) -> Fraction:
    """max over resources of allocated / allocatable (DRS).

    An unlimited allocatable share is measured against the cluster total; where the
    denominator is 0, holding anything costs allocated x 1000 instead of a division by zero.
    The result is never below 0 (victim ordering may pass negative allocations).
    """
    dominant = ZERO
    for resource in RESOURCE_NAMES:
        held = allocated.get(resource)
        denominator = allocatable.get(resource)
        if denominator == UNLIMITED:
            denominator = total.get(resource)
        value = held * ZERO_SHARE_PENALTY if denominator == 0 else held / denominator
        dominant = max(dominant, value)
    return dominant


def is_over_fair_share(share: QueueShare) -> bool:
    """Allocated strictly above fair share in every resource (KAI's "over-utilised")."""
    return all(
        share.allocated.get(resource) > share.fair_share.get(resource)
        for resource in RESOURCE_NAMES
    )


def fits_within_deserved(share: QueueShare, queue: Queue, request: Resources) -> bool:
    """allocated + request <= deserved in every resource; an unlimited quota always fits."""
    return all(
        queue.resource(resource).quota == UNLIMITED
        or share.allocated.get(resource) + request.get(resource) <= share.deserved.get(resource)
        for resource in RESOURCE_NAMES
    )


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
    `allocatable` is `allocatable_share(share, queue)` when the caller has it already
    (it does not depend on what is allocated, so a pass computes it once per queue).
    """
    if allocatable is None:
        allocatable = allocatable_share(share, queue)
    with_job = share.allocated + job_request
    holds_unallowed = any(
        allocatable.get(resource) == 0 and with_job.get(resource) > 0 for resource in RESOURCE_NAMES
    )
    return (
        is_over_fair_share(share),
        not fits_within_deserved(share, queue, job_request),
        -queue.priority,
        holds_unallowed,
        dominant_resource_share(with_job, allocatable, total),
        dominant_resource_share(share.allocated, allocatable, total),
        tuple(
            (value == UNLIMITED, ZERO if value == UNLIMITED else value)
            for _, value in allocatable.items()
        ),
        creation_order(queue),
    )
