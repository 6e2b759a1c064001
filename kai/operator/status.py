"""Queue and PodGroup status, derived from the pods after each cycle and written only on change.

Queue status (allocated, allocatedNonPreemptible, requested, and the fair share the
engine computed) is recomputed from the pods every cycle, never accumulated, so it
cannot drift from what runs (KAI#1048). PodGroup status carries the engine's
decision: an `UnschedulableOnNodePool` scheduling condition with the reason and
message while the group waits, none once it is scheduled, and the group's own
resource totals. A status equal to what the cache shows is not sent; a changed
unschedulable reason also raises an `Unschedulable` event on the group and its
pending pods.

Resource lists use Kubernetes quantities: GPUs as a decimal count of devices,
CPU in millicores (`m`), memory in megabytes (`M`), as KAI reports them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any

import structlog

from kai.api.constants import NVIDIA_GPU_RESOURCE
from kai.engine.accounting import accounting_device_memory
from kai.engine.cycle import GroupDecision
from kai.engine.fairshare import QueueShare
from kai.engine.gangs import pod_resources
from kai.engine.model import UNLIMITED, PodPhase, Snapshot
from kai.engine.resources import Resources
from kai.kube.client import Kube
from kai.kube.writes import run_bounded
from kai.operator.cache import ClusterView
from kai.operator.events import UNSCHEDULABLE, WARNING, EventRecorder, InvolvedObject

log = structlog.get_logger(__name__)

UNSCHEDULABLE_ON_NODE_POOL = "UnschedulableOnNodePool"
DEFAULT_NODE_POOL = "default"
_MB = 10**6


def resource_list(value: Resources) -> dict[str, str]:
    """A ResourceList of quantities: GPU devices, CPU millicores, memory megabytes."""
    return {
        NVIDIA_GPU_RESOURCE: _decimal(value.gpu),
        "cpu": f"{_decimal(value.cpu)}m",
        "memory": f"{_decimal(value.memory / _MB)}M",
    }


def _decimal(amount: Fraction) -> str:
    if amount == UNLIMITED:
        return "-1"
    if amount.denominator == 1:
        return str(amount.numerator)
    return format(round(float(amount), 6), "g")


def queue_status(share: QueueShare) -> dict[str, Any]:
    return {
        "allocated": resource_list(share.allocated),
        "allocatedNonPreemptible": resource_list(share.allocated_non_preemptible),
        "requested": resource_list(share.request),
        "fairShare": resource_list(share.fair_share),
        "deserved": resource_list(share.deserved),
    }


class StatusWriter:
    def __init__(self, kube: Kube, events: EventRecorder, concurrency: int) -> None:
        self._kube = kube
        self._events = events
        self._concurrency = concurrency
        self._written: dict[str, Mapping[str, Any]] = {}  # object -> the status last written
        self.writes = 0

    def _differs(self, what: str, current: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
        """Whether `wanted` must be written: the cache shows otherwise, or this writer last
        wrote otherwise. The cache may not show that last write yet (a watch that lags or
        was cut), and would hide that a change back to what it shows is still owed."""
        written = self._written.get(what)
        return (written is not None and written != wanted) or any(
            current.get(field, []) != value for field, value in wanted.items()
        )

    async def publish(
        self,
        view: ClusterView,
        after: Snapshot,
        shares: Mapping[str, QueueShare],
        decisions: Mapping[str, GroupDecision],
        now: datetime,
    ) -> None:
        writes: list[tuple[str, Any]] = []
        wants: dict[str, Mapping[str, Any]] = {}
        for name, share in shares.items():
            queue = view.queues.get(name)
            if queue is None:
                continue
            wanted = queue_status(share)
            what = f"Queue {name}"
            if self._differs(what, queue.get("status") or {}, wanted):
                writes.append((what, self._patcher(_queue_path(name), wanted)))
                wants[what] = wanted
        group_totals = _group_resources(after)
        pending_pods = _pending_pods_by_group(after)
        for key, decision in decisions.items():
            group = view.pod_groups.get(key)
            if group is None:
                continue
            current = group.get("status") or {}
            conditions = _scheduling_conditions(current, decision, now)
            allocated, allocated_np, requested = group_totals.get(key, (Resources(),) * 3)
            wanted = {
                "schedulingConditions": conditions,
                "resourcesStatus": {
                    "allocated": resource_list(allocated),
                    "allocatedNonPreemptible": resource_list(allocated_np),
                    "requested": resource_list(requested),
                },
            }
            what = f"PodGroup {key}"
            if self._differs(what, current, wanted):
                writes.append((what, self._patcher(pod_group_path(group), wanted)))
                wants[what] = wanted
            if conditions and conditions != current.get("schedulingConditions", []):
                self._announce(group, decision, pending_pods.get(key, []))
        self.writes += len(writes)
        failures = await run_bounded(writes, self._concurrency)
        for what, status in wants.items():
            if what in failures:
                # Not retried here: the next cycle computes the status again and writes it.
                self._written.pop(what, None)
                log.warning("status not written", object=what, error=str(failures[what]))
            else:
                self._written[what] = status
        present = {f"Queue {name}" for name in view.queues} | {
            f"PodGroup {key}" for key in view.pod_groups
        }
        for what in [w for w in self._written if w not in present]:
            del self._written[what]

    def _patcher(self, path: str, status: Mapping[str, Any]) -> Any:
        return lambda: self._kube.merge_patch(f"{path}/status", {"status": status})

    def _announce(
        self, group: Mapping[str, Any], decision: GroupDecision, pods: list[InvolvedObject]
    ) -> None:
        message = f"{decision.reason}: {decision.message}" if decision.reason else decision.message
        about = InvolvedObject.of(group)
        self._events.record(about, WARNING, UNSCHEDULABLE, message)
        for pod in pods:
            self._events.record(pod, WARNING, UNSCHEDULABLE, message)


def _scheduling_conditions(
    current: Mapping[str, Any], decision: GroupDecision, now: datetime
) -> list[dict[str, Any]]:
    if decision.scheduled or not decision.reason:
        return []
    reasons = [{"reason": decision.reason, "message": decision.message}]
    previous = current.get("schedulingConditions") or []
    if previous and previous[0].get("reasons") == reasons:
        return list(previous)
    last_id = int(previous[0].get("transitionID") or 0) if previous else 0
    return [
        {
            "type": UNSCHEDULABLE_ON_NODE_POOL,
            "nodePool": DEFAULT_NODE_POOL,
            "status": "True",
            "reasons": reasons,
            "transitionID": str(last_id + 1),
            "lastTransitionTime": now.astimezone(UTC).isoformat().replace("+00:00", "Z"),
        }
    ]


def _group_resources(after: Snapshot) -> dict[str, tuple[Resources, Resources, Resources]]:
    nodes = {node.name: node for node in after.nodes}
    preemptible = {group.key: group.preemptible for group in after.pod_groups}
    default_memory = accounting_device_memory(after)
    totals: dict[str, list[Resources]] = defaultdict(lambda: [Resources()] * 3)
    for pod in after.pods:
        if pod.group not in preemptible or pod.phase not in (PodPhase.BOUND, PodPhase.PENDING):
            continue
        node = nodes.get(pod.node or "")
        amount = pod_resources(pod, node.gpu_memory_mib if node else default_memory)
        entry = totals[pod.group]
        if pod.phase is PodPhase.BOUND:
            entry[0] = entry[0] + amount
            if not preemptible[pod.group]:
                entry[1] = entry[1] + amount
        entry[2] = entry[2] + amount
    return {key: (a, b, c) for key, (a, b, c) in totals.items()}


def _pending_pods_by_group(after: Snapshot) -> dict[str, list[InvolvedObject]]:
    result: dict[str, list[InvolvedObject]] = defaultdict(list)
    for pod in after.pods:
        if pod.phase is PodPhase.PENDING and pod.scheduler_is_ours:
            result[pod.group].append(InvolvedObject("v1", "Pod", pod.namespace, pod.name, pod.uid))
    return result


def _queue_path(name: str) -> str:
    return f"/apis/scheduling.run.ai/v2/queues/{name}"


def pod_group_path(group: Mapping[str, Any]) -> str:
    metadata = group.get("metadata") or {}
    return (
        f"/apis/scheduling.run.ai/v2alpha2/namespaces/{metadata.get('namespace')}"
        f"/podgroups/{metadata.get('name')}"
    )
