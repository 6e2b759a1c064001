"""The pod grouper: pure functions that decide each pod's PodGroup, shared by the operator and
`kai simulate`.

`plan_pod_group(pod, owner_chain, registry, priority_classes)` returns the PodGroupPlan
(manifest plus what to set on the pod) or None for pods that opt out;
`resolve_owner_chain` builds the owner chain from objects held in memory.
"""

from kai.grouping.grouper import plan_pod_group
from kai.grouping.owners import resolve_owner_chain
from kai.grouping.plan import GroupingError, PodGroupPlan, grouped_manifest

__all__ = [
    "GroupingError",
    "PodGroupPlan",
    "grouped_manifest",
    "plan_pod_group",
    "resolve_owner_chain",
]
