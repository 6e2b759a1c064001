"""Turns `scheduling.run.ai/v2alpha2` PodGroup manifests into the engine's `PodGroup`.

Beyond field types, KAI's admission webhook enforces rules that span fields (the
subgroup tree, minMember against minSubGroup); they are checked here with the same
meaning so that a PodGroup KAI would refuse never reaches the engine. Priority and
preemptibility are derived as KAI derives them (kai-semantics §3.2, §5). The
timestamps the scheduler keeps on a PodGroup as annotations (§4.2) are read here,
and written back in the same format by `stamp_annotations`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final

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

LAST_START_ANNOTATION: Final = "kai.scheduler/last-start-timestamp"
STALE_SINCE_ANNOTATION: Final = "kai.scheduler/stale-podgroup-timestamp"
LAST_EVICTION_ANNOTATION: Final = "kai.scheduler/last-eviction-timestamp"


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
    annotations = wire.metadata.annotations
    last_start = _annotated_time(ref, annotations, LAST_START_ANNOTATION, errors)
    stale_since = _annotated_time(ref, annotations, STALE_SINCE_ANNOTATION, errors)
    last_eviction = _annotated_time(ref, annotations, LAST_EVICTION_ANNOTATION, errors)
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
        last_start=last_start,
        stale_since=stale_since,
        last_eviction=last_eviction,
    )


def stamp_annotations(
    last_start: datetime | None, stale_since: datetime | None, last_eviction: datetime | None
) -> dict[str, str | None]:
    """The PodGroup annotations that hold these times; None means the annotation is removed."""
    return {
        LAST_START_ANNOTATION: _format_time(last_start),
        STALE_SINCE_ANNOTATION: _format_time(stale_since),
        LAST_EVICTION_ANNOTATION: _format_time(last_eviction),
    }


def _format_time(moment: datetime | None) -> str | None:
    if moment is None:
        return None
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _annotated_time(
    ref: ObjectRef, annotations: Mapping[str, str], key: str, errors: list[ManifestError]
) -> datetime | None:
    """An RFC 3339 time kept in an annotation; a missing or empty annotation is None."""
    text = annotations.get(key)
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("z", "Z"))
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None:
        errors.append(
            ref.error(
                f"metadata.annotations.{key}",
                f"{text!r} is not an RFC 3339 time such as 2024-05-01T12:00:00Z",
            )
        )
        return None
    return moment


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
    return _min_sub_group_errors(
        ref, "spec", spec.min_member, spec.min_sub_group, roots, on_subgroup=False
    )


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
        if children[sub.name] > 0 and sub.min_member is not None:
            errors.append(
                ref.error(
                    f"{path}.minMember",
                    "counts pods, so it cannot be set on a subgroup with child subgroups; "
                    "use minSubGroup",
                )
            )
        errors += _min_sub_group_errors(
            ref, path, sub.min_member, sub.min_sub_group, children[sub.name], on_subgroup=True
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
    ref: ObjectRef,
    path: str,
    min_member: int | None,
    min_sub_group: int | None,
    children: int,
    *,
    on_subgroup: bool,
) -> list[ManifestError]:
    """minSubGroup counts direct child subgroups, so it needs them and excludes minMember.

    As in KAI's webhook, minMember and minSubGroup exclude each other even when one is 0,
    and 0 asks for no child at all (no gang requirement), which the PodGroup itself may
    say without subgroups but a leaf subgroup may not (it counts pods: minMember).
    """
    field = f"{path}.minSubGroup"
    if min_sub_group is None:
        return []
    if min_member is not None:
        return [ref.error(field, "cannot be combined with minMember")]
    if children == 0 and (on_subgroup or min_sub_group > 0):
        return [ref.error(field, "needs child subgroups to count")]
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
