"""`kai queues`: the queue tree, how each queue stands against its quota, and what waits in it.

The numbers are the ones the scheduler wrote and works with: quota and limit from the
Queue's spec (read by `kai.api.queues`, so in the engine's units: GPUs, millicores,
bytes; -1 unlimited); allocated, allocatedNonPreemptible and requested from the
Queue's status, which kai's scheduler writes for every queue as KAI's queue controller
does (sums over the queue's subtree); fairShare and deserved from the same status,
which kai adds (absent under KAI's own CRD, which prunes them, and then shown as not
known). What is pending is counted from the PodGroups and their pods: a PodGroup with
a pod waiting for a node, its scheduling condition's reason, summed up the tree as the
status totals are.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from kai.api.constants import NVIDIA_GPU_RESOURCE, default_priority_classes
from kai.api.errors import object_ref, validated
from kai.api.fields import Quantity, WireModel
from kai.api.podgroups import parse_pod_group
from kai.api.pods import annotated_pod_group_key
from kai.api.queues import declared_parent, parse_queue, queue_tree_errors
from kai.engine.model import UNLIMITED, PodPhase
from kai.engine.resources import RESOURCE_NAMES, ResourceName, Resources
from kai.inspect import units
from kai.inspect.lenient import field as field_at
from kai.inspect.lenient import key_of, parsed, read_pod, text

MEASURES = (
    "quota",
    "deserved",
    "fairShare",
    "allocated",
    "allocatedNonPreemptible",
    "requested",
    "limit",
)
"""What is known of each queue, per resource: spec (quota, limit) and status (the rest)."""
TABLE_MEASURES = ("deserved", "fairShare", "allocated", "requested", "limit")
_HEADERS = {
    "quota": "QUOTA",
    "deserved": "DESERVED",
    "fairShare": "FAIRSHARE",
    "allocated": "ALLOCATED",
    "allocatedNonPreemptible": "NONPREEMPTIBLE",
    "requested": "REQUESTED",
    "limit": "LIMIT",
}
_PREFIXES: Mapping[ResourceName, str] = {"gpu": "GPU", "cpu": "CPU", "memory": "MEM"}
UNSCHEDULABLE_CONDITION = "UnschedulableOnNodePool"


class _WrittenStatus(WireModel):
    """Queue status as the scheduler writes it; a list left out is not known (None), not 0."""

    allocated: dict[str, Quantity] | None = None
    allocated_non_preemptible: dict[str, Quantity] | None = None
    requested: dict[str, Quantity] | None = None
    fair_share: dict[str, Quantity] | None = None
    deserved: dict[str, Quantity] | None = None


class _QueueStatusOnly(WireModel):
    status: _WrittenStatus = _WrittenStatus()


@dataclass(frozen=True)
class Pending:
    """What waits in a queue (and below it): groups with a pod waiting for a node."""

    groups: int = 0
    pods: int = 0
    reasons: Mapping[str, int] = field(default_factory=dict)

    def __add__(self, other: Pending) -> Pending:
        return Pending(
            self.groups + other.groups,
            self.pods + other.pods,
            dict(Counter(self.reasons) + Counter(other.reasons)),
        )

    def document(self) -> dict[str, Any]:
        return {"podGroups": self.groups, "pods": self.pods, "reasons": dict(self.reasons)}


@dataclass(frozen=True)
class QueueSummary:
    name: str
    parent: str | None
    depth: int
    priority: int | None
    amounts: Mapping[str, Resources | None]
    """By measure (MEASURES); None where the object does not say (no status written yet)."""
    pending: Pending

    def document(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "parent": self.parent,
            "depth": self.depth,
            "priority": self.priority,
            **{m: _json(self.amounts.get(m)) for m in MEASURES},
            "pending": self.pending.document(),
        }


@dataclass(frozen=True)
class QueuesReport:
    queues: list[QueueSummary]
    """In tree order: each queue followed by its children, in name order."""
    problems: list[str]

    def document(self) -> dict[str, Any]:
        return {"queues": [q.document() for q in self.queues], "problems": self.problems}

    def rows(self, wide: bool = False) -> list[tuple[str, ...]]:
        resources: Sequence[ResourceName] = RESOURCE_NAMES if wide else ("gpu",)
        measures = MEASURES if wide else TABLE_MEASURES
        header = ["QUEUE"] + (["PRIORITY"] if wide else [])
        header += [f"{_PREFIXES[r]}-{_HEADERS[m]}" for r in resources for m in measures]
        header += ["PENDING-GROUPS", "PENDING-PODS"] + (["REASONS"] if wide else [])
        rows = [tuple(header)]
        for queue in self.queues:
            row = ["  " * queue.depth + queue.name]
            if wide:
                row.append(units.NOT_KNOWN if queue.priority is None else str(queue.priority))
            row += [
                units.resource_amount(r, queue.amounts.get(m)) for r in resources for m in measures
            ]
            row += [str(queue.pending.groups), str(queue.pending.pods)]
            if wide:
                reasons = sorted(queue.pending.reasons.items())
                row.append(",".join(f"{reason}={n}" for reason, n in reasons) or units.NOT_KNOWN)
            rows.append(tuple(row))
        return rows


def queue_amounts(
    manifest: Mapping[str, Any], problems: list[str]
) -> tuple[int | None, dict[str, Resources | None]]:
    """A Queue's priority and its amounts by measure, each part that cannot be read left
    None with its problem named."""
    amounts: dict[str, Resources | None] = dict.fromkeys(MEASURES)
    found: list[str] = []
    queue = parsed(lambda: parse_queue(manifest), found)
    if queue is not None:
        amounts["quota"] = Resources(*(queue.resource(r).quota for r in RESOURCE_NAMES))
        amounts["limit"] = Resources(*(queue.resource(r).limit for r in RESOURCE_NAMES))
    ref = object_ref("Queue", manifest, namespaced=False)
    written = parsed(lambda: validated(_QueueStatusOnly, ref, manifest).status, found)
    problems.extend(dict.fromkeys(found))  # the spec parser reads KAI's status fields too
    if written is not None:
        amounts["allocated"] = _resources(written.allocated)
        amounts["allocatedNonPreemptible"] = _resources(written.allocated_non_preemptible)
        amounts["requested"] = _resources(written.requested)
        amounts["fairShare"] = _resources(written.fair_share)
        amounts["deserved"] = _resources(written.deserved)
    return (queue.priority if queue is not None else None), amounts


def summarise_queues(
    queues: Sequence[Mapping[str, Any]],
    pod_groups: Sequence[Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]],
) -> QueuesReport:
    """Every queue in tree order with its amounts and what is pending below it."""
    problems: list[str] = []
    manifests = {key_of("Queue", m, namespaced=False): m for m in queues}
    parents = {name: declared_parent(m) for name, m in manifests.items()}
    problems += [str(error) for error in queue_tree_errors(parents)]
    own = _pending_by_queue(pod_groups, pods, problems)
    children: dict[str, list[str]] = {}
    for name in sorted(parents):
        parent = parents[name]
        if parent in parents:
            children.setdefault(parent, []).append(name)
    order: list[tuple[str, int]] = []
    subtree: dict[str, Pending] = {}

    def visit(name: str, depth: int) -> Pending:
        subtree[name] = Pending()  # seen: a parent cycle does not loop
        order.append((name, depth))
        total = own.get(name, Pending())
        for child in children.get(name, []):
            if child not in subtree:
                total += visit(child, depth + 1)
        subtree[name] = total
        return total

    for name in sorted(parents):
        if parents[name] not in parents:
            visit(name, 0)
    for name in sorted(parents):  # queues on a parent cycle: no root leads to them
        if name not in subtree:
            visit(name, 0)
    summaries = []
    for name, depth in order:
        priority, amounts = queue_amounts(manifests[name], problems)
        summaries.append(QueueSummary(name, parents[name], depth, priority, amounts, subtree[name]))
    return QueuesReport(summaries, problems)


def scheduling_reason(group: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """The reason, message and time of a PodGroup's scheduling condition, if it has one."""
    conditions = field_at(group, "status", "schedulingConditions")
    for condition in conditions if isinstance(conditions, list) else []:
        if not isinstance(condition, Mapping):
            continue
        if condition.get("type") != UNSCHEDULABLE_CONDITION or condition.get("status") == "False":
            continue
        reasons = condition.get("reasons")
        first = reasons[0] if isinstance(reasons, list) and reasons else {}
        first = first if isinstance(first, Mapping) else {}
        return (
            str(first.get("reason") or ""),
            str(first.get("message") or ""),
            str(condition.get("lastTransitionTime") or ""),
        )
    return None


def pending_pods_by_group(pods: Sequence[Mapping[str, Any]], problems: list[str]) -> Counter[str]:
    """Pods waiting for a node, by the key of the PodGroup they belong to.

    A pod kai cannot read is counted when it is on no node: the scheduler sets its
    whole group aside (`InvalidPod`), so it waits all the same.
    """
    waiting: Counter[str] = Counter()
    for manifest in pods:
        pod = read_pod(manifest, problems)
        if pod is None:
            key = annotated_pod_group_key(manifest)
            if key and not text(manifest, "spec", "nodeName"):
                waiting[key] += 1
            continue
        if pod.group and pod.phase is PodPhase.PENDING:
            waiting[pod.group] += 1
    return waiting


def _pending_by_queue(
    pod_groups: Sequence[Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]],
    problems: list[str],
) -> dict[str, Pending]:
    waiting = pending_pods_by_group(pods, problems)
    classes = default_priority_classes()
    result: dict[str, Pending] = {}
    for group in pod_groups:
        _check_group(group, classes, problems)
        count = waiting.get(key_of("PodGroup", group, namespaced=True), 0)
        if not count:
            continue
        verdict = scheduling_reason(group)
        reasons = {verdict[0] or "Unknown": 1} if verdict else {}
        queue = text(group, "spec", "queue")
        result[queue] = result.get(queue, Pending()) + Pending(1, count, reasons)
    return result


def _check_group(group: Mapping[str, Any], classes: Mapping[str, int], problems: list[str]) -> None:
    """A PodGroup the scheduler cannot read is set aside (`InvalidPodGroup`): say why."""
    parsed(lambda: parse_pod_group(group, classes), problems)


def _resources(resource_list: Mapping[str, Fraction] | None) -> Resources | None:
    """A status ResourceList (GPU devices, CPU cores, memory bytes) in engine units."""
    if resource_list is None:
        return None
    cpu = resource_list.get("cpu", Fraction(0))
    return Resources(
        resource_list.get(NVIDIA_GPU_RESOURCE, Fraction(0)),
        cpu if cpu == UNLIMITED else cpu * 1000,
        resource_list.get("memory", Fraction(0)),
    )


def _json(value: Resources | None) -> dict[str, float | int] | None:
    return None if value is None else value.to_json()
