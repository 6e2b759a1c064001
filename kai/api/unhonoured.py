"""The required constraints a pod may carry that kai does not honour yet: which field holds one.

KAI and kube-scheduler filter nodes by inter-pod affinity and anti-affinity (a pod
beside, or never beside, pods with given labels in a topology domain). kai's engine
places pods by node predicates alone, so it cannot keep such a term. Placing the pod
anyway would break a constraint its author made required (two replicas meant for two
nodes, sharing one); the engine leaves the pod's gang pending instead and says why
(`kai.engine.unhonoured`, which words it), and the admission webhook warns when the
pod is created.
Preferred terms are scores in kube-scheduler, as preferred node affinity is, and kai
reads neither.
"""

from __future__ import annotations

from kai.api import corev1

_AFFINITY = "spec.affinity"
_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


def unhonoured_field(affinity: corev1.Affinity | None) -> str | None:
    """The path of the first required term kai cannot honour in a pod's affinity, or None."""
    if affinity is None:
        return None
    for name, terms in (
        ("podAffinity", affinity.pod_affinity),
        ("podAntiAffinity", affinity.pod_anti_affinity),
    ):
        if terms is not None and terms.required_during_scheduling_ignored_during_execution:
            return f"{_AFFINITY}.{name}.{_REQUIRED}"
    return None
