"""What a pod may require that kai does not honour yet: which field holds it.

- Inter-pod affinity and anti-affinity: KAI and kube-scheduler filter nodes by them (a
  pod beside, or never beside, pods with given labels in a topology domain). kai's engine
  places pods by node predicates alone, so it cannot keep a required term. Preferred
  terms are scores in kube-scheduler, as preferred node affinity is, and kai reads neither.
- DRA resource claims (`spec.resourceClaims`): the scheduler that binds the pod must
  allocate its claims; kai does not, and a pod bound with its claims unallocated never
  starts.
- MIG slices (`nvidia.com/mig-*`, the GPU operator's mixed strategy): KAI places them;
  kai counts no such resource on a node, and a pod bound where its slice is not free
  fails at the kubelet's admission.

Placing such a pod would break what its author required; the engine leaves the pod's
gang pending instead and says why (`kai.engine.unhonoured`, which words it), and the
admission webhook warns when the pod is created.
"""

from __future__ import annotations

from kai.api import corev1

RESOURCE_CLAIMS = "spec.resourceClaims"
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
_AFFINITY = "spec.affinity"
_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


def unhonoured_field(spec: corev1.PodSpec) -> str | None:
    """The path of the first requirement of the pod that kai cannot honour, or None."""
    if spec.resource_claims:
        return RESOURCE_CLAIMS
    mig = _mig_request(spec)
    if mig is not None:
        return mig
    affinity = spec.affinity
    if affinity is None:
        return None
    for name, terms in (
        ("podAffinity", affinity.pod_affinity),
        ("podAntiAffinity", affinity.pod_anti_affinity),
    ):
        if terms is not None and terms.required_during_scheduling_ignored_during_execution:
            return f"{_AFFINITY}.{name}.{_REQUIRED}"
    return None


def _mig_request(spec: corev1.PodSpec) -> str | None:
    """The path of the first MIG slice a container asks for (a limit alone asks too)."""
    for kind, containers in (
        ("initContainers", spec.init_containers),
        ("containers", spec.containers),
    ):
        for index, container in enumerate(containers):
            for part, amounts in (
                ("requests", container.resources.requests),
                ("limits", container.resources.limits),
            ):
                for name, amount in amounts.items():
                    if name.startswith(MIG_RESOURCE_PREFIX) and amount > 0:
                        return f"spec.{kind}[{index}].resources.{part}.{name}"
    return None
