"""Read and validate `run.ai/v1alpha1` Karta documents into `WorkloadDefinition`s.

Validation follows the reference validator (workload-definitions §7) plus the CRD's
CEL rules: unique component names, a root with a full GVK, no `ownerRef` and a
status definition; children whose `ownerRef` names an existing component without
cycles; at most one spec mode; `instanceIdPath` paired with an instance selector;
gang members that exist; every jq program read-only; write paths that are plain
paths. Every problem is collected (not just the first) and named by its field
path in the document, so `kai workload validate` can list them all.

Status keys that upstream has since dropped from the format (`pending`,
`progressing`) are not problems: older definitions still carry them and upstream's
loader ignores unknown keys, so they are accepted, ignored and reported as
warnings on the definition.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from kai.workloads.definition import (
    GVK,
    AlphaPodGroup,
    ComponentDefinition,
    ConditionMatch,
    FragmentedPodSpec,
    GangMember,
    GangScheduling,
    Origin,
    PodGroupInstruction,
    PodSelector,
    Problem,
    ScaleDefinition,
    SpecDefinition,
    StatusDefinition,
    StatusMatcher,
    SubGroupInstruction,
    SuspendDefinition,
    Topology,
    TypeSelector,
    WorkloadDefinition,
    WriteAction,
)
from kai.workloads.jqeval import JqEvaluator
from kai.workloads.jqsafe import simple_path
from kai.workloads.objects import name_of

API_VERSION = "run.ai/v1alpha1"
KIND = "Karta"
STATUS_KEYS = (
    "initializing",
    "running",
    "completed",
    "failed",
    "degraded",
    "suspended",
    "suspending",
    "resuming",
)
DROPPED_STATUS_KEYS = ("pending", "progressing")
"""Status keys of earlier versions of the format, which upstream no longer maps."""
_FRAGMENT_FIELDS = {
    "schedulerNamePath": "scheduler_name",
    "labelsPath": "labels",
    "annotationsPath": "annotations",
    "resourcesPath": "resources",
    "resourceClaimsPath": "resource_claims",
    "podAffinityPath": "pod_affinity",
    "nodeAffinityPath": "node_affinity",
    "containersPath": "containers",
    "containerPath": "container",
    "priorityClassNamePath": "priority_class_name",
    "imagePath": "image",
}
T = TypeVar("T")


class InvalidDefinitionError(ValueError):
    def __init__(self, name: str, problems: list[Problem]) -> None:
        listed = "; ".join(str(problem) for problem in problems)
        super().__init__(f"Karta {name or '<unnamed>'} is invalid: {listed}")
        self.name = name
        self.problems = problems


def load_definition(
    document: Any, jq: JqEvaluator, origin: Origin = "catalog"
) -> WorkloadDefinition:
    """The definition in `document`, or InvalidDefinitionError listing every problem."""
    definition, problems = _read(document, jq, origin)
    if problems or definition is None:
        name = name_of(document) if isinstance(document, Mapping) else ""
        raise InvalidDefinitionError(name, problems)
    return definition


def definition_problems(document: Any, jq: JqEvaluator) -> list[Problem]:
    """Every problem of `document` as a Karta definition; empty when it is valid."""
    return _read(document, jq, "file")[1]


def _read(
    document: Any, jq: JqEvaluator, origin: Origin
) -> tuple[WorkloadDefinition | None, list[Problem]]:
    # The catalog ships with kai and its programs are compiled by its tests; compiling its
    # 282 programs (about 1 ms each: libjq parses its builtins every time) was a third of a
    # second of every start. Its programs still get the read-only check, and compile on use.
    reader = _Reader(jq, compile_programs=origin != "catalog")
    if not isinstance(document, dict):
        reader.problem("", "a Karta definition must be a mapping")
        return None, reader.problems
    if document.get("apiVersion") != API_VERSION:
        reader.problem("apiVersion", f"must be {API_VERSION}, got {document.get('apiVersion')!r}")
    if document.get("kind") != KIND:
        reader.problem("kind", f"must be {KIND}, got {document.get('kind')!r}")
    metadata = reader.mapping(document.get("metadata"), "metadata", required=True) or {}
    name = reader.string(metadata, "name", "metadata", required=True) or ""
    spec = reader.mapping(document.get("spec"), "spec", required=True) or {}
    reader.known_keys(spec, "spec", {"structureDefinition", "optimizationInstructions"})
    structure = (
        reader.mapping(spec.get("structureDefinition"), "spec.structureDefinition", required=True)
        or {}
    )
    base = "spec.structureDefinition"
    reader.known_keys(structure, base, {"rootComponent", "childComponents", "additionalChildKinds"})
    root_raw = reader.mapping(structure.get("rootComponent"), f"{base}.rootComponent", True)
    root = _component(reader, root_raw or {}, f"{base}.rootComponent", is_root=True)
    children = [
        _component(reader, raw, f"{base}.childComponents[{index}]", is_root=False)
        for index, raw in enumerate(reader.items(structure, "childComponents", base))
    ]
    extra_kinds = [
        _gvk(reader, raw, f"{base}.additionalChildKinds[{index}]", required=True)
        for index, raw in enumerate(reader.items(structure, "additionalChildKinds", base))
    ]
    instructions = reader.mapping(
        spec.get("optimizationInstructions"), "spec.optimizationInstructions"
    )
    gang = _gang(reader, instructions or {}, "spec.optimizationInstructions")
    if root is None:
        return None, reader.problems
    components = [root, *[child for child in children if child is not None]]
    _check_tree(reader, components, base)
    _check_gang_members(reader, gang, {component.name for component in components})
    if reader.problems:
        return None, reader.problems
    definition = WorkloadDefinition(
        name=name,
        root=root,
        children=tuple(child for child in children if child is not None),
        additional_child_kinds=tuple(kind for kind in extra_kinds if kind is not None),
        gang=gang,
        origin=origin,
        document=document,
        warnings=tuple(reader.warnings),
    )
    return definition, []


class _Reader:
    """Typed access to the raw document that records a Problem instead of raising."""

    def __init__(self, jq: JqEvaluator, compile_programs: bool = True) -> None:
        self.jq = jq
        self.compile_programs = compile_programs
        self.problems: list[Problem] = []
        self.warnings: list[Problem] = []

    def problem(self, path: str, message: str) -> None:
        self.problems.append(Problem(path or "<document>", message))

    def warning(self, path: str, message: str) -> None:
        self.warnings.append(Problem(path, message))

    def mapping(self, value: Any, path: str, required: bool = False) -> dict[str, Any] | None:
        if value is None:
            if required:
                self.problem(path, "is required")
            return None
        if not isinstance(value, dict):
            self.problem(path, f"must be a mapping, got {type(value).__name__}")
            return None
        return value

    def known_keys(self, raw: Mapping[str, Any], path: str, allowed: set[str]) -> None:
        for key in sorted(set(raw) - allowed):
            self.problem(f"{path}.{key}", "is not a field of this object")

    def string(
        self, raw: Mapping[str, Any], key: str, path: str, required: bool = False
    ) -> str | None:
        value = raw.get(key)
        if value is None:
            if required:
                self.problem(f"{path}.{key}", "is required")
            return None
        if not isinstance(value, str) or (required and not value):
            self.problem(f"{path}.{key}", "must be a non-empty string")
            return None
        return value

    def jq_program(
        self, raw: Mapping[str, Any], key: str, path: str, required: bool = False
    ) -> str | None:
        program = self.string(raw, key, path, required)
        if program is not None:
            for problem in self.jq.check(program, self.compile_programs):
                self.problem(f"{path}.{key}", f"jq {program!r}: {problem}")
        return program

    def items(self, raw: Mapping[str, Any], key: str, path: str) -> list[Any]:
        value = raw.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            self.problem(f"{path}.{key}", "must be a list")
            return []
        return value

    def section(
        self,
        raw: Mapping[str, Any],
        key: str,
        path: str,
        build: Callable[[dict[str, Any], str], T],
    ) -> T | None:
        value = self.mapping(raw.get(key), f"{path}.{key}")
        return None if value is None else build(value, f"{path}.{key}")


def _gvk(reader: _Reader, raw: Any, path: str, required: bool) -> GVK | None:
    value = reader.mapping(raw, path, required)
    if value is None:
        return None
    reader.known_keys(value, path, {"group", "version", "kind"})
    group = value.get("group") or ""
    if not isinstance(group, str):
        reader.problem(f"{path}.group", "must be a string")
        group = ""
    version = reader.string(value, "version", path, required=True)
    kind = reader.string(value, "kind", path, required=True)
    if version is None or kind is None:
        return None
    return GVK(group, version, kind)


def _component(
    reader: _Reader, raw: dict[str, Any], path: str, *, is_root: bool
) -> ComponentDefinition | None:
    if not isinstance(raw, dict):
        reader.problem(path, "must be a mapping")
        return None
    reader.known_keys(
        raw,
        path,
        {
            "name",
            "kind",
            "ownerRef",
            "specDefinition",
            "scaleDefinition",
            "statusDefinition",
            "suspendDefinition",
            "instanceIdPath",
            "podSelector",
        },
    )
    name = reader.string(raw, "name", path, required=True)
    kind = _gvk(reader, raw.get("kind"), f"{path}.kind", required=is_root)
    if is_root and kind is not None and not kind.group and kind.kind != "Pod":
        reader.problem(f"{path}.kind.group", "is required (only Pod may have the core group)")
    owner = raw.get("ownerRef")
    if is_root and owner is not None:
        reader.problem(f"{path}.ownerRef", "is not allowed on the root component")
    if not is_root:
        owner = reader.string(raw, "ownerRef", path, required=True)
    status = reader.section(raw, "statusDefinition", path, lambda v, p: _status(reader, v, p))
    if is_root and raw.get("statusDefinition") is None:
        reader.problem(f"{path}.statusDefinition", "is required on the root component")
    instance_id_path = reader.jq_program(raw, "instanceIdPath", path)
    selector = reader.section(raw, "podSelector", path, lambda v, p: _pod_selector(reader, v, p))
    has_instance_selector = selector is not None and selector.instance_id_path is not None
    if (instance_id_path is not None) != has_instance_selector:
        reader.problem(
            f"{path}.podSelector.componentInstanceSelector"
            if instance_id_path is not None
            else f"{path}.instanceIdPath",
            "instanceIdPath and podSelector.componentInstanceSelector must be set together",
        )
    if name is None:
        return None
    return ComponentDefinition(
        name=name,
        kind=kind,
        owner=owner if isinstance(owner, str) else None,
        spec=reader.section(raw, "specDefinition", path, lambda v, p: _spec(reader, v, p)),
        scale=reader.section(raw, "scaleDefinition", path, lambda v, p: _scale(reader, v, p)),
        status=status,
        suspend=reader.section(raw, "suspendDefinition", path, lambda v, p: _suspend(reader, v, p)),
        instance_id_path=instance_id_path,
        pod_selector=selector,
    )


def _spec(reader: _Reader, raw: dict[str, Any], path: str) -> SpecDefinition:
    reader.known_keys(
        raw,
        path,
        {"podTemplateSpecPath", "podSpecPath", "metadataPath", "fragmentedPodSpecDefinition"},
    )
    modes = [
        mode
        for mode, present in (
            ("podTemplateSpecPath", "podTemplateSpecPath" in raw),
            ("podSpecPath/metadataPath", "podSpecPath" in raw or "metadataPath" in raw),
            ("fragmentedPodSpecDefinition", "fragmentedPodSpecDefinition" in raw),
        )
        if present
    ]
    if len(modes) != 1:
        reader.problem(
            path,
            "must set exactly one mode of podTemplateSpecPath, podSpecPath/metadataPath and "
            f"fragmentedPodSpecDefinition (found: {', '.join(modes) or 'none'})",
        )
    fragmented = reader.section(
        raw, "fragmentedPodSpecDefinition", path, lambda v, p: _fragments(reader, v, p)
    )
    return SpecDefinition(
        pod_template_spec_path=reader.jq_program(raw, "podTemplateSpecPath", path),
        pod_spec_path=reader.jq_program(raw, "podSpecPath", path),
        metadata_path=reader.jq_program(raw, "metadataPath", path),
        fragmented=fragmented,
    )


def _fragments(reader: _Reader, raw: dict[str, Any], path: str) -> FragmentedPodSpec:
    reader.known_keys(raw, path, set(_FRAGMENT_FIELDS))
    values = {attr: reader.jq_program(raw, key, path) for key, attr in _FRAGMENT_FIELDS.items()}
    return FragmentedPodSpec(**values)


def _scale(reader: _Reader, raw: dict[str, Any], path: str) -> ScaleDefinition:
    reader.known_keys(raw, path, {"replicasPath", "minReplicasPath", "maxReplicasPath"})
    return ScaleDefinition(
        replicas_path=reader.jq_program(raw, "replicasPath", path),
        min_replicas_path=reader.jq_program(raw, "minReplicasPath", path),
        max_replicas_path=reader.jq_program(raw, "maxReplicasPath", path),
    )


def _pod_selector(reader: _Reader, raw: dict[str, Any], path: str) -> PodSelector:
    reader.known_keys(
        raw, path, {"componentTypeSelector", "componentInstanceSelector", "replicaSelector"}
    )
    type_selector = reader.section(
        raw, "componentTypeSelector", path, lambda v, p: _type_selector(reader, v, p)
    )
    instance = reader.mapping(
        raw.get("componentInstanceSelector"), f"{path}.componentInstanceSelector"
    )
    replica = reader.mapping(raw.get("replicaSelector"), f"{path}.replicaSelector")
    instance_path = replica_path = None
    if instance is not None:
        reader.known_keys(instance, f"{path}.componentInstanceSelector", {"idPath"})
        instance_path = reader.jq_program(
            instance, "idPath", f"{path}.componentInstanceSelector", required=True
        )
    if replica is not None:
        reader.known_keys(replica, f"{path}.replicaSelector", {"keyPath"})
        replica_path = reader.jq_program(
            replica, "keyPath", f"{path}.replicaSelector", required=True
        )
    return PodSelector(type_selector, instance_path, replica_path)


def _type_selector(reader: _Reader, raw: dict[str, Any], path: str) -> TypeSelector:
    reader.known_keys(raw, path, {"keyPath", "value", "matchLabels"})
    key_path = reader.jq_program(raw, "keyPath", path)
    labels = reader.mapping(raw.get("matchLabels"), f"{path}.matchLabels") or {}
    if key_path is None and not labels:
        reader.problem(path, "needs keyPath or matchLabels")
    if "value" in raw and key_path is None:
        reader.problem(f"{path}.value", "requires keyPath")
    return TypeSelector(
        key_path=key_path,
        value=raw.get("value"),
        has_value="value" in raw,
        match_labels=tuple(sorted((str(k), str(v)) for k, v in labels.items())),
    )


def _status(reader: _Reader, raw: dict[str, Any], path: str) -> StatusDefinition:
    reader.known_keys(raw, path, {"phaseDefinition", "conditionsDefinition", "statusMappings"})
    phase = reader.mapping(raw.get("phaseDefinition"), f"{path}.phaseDefinition") or {}
    conditions = (
        reader.mapping(raw.get("conditionsDefinition"), f"{path}.conditionsDefinition") or {}
    )
    reader.known_keys(phase, f"{path}.phaseDefinition", {"path"})
    condition_fields = {"typeFieldName", "statusFieldName", "messageFieldName", "reasonFieldName"}
    reader.known_keys(conditions, f"{path}.conditionsDefinition", {"path", *condition_fields})
    mappings_raw = reader.mapping(raw.get("statusMappings"), f"{path}.statusMappings", True) or {}
    reader.known_keys(mappings_raw, f"{path}.statusMappings", {*STATUS_KEYS, *DROPPED_STATUS_KEYS})
    for key in DROPPED_STATUS_KEYS:
        if key in mappings_raw:
            reader.warning(
                f"{path}.statusMappings.{key}", "is no longer a status of the format; ignored"
            )
    mappings = []
    for key in STATUS_KEYS:
        matchers = [
            _matcher(reader, item, f"{path}.statusMappings.{key}[{index}]")
            for index, item in enumerate(reader.items(mappings_raw, key, f"{path}.statusMappings"))
        ]
        if matchers:
            mappings.append((key.capitalize(), tuple(matchers)))

    def field_name(key: str, default: str) -> str:
        return reader.string(conditions, key, f"{path}.conditionsDefinition") or default

    return StatusDefinition(
        phase_path=reader.jq_program(
            phase, "path", f"{path}.phaseDefinition", required=bool(phase)
        ),
        conditions_path=reader.jq_program(
            conditions, "path", f"{path}.conditionsDefinition", required=bool(conditions)
        ),
        type_field=field_name("typeFieldName", "type"),
        status_field=field_name("statusFieldName", "status"),
        message_field=field_name("messageFieldName", "message"),
        reason_field=field_name("reasonFieldName", "reason"),
        mappings=tuple(mappings),
    )


def _matcher(reader: _Reader, raw: Any, path: str) -> StatusMatcher:
    value = reader.mapping(raw, path, required=True) or {}
    reader.known_keys(value, path, {"byPhase", "byConditions", "byExpression"})
    if not value:
        reader.problem(path, "needs byPhase, byConditions or byExpression")
    conditions = []
    for index, item in enumerate(reader.items(value, "byConditions", path)):
        condition_path = f"{path}.byConditions[{index}]"
        condition = reader.mapping(item, condition_path, required=True) or {}
        reader.known_keys(condition, condition_path, {"type", "status", "reason"})
        conditions.append(
            ConditionMatch(
                type=reader.string(condition, "type", condition_path, required=True) or "",
                status=reader.string(condition, "status", condition_path),
                reason=reader.string(condition, "reason", condition_path),
            )
        )
    expression = None
    expression_raw = reader.mapping(value.get("byExpression"), f"{path}.byExpression")
    if expression_raw is not None:
        reader.known_keys(expression_raw, f"{path}.byExpression", {"expression", "expectedResult"})
        program = reader.jq_program(expression_raw, "expression", f"{path}.byExpression", True)
        expected = expression_raw.get("expectedResult", "true")
        expression = (program or "", str(expected))
    return StatusMatcher(
        by_phase=reader.string(value, "byPhase", path),
        by_conditions=tuple(conditions),
        by_expression=expression,
    )


def _suspend(reader: _Reader, raw: dict[str, Any], path: str) -> SuspendDefinition:
    reader.known_keys(raw, path, {"suspendActions", "resumeActions"})

    def actions(key: str) -> tuple[WriteAction, ...]:
        items = reader.items(raw, key, path)
        if not items:
            reader.problem(f"{path}.{key}", "needs at least one action")
        result = []
        for index, item in enumerate(items):
            action_path = f"{path}.{key}[{index}]"
            action = reader.mapping(item, action_path, required=True) or {}
            reader.known_keys(action, action_path, {"path", "value"})
            target = reader.jq_program(action, "path", action_path, required=True)
            if target is not None and simple_path(target) is None:
                reader.problem(f"{action_path}.path", f"{target!r} is not a plain path expression")
            encoded = action.get("value")
            try:
                value = json.loads(encoded) if isinstance(encoded, str) else None
            except json.JSONDecodeError:
                value = None
                reader.problem(f"{action_path}.value", f"{encoded!r} is not JSON")
            if not isinstance(encoded, str):
                reader.problem(f"{action_path}.value", "must be a JSON-encoded string")
            result.append(WriteAction(target or "", value))
        return tuple(result)

    return SuspendDefinition(actions("suspendActions"), actions("resumeActions"))


def _topology(reader: _Reader, raw: dict[str, Any], path: str) -> Topology:
    reader.known_keys(
        raw, path, {"topologyName", "preferredTopologyLevel", "requiredTopologyLevel"}
    )
    name = reader.string(raw, "topologyName", path, required=True) or ""
    required = reader.string(raw, "requiredTopologyLevel", path)
    preferred = reader.string(raw, "preferredTopologyLevel", path)
    if required is None and preferred is None:
        reader.problem(path, "needs requiredTopologyLevel or preferredTopologyLevel")
    return Topology(name, required, preferred)


def _gang(reader: _Reader, raw: dict[str, Any], path: str) -> GangScheduling:
    reader.known_keys(raw, path, {"gangScheduling"})
    gang = reader.mapping(raw.get("gangScheduling"), f"{path}.gangScheduling") or {}
    path = f"{path}.gangScheduling"
    reader.known_keys(gang, path, {"podGroups", "podGroup"})
    alpha = []
    for index, item in enumerate(reader.items(gang, "podGroups", path)):
        group_path = f"{path}.podGroups[{index}]"
        group = reader.mapping(item, group_path, required=True) or {}
        reader.known_keys(group, group_path, {"name", "members"})
        members = []
        for member_index, member_raw in enumerate(reader.items(group, "members", group_path)):
            member_path = f"{group_path}.members[{member_index}]"
            member = reader.mapping(member_raw, member_path, required=True) or {}
            reader.known_keys(member, member_path, {"componentName", "groupByKeyPaths", "filters"})
            members.append(
                GangMember(
                    component=reader.string(member, "componentName", member_path, True) or "",
                    group_by_key_paths=_programs(reader, member, "groupByKeyPaths", member_path),
                    filters=_programs(reader, member, "filters", member_path),
                )
            )
        if not members:
            reader.problem(f"{group_path}.members", "needs at least one member")
        alpha.append(
            AlphaPodGroup(reader.string(group, "name", group_path, True) or "", tuple(members))
        )
    current = None
    current_raw = reader.mapping(gang.get("podGroup"), f"{path}.podGroup")
    if current_raw is not None:
        current_path = f"{path}.podGroup"
        reader.known_keys(current_raw, current_path, {"name", "subGroups", "topology"})
        sub_groups = []
        for index, item in enumerate(reader.items(current_raw, "subGroups", current_path)):
            sub_path = f"{current_path}.subGroups[{index}]"
            sub = reader.mapping(item, sub_path, required=True) or {}
            reader.known_keys(sub, sub_path, {"componentName", "topology"})
            sub_groups.append(
                SubGroupInstruction(
                    component=reader.string(sub, "componentName", sub_path, True) or "",
                    topology=reader.section(
                        sub, "topology", sub_path, lambda v, p: _topology(reader, v, p)
                    ),
                )
            )
        current = PodGroupInstruction(
            name=reader.string(current_raw, "name", current_path, required=True) or "",
            sub_groups=tuple(sub_groups),
            topology=reader.section(
                current_raw, "topology", current_path, lambda v, p: _topology(reader, v, p)
            ),
        )
    return GangScheduling(tuple(alpha), current)


def _programs(reader: _Reader, raw: dict[str, Any], key: str, path: str) -> tuple[str, ...]:
    programs = []
    for index, item in enumerate(reader.items(raw, key, path)):
        if not isinstance(item, str) or not item:
            reader.problem(f"{path}.{key}[{index}]", "must be a non-empty jq program")
            continue
        for problem in reader.jq.check(item, reader.compile_programs):
            reader.problem(f"{path}.{key}[{index}]", f"jq {item!r}: {problem}")
        programs.append(item)
    return tuple(programs)


def _check_tree(reader: _Reader, components: list[ComponentDefinition], base: str) -> None:
    paths = {id(components[0]): f"{base}.rootComponent"}
    for index, component in enumerate(components[1:]):
        paths[id(component)] = f"{base}.childComponents[{index}]"
    by_name: dict[str, ComponentDefinition] = {}
    for component in components:
        if component.name in by_name:
            reader.problem(
                f"{paths[id(component)]}.name", f"component name {component.name!r} is used twice"
            )
        by_name.setdefault(component.name, component)
    for component in components[1:]:
        if component.owner is None:
            continue
        if component.owner not in by_name:
            reader.problem(
                f"{paths[id(component)]}.ownerRef",
                f"names unknown parent component {component.owner!r}",
            )
            continue
        seen = {component.name}
        current = by_name[component.owner]
        while current.owner is not None and current.owner in by_name:
            if current.name in seen:
                reader.problem(
                    f"{paths[id(component)]}.ownerRef",
                    f"ownership cycle through component {current.name!r}",
                )
                break
            seen.add(current.name)
            current = by_name[current.owner]
        else:
            if current.name in seen:
                reader.problem(
                    f"{paths[id(component)]}.ownerRef",
                    f"ownership cycle through component {current.name!r}",
                )


def _check_gang_members(reader: _Reader, gang: GangScheduling, names: set[str]) -> None:
    base = "spec.optimizationInstructions.gangScheduling"
    for index, group in enumerate(gang.pod_groups):
        for member_index, member in enumerate(group.members):
            if member.component and member.component not in names:
                reader.problem(
                    f"{base}.podGroups[{index}].members[{member_index}].componentName",
                    f"names unknown component {member.component!r}",
                )
    if gang.pod_group is not None:
        for index, sub in enumerate(gang.pod_group.sub_groups):
            if sub.component and sub.component not in names:
                reader.problem(
                    f"{base}.podGroup.subGroups[{index}].componentName",
                    f"names unknown component {sub.component!r}",
                )
