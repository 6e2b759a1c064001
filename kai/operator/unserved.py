"""Pods of a node pool that no scheduler serves are told so, not left waiting in silence.

A pool's shard sees only its pool and the default shard only unlabelled objects, so
a pod labelled with a pool nobody runs a scheduler for would wait for ever with
nothing saying why (KAI#1045, #1112). No shard can know which pools *should* have a
scheduler, but every running shard holds a Lease named after its pool in the
scheduler's namespace (`kai-scheduler-POOL`): that is the evidence used. The default
shard, and only it (so one writer reports), looks at the Lease of each pool that has
pending `kai-scheduler` pods; when it is absent, or has not been renewed for
`SERVED_GRACE_SECONDS` (longer than a takeover takes), each of those pods gets one
Warning event `NoSchedulerForNodePool` naming the pool and the Lease, again only
after its pool was served in between. No status is written: a PodGroup of the pool
belongs to the pool's shard, which may start at any moment and must not find a
status another scheduler keeps rewriting.

A pod's pool is its PodGroup's label once it has one, else its own label (KAI's pod
grouper copies it onto the group).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import structlog

from kai.api.pods import annotated_pod_group_key, waits_for_scheduler
from kai.api.shards import Shard
from kai.kube.client import ApiError, Kube
from kai.operator.cache import ClusterView
from kai.operator.events import WARNING, EventRecorder, InvolvedObject

log = structlog.get_logger(__name__)

NO_SCHEDULER_FOR_NODE_POOL = "NoSchedulerForNodePool"
SERVED_GRACE_SECONDS = 30.0
"""A Lease renewed this recently (or within its own duration, if longer) serves its pool."""
_NOT_FOUND = 404

Manifest = Mapping[str, Any]


def pending_by_pool(
    shard: Shard, pods: Mapping[str, Manifest], pod_groups: Mapping[str, Manifest]
) -> dict[str, list[Manifest]]:
    """Pending `kai-scheduler` pods of any pool (not the default shard's), by pool."""
    result: dict[str, list[Manifest]] = defaultdict(list)
    for pod in pods.values():
        if not waits_for_scheduler(pod):
            continue
        group = pod_groups.get(annotated_pod_group_key(pod) or "")
        pool = shard.pool_of(group if group is not None else pod)
        if pool is not None:
            result[pool].append(pod)
    return dict(result)


def lease_serves(lease: Manifest | None, now: datetime) -> bool:
    """Whether a shard's Lease shows a scheduler: renewed within the grace (or its duration)."""
    spec = (lease or {}).get("spec") or {}
    renewed = spec.get("renewTime")
    if not renewed:
        return False
    try:
        at = datetime.fromisoformat(str(renewed).replace("Z", "+00:00"))
    except ValueError:
        return True  # unreadable: say nothing rather than something wrong
    duration = float(spec.get("leaseDurationSeconds") or 0)
    return now.astimezone(UTC) - at < timedelta(seconds=max(duration, SERVED_GRACE_SECONDS))


class UnservedPools:
    """The default shard's report of pending pods whose pool has no live scheduler."""

    def __init__(
        self, kube: Kube, events: EventRecorder, namespace: str, lease_base: str, shard: Shard
    ) -> None:
        self._kube = kube
        self._events = events
        self._namespace = namespace
        self._lease_base = lease_base
        self._shard = shard
        self._reported: set[str] = set()  # pod uids told, while their pool stays unserved
        self.waits_on_leases = False
        """The last report found pending pods of a pool whose Lease lives: when it runs out
        they are unserved, and no watch event says so (the loop keeps cycling)."""

    async def report(self, whole: ClusterView, now: datetime) -> None:
        """Record one event per newly unserved pod; they go out with the cycle's events."""
        unserved_now: set[str] = set()
        self.waits_on_leases = False
        for pool, pods in sorted(
            pending_by_pool(self._shard, whole.pods, whole.pod_groups).items()
        ):
            lease = Shard(pool, self._shard.label_key).lease_name(self._lease_base)
            try:
                served = lease_serves(await self._lease(lease), now)
            except ApiError as error:  # no news: keep what was told, tell nothing new
                log.warning("node pool lease not readable", lease=lease, error=str(error))
                unserved_now.update(_uid(pod) for pod in pods if _uid(pod) in self._reported)
                self.waits_on_leases = True
                continue
            if served:
                self.waits_on_leases = True
                continue
            message = (
                f"node pool {pool!r} ({self._shard.label_key}={pool}) has no kai scheduler: "
                f"no live Lease {self._namespace}/{lease}; run `kai run --node-pool {pool}` "
                f"(Helm: scheduler.nodePools) or change the label"
            )
            for pod in pods:
                uid = _uid(pod)
                unserved_now.add(uid)
                if uid not in self._reported:
                    self._events.record(
                        InvolvedObject.of(pod), WARNING, NO_SCHEDULER_FOR_NODE_POOL, message
                    )
        self._reported = unserved_now

    async def _lease(self, name: str) -> Manifest | None:
        path = f"/apis/coordination.k8s.io/v1/namespaces/{self._namespace}/leases/{name}"
        try:
            return await self._kube.get(path)
        except ApiError as error:
            if error.status == _NOT_FOUND:
                return None
            raise


def _uid(pod: Manifest) -> str:
    return str((pod.get("metadata") or {}).get("uid") or "")
