"""Carrying out a cycle's decisions: binds through `pods/binding`, evictions as deletions.

Bindings are grouped by gang and each gang's binds are sent together, with at most
`concurrency` requests in flight overall. Fractional pods get their reservation
pod, ConfigMaps and group label first (`gpu_sharing`). A bind the server refuses
leaves nothing the next cycle cannot read from the cluster: the pod is still
unbound (its group label is taken back), bound pods of the gang stay bound and
count toward it, and the pod's group backs off (`backoff`). A bind that finds the
pod already bound (409) is not a failure of the pod: the cache will show where.

Before each bind the binder asks the cycle's grouping writes what the binding must
carry: a pod grouped in this cycle waits for its PodGroup to be written, and its
`pod-group-name` annotation rides on the Binding, which the API server copies onto
the pod in the same write. A pod whose group could not be written is not bound.

Evictions follow KAI's evictor: the pod gets the `DisruptionTarget` condition,
then is deleted.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any

import structlog

from kai.engine.cycle import Binding
from kai.engine.evictions.decisions import Eviction
from kai.engine.model import Pod, PodGroup
from kai.kube.client import ApiError, Kube
from kai.operator.backoff import BindBackoff
from kai.operator.events import (
    EVICTED,
    NORMAL,
    SCHEDULED,
    EventRecorder,
    InvolvedObject,
)
from kai.operator.gpu_sharing import GpuSharing
from kai.operator.snapshot import Assumed

log = structlog.get_logger(__name__)

STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
_ALREADY_BOUND = 409
_GONE = 404

Annotations = Callable[[str], Awaitable[Mapping[str, str] | None]]
"""Pod key -> the annotations its Binding carries, once it may be bound; None: not this cycle."""


@dataclass
class BindReport:
    bound: dict[str, Assumed]
    failed: dict[str, str]
    skipped_not_leader: int = 0


class Binder:
    def __init__(
        self,
        kube: Kube,
        sharing: GpuSharing,
        backoff: BindBackoff,
        events: EventRecorder,
        concurrency: int,
        is_leader: Callable[[], bool],
    ) -> None:
        self._kube = kube
        self._sharing = sharing
        self._backoff = backoff
        self._events = events
        self._slots = asyncio.Semaphore(concurrency)
        self._is_leader = is_leader

    async def bind(
        self,
        bindings: Sequence[Binding],
        pods: Mapping[str, Pod],
        groups: Mapping[str, PodGroup],
        manifests: Mapping[str, Mapping[str, Any]],
        reservations: Mapping[str, Mapping[str, Any]],
        annotations: Annotations,
    ) -> BindReport:
        """Bind every pod of `bindings`; gangs in the engine's order, each gang's binds together."""
        gangs: dict[str, list[Binding]] = defaultdict(list)
        for binding in bindings:
            gangs[pods[binding.pod].group].append(binding)
        report = BindReport({}, {})
        async with asyncio.TaskGroup() as tasks:
            for group_key, members in gangs.items():
                # Leadership is checked per gang: a deposed leader starts no new gang.
                if not self._is_leader():
                    report.skipped_not_leader += len(members)
                    continue
                queue = groups[group_key].queue if group_key in groups else ""
                for binding in members:
                    pod = pods[binding.pod]
                    tasks.create_task(
                        self._bind_one(
                            binding, pod, queue, manifests, reservations, annotations, report
                        )
                    )
                # Let this gang's binds start before the next gang's are queued behind them.
                await asyncio.sleep(0)
        return report

    async def _bind_one(
        self,
        binding: Binding,
        pod: Pod,
        queue: str,
        manifests: Mapping[str, Mapping[str, Any]],
        reservations: Mapping[str, Mapping[str, Any]],
        annotations: Annotations,
        report: BindReport,
    ) -> None:
        carried = await annotations(pod.key)  # before taking a slot: it may wait for a write
        if carried is None:
            return
        async with self._slots:
            shared = bool(binding.gpu_groups)
            try:
                if shared:
                    portion = binding.gpus / len(binding.gpu_groups)
                    await self._sharing.prepare(
                        manifests[pod.key],
                        pod,
                        binding.node,
                        binding.gpu_groups,
                        Fraction(portion),
                        reservations,
                    )
                await self._post_binding(pod, binding.node, carried)
            except ApiError as error:
                if error.status == _ALREADY_BOUND:
                    log.info("pod already bound", pod=pod.key, error=error.message)
                    return
                if shared:
                    await self._sharing.undo(pod, binding.gpu_groups)
                self._backoff.failed(
                    pod.key,
                    pod.group,
                    queue,
                    binding.node,
                    f"{error.status} {error.reason}",
                    time.monotonic(),
                )
                report.failed[pod.key] = str(error)
                log.warning("bind failed", pod=pod.key, node=binding.node, error=str(error))
                return
        self._backoff.succeeded(pod.key)
        report.bound[pod.key] = Assumed(binding.node, binding.gpu_groups)
        about = InvolvedObject("v1", "Pod", pod.namespace, pod.name, pod.uid)
        self._events.record(
            about, NORMAL, SCHEDULED, f"Successfully assigned {pod.key} to {binding.node}"
        )

    async def _post_binding(self, pod: Pod, node: str, annotations: Mapping[str, str]) -> None:
        # The uid makes the server refuse to bind a newer pod of the same name.
        metadata: dict[str, Any] = {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid}
        if annotations:
            metadata["annotations"] = dict(annotations)
        await self._kube.create(
            f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/binding",
            {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": metadata,
                "target": {"apiVersion": "v1", "kind": "Node", "name": node},
            },
        )

    async def evict(self, evictions: Sequence[Eviction], pods: Mapping[str, Pod]) -> list[str]:
        """Mark each victim DisruptionTarget and delete it; the pods actually evicted."""
        evicted: list[str] = []

        async def one(eviction: Eviction) -> None:
            pod = pods[eviction.pod]
            path = f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}"
            condition = {
                "type": "DisruptionTarget",
                "status": "True",
                "reason": "PreemptionByScheduler",
                "message": _eviction_message(eviction),
                "lastTransitionTime": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
            }
            async with self._slots:
                try:
                    await self._kube.write(
                        "PATCH",
                        f"{path}/status",
                        {"status": {"conditions": [condition]}},
                        STRATEGIC_MERGE_PATCH,
                    )
                    await self._kube.delete(path, {"preconditions": {"uid": pod.uid}})
                except ApiError as error:
                    if error.status != _GONE:
                        log.warning("eviction failed", pod=pod.key, error=str(error))
                        return
            evicted.append(pod.key)
            about = InvolvedObject("v1", "Pod", pod.namespace, pod.name, pod.uid)
            self._events.record(about, NORMAL, EVICTED, _eviction_message(eviction))

        async with asyncio.TaskGroup() as tasks:
            for eviction in evictions:
                if eviction.pod in pods:
                    tasks.create_task(one(eviction))
        return evicted


def _eviction_message(eviction: Eviction) -> str:
    cause = f" for {eviction.preemptor}" if eviction.preemptor else ""
    return f"evicted by {eviction.action.value}{cause} ({eviction.rule})"
