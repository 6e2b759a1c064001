"""A gang with a pod whose requirement kai cannot honour yet is left pending, and told why.

The parser records the field of such a requirement on the pod (`Pod.unhonoured`: today
DRA resource claims; `kai.api.unhonoured`). Placing the pod would break what its author required, so the
cycle offers its gang to no pass, neither the allocation nor the eviction actions, and
the gang's PodGroup carries this reason. Pods already on a node are counted as they
are: another scheduler placed them, or kai before it read the field, and their room is
taken either way; but consolidation does not move them, as it would re-place them
without honouring it.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from kai.engine.budget import Refusal
from kai.engine.model import Pod

UNHONOURED_CONSTRAINT = "UnhonouredConstraint"


_WHY = (
    (
        "spec.resourceClaims",
        "kai does not allocate DRA resource claims yet, and a pod bound with its claims "
        "unallocated never starts; it waits for a scheduler that does",
    ),
)
"""What a requirement's field holds (`kai.api.unhonoured` names the fields), and why it waits."""


def unhonoured_message(field: str) -> str:
    """What a pod with a requirement at `field` is told, by the cycle and at admission."""
    why = next(text for marker, text in _WHY if marker in field)
    return f"{field}: {why}"


def unhonoured_refusal(pending: Iterable[Pod]) -> Refusal | None:
    """Why a gang whose pending pods are `pending` is not placed, or None when it may be."""
    for pod in pending:
        if pod.unhonoured is not None:
            message = f"pod {pod.key}: {unhonoured_message(pod.unhonoured)}"
            return Refusal(UNHONOURED_CONSTRAINT, message)
    return None


def may_be_moved(pods: Collection[Pod]) -> bool:
    """Whether consolidation may re-place these running pods: none holds a requirement kai
    cannot keep or waits for the cluster (`kai.engine.prerequisites`). Inter-pod terms do
    not keep a pod in place: its move is seated by them (`term_seats.seat_moves`)."""
    return not any(pod.unhonoured is not None or pod.waits_for is not None for pod in pods)
