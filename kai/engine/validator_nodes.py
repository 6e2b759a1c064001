"""The validator's own node predicates: may this pod run on that node at all?

A second implementation, by design, of what `kai.engine.eligibility` decides for the
engine (readiness, cordons, nodeSelector, required node affinity, the node affinity of
the pod's volumes, NoSchedule and NoExecute taints, and the GPU asks a MIG-enabled node
takes). It is written from the Kubernetes rules, not from the engine's
code, so that a bug in the engine's filter cannot vouch for itself; a differential
test keeps the two in agreement.
"""

from __future__ import annotations

from kai.engine.model import Node, Placement, Pod, Requirement, Taint, Toleration

_BLOCKING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
_NODE_NAME_FIELD = "metadata.name"  # matchFields: the only field kube-scheduler supports


def may_run_on(node: Node, placement: Placement) -> bool:
    """True when kube-scheduler's filters would let a pod with this placement onto the node."""
    if not node.ready or node.unschedulable:
        return False
    labels: dict[str, str] = {}
    for key, value in node.labels:
        labels[key] = value
    for key, wanted in placement.node_selector:
        if key not in labels or labels[key] != wanted:
            return False
    # Affinity terms are ORed, the requirements inside one term ANDed; no terms: no constraint.
    terms = placement.affinity_terms
    if terms and not any(_term_matches(term, labels, node.name) for term in terms):
        return False
    # Each volume's terms are read as node affinity's, and every volume must be reachable.
    for volume_terms in placement.volume_terms:
        if volume_terms and not any(_term_matches(t, labels, node.name) for t in volume_terms):
            return False
    for taint in node.taints:
        if taint.effect in _BLOCKING_EFFECTS and not _some_toleration_covers(
            placement.tolerations, taint
        ):
            return False
    return True


def _term_matches(term: tuple[Requirement, ...], labels: dict[str, str], node_name: str) -> bool:
    for requirement in term:
        if requirement.key == _NODE_NAME_FIELD:
            value: str | None = node_name
        else:
            value = labels.get(requirement.key)
        if not _requirement_matches(requirement, value):
            return False
    return True


def _requirement_matches(requirement: Requirement, value: str | None) -> bool:
    operator = requirement.operator
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if operator == "In":
        return value is not None and value in requirement.values
    if operator == "NotIn":
        return value is None or value not in requirement.values
    if operator in ("Gt", "Lt"):
        if value is None or len(requirement.values) == 0:
            return False
        try:
            have, bound = int(value), int(requirement.values[0])
        except ValueError:
            return False
        return have > bound if operator == "Gt" else have < bound
    return False  # an operator Kubernetes does not define matches nothing


def _some_toleration_covers(tolerations: tuple[Toleration, ...], taint: Taint) -> bool:
    for toleration in tolerations:
        if toleration.effect is not None and toleration.effect != taint.effect:
            continue
        if toleration.key is None:
            # An empty key tolerates every taint, but only with operator Exists.
            if toleration.operator == "Exists":
                return True
            continue
        if toleration.key != taint.key:
            continue
        if toleration.operator == "Exists":
            return True
        if (toleration.value or "") == (taint.value or ""):
            return True
    return False


def mig_mode_refuses(node: Node, pod: Pod) -> bool:
    """KAI's PredicateByNodeResourcesType, from the pod's own requests: a MIG slice only on
    a MIG-enabled node; there, with strategy "mixed" only slices, with "single" only whole
    devices; a pod without a GPU anywhere."""
    slices = any(name.startswith("nvidia.com/mig-") for name, _ in pod.scalars)
    shares = bool(pod.gpu.portion) or bool(pod.gpu.memory_mib)
    if not (slices or shares or pod.gpu.whole):
        return False
    if node.mig is None:
        return slices
    if node.mig == "mixed":
        return not slices
    if node.mig == "single":
        return slices or shares
    return False
