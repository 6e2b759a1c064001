"""The workload-definition fallback: a PodGroup from a Karta's gang instructions.

Used for types no built-in rule covers (workload-definitions §9). The current
`podGroup` form gives one group `pg-<uid>-<name>`, either with one sub-group per
listed component (each needing its subtree's gang size, which must be > 0) or with
the whole tree's gang size. The alpha `podGroups` form finds the pod's component
and the first member covering it, then names the group after the member's key
values; its size is that of the member's subtree (§6), for the pod's own instance
when the member is the pod's instanced component. As in KAI, a member split into
replica gangs by its keys is not divided: §6 sizes the whole subtree, so types
made of identical replicas (LeaderWorkerSet, Grove) have built-in rules. A pod
that no member covers falls back to the default grouper.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from kai.grouping.context import GroupingInput
from kai.grouping.plan import GroupDecision, GroupingError, SubGroupSpec
from kai.workloads.definition import (
    ComponentDefinition,
    GangMember,
    PodGroupInstruction,
    Topology,
    TypeSelector,
    WorkloadDefinition,
)
from kai.workloads.jqeval import JqError
from kai.workloads.objects import labels_of, object_uid
from kai.workloads.structure import WorkloadStructure, extract_structure

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def definition_rule(inp: GroupingInput, definition: WorkloadDefinition) -> GroupDecision | None:
    """The definition's decision, or None when it has nothing to say about this pod."""
    structure = extract_structure(definition, inp.top, inp.registry.jq)
    if definition.gang.pod_group is not None:
        return _current_form(inp, structure, definition.gang.pod_group)
    return _alpha_form(inp, structure)


def pod_component(inp: GroupingInput, definition: WorkloadDefinition) -> ComponentDefinition | None:
    """The leaf component the pod plays: the only leaf, else the first whose type selector matches."""
    leaves = definition.leaves()
    if len(leaves) == 1:
        return leaves[0]
    for leaf in leaves:
        selector = leaf.pod_selector.type_selector if leaf.pod_selector else None
        if selector is not None and _matches(inp, selector):
            return leaf
    return None


def pod_instance(inp: GroupingInput, component: ComponentDefinition) -> str | None:
    path = component.pod_selector.instance_id_path if component.pod_selector else None
    if path is None:
        return None
    value = _run(inp, path, "componentInstanceSelector.idPath")
    return None if value is None else _text(value)


def plays(inp: GroupingInput, selector: TypeSelector) -> bool:
    """Whether the pod passes a component's type selector (§5.4); `kai workload describe`
    attributes live pods with the same test the grouper uses."""
    return _matches(inp, selector)


def _current_form(
    inp: GroupingInput, structure: WorkloadStructure, instruction: PodGroupInstruction
) -> GroupDecision:
    definition = structure.definition
    name = _group_name(inp, [instruction.name])
    topology = _topology(instruction.topology)
    if not instruction.sub_groups:
        return GroupDecision(
            name=name, min_member=structure.gang_size(definition.root.name), topology=topology
        )
    component = pod_component(inp, definition)
    covering = {c.name for c in definition.ancestors(component.name)} if component else set()
    subgroups = []
    pod_subgroup = None
    for sub in instruction.sub_groups:
        size = structure.gang_size(sub.component)
        if size <= 0:
            raise GroupingError(
                f"{definition.name}: sub-group {sub.component} of {inp.top.get('kind')} "
                f"{inp.top.get('metadata', {}).get('name')} has gang size {size}; it must be > 0"
            )
        subgroups.append(
            SubGroupSpec(sub.component, min_member=size, topology=_topology(sub.topology))
        )
        if sub.component in covering and pod_subgroup is None:
            pod_subgroup = sub.component
    return GroupDecision(
        name=name,
        min_member=None,
        min_subgroup=len(subgroups),
        subgroups=tuple(subgroups),
        pod_subgroup=pod_subgroup,
        topology=topology,
    )


def _alpha_form(inp: GroupingInput, structure: WorkloadStructure) -> GroupDecision | None:
    definition = structure.definition
    component = pod_component(inp, definition)
    if component is None:
        return None
    covering = [c.name for c in definition.ancestors(component.name)]
    members = [m for group in definition.gang.pod_groups for m in group.members]
    # Most specific member first: a member naming the pod's own component beats its ancestors.
    members.sort(
        key=lambda m: covering.index(m.component) if m.component in covering else len(covering)
    )
    member = next((m for m in members if m.component in covering and _passes(inp, m)), None)
    if member is None:
        return None
    keys = [_group_key(inp, path) for path in member.group_by_key_paths]
    if member.component == component.name and component.instance_id_path is not None:
        size = structure.gang_size(component.name, instance_id=pod_instance(inp, component))
    else:
        size = structure.gang_size(member.component)
    return GroupDecision(name=_group_name(inp, keys), min_member=max(size, 1))


def _passes(inp: GroupingInput, member: GangMember) -> bool:
    return all(_run(inp, program, "filters") is True for program in member.filters)


def _group_key(inp: GroupingInput, program: str) -> str:
    try:
        values = inp.registry.jq.all(program, inp.pod)
    except JqError as error:
        raise GroupingError(f"pod {_pod_name(inp)}: groupByKeyPaths: {error}") from None
    if len(values) != 1 or values[0] in (None, ""):
        raise GroupingError(
            f"pod {_pod_name(inp)}: groupByKeyPaths {program!r} must give exactly one non-empty "
            f"value, got {values!r}"
        )
    return _text(values[0])


def _group_name(inp: GroupingInput, parts: list[str]) -> str:
    name = "-".join(["pg", object_uid(inp.top), *parts]).lower()
    if len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
        raise GroupingError(
            f"pod {_pod_name(inp)}: PodGroup name {name!r} is not a DNS-1123 subdomain"
        )
    return name


def _matches(inp: GroupingInput, selector: TypeSelector) -> bool:
    pod_labels = labels_of(inp.pod)
    if any(pod_labels.get(key) != value for key, value in selector.match_labels):
        return False
    if selector.key_path is None:
        return True
    try:
        values = inp.registry.jq.all(selector.key_path, inp.pod)
    except JqError as error:
        raise GroupingError(f"pod {_pod_name(inp)}: componentTypeSelector: {error}") from None
    if selector.has_value:
        return any(_text(value) == _text(selector.value) for value in values)
    return any(value is not None for value in values)


def _run(inp: GroupingInput, program: str, field: str) -> Any:
    try:
        return inp.registry.jq.first(program, inp.pod)
    except JqError as error:
        raise GroupingError(f"pod {_pod_name(inp)}: {field}: {error}") from None


def _topology(topology: Topology | None) -> dict[str, str] | None:
    if topology is None:
        return None
    constraint = {"topology": topology.topology}
    if topology.required_level:
        constraint["requiredTopologyLevel"] = topology.required_level
    if topology.preferred_level:
        constraint["preferredTopologyLevel"] = topology.preferred_level
    return constraint


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _pod_name(inp: GroupingInput) -> str:
    pod_meta: Mapping[str, Any] = inp.pod.get("metadata") or {}
    return f"{pod_meta.get('namespace', 'default')}/{pod_meta.get('name', '')}"
