"""The validator's own check of inter-pod affinity terms on an answer (imports no rule module).

After the answer's bindings, no two pods may share a domain where an anti-affinity term of
either selects the other, and each bound pod's affinity terms must each find a pod they
select in the pod's domain; a pod that all its affinity terms select may have been the
first of its set, so its own labels satisfy them. The greedy pass checks each pod against
the placements before it (kai.engine.pod_affinity); here the whole answer is checked at once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kai.engine.model import Node, Pod, PodAffinityTerm


def pod_affinity_problems(
    nodes: Sequence[Node], pods: Sequence[Pod], bound: Sequence[tuple[Pod, str]]
) -> list[str]:
    """What the answer's bindings (`bound`, as (pod, node)) break, beside `pods` on nodes."""
    labels = {node.name: dict(node.labels) for node in nodes}
    new = {pod.key for pod, _ in bound}
    where = [(pod, pod.node) for pod in pods if pod.node in labels and pod.phase.occupies_node]
    where = [(pod, node) for pod, node in where if pod.key not in new] + list(bound)
    with_terms = [(pod, node) for pod, node in where if pod.pod_terms]
    problems = []
    for pod, node in bound:
        here = labels.get(node, {})
        for other, other_node in with_terms:
            if other.key == pod.key:
                continue
            there = labels.get(other_node, {})
            for term in other.pod_terms:
                if term.anti and _same_domain(term, here, there) and selected_by(term, pod):
                    problems.append(f"pod {pod.key} on {node} is in the domain {other.key} avoids")
        for term in pod.pod_terms:
            near = [
                other
                for other, other_node in where
                if other.key != pod.key
                and _same_domain(term, here, labels.get(other_node, {}))
                and selected_by(term, other)
            ]
            if term.anti and near:
                problems.append(f"pod {pod.key} on {node} shares a domain with {near[0].key}")
            if not term.anti and not near and not selected_by(term, pod):
                problems.append(f"pod {pod.key} on {node}: no pod its affinity wants is near")
    return problems


def _same_domain(term: PodAffinityTerm, here: Mapping[str, str], there: Mapping[str, str]) -> bool:
    key = term.topology_key
    return key in here and here.get(key) == there.get(key)


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
