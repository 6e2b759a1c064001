"""A gang with a pod whose required constraint kai cannot honour yet is left pending, and told why.

The parser records the field of such a constraint on the pod (`Pod.unhonoured`: today a
required inter-pod affinity or anti-affinity term, `kai.api.unhonoured`). Placing the
pod would break what its author made required, so the cycle offers its gang to no pass,
neither the allocation nor the eviction actions, and the gang's PodGroup carries this
reason. Pods already on a node are counted as they are: they were placed by another
scheduler or before the term was read, and their room is taken either way; but
consolidation does not move them, as it would re-place them by node predicates alone.
"""

from __future__ import annotations

from collections.abc import Iterable

from kai.engine.budget import Refusal
from kai.engine.model import Pod

UNHONOURED_CONSTRAINT = "UnhonouredConstraint"


def unhonoured_message(field: str) -> str:
    """What a pod with a term at `field` is told, by the cycle and at admission."""
    return (
        f"{field}: kai does not place pods by inter-pod affinity yet, so a required term "
        "leaves the pod pending rather than broken; remove the term or make it preferred"
    )


def unhonoured_refusal(pending: Iterable[Pod]) -> Refusal | None:
    """Why a gang whose pending pods are `pending` is not placed, or None when it may be."""
    for pod in pending:
        if pod.unhonoured is not None:
            message = f"pod {pod.key}: {unhonoured_message(pod.unhonoured)}"
            return Refusal(UNHONOURED_CONSTRAINT, message)
    return None


def may_be_moved(pods: Iterable[Pod]) -> bool:
    """Whether consolidation may re-place these running pods: none holds a term kai cannot keep."""
    return all(pod.unhonoured is None for pod in pods)
