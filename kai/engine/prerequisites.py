"""A gang with a pod that needs something from the cluster before it may run waits, told
what: a volume claim ready, a ConfigMap that exists.

The snapshot's makers read what the pod depends on (`kai.api.volumes`,
`kai.api.config_maps`) and set `Pod.waits_for` when it may run nowhere yet: a claim that
is missing, not bound and bound only by the volume controller, or of a class kai cannot
provision (`VolumeClaimNotReady`, kube-scheduler's VolumeBinding under KAI), or a
ConfigMap it requires that does not exist (`MissingConfigMaps`, KAI's ConfigMap
predicate). Such a gang is offered to no pass, as KAI's pre-predicates refuse the pod
before any node is looked at; it is placed once what it waits for is there.
"""

from __future__ import annotations

from collections.abc import Iterable

from kai.engine.budget import Refusal
from kai.engine.model import Pod

VOLUME_CLAIM_NOT_READY = "VolumeClaimNotReady"
MISSING_CONFIG_MAPS = "MissingConfigMaps"


def prerequisite_refusal(pending: Iterable[Pod]) -> Refusal | None:
    """Why a gang whose pending pods are `pending` waits for the cluster, or None."""
    for pod in pending:
        if pod.waits_for is not None:
            return Refusal(pod.waits_for.reason, f"pod {pod.key}: {pod.waits_for.message}")
    return None
