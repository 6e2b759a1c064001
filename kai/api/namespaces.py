"""The namespaces an inter-pod term selects by their labels, read from the cluster's Namespaces.

A term's `namespaceSelector` with labels selects the namespaces whose labels meet it,
besides those it lists (kube-scheduler merges the two when it reads the term). The labels
are the Namespaces', not the pod's, and change without it, so the pod's parse keeps the
selector (`PodAffinityTerm.namespace_selector`) and the snapshot's makers add the
namespaces it selects on top of the parse each time (`kai.api.dependencies`). Every
namespace carries `kubernetes.io/metadata.name` with its own name (the API server sets
it), which a selector may read too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from kai.engine.eligibility import value_meets
from kai.engine.model import Pod, PodAffinityTerm, Requirement

NAME_LABEL = "kubernetes.io/metadata.name"
NamespaceLabels = Mapping[str, Mapping[str, str]]
"""Each namespace's labels, by its name."""


def namespace_labels(
    namespaces: Mapping[str, Mapping[str, Any]], also: Iterable[str] = ()
) -> dict[str, dict[str, str]]:
    """The labels of each Namespace (by name, its manifest), with the name label the API
    server sets; `also`: namespaces known to exist without their object (`kai simulate`'s
    input may leave it out), which carry that label alone."""
    found: dict[str, dict[str, str]] = {name: {NAME_LABEL: name} for name in also}
    for name, manifest in namespaces.items():
        metadata = manifest.get("metadata")
        labels = metadata.get("labels") if isinstance(metadata, Mapping) else None
        found[name] = {
            **{k: v for k, v in (labels or {}).items() if isinstance(v, str)},
            NAME_LABEL: name,
        }
    return found


def reads_namespaces(pod: Pod) -> bool:
    """Whether a term of the pod selects namespaces by their labels."""
    return any(
        term.namespace_selector is not None for term in (*pod.pod_terms, *pod.preferred_terms)
    )


def selected(pod: Pod, labels: NamespaceLabels) -> tuple[frozenset[str], ...]:
    """The namespaces each such term selects by their labels, in the pod's order of terms:
    what the pod reads of the cluster (`kai.api.dependencies.inputs`)."""
    return tuple(
        _meeting(term.namespace_selector, labels)
        for term in (*pod.pod_terms, *pod.preferred_terms)
        if term.namespace_selector is not None
    )


def with_namespaces(pod: Pod, labels: NamespaceLabels) -> Pod:
    """The pod with each term that selects namespaces by their labels selecting them too."""
    return dataclasses.replace(
        pod,
        pod_terms=_resolved(pod.pod_terms, labels),
        preferred_terms=_resolved(pod.preferred_terms, labels),
    )


def _resolved(
    terms: tuple[PodAffinityTerm, ...], labels: NamespaceLabels
) -> tuple[PodAffinityTerm, ...]:
    return tuple(
        term
        if term.namespace_selector is None
        else dataclasses.replace(
            term,
            namespaces=(term.namespaces or frozenset()) | _meeting(term.namespace_selector, labels),
        )
        for term in terms
    )


def _meeting(selector: tuple[Requirement, ...], labels: NamespaceLabels) -> frozenset[str]:
    return frozenset(
        name
        for name, theirs in labels.items()
        if all(value_meets(requirement, theirs.get(requirement.key)) for requirement in selector)
    )


def names_namespace_labels(manifest: Mapping[str, Any]) -> bool:
    """Whether an inter-pod term of the pod's manifest has a namespace selector with labels:
    cheap, for the many pods without affinity (`kai.api.dependencies.depends`)."""
    spec = manifest.get("spec")
    affinity = spec.get("affinity") if isinstance(spec, Mapping) else None
    if not isinstance(affinity, Mapping):
        return False
    for kind in ("podAffinity", "podAntiAffinity"):
        terms = affinity.get(kind)
        if not isinstance(terms, Mapping):
            continue
        required = terms.get("requiredDuringSchedulingIgnoredDuringExecution") or []
        preferred = terms.get("preferredDuringSchedulingIgnoredDuringExecution") or []
        written = [
            *(term for term in required if isinstance(term, Mapping)),
            *(
                weighted.get("podAffinityTerm")
                for weighted in preferred
                if isinstance(weighted, Mapping)
            ),
        ]
        for term in written:
            chosen = term.get("namespaceSelector") if isinstance(term, Mapping) else None
            if isinstance(chosen, Mapping) and (
                chosen.get("matchLabels") or chosen.get("matchExpressions")
            ):
                return True
    return False
