"""Queue and PodGroup status, derived from the pods after each cycle and written only on change.

The resource totals mean what KAI's controllers write (pkg/podgroupcontroller and
pkg/queuecontroller): a PodGroup's `requested` is what its pods in phase Pending or
Running ask for (scheduling-gated and being-deleted ones included), its `allocated`
what its bound, unfinished pods hold (being-deleted ones included while they run),
and `allocatedNonPreemptible` the same as `allocated` for a non-preemptible group. A
Queue's three totals are the sums over its PodGroups and, recursively, its child
queues; `childQueues` names the queues whose `spec.parentQueue` is this queue, and
is absent for a queue with none. These are derived from the pods of each cycle's
snapshot, never accumulated from events, so they cannot drift from what runs
(KAI#1048): a group's total is summed again from its pods whenever one of them
changed (`kai.operator.status_totals`), exactly, and equals the total summed from
every pod (a test holds the two equal). They are not the
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
scheduling condition with the reason and message while the group waits, or while pods
beyond the minimum of a group that runs wait (as KAI records a job's pending pods), none
once all are scheduled; its `nodePool` names the shard that decided (`default` for the shard
of unlabelled objects, as KAI). A status equal to what the cache shows is not sent; a changed
unschedulable reason also raises an `Unschedulable` event on the group and its
pending pods. A pass told which decisions the engine made anew since the decisions the
last pass read (`kai.engine.decision_changes`) looks only at those groups, the groups
whose object or totals changed, and those the last pass did not settle: a cycle that
decides one group among 8,000 reads a handful (a test holds it to the writes of a pass
that reads everything).

Resource lists use Kubernetes quantities: GPUs as a decimal count of devices,
CPU in millicores (`m`), memory in megabytes (`M`), exact (bytes when not whole
megabytes).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

import structlog

from kai.api.changes import StoreChanges
from kai.engine.decision_changes import NO_ACCOUNT, DecisionChanges
from kai.engine.fairshare import QueueShare
from kai.engine.group_decision import GroupDecision
from kai.engine.model import PodPhase, Snapshot
from kai.kube.client import Kube
from kai.kube.writes import run_bounded
from kai.operator.cache import ClusterView
from kai.operator.events import UNSCHEDULABLE, WARNING, EventRecorder, InvolvedObject
from kai.operator.status_totals import KeptTotals, StatusTotals, resource_list

log = structlog.get_logger(__name__)

UNSCHEDULABLE_ON_NODE_POOL = "UnschedulableOnNodePool"


EXTENSION_FIELDS = ("fairShare", "deserved")
"""Queue status fields KAI's Queue CRD does not declare (its API server prunes them)."""


def queue_statuses(
    queues: Iterable[Mapping[str, Any]],
    own: Mapping[str, StatusTotals],
    shares: Mapping[str, QueueShare],
) -> dict[str, dict[str, Any]]:
    """The status of every Queue object, as KAI's queue controller writes it, plus the
    engine's fair share for the queues that take part in its division.

    `own` are each queue's own totals, the sums over its PodGroups (`KeptTotals`).
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
        self._totals = KeptTotals()
        # Group key -> the PodGroup object and decision of the last pass that found its
        # status as wanted: while neither changes, nor its totals, it is not worked out
        # again (most of a busy cluster's groups, every pass).
        self._settled: dict[str, tuple[Mapping[str, Any], GroupDecision]] = {}
        # The groups the last pass looked at and did not settle (written, or a write that
        # failed), and the decisions it read: a pass on the next cycle's decisions, told
        # which of them are new (`DecisionChanges`), looks only at those, these and the
        # groups whose object or totals changed; every other group is settled as it was.
        self._unsettled: set[str] = set()
        self._read: Mapping[str, GroupDecision] | None = None
        # The Queues and PodGroups that came or went: what is kept of those gone is forgotten.
        self._queue_changes = StoreChanges()
        self._group_changes = StoreChanges()
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
        changes: DecisionChanges = NO_ACCOUNT,
    ) -> None:
        """`changes`: the engine's account of which `decisions` are new since the cycle
        before; a pass on the decisions that cycle's pass read looks only at those."""
        writes: list[tuple[str, Any]] = []
        wants: dict[str, Mapping[str, Any]] = {}
        recounted = self._totals.update(after)
        for key in recounted:
            self._settled.pop(key, None)
        totals = self._totals.groups
        replaced, gone = self._group_changes.since_last(view.pod_groups)
        for key in gone:
            self._settled.pop(key, None)
            self._written.pop(f"PodGroup {key}", None)
        queues = {
            str((queue.get("metadata") or {}).get("name") or ""): queue
            for queue in view.queues.values()
        }
        for name, wanted in queue_statuses(queues.values(), self._totals.queues(), shares).items():
            what = f"Queue {name}"
            if self._differs(what, queues[name].get("status") or {}, wanted):
                writes.append((what, self._patcher(_queue_path(name), wanted)))
                wants[what] = wanted
        announced: list[tuple[Mapping[str, Any], GroupDecision]] = []
        settled, unsettled = self._settled, self._unsettled
        told = changes.keys_since(self._read)
        self._read = decisions
        if told is None:
            unsettled.clear()
            looked_at: Iterable[str] = decisions
        else:
            looked_at = sorted({*told, *replaced, *recounted, *unsettled})
        for key in looked_at:
            decision = decisions.get(key)
            group = view.pod_groups.get(key)
            if decision is None or group is None:
                unsettled.discard(key)  # a group that appears is among those `replaced`
                continue
            kept = settled.get(key)
            if (
                kept is not None
                and kept[0] is group
                and (kept[1] is decision or kept[1] == decision)
            ):
                unsettled.discard(key)
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
                settled.pop(key, None)
                unsettled.add(key)
            else:
                settled[key] = (group, decision)
                unsettled.discard(key)
            if conditions and conditions != current.get("schedulingConditions", []):
                announced.append((group, decision))
        if announced:
            pending_pods = _pending_pods_by_group(after)
            for group, decision in announced:
                self._announce(group, decision, pending_pods.get(_key(group), []))
        self.writes += len(writes)
        failures = await run_bounded(writes, self._concurrency)
        for what, status in wants.items():
            if what in failures:
                # Not retried here: the next cycle computes the status again and writes it.
                self._written.pop(what, None)
                log.warning("status not written", object=what, error=str(failures[what]))
            else:
                self._written[what] = status
        for name in self._queue_changes.since_last(view.queues)[1]:
            self._written.pop(f"Queue {name}", None)

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
    if not decision.reason:  # a group that runs has one while pods beyond its minimum wait
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


def _key(group: Mapping[str, Any]) -> str:
    metadata = group.get("metadata") or {}
    return f"{metadata.get('namespace')}/{metadata.get('name')}"


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
