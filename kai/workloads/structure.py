"""A definition applied to one workload object: its component instances, templates and scale.

This is the extraction step of the reference model (workload-definitions §5.1, §4.2,
§4.3). Every path is evaluated on the root workload object; a program with many
results gives one value per instance, zipped by position with the ids of
`instanceIdPath`. Templates come out in one shape, `{metadata, spec}`, whichever
spec mode the definition uses. The gang size of a subtree follows §6.

Counts are totals, as upstream's catalog writes them: a component's scale paths give
every pod of that component in the workload (the LeaderWorkerSet worker's
`replicas * (size - 1)`), so nothing is multiplied by the enclosing components.
A count that is not given is the minimum, else one.

What exists follows upstream's describe. A pod-defining instance whose template path
yields nothing is still an instance, with no pods (a PyTorchJob without a Master, a
Milvus whose etcd is not configured): it counts for neither pods nor gang size. A
logical component with neither a scale nor children describes nothing and has no
instance (a Deployment's ReplicaSet).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kai.api.errors import ManifestError
from kai.api.shapes import misshapen_field
from kai.workloads.definition import ComponentDefinition, SpecDefinition, WorkloadDefinition
from kai.workloads.fragments import fragmented_template
from kai.workloads.jqeval import JqError, JqEvaluator
from kai.workloads.objects import object_ref


@dataclass(frozen=True, slots=True)
class Scale:
    replicas: int | None = None
    min_replicas: int | None = None
    max_replicas: int | None = None

    @property
    def copies(self) -> int:
        """How many copies exist: the replicas, else the minimum, else one."""
        if self.replicas is not None:
            return self.replicas
        return 1 if self.min_replicas is None else self.min_replicas

    @property
    def given(self) -> bool:
        """Whether the workload states any count (a fragmented template exists then)."""
        return any(v is not None for v in (self.replicas, self.min_replicas, self.max_replicas))

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
    template: dict[str, Any] | None  # {metadata, spec}; None: logical, or its pods not described
    scale: Scale

    @property
    def has_pods(self) -> bool:
        """Whether the instance stands for pods: it defines them and its template was found."""
        return self.component.defines_pods and self.template is not None


@dataclass(frozen=True)
class WorkloadStructure:
    definition: WorkloadDefinition
    obj: Mapping[str, Any]
    instances: dict[str, tuple[ComponentInstance, ...]]

    def instances_of(self, component: str) -> tuple[ComponentInstance, ...]:
        return self.instances.get(component, ())

    def pod_count(self, instance: ComponentInstance) -> int:
        """Pods an instance stands for in the whole workload: its copies, if it has pods."""
        return instance.scale.copies if instance.has_pods else 0

    def gang_size(self, component: str, instance_id: str | None = None) -> int:
        """§6: the subtree size of `component`, or of one of its instances."""
        if not self.definition.has_scale():
            return self._pod_defining_leaf_instances(component)
        own = sum(
            instance.scale.gang_size
            for instance in self._counted(component)
            if instance_id is None or instance.instance_id == instance_id
        )
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
            return len(self._counted(component)) if definition.defines_pods else 0
        return sum(self._pod_defining_leaf_instances(child.name) for child in children)

    def _counted(self, component: str) -> list[ComponentInstance]:
        """The instances that count for gang size: logical ones, or those with pods."""
        return [
            instance
            for instance in self.instances_of(component)
            if instance.has_pods or not instance.component.defines_pods
        ]


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
        if self._describes_nothing():
            return ()
        scales = self._scales()
        templates = self._templates(scales)
        return tuple(
            ComponentInstance(self.component, instance_id, templates[index], scales[index])
            for index, instance_id in enumerate(self.ids)
        )

    def _describes_nothing(self) -> bool:
        component = self.component
        return (
            not component.defines_pods
            and component.scale is None
            and not self.definition.children_of(component.name)
        )

    def error(self, field: str, message: str) -> ManifestError:
        return object_ref(self.obj).error(
            f"{self.definition.name}: component {self.component.name}: {field}", message
        )

    def _run(self, field: str, program: str) -> list[Any]:
        try:
            return self.jq.all(program, self.obj)
        except JqError as error:
            misshapen = misshapen_field(self.obj)  # the object's fault, not the definition's
            if misshapen is not None:
                raise object_ref(self.obj).error(*misshapen) from None
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

    def _templates(self, scales: list[Scale]) -> list[dict[str, Any] | None]:
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
        return self._fragmented_mode(spec, scales)

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

    def _fragmented_mode(
        self, spec: SpecDefinition, scales: list[Scale]
    ) -> list[dict[str, Any] | None]:
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
            fragmented_template(
                {name: column[index] for name, column in columns.items()}, scales[index].given
            )
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
        if number is None or not math.isfinite(number) or number != int(number) or number < 0:
            raise self.error(
                f"scaleDefinition.{name}", f"must be a whole number >= 0, got {value!r}"
            )
        return int(number)
