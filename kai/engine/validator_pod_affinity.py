"""The validator's own check of inter-pod affinity terms on an answer (imports no rule module).

After the answer's bindings, no two pods may share a domain where an anti-affinity term of
either selects the other, and each bound pod's affinity terms must each find a pod they
select in the pod's domain; a pod that all its affinity terms select may have been the
first of its set, so its own labels satisfy them. The greedy pass checks each pod against
the placements before it (kai.engine.pod_affinity); here the whole answer is checked at once.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from kai.engine.model import Node, Pod, PodAffinityTerm


def pod_affinity_problems(
    nodes: Sequence[Node], pods: Sequence[Pod], bound: Sequence[tuple[Pod, str]]
) -> list[str]:
    """What the answer's bindings (`bound`, as (pod, node)) break, beside `pods` on nodes.

    Pods are grouped by domain, for each topology key a term names, so a term reads only
    the pods of its own domain."""
    labels = {node.name: dict(node.labels) for node in nodes}
    new = {pod.key for pod, _ in bound}
    where = [(pod, pod.node) for pod in pods if pod.node in labels and pod.phase.occupies_node]
    where = [(pod, node) for pod, node in where if pod.key not in new] + list(bound)
    keys = {term.topology_key for pod, _ in where for term in pod.pod_terms}
    members: dict[tuple[str, str], list[Pod]] = defaultdict(list)
    newcomers: dict[tuple[str, str], list[tuple[Pod, str]]] = defaultdict(list)
    for pod, node in where:
        for key in keys:
            value = labels[node].get(key)
            if value is not None:
                members[key, value].append(pod)
                if pod.key in new:
                    newcomers[key, value].append((pod, node))
    problems = []
    for owner, node in where:  # anti-affinity of any pod, against the pods bound beside it
        for term in owner.pod_terms:
            value = labels[node].get(term.topology_key)
            if not term.anti or value is None:
                continue
            for pod, at in newcomers[term.topology_key, value]:
                if pod.key != owner.key and selected_by(term, pod):
                    problems.append(f"pod {pod.key} on {at} is in the domain {owner.key} avoids")
    for pod, node in bound:  # the bound pod's own terms
        for term in pod.pod_terms:
            value = labels[node].get(term.topology_key)
            near = [
                other
                for other in (members[term.topology_key, value] if value is not None else [])
                if other.key != pod.key and selected_by(term, other)
            ]
            if term.anti and near:
                problems.append(f"pod {pod.key} on {node} shares a domain with {near[0].key}")
            if not term.anti and not near and not selected_by(term, pod):
                problems.append(f"pod {pod.key} on {node}: no pod its affinity wants is near")
    return problems


def selected_by(term: PodAffinityTerm, pod: Pod) -> bool:
    """Whether the term selects `pod` (its namespace and labels), by the validator's reading."""
    if term.selects_nothing:
        return False
    if term.namespaces is not None and pod.namespace not in term.namespaces:
        return False
    labels = dict(pod.labels)
    for key, value in term.match_labels:
        if labels.get(key) != value:
            return False
    for requirement in term.expressions:
        present = requirement.key in labels
        value = labels.get(requirement.key, "")
        met = {
            "In": present and value in requirement.values,
            "NotIn": not present or value not in requirement.values,
            "Exists": present,
            "DoesNotExist": not present,
        }[requirement.operator]
        if not met:
            return False
    return True
