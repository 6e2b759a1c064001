"""A gang with a pod whose volume claims keep it off every node waits, told which and why.

The snapshot's makers read the pod's claims (`kai.api.volumes`): where they let it run is
in its placement; a claim that lets it run nowhere yet (missing, not bound and bound only
by the volume controller, or of a class kai cannot provision) is `Pod.volume_wait`. Such a
gang is offered to no pass, as kube-scheduler's VolumeBinding filter refuses the pod
before any node is looked at; it is placed once the claim is ready.
"""

from __future__ import annotations

from collections.abc import Iterable

from kai.engine.budget import Refusal
from kai.engine.model import Pod

VOLUME_CLAIM_NOT_READY = "VolumeClaimNotReady"


def volume_refusal(pending: Iterable[Pod]) -> Refusal | None:
    """Why a gang whose pending pods are `pending` waits for a claim, or None."""
    for pod in pending:
        if pod.volume_wait is not None:
            return Refusal(VOLUME_CLAIM_NOT_READY, f"pod {pod.key}: {pod.volume_wait}")
    return None
