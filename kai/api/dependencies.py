"""What a pod depends on besides itself, read on top of its parse: its volume claims
(`kai.api.volumes`), the ConfigMaps it requires (`kai.api.config_maps`) and the labels of
the namespaces its inter-pod terms select by them (`kai.api.namespaces`).

Both change without the pod, so the snapshot's makers apply them to the parsed pod each
time they build one. The claims come first, as KAI runs the VolumeBinding pre-predicate
before the ConfigMap one: a pod waits for its claims before its ConfigMaps. The
ConfigMaps are read only for a pod on no node yet, as KAI's predicates run on the pods
they place: one on a node has started without them or waits there.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from kai.api.config_maps import missing_message, required_config_maps
from kai.api.errors import ManifestError
from kai.api.namespaces import (
    NamespaceLabels,
    names_namespace_labels,
    namespace_labels,
    reads_namespaces,
    selected,
    with_namespaces,
)
from kai.api.volumes import (
    VolumeObjects,
    claim_inputs,
    claim_keys,
    names_claims,
    pod_claims,
    with_claims,
)
from kai.engine.model import Pod, Prerequisite
from kai.engine.prerequisites import MISSING_CONFIG_MAPS


@dataclass(frozen=True)
class ClusterObjects:
    """The objects pods depend on: claims, volumes and classes; ConfigMaps by key; the
    namespaces' labels."""

    volumes: VolumeObjects
    config_maps: Collection[str]
    namespace_objects: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """The Namespaces, by name, as given."""
    known_namespaces: frozenset[str] = frozenset()
    """Namespaces known to exist without their object (`namespace_labels`)."""

    @functools.cached_property
    def namespaces(self) -> NamespaceLabels:
        """Each namespace's labels, worked out when a pod's term first reads them (most
        cycles none does)."""
        return namespace_labels(self.namespace_objects, self.known_namespaces)


def depends(manifest: Mapping[str, Any]) -> bool:
    """Whether the pod names a claim, is on no node and requires a ConfigMap, or has an
    inter-pod term that selects namespaces by their labels."""
    return (
        names_claims(manifest) or bool(_config_maps(manifest)) or names_namespace_labels(manifest)
    )


def inputs(pod: Pod, manifest: Mapping[str, Any], objects: ClusterObjects) -> tuple[object, ...]:
    """What `with_dependencies` reads of the cluster for this pod (`pod`, as parsed): the
    claim objects (the very ones), whether each required ConfigMap exists and the
    namespaces its terms select by labels. The same inputs, the same pod."""
    try:
        claims = claim_inputs(claim_keys(manifest), objects.volumes)
    except ManifestError:  # no claims to read: the reading says why
        claims = ()
    namespace = _namespace(manifest)
    present = tuple(f"{namespace}/{name}" in objects.config_maps for name in _config_maps(manifest))
    return (*claims, present, selected(pod, objects.namespaces))


def with_dependencies(pod: Pod, manifest: Mapping[str, Any], objects: ClusterObjects) -> Pod:
    """The pod with the namespaces its terms select by labels, where its claims let it run
    and, if anything it depends on is not there, what it waits for."""
    if reads_namespaces(pod):
        pod = with_namespaces(pod, objects.namespaces)
    if names_claims(manifest):
        pod = with_claims(pod, pod_claims(manifest, objects.volumes))
    if pod.waits_for is not None:
        return pod
    names = _config_maps(manifest)
    message = missing_message(_namespace(manifest), names, objects.config_maps) if names else None
    if message is None:
        return pod
    return dataclasses.replace(pod, waits_for=Prerequisite(MISSING_CONFIG_MAPS, message))


def _config_maps(manifest: Mapping[str, Any]) -> tuple[str, ...]:
    """The ConfigMaps the pod requires, if it is on no node yet."""
    spec = manifest.get("spec")
    if isinstance(spec, Mapping) and spec.get("nodeName"):
        return ()
    return required_config_maps(manifest)


def _namespace(manifest: Mapping[str, Any]) -> str:
    metadata = manifest.get("metadata")
    namespace = metadata.get("namespace") if isinstance(metadata, Mapping) else None
    return namespace if isinstance(namespace, str) and namespace else "default"
