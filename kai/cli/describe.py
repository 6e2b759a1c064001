"""Describe one workload: its components, replicas, resources, status and PodGroup(s).

This is the document of `kai workload describe -o json` (contracts/workload.md).
Components are listed depth first, one entry per component instance (a JobSet's
replicatedJobs appear by their names); the root is listed only when it defines
pods itself. Resources are totals over every pod the workload asks for. The
PodGroup part is not computed separately: the workload is expanded into the pods
its controllers would create and each pod goes through the real pod grouper, so
describe shows exactly what the grouper would create.

Given the live pods the workload owns (`kai workload describe TYPE/NAME`), each
entry also gets a `live` part: which of those pods play that component instance
and their phases (`kai.cli.attribution`); pods no component claims are listed in
the document's own `live` part. The spec-derived fields stay what the spec asks
for, so a live describe and `describe -f` of the same object agree on them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

from kai.api.constants import default_priority_classes
from kai.api.shapes import naming_unreadable
from kai.cli.attribution import Attribution, live_view
from kai.engine.resources import Resources
from kai.grouping import PodGroupPlan, plan_pod_group, resolve_owner_chain
from kai.workloads.definition import ComponentDefinition, WorkloadDefinition
from kai.workloads.expansion import expand_workload, is_workload_kind
from kai.workloads.jqeval import JqEvaluator
from kai.workloads.objects import gvk_of, metadata, name_of, namespace_of, object_ref
from kai.workloads.podresources import pod_template_resources
from kai.workloads.registry import DefinitionRegistry
from kai.workloads.status import workload_phases
from kai.workloads.structure import WorkloadStructure, extract_structure


class NoDefinitionError(LookupError):
    """No definition describes the object's type (nor another version of its kind).

    From a manifest the type is its apiVersion and kind; from a live command it may be only the
    word the user typed (`type`), when nothing, not even API discovery, says which kind it means.
    """

    def __init__(self, api_version: str | None, kind: str | None, type_word: str | None = None):
        named = f"{api_version} {kind}" if kind else f"type {type_word!r}"
        super().__init__(f"no workload definition for {named}")
        self.api_version = api_version
        self.kind = kind
        self.type_word = type_word

    def document(self) -> dict[str, str | None]:
        document = {
            "error": "no_definition_for_type",
            "kind": self.kind,
            "apiVersion": self.api_version,
            "message": str(self),
            "hint": "list known types with `kai workload definitions`, apply a Karta definition "
            "for this type to the cluster, or give one with --definition FILE",
        }
        if self.type_word is not None:
            document["type"] = self.type_word
        return document


def describe_workload(
    obj: Mapping[str, Any],
    registry: DefinitionRegistry,
    priority_classes: Mapping[str, int] | None = None,
    *,
    file_mode: bool = True,
    pods: Sequence[Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The describe document for `obj` (raises NoDefinitionError for an unknown type).

    `pods`, when given, are the live pods the workload owns; they fill the `live` parts.
    """
    gvk = gvk_of(obj)
    definition = registry.find(gvk)
    if definition is None:
        raise NoDefinitionError(gvk.api_version, gvk.kind)
    with naming_unreadable(object_ref(obj), obj):
        return _described(obj, definition, registry, priority_classes, file_mode, pods)


def _described(
    obj: Mapping[str, Any],
    definition: WorkloadDefinition,
    registry: DefinitionRegistry,
    priority_classes: Mapping[str, int] | None,
    file_mode: bool,
    pods: Sequence[Mapping[str, Any]] | None,
) -> dict[str, Any]:
    structure = extract_structure(definition, obj, registry.jq)
    attribution = None if pods is None else Attribution(definition, pods, registry)
    components = _components(structure, attribution)
    total = sum((entry.pop("_own") for entry in components if "_own" in entry), start=Resources())
    groups = pod_group_views(obj, registry, priority_classes or default_priority_classes())
    document = {
        **workload_view(obj, definition, registry.jq),
        "namespace": namespace_of(obj),
        "fileMode": file_mode,
        "components": components,
        "resources": resources_json(total),
        "podGroup": groups[0] if groups else None,
        "podGroups": groups,
    }
    if attribution is not None:
        document["live"] = _live_totals(attribution)
    return document


def _live_totals(attribution: Attribution) -> dict[str, Any]:
    """All the workload's pods counted, with those no component claims listed (`unattributed`),
    so a pod the definition cannot place is still seen."""
    totals = live_view(attribution.pods)
    del totals["pods"]
    totals["unattributed"] = live_view(attribution.unattributed)["pods"]
    return totals


def workload_view(
    obj: Mapping[str, Any], definition: WorkloadDefinition, jq: JqEvaluator
) -> dict[str, Any]:
    """A workload's identity, definition and phases: a row of `kai workload get`, and the head
    of the describe document, so the two cannot disagree about a workload's phase."""
    meta = metadata(obj)
    with naming_unreadable(object_ref(obj), obj):  # one bad row must not cost the whole listing
        phases = workload_phases(definition, obj, jq)
    return {
        "apiVersion": obj.get("apiVersion"),
        "kind": obj.get("kind"),
        "namespace": str(meta.get("namespace") or ""),
        "name": name_of(obj),
        "createdAt": meta.get("creationTimestamp"),
        "definition": definition.name,
        "origin": definition.origin,
        "phases": phases,
    }


def resources_json(resources: Resources) -> dict[str, int | float]:
    gpus: int | float = (
        int(resources.gpu) if resources.gpu.denominator == 1 else float(resources.gpu)
    )
    return {
        "gpus": gpus,
        "cpuMillis": _whole(resources.cpu),
        "memoryBytes": _whole(resources.memory),
    }


def _whole(value: Fraction) -> int:
    return -((-value.numerator) // value.denominator)


def _components(
    structure: WorkloadStructure, attribution: Attribution | None
) -> list[dict[str, Any]]:
    definition = structure.definition
    entries: list[dict[str, Any]] = []
    for component in _depth_first(definition, definition.root):
        if component.owner is None and not component.defines_pods:
            continue
        for instance in structure.instances_of(component.name):
            entry: dict[str, Any] = {
                "name": instance.instance_id or component.name,
                "component": component.name,
                "instance": instance.instance_id or None,
                "parent": component.owner,
                "kind": str(component.kind) if component.kind else None,
                "replicas": instance.scale.copies,
            }
            if instance.scale.min_replicas is not None:
                entry["minReplicas"] = instance.scale.min_replicas
            if instance.scale.max_replicas is not None:
                entry["maxReplicas"] = instance.scale.max_replicas
            if component.defines_pods and instance.template is not None:
                pods = structure.pod_count(instance)
                field = f"{definition.name}: component {component.name}"
                per_pod = pod_template_resources(
                    instance.template, object_ref(structure.obj), field
                )
                own = per_pod.scaled(pods)
                entry["_own"] = own
            else:
                pods, own = _descendant_totals(structure, component)
            entry["pods"] = pods
            entry["resources"] = resources_json(own)
            if attribution is not None:
                entry["live"] = live_view(attribution.pods_of(component, instance.instance_id))
            entries.append(entry)
    return entries


def _descendant_totals(
    structure: WorkloadStructure, component: ComponentDefinition
) -> tuple[int, Resources]:
    """Pods and resources of everything below a component that defines no pods itself."""
    definition = structure.definition
    pods, total = 0, Resources()
    for descendant in _depth_first(definition, component):
        if descendant is component or not descendant.defines_pods:
            continue
        for instance in structure.instances_of(descendant.name):
            if instance.template is None:
                continue
            count = structure.pod_count(instance)
            per_pod = pod_template_resources(
                instance.template, object_ref(structure.obj), descendant.name
            )
            pods += count
            total = total + per_pod.scaled(count)
    return pods, total


def _depth_first(
    definition: WorkloadDefinition, component: ComponentDefinition
) -> list[ComponentDefinition]:
    ordered = [component]
    for child in definition.children_of(component.name):
        ordered.extend(_depth_first(definition, child))
    return ordered


def pod_group_views(
    obj: Mapping[str, Any], registry: DefinitionRegistry, priority_classes: Mapping[str, int]
) -> list[dict[str, Any]]:
    """What the grouper makes of the workload's pods: one view per PodGroup, in pod order."""
    gvk = gvk_of(obj)
    if not (is_workload_kind(gvk.api_version, gvk.kind, registry) or gvk.kind == "Pod"):
        return _pod_less_views(obj, registry, priority_classes)
    objects = expand_workload(obj, registry)
    known = [obj, *objects]
    views: dict[str, dict[str, Any]] = {}
    pods = [item for item in objects if item.get("kind") == "Pod"]
    for pod in pods:
        plan = plan_pod_group(pod, resolve_owner_chain(pod, known), registry, priority_classes)
        if plan is None:
            continue
        view = views.setdefault(plan.name, gang_view(plan))
        view["pods"] += 1
    return list(views.values())


def _pod_less_views(
    obj: Mapping[str, Any], registry: DefinitionRegistry, priority_classes: Mapping[str, int]
) -> list[dict[str, Any]]:
    """A definition without pod templates (no specDefinition) still tells the grouper how
    to group any pod the workload's controller makes, as KAI's grouper reads it from the
    top owner alone: plan for a pod it owns, and show that group, with no pods."""
    if registry.get(gvk_of(obj)) is None:
        return []
    probe = _owned_pod(obj)
    plan = plan_pod_group(probe, resolve_owner_chain(probe, [obj]), registry, priority_classes)
    if plan is None:
        return []
    return [gang_view(plan)]


def _owned_pod(obj: Mapping[str, Any]) -> dict[str, Any]:
    gvk = gvk_of(obj)
    meta = obj.get("metadata") or {}
    owner = {
        "apiVersion": gvk.api_version,
        "kind": gvk.kind,
        "name": meta.get("name", ""),
        "uid": meta.get("uid", ""),
        "controller": True,
    }
    pod_meta: dict[str, Any] = {"name": f"{meta.get('name', '')}-pod", "ownerReferences": [owner]}
    if meta.get("namespace"):
        pod_meta["namespace"] = meta["namespace"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": pod_meta,
        "spec": {"schedulerName": "kai-scheduler", "containers": []},
    }


def gang_view(plan: PodGroupPlan) -> dict[str, Any]:
    """A PodGroup as the contract shows it: `minMember` is always the gang size in pods."""
    spec = plan.manifest["spec"]
    subgroups = spec.get("subGroups") or []
    children: dict[str | None, list[dict[str, Any]]] = {}
    for sub in subgroups:
        children.setdefault(sub.get("parent"), []).append(sub)

    def node(sub: Mapping[str, Any]) -> dict[str, Any]:
        below = [node(child) for child in children.get(sub["name"], [])]
        view: dict[str, Any] = {"name": sub["name"], "minMember": _gang(sub, below)}
        if below:
            view["subGroups"] = below
        return view

    top = [node(sub) for sub in children.get(None, [])]
    view: dict[str, Any] = {
        "name": plan.name,
        "queue": spec.get("queue"),
        "priorityClassName": spec.get("priorityClassName"),
        "minMember": _gang(spec, top),
    }
    if "minSubGroup" in spec:
        view["minSubGroup"] = spec["minSubGroup"]
    if top:
        view["subGroups"] = top
    view["pods"] = 0
    return view


def _gang(group: Mapping[str, Any], children: list[dict[str, Any]]) -> int:
    """A group's own minMember, else the smallest `minSubGroup` of its children's gangs."""
    if group.get("minMember"):
        return int(group["minMember"])
    if not children:
        return 0
    needed = int(group.get("minSubGroup", len(children)))
    return sum(sorted(int(child["minMember"]) for child in children)[:needed])
