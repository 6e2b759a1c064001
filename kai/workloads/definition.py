"""The `run.ai/v1alpha1` Karta definition as typed, immutable values.

A definition describes one workload type: its component tree, where each
component's pod template is, how many replicas it has, how native status maps
to common states and how it is gang-scheduled (workload-definitions §3). The
loader (`kai.workloads.loader`) builds these from YAML and validates them; every
other module reads only these types, never the raw document.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

Origin = Literal["catalog", "cluster", "file"]

STATUS_ORDER: tuple[str, ...] = (
    "Resuming",
    "Suspending",
    "Suspended",
    "Running",
    "Failed",
    "Completed",
    "Initializing",
    "Degraded",
)
"""The normalised statuses in the canonical order used when one status must be chosen."""
UNDEFINED_STATUS = "Undefined"


@dataclass(frozen=True, slots=True)
class GVK:
    group: str
    version: str
    kind: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @classmethod
    def of(cls, api_version: str, kind: str) -> GVK:
        group, _, version = api_version.rpartition("/")
        return cls(group, version, kind)

    def __str__(self) -> str:
        return f"{self.api_version} {self.kind}"


@dataclass(frozen=True, slots=True)
class FragmentedPodSpec:
    """jq paths to pod fields scattered through the workload object (spec mode 3)."""

    scheduler_name: str | None = None
    labels: str | None = None
    annotations: str | None = None
    resources: str | None = None
    resource_claims: str | None = None
    pod_affinity: str | None = None
    node_affinity: str | None = None
    containers: str | None = None
    container: str | None = None
    priority_class_name: str | None = None
    image: str | None = None


@dataclass(frozen=True, slots=True)
class SpecDefinition:
    """Where a component's pods are described; exactly one mode is set (the loader checks)."""

    pod_template_spec_path: str | None = None
    pod_spec_path: str | None = None
    metadata_path: str | None = None
    fragmented: FragmentedPodSpec | None = None


@dataclass(frozen=True, slots=True)
class ScaleDefinition:
    replicas_path: str | None = None
    min_replicas_path: str | None = None
    max_replicas_path: str | None = None


@dataclass(frozen=True, slots=True)
class TypeSelector:
    """Whether a pod plays a component's role: `key_path` equals `value` (or exists); labels."""

    key_path: str | None = None
    value: Any = None
    has_value: bool = False
    match_labels: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class PodSelector:
    type_selector: TypeSelector | None = None
    instance_id_path: str | None = None
    replica_key_path: str | None = None


@dataclass(frozen=True, slots=True)
class ConditionMatch:
    type: str
    status: str | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class StatusMatcher:
    """All parts present must hold; a status matches when any of its matchers does."""

    by_phase: str | None = None
    by_conditions: tuple[ConditionMatch, ...] = ()
    by_expression: tuple[str, str] | None = None  # (jq expression, expected result as a string)


@dataclass(frozen=True, slots=True)
class StatusDefinition:
    phase_path: str | None = None
    conditions_path: str | None = None
    type_field: str = "type"
    status_field: str = "status"
    message_field: str = "message"
    reason_field: str = "reason"
    mappings: tuple[tuple[str, tuple[StatusMatcher, ...]], ...] = ()  # (status name, matchers)


@dataclass(frozen=True, slots=True)
class WriteAction:
    path: str
    value: Any


@dataclass(frozen=True, slots=True)
class SuspendDefinition:
    suspend_actions: tuple[WriteAction, ...]
    resume_actions: tuple[WriteAction, ...]


@dataclass(frozen=True, slots=True)
class ComponentDefinition:
    name: str
    kind: GVK | None = None  # None: a logical grouping component
    owner: str | None = None  # name of the parent component; None for the root
    spec: SpecDefinition | None = None
    scale: ScaleDefinition | None = None
    status: StatusDefinition | None = None
    suspend: SuspendDefinition | None = None
    instance_id_path: str | None = None
    pod_selector: PodSelector | None = None

    @property
    def defines_pods(self) -> bool:
        return self.spec is not None


@dataclass(frozen=True, slots=True)
class Topology:
    topology: str
    required_level: str | None = None
    preferred_level: str | None = None


@dataclass(frozen=True, slots=True)
class GangMember:
    component: str
    group_by_key_paths: tuple[str, ...] = ()
    filters: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class AlphaPodGroup:
    """One entry of the deprecated `podGroups[]` form."""

    name: str
    members: tuple[GangMember, ...]


@dataclass(frozen=True, slots=True)
class SubGroupInstruction:
    component: str
    topology: Topology | None = None


@dataclass(frozen=True, slots=True)
class PodGroupInstruction:
    """The current `podGroup` form."""

    name: str
    sub_groups: tuple[SubGroupInstruction, ...] = ()
    topology: Topology | None = None


@dataclass(frozen=True, slots=True)
class GangScheduling:
    pod_groups: tuple[AlphaPodGroup, ...] = ()
    pod_group: PodGroupInstruction | None = None

    @property
    def is_empty(self) -> bool:
        return not self.pod_groups and self.pod_group is None


@dataclass(frozen=True, slots=True)
class Problem:
    """Something wrong with a definition, at a dotted field path of the document."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


@dataclass(frozen=True)
class WorkloadDefinition:
    name: str
    root: ComponentDefinition
    children: tuple[ComponentDefinition, ...] = ()
    additional_child_kinds: tuple[GVK, ...] = ()
    gang: GangScheduling = GangScheduling()
    origin: Origin = "catalog"
    document: dict[str, Any] = field(default_factory=dict, compare=False)
    """The definition as written, for `definitions -o yaml`."""
    warnings: tuple[Problem, ...] = field(default=(), compare=False)
    """What the loader accepted but ignores (keys upstream dropped from the format)."""

    @property
    def gvk(self) -> GVK:
        assert self.root.kind is not None  # the loader rejects a root without a kind
        return self.root.kind

    @property
    def components(self) -> tuple[ComponentDefinition, ...]:
        return (self.root, *self.children)

    def component(self, name: str) -> ComponentDefinition:
        for component in self.components:
            if component.name == name:
                return component
        raise KeyError(f"definition {self.name} has no component {name!r}")

    def children_of(self, name: str) -> tuple[ComponentDefinition, ...]:
        return tuple(child for child in self.children if child.owner == name)

    def ancestors(self, name: str) -> Iterator[ComponentDefinition]:
        """The component itself, then its parent, up to the root (the loader rules out cycles)."""
        current: ComponentDefinition | None = self.component(name)
        while current is not None:
            yield current
            current = self.component(current.owner) if current.owner else None

    def leaves(self) -> tuple[ComponentDefinition, ...]:
        return tuple(c for c in self.components if not self.children_of(c.name))

    def has_scale(self) -> bool:
        return any(component.scale is not None for component in self.components)
