"""Whether a PodGroup's queue can receive jobs at all: it must exist and be a leaf (kai-semantics §3.1, §7).

Why a module of its own: the cycle refuses such a group before anything else, and the
memo carried between cycles keeps the refusal (or its absence) for every group whose
queue and the queue tree did not change, so both must ask the same question.
"""

from __future__ import annotations

from collections.abc import Collection

from kai.engine.budget import Refusal
from kai.engine.model import PodGroup

QUEUE_DOES_NOT_EXIST = "QueueDoesNotExist"
QUEUE_NOT_LEAF = "QueueIsNotLeaf"


def queue_refusal(
    group: PodGroup, queues: Collection[str], leaves: Collection[str]
) -> Refusal | None:
    """Why the group's queue takes no job (None: it does); `queues` by name, `leaves` the
    names of those without children."""
    if group.queue not in queues:
        return Refusal(
            QUEUE_DOES_NOT_EXIST,
            f"queue {group.queue!r} does not exist; create it or set the kai.scheduler/queue label to an existing leaf queue",
        )
    if group.queue not in leaves:
        return Refusal(
            QUEUE_NOT_LEAF, f"queue {group.queue!r} has child queues; only leaf queues receive jobs"
        )
    return None
