"""Wire models of the core Kubernetes objects kai reads: Pod, Node and PriorityClass.

Only the fields the scheduler uses are modelled; the rest of a real object is ignored.
Values are checked the way the API server checks them (quantities, enums, integer
types) so that a file `kubectl apply` would refuse is refused here too, with the path
of the field.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, StrictBool, StrictInt

from kai.api.fields import ObjectMeta, Quantity, WireModel

TaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


class ResourceRequirements(WireModel):
    requests: dict[str, Quantity] = Field(default_factory=dict)
    limits: dict[str, Quantity] = Field(default_factory=dict)


class ContainerPort(WireModel):
    container_port: StrictInt = Field(ge=1, le=65535)
    host_port: StrictInt = Field(default=0, ge=0, le=65535)  # 0: none
    host_ip: str = Field(default="", alias="hostIP")  # "" or 0.0.0.0: every address
    protocol: Literal["TCP", "UDP", "SCTP"] = "TCP"


class Container(WireModel):
    name: str = ""
    resources: ResourceRequirements = ResourceRequirements()
    restart_policy: str | None = None  # on an init container, Always makes it a sidecar
    ports: list[ContainerPort] = Field(default_factory=list)


class NodeSelectorRequirement(WireModel):
    key: str = Field(min_length=1)
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
    values: list[str] = Field(default_factory=list)


class NodeSelectorTerm(WireModel):
    match_expressions: list[NodeSelectorRequirement] = Field(default_factory=list)
    match_fields: list[NodeSelectorRequirement] = Field(default_factory=list)


class NodeSelector(WireModel):
    node_selector_terms: list[NodeSelectorTerm] = Field(min_length=1)


class NodeAffinity(WireModel):
    required_during_scheduling_ignored_during_execution: NodeSelector | None = None


class LabelSelectorRequirement(WireModel):
    key: str = Field(min_length=1)
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: list[str] = Field(default_factory=list)


class LabelSelector(WireModel):
    match_labels: dict[str, str] = Field(default_factory=dict)
    match_expressions: list[LabelSelectorRequirement] = Field(default_factory=list)


class PodAffinityTerm(WireModel):
    label_selector: LabelSelector | None = None
    namespaces: list[str] = Field(default_factory=list)
    namespace_selector: LabelSelector | None = None
    topology_key: str = Field(min_length=1)
    match_label_keys: list[str] = Field(default_factory=list)
    mismatch_label_keys: list[str] = Field(default_factory=list)


class WeightedPodAffinityTerm(WireModel):
    weight: int = Field(ge=1, le=100)
    pod_affinity_term: PodAffinityTerm


class PodAffinity(WireModel):
    """podAffinity or podAntiAffinity: terms required, and terms preferred with a weight."""

    required_during_scheduling_ignored_during_execution: list[PodAffinityTerm] = Field(
        default_factory=list
    )
    preferred_during_scheduling_ignored_during_execution: list[WeightedPodAffinityTerm] = Field(
        default_factory=list
    )


class Affinity(WireModel):
    node_affinity: NodeAffinity | None = None
    pod_affinity: PodAffinity | None = None
    pod_anti_affinity: PodAffinity | None = None


class Toleration(WireModel):
    key: str = ""
    operator: Literal["Equal", "Exists", ""] = ""  # empty means Equal
    value: str = ""
    effect: TaintEffect | Literal[""] = ""  # empty tolerates every effect


class SchedulingGate(WireModel):
    name: str = Field(min_length=1)


class PodSpec(WireModel):
    node_name: str = ""
    scheduler_name: str = "default-scheduler"
    containers: list[Container] = Field(default_factory=list)
    init_containers: list[Container] = Field(default_factory=list)
    overhead: dict[str, Quantity] = Field(default_factory=dict)
    resources: ResourceRequirements | None = None  # pod-level requests (KEP-2837)
    node_selector: dict[str, str] = Field(default_factory=dict)
    affinity: Affinity | None = None
    tolerations: list[Toleration] = Field(default_factory=list)
    scheduling_gates: list[SchedulingGate] = Field(default_factory=list)
    resource_claims: list[Any] = Field(default_factory=list)  # DRA: only whether any is read
    host_network: StrictBool = False


PodPhaseName = Literal["Pending", "Running", "Succeeded", "Failed", "Unknown"]


class PodStatus(WireModel):
    phase: PodPhaseName = "Pending"
    nominated_node_name: str = ""


class Pod(WireModel):
    metadata: ObjectMeta
    spec: PodSpec
    status: PodStatus = PodStatus()


class Taint(WireModel):
    key: str = Field(min_length=1)
    value: str = ""
    effect: TaintEffect


class NodeSpec(WireModel):
    unschedulable: StrictBool = False
    taints: list[Taint] = Field(default_factory=list)


class NodeCondition(WireModel):
    type: str
    status: Literal["True", "False", "Unknown"]


class NodeStatus(WireModel):
    allocatable: dict[str, Quantity] = Field(default_factory=dict)
    conditions: list[NodeCondition] = Field(default_factory=list)


class Node(WireModel):
    metadata: ObjectMeta
    spec: NodeSpec = NodeSpec()
    status: NodeStatus = NodeStatus()


class NamedObject(WireModel):
    """An object of which kai reads only that it exists (a ConfigMap a pod requires)."""

    metadata: ObjectMeta


class PriorityClass(WireModel):
    metadata: ObjectMeta
    value: StrictInt
