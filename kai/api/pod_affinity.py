"""A pod's inter-pod affinity and anti-affinity terms, required and preferred, read as Kubernetes reads them.

A term selects pods by a label selector (null: no pod; empty: every pod) in a set of
namespaces: those listed, the pod's own when none is listed, every namespace when the
namespace selector is empty. `matchLabelKeys` and `mismatchLabelKeys` add the pod's own
value of each key to the selector (In and NotIn), as the API server does when it admits
the pod; a key the pod does not carry adds nothing. A namespace selector with labels
needs the namespaces' labels, which kai does not read: such a required term is one kai
cannot honour yet (`kai.api.unhonoured`) and is not returned here; such a preferred term
is left out (a preference unread, where kube-scheduler would score it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping

from kai.api import corev1
from kai.engine.model import PodAffinityTerm, Requirement

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


def pod_terms(
    affinity: corev1.Affinity | None, namespace: str, labels: Mapping[str, str]
) -> tuple[PodAffinityTerm, ...]:
    """The pod's required terms, affinity first, in the order written."""
    return tuple(
        _term(anti, term, namespace, labels)
        for _, anti, term in _required(affinity)
        if not _reads_namespace_labels(term)
    )


def preferred_terms(
    affinity: corev1.Affinity | None, namespace: str, labels: Mapping[str, str]
) -> tuple[PodAffinityTerm, ...]:
    """The pod's preferred terms, each with its weight, affinity first, in the order written."""
    if affinity is None:
        return ()
    found: list[PodAffinityTerm] = []
    for anti, kind in ((False, affinity.pod_affinity), (True, affinity.pod_anti_affinity)):
        for weighted in kind.preferred_during_scheduling_ignored_during_execution if kind else []:
            term = weighted.pod_affinity_term
            if not _reads_namespace_labels(term):
                found.append(
                    dataclasses.replace(
                        _term(anti, term, namespace, labels), weight=weighted.weight
                    )
                )
    return tuple(found)


def namespace_selector_field(affinity: corev1.Affinity | None) -> str | None:
    """The path of the first term that selects namespaces by their labels, or None."""
    for path, _, term in _required(affinity):
        if _reads_namespace_labels(term):
            return f"{path}.namespaceSelector"
    return None


def _required(
    affinity: corev1.Affinity | None,
) -> Iterator[tuple[str, bool, corev1.PodAffinityTerm]]:
    """Each required term with its path and whether it is anti-affinity, affinity first."""
    if affinity is None:
        return
    for name, anti, kind in (
        ("podAffinity", False, affinity.pod_affinity),
        ("podAntiAffinity", True, affinity.pod_anti_affinity),
    ):
        terms = kind.required_during_scheduling_ignored_during_execution if kind else []
        for index, term in enumerate(terms):
            yield f"spec.affinity.{name}.{REQUIRED}[{index}]", anti, term


def _reads_namespace_labels(term: corev1.PodAffinityTerm) -> bool:
    selector = term.namespace_selector
    return selector is not None and bool(selector.match_labels or selector.match_expressions)


def _term(
    anti: bool, term: corev1.PodAffinityTerm, namespace: str, labels: Mapping[str, str]
) -> PodAffinityTerm:
    namespaces: frozenset[str] | None
    if term.namespace_selector is not None:  # empty: every namespace
        namespaces = None
    else:
        namespaces = frozenset(term.namespaces or [namespace])
    selector = term.label_selector
    if selector is None:
        return PodAffinityTerm(anti, term.topology_key, namespaces=namespaces, selects_nothing=True)
    expressions = [
        Requirement(item.key, item.operator, tuple(item.values))
        for item in selector.match_expressions
    ]
    expressions += [
        Requirement(k, "In", (labels[k],)) for k in term.match_label_keys if k in labels
    ]
    expressions += [
        Requirement(k, "NotIn", (labels[k],)) for k in term.mismatch_label_keys if k in labels
    ]
    return PodAffinityTerm(
        anti,
        term.topology_key,
        tuple(sorted(selector.match_labels.items())),
        tuple(expressions),
        namespaces,
    )
