"""What the pod grouper decides for one pod, and the PodGroup manifest that follows from it.

A grouping rule (per workload kind, from a definition, or the default) only decides
the shape of the gang: the group's name, its minimum, its sub-groups and the pod's
sub-group. Everything a PodGroup inherits from the top owner (queue, priority
class, preemptibility, topology, labels, annotations, owner reference) is resolved
here once, the same way for every rule (kai-semantics §4.4, §14.2).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from kai.api.constants import (
    POD_GROUP_ANNOTATION,
    POD_GROUP_API_VERSION,
    QUEUE_LABEL,
    SUBGROUP_LABEL,
    TRAIN_PRIORITY_CLASS,
)
from kai.api.shards import NODE_POOL_LABEL_KEY
from kai.workloads.objects import (
    annotations_of,
    gvk_of,
    labels_of,
    name_of,
    namespace_of,
    object_uid,
)

TOP_OWNER_METADATA_ANNOTATION = "kai.scheduler/top-owner-metadata"
PROJECT_LABEL = "project"
PRIORITY_CLASS_LABEL = "priorityClassName"
PREEMPTIBILITY_LABEL = "kai.scheduler/preemptibility"
DEFAULT_QUEUE = "default-queue"
PREEMPTIBILITY_VALUES = ("preemptible", "non-preemptible")
_TOPOLOGY_ANNOTATIONS = {
    "kai.scheduler/topology": "topology",
    "kai.scheduler/topology-required-placement": "requiredTopologyLevel",
    "kai.scheduler/topology-preferred-placement": "preferredTopologyLevel",
}
_DURATION_ANNOTATIONS = {
    "kai.scheduler/preemption-delay": "preemptionDelay",
    "kai.scheduler/staleness-grace-period": "stalenessGracePeriod",
}


class GroupingError(ValueError):
    """A pod whose PodGroup cannot be computed; names the object and the field at fault."""


@dataclass(frozen=True)
class PodGroupPlan:
    """The PodGroup a pod belongs to and what to set on the pod to link it there."""

    name: str
    namespace: str
    manifest: dict[str, Any]
    pod_annotations: dict[str, str]
    pod_labels: dict[str, str]

    @property
    def key(self) -> str:
        """The PodGroup's "namespace/name", as the cache and the engine key it."""
        return f"{self.namespace}/{self.name}"

    def with_group_annotations(self, extra: Mapping[str, str]) -> PodGroupPlan:
        """The plan with these annotations added to (or replacing some of) the PodGroup's."""
        if not extra:
            return self
        metadata = dict(self.manifest.get("metadata") or {})
        metadata["annotations"] = {**(metadata.get("annotations") or {}), **extra}
        return dataclasses.replace(self, manifest={**self.manifest, "metadata": metadata})


@dataclass(frozen=True, slots=True)
class SubGroupSpec:
    name: str
    min_member: int | None = None
    min_subgroup: int | None = None
    parent: str | None = None
    topology: dict[str, str] | None = None


@dataclass(frozen=True)
class GroupDecision:
    """A rule's answer: the gang's shape and the per-kind defaults it implies."""

    name: str
    min_member: int | None = 1
    min_subgroup: int | None = None
    subgroups: tuple[SubGroupSpec, ...] = ()
    pod_subgroup: str | None = None
    default_priority_class: str = TRAIN_PRIORITY_CLASS
    priority_class_override: str | None = None
    topology: dict[str, str] | None = None
    extra_labels: dict[str, str] = field(default_factory=dict)


def default_group_name(owner: Mapping[str, Any]) -> str:
    """KAI's default name: `pg-<ownerName>-<ownerUID>`."""
    return f"pg-{name_of(owner)}-{object_uid(owner)}"


def build_plan(
    pod: Mapping[str, Any],
    top_owner: Mapping[str, Any],
    decision: GroupDecision,
    priority_classes: Mapping[str, int],
    node_pool_label: str = NODE_POOL_LABEL_KEY,
) -> PodGroupPlan:
    """The full plan for `pod`, whose gang `decision` describes, owned by `top_owner`.

    `node_pool_label` is the label naming a node pool (`--node-pool-label`, KAI's
    `nodePoolLabelKey`): the group takes the pod's pool under it, and a `project`
    queue is suffixed with it."""
    namespace = namespace_of(pod)
    spec: dict[str, Any] = {
        "queue": _queue(top_owner, pod, node_pool_label),
        "priorityClassName": decision.priority_class_override
        or _priority_class(top_owner, pod, decision.default_priority_class, priority_classes),
    }
    if decision.min_subgroup is not None:
        spec["minSubGroup"] = decision.min_subgroup
    else:
        spec["minMember"] = decision.min_member if decision.min_member is not None else 1
    preemptibility = _preemptibility(top_owner, pod)
    if preemptibility:
        spec["preemptibility"] = preemptibility
    topology = decision.topology or _owner_topology(top_owner)
    if topology:
        spec["topologyConstraint"] = topology
    owner_annotations = annotations_of(top_owner)
    pod_annotations = annotations_of(pod)
    for annotation, spec_field in _DURATION_ANNOTATIONS.items():
        value = owner_annotations.get(annotation) or pod_annotations.get(annotation)
        if value:
            spec[spec_field] = value
    if decision.subgroups:
        spec["subGroups"] = [_subgroup_manifest(sub) for sub in decision.subgroups]
    group_labels = dict(labels_of(top_owner))
    node_pool = labels_of(pod).get(node_pool_label)
    if node_pool and node_pool_label not in group_labels:  # the owner's pool wins (KAI)
        group_labels[node_pool_label] = node_pool
    group_labels.update(decision.extra_labels)
    group_annotations = {
        **owner_annotations,
        TOP_OWNER_METADATA_ANNOTATION: _top_owner_metadata(top_owner),
    }
    manifest = {
        "apiVersion": POD_GROUP_API_VERSION,
        "kind": "PodGroup",
        "metadata": {
            "name": decision.name,
            "namespace": namespace,
            "labels": group_labels,
            "annotations": group_annotations,
            "ownerReferences": [
                {
                    "apiVersion": top_owner.get("apiVersion"),
                    "kind": top_owner.get("kind"),
                    "name": name_of(top_owner),
                    "uid": object_uid(top_owner),
                }
            ],
        },
        "spec": spec,
    }
    pod_labels = {SUBGROUP_LABEL: decision.pod_subgroup} if decision.pod_subgroup else {}
    return PodGroupPlan(
        name=decision.name,
        namespace=namespace,
        manifest=manifest,
        pod_annotations={POD_GROUP_ANNOTATION: decision.name},
        pod_labels=pod_labels,
    )


def _subgroup_manifest(sub: SubGroupSpec) -> dict[str, Any]:
    manifest: dict[str, Any] = {"name": sub.name}
    if sub.min_subgroup is not None:
        manifest["minSubGroup"] = sub.min_subgroup
    else:
        manifest["minMember"] = sub.min_member if sub.min_member is not None else 0
    if sub.parent:
        manifest["parent"] = sub.parent
    if sub.topology:
        manifest["topologyConstraint"] = sub.topology
    return manifest


def _queue(owner: Mapping[str, Any], pod: Mapping[str, Any], node_pool_label: str) -> str:
    """Owner queue label, pod queue label, `project` (with the pod's node pool), default-queue."""
    owner_labels, pod_labels = labels_of(owner), labels_of(pod)
    for source in (owner_labels, pod_labels):
        if source.get(QUEUE_LABEL):
            return source[QUEUE_LABEL]
    project = owner_labels.get(PROJECT_LABEL) or pod_labels.get(PROJECT_LABEL)
    if project:
        node_pool = pod_labels.get(node_pool_label)
        return f"{project}-{node_pool}" if node_pool else project
    return DEFAULT_QUEUE


def _priority_class(
    owner: Mapping[str, Any],
    pod: Mapping[str, Any],
    kind_default: str,
    priority_classes: Mapping[str, int],
) -> str:
    """Owner label, then the pod's label or spec (only if the class exists), then the kind default."""
    owner_class = labels_of(owner).get(PRIORITY_CLASS_LABEL)
    if owner_class:
        return owner_class
    pod_spec = pod.get("spec") if isinstance(pod.get("spec"), Mapping) else {}
    for candidate in (
        labels_of(pod).get(PRIORITY_CLASS_LABEL),
        (pod_spec or {}).get("priorityClassName"),
    ):
        if candidate and candidate in priority_classes:
            return str(candidate)
    return kind_default


def _preemptibility(owner: Mapping[str, Any], pod: Mapping[str, Any]) -> str | None:
    for source in (labels_of(owner), labels_of(pod)):
        value = source.get(PREEMPTIBILITY_LABEL)
        if value in PREEMPTIBILITY_VALUES:
            return value
    return None


def _owner_topology(owner: Mapping[str, Any]) -> dict[str, str] | None:
    owner_annotations = annotations_of(owner)
    topology = {
        field_name: owner_annotations[annotation]
        for annotation, field_name in _TOPOLOGY_ANNOTATIONS.items()
        if owner_annotations.get(annotation)
    }
    return topology if "topology" in topology else None


_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
"""libyaml's safe dumper where PyYAML has it: the same text in a quarter of the time, and
this runs once per pod (with the pure-Python one, about 5% of the scheduler's time in a
5,000-pod burst)."""


_PLAIN = re.compile(r"[A-Za-z0-9](?:[-A-Za-z0-9._]*[A-Za-z0-9])?\Z")
"""Text YAML writes as it is, unless it reads as another type (`true`, `12`, `1e3`)."""
_RESOLVER = yaml.resolver.Resolver()
_STR = "tag:yaml.org,2002:str"


def _top_owner_metadata(owner: Mapping[str, Any]) -> str:
    """KAI's YAML of the top owner's identity. Written here line by line when every value is
    plain text, as `yaml.dump` writes it then: the dump cost about 30 us a pod, a tenth of
    a second of the event loop's time in a 5,000-pod burst."""
    gvk = gvk_of(owner)
    document = {
        "group": gvk.group,
        "version": gvk.version,
        "kind": gvk.kind,
        "name": name_of(owner),
        "uid": object_uid(owner),
    }
    lines = []
    for key, value in document.items():
        scalar = _plain_scalar(value)
        if scalar is None:
            return yaml.dump(document, Dumper=_DUMPER, sort_keys=False)
        lines.append(f"{key}: {scalar}\n")
    return "".join(lines)


def _plain_scalar(value: object) -> str | None:
    """The value as YAML writes it when that is the text itself (or '' for none); None: ask YAML."""
    if value == "":
        return "''"
    if (
        isinstance(value, str)
        and _PLAIN.match(value)
        and _RESOLVER.resolve(yaml.ScalarNode, value, (True, False)) == _STR  # type: ignore[no-untyped-call]
    ):
        return value
    return None


def grouped_manifest(manifest: Mapping[str, Any], plan: PodGroupPlan) -> dict[str, Any]:
    """The pod as the grouper leaves it: annotated with its group, labelled with its sub-group."""
    metadata = dict(manifest.get("metadata") or {})
    metadata["annotations"] = {**(metadata.get("annotations") or {}), **plan.pod_annotations}
    metadata["labels"] = {**(metadata.get("labels") or {}), **plan.pod_labels}
    return {**manifest, "metadata": metadata}
