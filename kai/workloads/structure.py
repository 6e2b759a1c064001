"""A definition applied to one workload object: its component instances, templates and scale.

This is the extraction step of the reference model (workload-definitions §5.1, §4.2,
§4.3). Every path is evaluated on the root workload object; a program with many
results gives one value per instance, zipped by position with the ids of
`instanceIdPath`. Templates come out in one shape, `{metadata, spec}`, whichever
spec mode the definition uses. The gang size of a subtree follows §6.

A pod-defining instance whose template path yields nothing does not exist (a
PyTorchJob without a Master has no master pods), so it counts for neither pods nor
gang size.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kai.api.errors import ManifestError
from kai.workloads.definition import ComponentDefinition, SpecDefinition, WorkloadDefinition
from kai.workloads.jqeval import JqError, JqEvaluator
from kai.workloads.objects import object_ref


@dataclass(frozen=True, slots=True)
class Scale:
    replicas: int | None = None
    min_replicas: int | None = None
    max_replicas: int | None = None

    @property
    def copies(self) -> int:
        """How many copies exist: the replicas, or one when the count is not given."""
        return 1 if self.replicas is None else self.replicas

    @property
    def gang_size(self) -> int:
        """§6 rule 1: minReplicas when > 0, else replicas when > 0, else 0."""
        if self.min_replicas:
            return self.min_replicas
        return self.replicas or 0


@dataclass(frozen=True, slots=True)
class ComponentInstance:
    component: ComponentDefinition
    instance_id: str
    template: dict[str, Any] | None  # {metadata, spec}; None for a logical component
    scale: Scale


@dataclass(frozen=True)
class WorkloadStructure:
    definition: WorkloadDefinition
    obj: Mapping[str, Any]
    instances: dict[str, tuple[ComponentInstance, ...]]

    def instances_of(self, component: str) -> tuple[ComponentInstance, ...]:
        return self.instances.get(component, ())

    def multiplier(self, component: str) -> int:
        """Copies of the enclosing structure: the product of the ancestors' replicas bar root."""
        product = 1
        for ancestor in list(self.definition.ancestors(component))[1:]:
            if ancestor.owner is None:
                break
            product *= sum(instance.scale.copies for instance in self.instances_of(ancestor.name))
        return product

    def pod_count(self, instance: ComponentInstance) -> int:
        """Pods one instance of a pod-defining component stands for, over all enclosing copies."""
        if not instance.component.defines_pods:
            return 0
        return self.multiplier(instance.component.name) * instance.scale.copies

    def gang_size(
        self, component: str, instance_id: str | None = None, per_replica: bool = False
    ) -> int:
        """§6: the subtree size of `component`, or of one of its instances.

        `per_replica` drops the component's own replica factor, for gangs formed per
        replica of an identical sub-structure (one per LWS group).
        """
        if not self.definition.has_scale():
            return self._pod_defining_leaf_instances(component)
        own = sum(
            instance.scale.gang_size
            for instance in self.instances_of(component)
            if instance_id is None or instance.instance_id == instance_id
        )
        if per_replica:
            own = 0
        children = sum(
            self.gang_size(child.name) for child in self.definition.children_of(component)
        )
        if own == 0:
            return children
        if children == 0:
            return own
        return own * children

    def _pod_defining_leaf_instances(self, component: str) -> int:
        children = self.definition.children_of(component)
        if not children:
            definition = self.definition.component(component)
            return len(self.instances_of(component)) if definition.defines_pods else 0
        return sum(self._pod_defining_leaf_instances(child.name) for child in children)


def extract_structure(
    definition: WorkloadDefinition, obj: Mapping[str, Any], jq: JqEvaluator
) -> WorkloadStructure:
    """Every component's instances for `obj`; a ManifestError names the component and field."""
    return WorkloadStructure(
        definition,
        obj,
        {
            component.name: _Extractor(definition, component, obj, jq).instances()
            for component in definition.components
        },
    )


class _Extractor:
    def __init__(
        self,
        definition: WorkloadDefinition,
        component: ComponentDefinition,
        obj: Mapping[str, Any],
        jq: JqEvaluator,
    ) -> None:
        self.definition = definition
        self.component = component
        self.obj = obj
        self.jq = jq
        self.ids = self._instance_ids()

    def instances(self) -> tuple[ComponentInstance, ...]:
        templates = self._templates()
        scales = self._scales()
        instances = []
        for index, instance_id in enumerate(self.ids):
            template = templates[index]
            if self.component.defines_pods and template is None:
                continue
            instances.append(
                ComponentInstance(self.component, instance_id, template, scales[index])
            )
        return tuple(instances)

    def error(self, field: str, message: str) -> ManifestError:
        return object_ref(self.obj).error(
            f"{self.definition.name}: component {self.component.name}: {field}", message
        )

    def _run(self, field: str, program: str) -> list[Any]:
        try:
            return self.jq.all(program, self.obj)
        except JqError as error:
            raise self.error(field, str(error)) from None

    def _per_instance(self, field: str, program: str | None) -> list[Any]:
        """One value per instance; no result means absent everywhere, else the counts must match."""
        if program is None:
            return [None] * len(self.ids)
        results = self._run(field, program)
        if not results:
            return [None] * len(self.ids)
        if len(results) != len(self.ids):
            raise self.error(
                field,
                f"jq {program!r} yields {len(results)} values for {len(self.ids)} instances",
            )
        return results

    def _instance_ids(self) -> list[str]:
        if self.component.instance_id_path is None:
            return [""]
        ids = self._run("instanceIdPath", self.component.instance_id_path)
        if any(not isinstance(value, str | int) or isinstance(value, bool) for value in ids):
            raise self.error("instanceIdPath", f"instance ids must be strings, got {ids!r}")
        return [str(value) for value in ids]

    def _templates(self) -> list[dict[str, Any] | None]:
        spec = self.component.spec
        if spec is None:
            return [None] * len(self.ids)
        if spec.pod_template_spec_path is not None:
            values = self._per_instance(
                "specDefinition.podTemplateSpecPath", spec.pod_template_spec_path
            )
            return [self._template_spec(value) for value in values]
        if spec.fragmented is None:
            return self._pod_spec_mode(spec)
        return self._fragmented_mode(spec)

    def _template_spec(self, value: Any) -> dict[str, Any] | None:
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise self.error(
                "specDefinition.podTemplateSpecPath", "must yield a pod template object"
            )
        return {
            "metadata": dict(value.get("metadata") or {}),
            "spec": dict(value.get("spec") or {}),
        }

    def _pod_spec_mode(self, spec: SpecDefinition) -> list[dict[str, Any] | None]:
        specs = self._per_instance("specDefinition.podSpecPath", spec.pod_spec_path)
        metas = self._per_instance("specDefinition.metadataPath", spec.metadata_path)
        templates: list[dict[str, Any] | None] = []
        for pod_spec, raw_meta in zip(specs, metas, strict=True):
            if pod_spec is None:
                templates.append(None)
                continue
            meta = raw_meta if isinstance(raw_meta, Mapping) else {}
            templates.append(
                {
                    "metadata": {
                        "labels": dict(meta.get("labels") or {}),
                        "annotations": dict(meta.get("annotations") or {}),
                    },
                    "spec": dict(pod_spec) if isinstance(pod_spec, Mapping) else {},
                }
            )
        return templates

    def _fragmented_mode(self, spec: SpecDefinition) -> list[dict[str, Any] | None]:
        fragments = spec.fragmented
        assert fragments is not None
        field = "specDefinition.fragmentedPodSpecDefinition"

        def values(name: str, program: str | None) -> list[Any]:
            return self._per_instance(f"{field}.{name}", program)

        columns = {
            "schedulerName": values("schedulerNamePath", fragments.scheduler_name),
            "labels": values("labelsPath", fragments.labels),
            "annotations": values("annotationsPath", fragments.annotations),
            "resources": values("resourcesPath", fragments.resources),
            "resourceClaims": values("resourceClaimsPath", fragments.resource_claims),
            "podAffinity": values("podAffinityPath", fragments.pod_affinity),
            "nodeAffinity": values("nodeAffinityPath", fragments.node_affinity),
            "containers": values("containersPath", fragments.containers),
            "container": values("containerPath", fragments.container),
            "priorityClassName": values("priorityClassNamePath", fragments.priority_class_name),
            "image": values("imagePath", fragments.image),
        }
        return [
            _fragmented_template({name: column[index] for name, column in columns.items()})
            for index in range(len(self.ids))
        ]

    def _scales(self) -> list[Scale]:
        scale = self.component.scale
        if scale is None:
            return [Scale()] * len(self.ids)
        columns = [
            [
                self._count(name, value)
                for value in self._per_instance(f"scaleDefinition.{name}", program)
            ]
            for name, program in (
                ("replicasPath", scale.replicas_path),
                ("minReplicasPath", scale.min_replicas_path),
                ("maxReplicasPath", scale.max_replicas_path),
            )
        ]
        return [Scale(*values) for values in zip(*columns, strict=True)]

    def _count(self, name: str, value: Any) -> int | None:
        """A replica count: a number or numeric string (Knative annotations); null is absent."""
        if value is None:
            return None
        number: float | int | None = None
        if isinstance(value, int | float) and not isinstance(value, bool):
            number = value
        elif isinstance(value, str):
            try:
                number = float(value.strip())
            except ValueError:
                number = None
        if number is None or number != int(number) or number < 0:
            raise self.error(
                f"scaleDefinition.{name}", f"must be a whole number >= 0, got {value!r}"
            )
        return int(number)


def _fragmented_template(values: Mapping[str, Any]) -> dict[str, Any] | None:
    """A pod template assembled from scattered fields; None when none of them is present."""
    if all(value is None for value in values.values()):
        return None
    containers: list[dict[str, Any]]
    if isinstance(values["containers"], list):
        containers = [dict(c) for c in values["containers"] if isinstance(c, Mapping)]
    elif isinstance(values["container"], Mapping):
        containers = [dict(values["container"])]
    else:
        containers = [{"name": "main"}]
    if values["resources"] is not None and "resources" not in containers[0]:
        containers[0]["resources"] = values["resources"]
    if values["image"] is not None and "image" not in containers[0]:
        containers[0]["image"] = values["image"]
    spec: dict[str, Any] = {"containers": containers}
    for key in ("schedulerName", "priorityClassName", "resourceClaims"):
        if values[key] is not None:
            spec[key] = values[key]
    affinity = {
        key: values[key] for key in ("podAffinity", "nodeAffinity") if values[key] is not None
    }
    if affinity:
        spec["affinity"] = affinity
    return {
        "metadata": {
            "labels": dict(values["labels"] or {}),
            "annotations": dict(values["annotations"] or {}),
        },
        "spec": spec,
    }
