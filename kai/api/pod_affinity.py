"""A pod's inter-pod affinity and anti-affinity terms, required and preferred, read as Kubernetes reads them.

A term selects pods by a label selector (null: no pod; empty: every pod) in a set of
namespaces: those listed, the pod's own when none is listed and there is no namespace
selector, every namespace when the namespace selector is empty, and those whose labels
meet a namespace selector that has some. `matchLabelKeys` and `mismatchLabelKeys` add
the pod's own value of each key to the selector (In and NotIn), as the API server does
when it admits the pod; a key the pod does not carry adds nothing. The namespaces' labels
are not the pod's: a term that reads them keeps its selector, and the snapshot's makers
add the namespaces it selects (`kai.api.namespaces`).
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
    return tuple(_term(anti, term, namespace, labels) for _, anti, term in _required(affinity))


def preferred_terms(
    affinity: corev1.Affinity | None, namespace: str, labels: Mapping[str, str]
) -> tuple[PodAffinityTerm, ...]:
    """The pod's preferred terms, each with its weight, affinity first, in the order written."""
    if affinity is None:
        return ()
    found: list[PodAffinityTerm] = []
    for anti, kind in ((False, affinity.pod_affinity), (True, affinity.pod_anti_affinity)):
        for weighted in kind.preferred_during_scheduling_ignored_during_execution if kind else []:
            term = _term(anti, weighted.pod_affinity_term, namespace, labels)
            found.append(dataclasses.replace(term, weight=weighted.weight))
    return tuple(found)


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


def _term(
    anti: bool, term: corev1.PodAffinityTerm, namespace: str, labels: Mapping[str, str]
) -> PodAffinityTerm:
    namespaces: frozenset[str] | None
    by_labels = None
    chosen = term.namespace_selector
    if chosen is None:
        namespaces = frozenset(term.namespaces or [namespace])
    elif chosen.match_labels or chosen.match_expressions:
        namespaces = frozenset(term.namespaces)
        by_labels = _requirements(chosen)
    else:  # empty: every namespace
        namespaces = None
    selector = term.label_selector
    if selector is None:
        return PodAffinityTerm(
            anti,
            term.topology_key,
            namespaces=namespaces,
            selects_nothing=True,
            namespace_selector=by_labels,
        )
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
        namespace_selector=by_labels,
    )


def _requirements(selector: corev1.LabelSelector) -> tuple[Requirement, ...]:
    """A label selector as requirements, all to be met: each label In its one value."""
    return (
        *(Requirement(key, "In", (value,)) for key, value in sorted(selector.match_labels.items())),
        *(
            Requirement(item.key, item.operator, tuple(item.values))
            for item in selector.match_expressions
        ),
    )
