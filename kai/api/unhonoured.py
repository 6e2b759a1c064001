"""What a pod may require that kai does not honour yet: which field holds it.

- DRA resource claims (`spec.resourceClaims`): the scheduler that binds the pod must
  allocate its claims; kai does not, and a pod bound with its claims unallocated never
  starts.

Placing such a pod would break what its author required; the engine leaves the pod's
gang pending instead and says why (`kai.engine.unhonoured`, which words it), and the
admission webhook warns when the pod is created.
"""

from __future__ import annotations

from kai.api import corev1

RESOURCE_CLAIMS = "spec.resourceClaims"


def unhonoured_field(spec: corev1.PodSpec) -> str | None:
    """The path of the first requirement of the pod that kai cannot honour, or None."""
    return RESOURCE_CLAIMS if spec.resource_claims else None
