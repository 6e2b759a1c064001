"""Expand a workload into the pods (and intermediate owners) its controllers would create.

The simulator has no controllers, so for each workload object it asks this module
what would appear in the cluster, then groups each pod with `plan_pod_group`.
Kinds whose controllers we know are played by `kai.workloads.controllers`. Any
other type with a definition is expanded from it: each pod-defining component
instance becomes as many pods as its scale counts (a total for the workload, see
`kai.workloads.structure`), owned through an object of the component's kind when it
has one, and labelled so that the definition's own pod selectors and gang keys
recognise them: a plain-path selector is inverted (`.metadata.labels["k"] == "v"`
sets label k to v; an instance selector sets the instance id; an existence test or
a gang key sets the workload's name). A replica selector sets the pod's replica
index: the pods are split evenly, in order, over the copies of the nearest
enclosing component that has one (the pods of an LWS worker over its groups).
Either way the objects made are reserved from the workload's `ExpansionBudget`, so a
count far beyond any cluster is reported instead of exhausting memory.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kai.api.errors import field_path
from kai.api.shapes import naming_unreadable
from kai.workloads.budget import MAX_EXPANDED_OBJECTS, ExpansionBudget
from kai.workloads.controllers import CONTROLLERS
from kai.workloads.definition import ComponentDefinition, WorkloadDefinition
from kai.workloads.jqsafe import simple_path
from kai.workloads.objects import gvk_of, name_of, object_ref
from kai.workloads.registry import DefinitionRegistry
from kai.workloads.structure import ComponentInstance, WorkloadStructure, extract_structure
from kai.workloads.synth import owned_object, pod_from_template


class NotAWorkloadError(ValueError):
    """An object of a type neither a known controller nor a definition describes."""


def is_workload_kind(api_version: str, kind: str, registry: DefinitionRegistry) -> bool:
    """Whether `expand_workload` can expand objects of this type (Pods are not expanded)."""
    gvk = gvk_of({"apiVersion": api_version, "kind": kind})
    if (gvk.group, gvk.kind) in CONTROLLERS:
        return True
    definition = registry.get(gvk)
    return (
        definition is not None
        and any(c.defines_pods for c in definition.components)
        and not (gvk.group == "" and gvk.kind == "Pod")
    )


def expand_workload(
    obj: Mapping[str, Any], registry: DefinitionRegistry, *, limit: int = MAX_EXPANDED_OBJECTS
) -> list[dict[str, Any]]:
    """The objects the workload's controllers would create, owners before what they own.

    Pods are included (a Pod expands to itself); the workload object is not. A workload
    whose values have a shape its controller cannot read, or that asks for more than
    `limit` objects, is a ManifestError naming it.
    """
    gvk = gvk_of(obj)
    if gvk.group == "" and gvk.kind == "Pod":
        return [dict(obj)]
    controller = CONTROLLERS.get((gvk.group, gvk.kind))
    definition = registry.get(gvk)
    if controller is None and definition is None:
        raise NotAWorkloadError(f"no controller or definition is known for {gvk} {name_of(obj)}")
    ref = object_ref(obj)
    with naming_unreadable(ref, obj):
        budget = ExpansionBudget(ref, limit)
        if controller is not None:
            return controller(obj, budget)
        assert definition is not None
        structure = extract_structure(definition, obj, registry.jq)
        return _from_definition(definition, structure, budget)


def _from_definition(
    definition: WorkloadDefinition, structure: WorkloadStructure, budget: ExpansionBudget
) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = []
    root = structure.obj
    for component in definition.components:
        for instance in structure.instances_of(component.name):
            if instance.template is None:
                continue
            owner: Mapping[str, Any] = root
            base = _base_name(root, component, instance)
            if (
                component.kind is not None
                and component.owner is not None
                and component.kind.kind != "Pod"
            ):
                owner = owned_object(component.kind.api_version, component.kind.kind, base, root)
                objects.append(dict(owner))
            pods = len(budget.spend(structure.pod_count(instance), _count_field(instance)))
            groups = _replica_groups(structure, component)
            for number in range(pods):
                pod_labels, pod_annotations = _selector_metadata(
                    definition, component, instance, number * groups // pods, name_of(root)
                )
                objects.append(
                    pod_from_template(
                        instance.template, f"{base}-{number}", owner, pod_labels, pod_annotations
                    )
                )
    return objects


def _count_field(instance: ComponentInstance) -> str:
    """The workload field an instance's pod count was read from, as the definition says."""
    scale = instance.component.scale
    if scale is None:
        return ""
    program = scale.replicas_path if instance.scale.replicas is not None else None
    program = program or scale.min_replicas_path or ""
    steps = simple_path(program) or ()
    named = [step for step in steps if step is not None]
    return field_path(named) if named and len(named) == len(steps) else program.strip()


def _replica_groups(structure: WorkloadStructure, component: ComponentDefinition) -> int:
    """The copies of the nearest enclosing component with a replica selector, else one."""
    for ancestor in list(structure.definition.ancestors(component.name))[1:]:
        if ancestor.pod_selector is not None and ancestor.pod_selector.replica_key_path:
            return max(1, sum(i.scale.copies for i in structure.instances_of(ancestor.name)))
    return 1


def _base_name(
    root: Mapping[str, Any], component: ComponentDefinition, instance: ComponentInstance
) -> str:
    parts = [name_of(root)]
    if component.owner is not None:
        parts.append(component.name)
    if instance.instance_id:
        parts.append(instance.instance_id.lower())
    return "-".join(parts)


def _selector_metadata(
    definition: WorkloadDefinition,
    component: ComponentDefinition,
    instance: ComponentInstance,
    replica: int,
    workload_name: str,
) -> tuple[dict[str, str], dict[str, str]]:
    """The labels and annotations that make the definition's selectors and gang keys match."""
    values: dict[tuple[str, str], str] = {}

    def put(path: str | None, value: str, overwrite: bool = True) -> None:
        target = _metadata_key(path)
        if target is not None and (overwrite or target not in values):
            values[target] = value

    for ancestor in definition.ancestors(component.name):
        selector = ancestor.pod_selector
        if selector is None:
            continue
        if selector.instance_id_path and ancestor.name == component.name:
            put(selector.instance_id_path, instance.instance_id)
        if selector.replica_key_path:
            put(selector.replica_key_path, str(replica))
        type_selector = selector.type_selector
        if type_selector is not None:
            for key, value in type_selector.match_labels:
                values[("labels", key)] = value
            if type_selector.has_value:
                put(type_selector.key_path, str(type_selector.value))
            else:
                put(type_selector.key_path, workload_name, overwrite=False)
    covering = {c.name for c in definition.ancestors(component.name)}
    for group in definition.gang.pod_groups:
        for member in group.members:
            if member.component in covering:
                for path in member.group_by_key_paths:
                    put(path, workload_name, overwrite=False)
    by_section: dict[str, dict[str, str]] = {"labels": {}, "annotations": {}}
    for (section, key), value in values.items():
        by_section[section][key] = value
    return by_section["labels"], by_section["annotations"]


def _metadata_key(path: str | None) -> tuple[str, str] | None:
    """("labels", key) for `.metadata.labels["key"]`, ("annotations", key) likewise, else None."""
    steps = simple_path(path) if path else None
    if steps is None or len(steps) != 3 or steps[0] != "metadata":
        return None
    section, key = steps[1], steps[2]
    if section not in ("labels", "annotations") or not isinstance(key, str):
        return None
    return str(section), key
