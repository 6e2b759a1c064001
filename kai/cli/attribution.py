"""Which component of a live workload each of its pods plays (workload-definitions §5.3).

`kai workload describe TYPE/NAME` reads the pods the workload owns (the live adapter
walks their owner chains) and has to say, per component and instance, which pods
are there and in what phase. Ownership alone cannot say it: a PyTorchJob owns its
master and its workers alike. So each pod goes to the first pod-defining component,
in the definition's order, whose type selector it passes (the same test the grouper
uses); a component without a type selector takes every pod only when it is the
definition's one pod-defining component, as upstream's CLI does, since otherwise it
would swallow its siblings' pods. A multi-instance component then splits its pods
by their instance id. A pod no component claims is kept apart, so the totals never
lose it silently.

Pure: pods and definitions in, pod lists out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kai.grouping.context import GroupingInput
from kai.grouping.rules_definition import plays, pod_instance
from kai.workloads.definition import ComponentDefinition, WorkloadDefinition
from kai.workloads.objects import name_of
from kai.workloads.registry import DefinitionRegistry

Pod = Mapping[str, Any]
POD_PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")
"""Kubernetes' pod phases, in the order a reader expects them counted."""


class Attribution:
    """The workload's pods per (pod-defining component, instance id), and those no component
    claims; the instance id is "" for a component with a single instance."""

    def __init__(
        self, definition: WorkloadDefinition, pods: Iterable[Pod], registry: DefinitionRegistry
    ) -> None:
        self._definition = definition
        self._registry = registry
        self.pods = list(pods)
        self.claimed: dict[tuple[str, str], list[Pod]] = {}
        self.unattributed: list[Pod] = []
        pod_defining = [c for c in definition.components if c.defines_pods]
        for pod in self.pods:
            component = next((c for c in pod_defining if self._claims(c, pod, pod_defining)), None)
            if component is None:
                self.unattributed.append(pod)
                continue
            key = (component.name, self._instance_of(pod, component))
            self.claimed.setdefault(key, []).append(pod)

    def pods_of(self, component: ComponentDefinition, instance: str) -> list[Pod]:
        """The pods of one component instance; a logical component gathers its descendants',
        narrowed to its own instance when it has several."""
        if component.defines_pods:
            return list(self.claimed.get((component.name, instance), []))
        below = _descendants(self._definition, component.name)
        gathered = [
            pod for (name, _), pods in self.claimed.items() if name in below for pod in pods
        ]
        if component.instance_id_path is None:
            return gathered
        return [pod for pod in gathered if self._instance_of(pod, component) == instance]

    def _claims(
        self, component: ComponentDefinition, pod: Pod, pod_defining: Sequence[ComponentDefinition]
    ) -> bool:
        selector = component.pod_selector.type_selector if component.pod_selector else None
        if selector is None:
            return len(pod_defining) == 1
        return plays(GroupingInput(pod, (), self._registry), selector)

    def _instance_of(self, pod: Pod, component: ComponentDefinition) -> str:
        if component.instance_id_path is None:
            return ""
        return pod_instance(GroupingInput(pod, (), self._registry), component) or ""


def live_view(pods: Sequence[Pod]) -> dict[str, Any]:
    """What the pods of one component are doing: counts per phase, readiness, nodes, and each pod
    (name order, so two runs read the same)."""
    views = sorted((pod_view(pod) for pod in pods), key=lambda view: str(view["name"]))
    counts = Counter(str(view["phase"]) for view in views)
    phases = {phase: counts[phase] for phase in POD_PHASES if counts[phase]}
    phases.update(counts)  # a phase Kubernetes adds later still counts, after the known ones
    return {
        "current": len(views),
        "ready": sum(1 for view in views if view["ready"]),
        "phases": phases,
        "nodes": sorted({str(view["node"]) for view in views if view["node"]}),
        "pods": views,
    }


def pod_view(pod: Pod) -> dict[str, Any]:
    """One pod as describe shows it: phase, readiness, node, and why it is not ready."""
    status = pod.get("status") or {}
    spec = pod.get("spec") or {}
    ready = _condition(status, "Ready") == "True"
    view: dict[str, Any] = {
        "name": name_of(pod),
        "phase": str(status.get("phase") or "Unknown"),
        "ready": ready,
        "node": spec.get("nodeName") or None,
    }
    reason = None if ready else _not_ready_reason(status)
    if reason:
        view["reason"] = reason
    return view


def _descendants(definition: WorkloadDefinition, name: str) -> set[str]:
    found: set[str] = set()
    for child in definition.children_of(name):
        found |= {child.name, *_descendants(definition, child.name)}
    return found


def _condition(status: Mapping[str, Any], kind: str) -> str | None:
    for condition in status.get("conditions") or []:
        if isinstance(condition, Mapping) and condition.get("type") == kind:
            return str(condition.get("status"))
    return None


def _not_ready_reason(status: Mapping[str, Any]) -> str | None:
    """The scheduler's reason first (Unschedulable), then the pod's own (Evicted), then the
    Ready condition's (PodCompleted): the first a reader can act on."""
    conditions = [c for c in status.get("conditions") or [] if isinstance(c, Mapping)]
    for condition in conditions:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return str(condition.get("reason") or "") or None
    if status.get("reason"):
        return str(status["reason"])
    for condition in conditions:
        if condition.get("type") == "Ready" and condition.get("status") == "False":
            return str(condition.get("reason") or "") or None
    return None
