"""What the eviction actions decide: evicted pods, pipelined pods and the PodGroup timestamps to write.

These are the records the cycle hands to its caller. Each eviction names the action
and the rule that allowed it, and the gang it made room for, so that the simulator
can report it and the live operator can say it in the pod's event.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime


class Action(enum.Enum):
    RECLAIM = "reclaim"
    PREEMPT = "preempt"
    CONSOLIDATE = "consolidate"
    STALE_GANG = "stale-gang"


MAINTAIN_FAIR_SHARE = "MaintainFairShare"
"""Reclaim: the victim's side of the queue tree stays above its fair share (allocatable share)."""
GUARANTEE_DESERVED_QUOTA = "GuaranteeDeservedQuota"
"""Reclaim: the reclaimer stays within its deserved quota and the victim's side is above its own."""
LOWER_PRIORITY = "LowerPriority"
"""Preempt: the victim is preemptible and of strictly lower priority, in the same queue."""
MOVED = "Moved"
"""Consolidation: the victim is placed again elsewhere (it is moved, never killed)."""
STALE_GRACE_EXPIRED = "StaleGracePeriodExpired"
"""Stale-gang eviction: the gang stayed below its minimum longer than its grace period."""


@dataclass(frozen=True)
class Eviction:
    pod: str
    group: str
    node: str
    action: Action
    rule: str
    preemptor: str | None  # the gang the room is for; None for stale-gang eviction


@dataclass(frozen=True)
class PipelinedPod:
    """A pod placed on capacity that is still being freed: it waits, unbound, for the next cycle."""

    pod: str
    group: str
    node: str
    gpu_groups: tuple[str, ...]


@dataclass(frozen=True)
class EvictionDecision:
    """One committed scenario: the victims of one action for one gang, and where its pods wait."""

    action: Action | None  # None: allocate's pipelining onto Releasing pods' room, nobody evicted
    preemptor: str | None
    evictions: tuple[Eviction, ...]
    pipelined: tuple[PipelinedPod, ...]  # the preemptor's pods, and moved victims in consolidation
    answer: str  # "cp-sat", "greedy" or "rule" (no search: stale gangs, releasing capacity)


@dataclass(frozen=True)
class GroupStamps:
    """A PodGroup's scheduler timestamps after the cycle; None means the annotation is removed."""

    last_start: datetime | None
    stale_since: datetime | None
    last_eviction: datetime | None
