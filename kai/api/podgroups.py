"""Turns `scheduling.run.ai/v2alpha2` PodGroup manifests into the engine's `PodGroup`.

Beyond field types, KAI's admission webhook enforces rules that span fields (the
subgroup tree, minMember against minSubGroup); they are checked here with the same
meaning so that a PodGroup KAI would refuse never reaches the engine. Priority and
preemptibility are derived as KAI derives them (kai-semantics §3.2, §5).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from kai.api import models as crd
from kai.api.durations import as_seconds
from kai.api.errors import ManifestError, ObjectRef, object_ref, raise_all, validated
from kai.api.trees import cycles, describe
from kai.engine.model import (
    DEFAULT_PODGROUP_PRIORITY,
    NON_PREEMPTIBLE_PRIORITY_THRESHOLD,
    PodGroup,
    SubGroup,
    TopologyConstraint,
)


def parse_pod_group(manifest: Mapping[str, Any], priority_classes: Mapping[str, int]) -> PodGroup:
    """The engine's view of a PodGroup, its priority looked up in `priority_classes`.

    A group without a class, or naming a class that does not exist, has priority 50
    (KAI's default) and keeps the name it gave. Raises ManifestError naming every bad field.
    """
    ref = object_ref("PodGroup", manifest, namespaced=True)
    wire = validated(crd.PodGroup, ref, manifest)
    spec = wire.spec
    errors = _gang_errors(ref, spec) + _subgroup_errors(ref, spec.sub_groups)
    topology = _topology(ref, "spec.topologyConstraint", spec.topology_constraint, errors)
    subgroups = tuple(
        SubGroup(
            name=sub.name,
            min_member=sub.min_member or 0,
            parent=sub.parent or None,
            min_sub_group=sub.min_sub_group,
            topology=_topology(
                ref, f"spec.subGroups[{index}].topologyConstraint", sub.topology_constraint, errors
            ),
        )
        for index, sub in enumerate(spec.sub_groups)
    )
    raise_all(errors)
    priority = priority_classes.get(spec.priority_class_name, DEFAULT_PODGROUP_PRIORITY)
    return PodGroup(
        namespace=ref.namespace or "default",
        name=wire.metadata.name,
        queue=spec.queue,
        min_member=_min_member(spec),
        priority=priority,
        preemptible=is_preemptible(spec.preemptibility, priority),
        subgroups=subgroups,
        created=wire.metadata.creation_timestamp,
        uid=wire.metadata.uid,
        priority_class=spec.priority_class_name or None,
        min_sub_group=spec.min_sub_group,
        topology=topology,
        preemption_delay_seconds=as_seconds(spec.preemption_delay),
        staleness_grace_period_seconds=as_seconds(spec.staleness_grace_period),
    )


def is_preemptible(preemptibility: crd.Preemptibility, priority: int) -> bool:
    """An explicit value wins; otherwise priority below 100 is preemptible (kai-semantics §5)."""
    if preemptibility:
        return preemptibility == "preemptible"
    return priority < NON_PREEMPTIBLE_PRIORITY_THRESHOLD


def _min_member(spec: crd.PodGroupSpec) -> int:
    """The gang size; unset means 1 (one pod at a time), or 0 when the gang counts subgroups."""
    if spec.min_member is not None:
        return spec.min_member
    return 0 if spec.min_sub_group is not None else 1


def _gang_errors(ref: ObjectRef, spec: crd.PodGroupSpec) -> list[ManifestError]:
    roots = sum(1 for sub in spec.sub_groups if not sub.parent)
    return _min_sub_group_errors(ref, "spec", spec.min_member, spec.min_sub_group, roots)


def _subgroup_errors(ref: ObjectRef, subgroups: list[crd.SubGroup]) -> list[ManifestError]:
    """KAI's webhook rules: unique names, existing parents, no cycles, min fields that fit."""
    errors: list[ManifestError] = []
    names = Counter(sub.name for sub in subgroups)
    children = Counter(sub.parent for sub in subgroups if sub.parent)
    for index, sub in enumerate(subgroups):
        path = f"spec.subGroups[{index}]"
        if names[sub.name] > 1:
            errors.append(ref.error(f"{path}.name", f"duplicate subgroup name {sub.name!r}"))
        if sub.parent and sub.parent not in names:
            errors.append(ref.error(f"{path}.parent", f"subgroup {sub.parent!r} does not exist"))
        if children[sub.name] == 0 and sub.min_member is None:
            errors.append(ref.error(f"{path}.minMember", "required on a subgroup with no children"))
        if children[sub.name] > 0 and sub.min_member:
            errors.append(
                ref.error(
                    f"{path}.minMember",
                    "counts pods, so it cannot be set on a subgroup with child subgroups; "
                    "use minSubGroup",
                )
            )
        errors += _min_sub_group_errors(
            ref, path, sub.min_member, sub.min_sub_group, children[sub.name]
        )
    index_of = {sub.name: index for index, sub in reversed(list(enumerate(subgroups)))}
    for cycle in cycles({sub.name: sub.parent or None for sub in subgroups}):
        errors.extend(
            ref.error(
                f"spec.subGroups[{index_of[name]}].parent",
                f"subgroups form a cycle: {describe(cycle)}",
            )
            for name in cycle
        )
    return errors


def _min_sub_group_errors(
    ref: ObjectRef, path: str, min_member: int | None, min_sub_group: int | None, children: int
) -> list[ManifestError]:
    """minSubGroup counts direct child subgroups, so it needs them and excludes minMember."""
    field = f"{path}.minSubGroup"
    if min_sub_group is None:
        return []
    if min_member:
        return [ref.error(field, "cannot be combined with minMember")]
    if children == 0:
        return [ref.error(field, "needs child subgroups to count")]
    if min_sub_group <= 0:
        return [ref.error(field, "must be greater than 0")]
    if min_sub_group > children:
        return [
            ref.error(field, f"is {min_sub_group} but there are only {children} child subgroups")
        ]
    return []


def _topology(
    ref: ObjectRef,
    path: str,
    wire: crd.TopologyConstraint | None,
    errors: list[ManifestError],
) -> TopologyConstraint | None:
    if wire is None or not (
        wire.topology or wire.required_topology_level or wire.preferred_topology_level
    ):
        return None
    if not wire.topology:
        errors.append(ref.error(f"{path}.topology", "required when a topology level is set"))
    return TopologyConstraint(
        topology=wire.topology,
        required_level=wire.required_topology_level or None,
        preferred_level=wire.preferred_topology_level or None,
    )
