"""Queue and PodGroup status, derived from the pods after each cycle and written only on change.

The resource totals mean what KAI's controllers write (pkg/podgroupcontroller and
pkg/queuecontroller): a PodGroup's `requested` is what its pods in phase Pending or
Running ask for (scheduling-gated and being-deleted ones included), its `allocated`
what its bound, unfinished pods hold (being-deleted ones included while they run),
and `allocatedNonPreemptible` the same as `allocated` for a non-preemptible group. A
Queue's three totals are the sums over its PodGroups and, recursively, its child
queues; `childQueues` names the queues whose `spec.parentQueue` is this queue, and
is absent for a queue with none. These are recomputed from the pods every cycle,
never accumulated, so they cannot drift from what runs (KAI#1048). They are not the
engine's accounting: fair share and limits leave pods being deleted and gated pods
out, as KAI's scheduler does (kai.engine.accounting).

kai also writes `fairShare` and `deserved` (the engine's division; KAI has them only
as metrics), for the queues that take part in it. KAI's CRD does not declare them and
its API server prunes them; a writer that compared them with the cache would then
write every queue every cycle, so a pruned extension field this writer has sent
counts as written.

KAI's queue controller writes no Queue conditions (the API declares `Orphan` and
`OverQuota`; nothing sets them), so kai writes none either, and leaves any that
another writer set: a status write is a merge patch of kai's own fields.

PodGroup status also carries the engine's decision: an `UnschedulableOnNodePool`
scheduling condition with the reason and message while the group waits, none once
it is scheduled; its `nodePool` names the shard that decided (`default` for the shard
of unlabelled objects, as KAI). A status equal to what the cache shows is not sent; a changed
unschedulable reason also raises an `Unschedulable` event on the group and its
pending pods.

Resource lists use Kubernetes quantities: GPUs as a decimal count of devices,
CPU in millicores (`m`), memory in megabytes (`M`), exact (bytes when not whole
megabytes).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any

import structlog

from kai.api.constants import NVIDIA_GPU_RESOURCE
from kai.engine.accounting import accounting_device_memory
from kai.engine.fairshare import QueueShare
from kai.engine.gangs import pod_resources
from kai.engine.group_decision import GroupDecision
from kai.engine.model import UNLIMITED, PodPhase, Snapshot
from kai.engine.resources import Resources, ResourceSum
from kai.kube.client import Kube
from kai.kube.writes import run_bounded
from kai.operator.cache import ClusterView
from kai.operator.events import UNSCHEDULABLE, WARNING, EventRecorder, InvolvedObject

log = structlog.get_logger(__name__)

UNSCHEDULABLE_ON_NODE_POOL = "UnschedulableOnNodePool"
_MB = 10**6


EXTENSION_FIELDS = ("fairShare", "deserved")
"""Queue status fields KAI's Queue CRD does not declare (its API server prunes them)."""


def resource_list(value: Resources) -> dict[str, str]:
    """A ResourceList of quantities: GPU devices, CPU millicores, memory megabytes."""
    return {
        NVIDIA_GPU_RESOURCE: _decimal(value.gpu),
        "cpu": f"{_decimal(value.cpu)}m",
        "memory": _memory(value.memory),
    }


def _memory(amount: Fraction) -> str:
    """Megabytes when whole, else bytes: an exact quantity (2Gi is 2147483648, not 2147.48M)."""
    megabytes = amount / _MB
    if megabytes.denominator == 1:
        return f"{megabytes.numerator}M"
    return _decimal(amount)


def _decimal(amount: Fraction) -> str:
    if amount == UNLIMITED:
        return "-1"
    if amount.denominator == 1:
        return str(amount.numerator)
    return format(round(float(amount), 6), "g")


@dataclass(frozen=True, slots=True)
class StatusTotals:
    """The resource totals of a PodGroup's or a Queue's status, as KAI's controllers sum them."""

    allocated: Resources = field(default_factory=Resources)
    allocated_non_preemptible: Resources = field(default_factory=Resources)
    requested: Resources = field(default_factory=Resources)

    def __add__(self, other: StatusTotals) -> StatusTotals:
        return StatusTotals(
            self.allocated + other.allocated,
            self.allocated_non_preemptible + other.allocated_non_preemptible,
            self.requested + other.requested,
        )

    def resources_status(self) -> dict[str, dict[str, str]]:
        return {
            "allocated": resource_list(self.allocated),
            "allocatedNonPreemptible": resource_list(self.allocated_non_preemptible),
            "requested": resource_list(self.requested),
        }


_NOTHING = Resources()


class _TotalsSum:
    """StatusTotals added up exactly and fast, a `ResourceSum` per total: each status pass
    sums every pod of the cluster into its group and every group into its queue, and
    adding `Fraction`s one by one was a sixth of the live scheduler's time in a burst."""

    __slots__ = ("allocated", "allocated_non_preemptible", "requested")

    def __init__(self) -> None:
        self.allocated = ResourceSum()
        self.allocated_non_preemptible = ResourceSum()
        self.requested = ResourceSum()

    def add(self, totals: StatusTotals) -> None:
        self.allocated.add(totals.allocated)
        self.allocated_non_preemptible.add(totals.allocated_non_preemptible)
        self.requested.add(totals.requested)

    def total(self) -> StatusTotals:
        return StatusTotals(
            self.allocated.total(), self.allocated_non_preemptible.total(), self.requested.total()
        )


def group_totals(after: Snapshot) -> dict[str, StatusTotals]:
    """Each PodGroup's totals as KAI's pod-group controller counts its pods (pod.go):
    requested by every pod in phase Pending or Running, allocated by those on a node.

    A group of one pod (every plain pod's) takes its pod's amount as it is: summing it
    made three exact sums and nine `Fraction`s per group, a tenth of the live
    scheduler's time in a burst of plain pods."""
    nodes = {node.name: node for node in after.nodes}
    preemptible = {group.key: group.preemptible for group in after.pod_groups}
    default_memory = accounting_device_memory(after)
    alone: dict[str, StatusTotals] = {}  # the group's one pod so far
    sums: dict[str, _TotalsSum] = {}
    for pod in after.pods:
        if pod.group not in preemptible or pod.phase in (PodPhase.SUCCEEDED, PodPhase.FAILED):
            continue
        node = nodes.get(pod.node or "")
        amount = pod_resources(pod, node.gpu_memory_mib if node else default_memory)
        # Bound, or being deleted while it still runs on its node: KAI's pod phase is
        # Running (or Pending with PodScheduled) either way.
        on_node = pod.phase is PodPhase.BOUND or (
            pod.phase is PodPhase.RELEASING and pod.node is not None
        )
        allocated = amount if on_node else _NOTHING
        totals = StatusTotals(allocated, _NOTHING if preemptible[pod.group] else allocated, amount)
        group = sums.get(pod.group)
        if group is None:
            first = alone.pop(pod.group, None)
            if first is None:
                alone[pod.group] = totals
                continue
            group = sums[pod.group] = _TotalsSum()
            group.add(first)
        group.add(totals)
    return {**alone, **{key: group.total() for key, group in sums.items()}}


def queue_statuses(
    queues: Iterable[Mapping[str, Any]],
    groups: Mapping[str, StatusTotals],
    group_queues: Mapping[str, str],
    shares: Mapping[str, QueueShare],
) -> dict[str, dict[str, Any]]:
    """The status of every Queue object, as KAI's queue controller writes it, plus the
    engine's fair share for the queues that take part in its division.

    `groups` are PodGroup totals by group key and `group_queues` each group's queue.
    A queue's totals are its PodGroups' and its children's (resource_updater.go);
    `childQueues` lists the queues naming it as `spec.parentQueue`
    (childqueues_updater.go) in name order. KAI's order is its informer index's, which
    is unordered; name order is one of its orders and keeps a status that has not
    changed equal to the one written. A queue in a parent cycle (the admission
    webhook refuses one) is counted once.
    """
    parents: dict[str, str] = {}
    for manifest in queues:
        name = str((manifest.get("metadata") or {}).get("name") or "")
        if name:
            parents[name] = str((manifest.get("spec") or {}).get("parentQueue") or "")
    children: dict[str, list[str]] = defaultdict(list)
    for name, parent in sorted(parents.items()):
        if parent:
            children[parent].append(name)
    sums: dict[str, _TotalsSum] = defaultdict(_TotalsSum)
    for key, totals in groups.items():
        sums[group_queues.get(key, "")].add(totals)
    own = {name: queue.total() for name, queue in sums.items()}

    def subtree(name: str, seen: set[str]) -> StatusTotals:
        seen.add(name)
        total = own.get(name, StatusTotals())
        for child in children.get(name, []):
            if child not in seen:
                total += subtree(child, seen)
        return total

    statuses: dict[str, dict[str, Any]] = {}
    for name in parents:
        status: dict[str, Any] = subtree(name, set()).resources_status()
        status["childQueues"] = children.get(name) or None  # None: removed by the merge patch
        share = shares.get(name)
        status["fairShare"] = resource_list(share.fair_share) if share else None
        status["deserved"] = resource_list(share.deserved) if share else None
        statuses[name] = status
    return statuses


class StatusWriter:
    def __init__(
        self, kube: Kube, events: EventRecorder, concurrency: int, node_pool: str = "default"
    ) -> None:
        self._kube = kube
        self._node_pool = node_pool  # the shard's name, in the conditions' `nodePool`
        self._events = events
        self._concurrency = concurrency
        self._written: dict[str, Mapping[str, Any]] = {}  # object -> the status last written
        self.writes = 0

    @property
    def written(self) -> frozenset[str]:
        """The objects ("Queue q", "PodGroup ns/name") this writer has written status for."""
        return frozenset(self._written)

    def _differs(self, what: str, current: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
        """Whether `wanted` must be written: the cache shows otherwise, or this writer last
        wrote otherwise. The cache may not show that last write yet (a watch that lags or
        was cut), and would hide that a change back to what it shows is still owed.

        A field wanted as None (removed) or empty matches one the cache does not show.
        An extension field the cache does not show, once this writer has written it, was
        pruned by a CRD that does not declare it (KAI's own) and is not sent again."""
        written = self._written.get(what)
        if written is not None and written != wanted:
            return True
        for name, value in wanted.items():
            shown = current.get(name)
            if shown == value or (_empty(shown) and _empty(value)):
                continue
            if name in EXTENSION_FIELDS and shown is None and written is not None:
                continue
            return True
        return False

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
        totals = group_totals(after)
        group_queues = {group.key: group.queue for group in after.pod_groups}
        queues = {
            str((queue.get("metadata") or {}).get("name") or ""): queue
            for queue in view.queues.values()
        }
        for name, wanted in queue_statuses(queues.values(), totals, group_queues, shares).items():
            what = f"Queue {name}"
            if self._differs(what, queues[name].get("status") or {}, wanted):
                writes.append((what, self._patcher(_queue_path(name), wanted)))
                wants[what] = wanted
        pending_pods = _pending_pods_by_group(after)
        for key, decision in decisions.items():
            group = view.pod_groups.get(key)
            if group is None:
                continue
            current = group.get("status") or {}
            conditions = _scheduling_conditions(current, decision, now, self._node_pool)
            wanted = {
                "schedulingConditions": conditions,
                "resourcesStatus": totals.get(key, StatusTotals()).resources_status(),
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
    current: Mapping[str, Any], decision: GroupDecision, now: datetime, node_pool: str
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
            "nodePool": node_pool,
            "status": "True",
            "reasons": reasons,
            "transitionID": str(last_id + 1),
            "lastTransitionTime": now.astimezone(UTC).isoformat().replace("+00:00", "Z"),
        }
    ]


def _empty(value: Any) -> bool:
    return value is None or value in ([], {})


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
