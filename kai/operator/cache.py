"""The watch cache: every object the scheduler reads, kept current by informers.

A cycle never lists anything. It takes a `ClusterView`, a point-in-time copy of
the stores made without yielding to the event loop, so no watch event can land
halfway through and the cycle reasons about one consistent cluster.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from kai.operator.informer import Informer, Resource
from kai.operator.kube import Kube

NODES = Resource("Node", "/api/v1/nodes", namespaced=False)
PODS = Resource("Pod", "/api/v1/pods", namespaced=True)
QUEUES = Resource("Queue", "/apis/scheduling.run.ai/v2/queues", namespaced=False)
POD_GROUPS = Resource("PodGroup", "/apis/scheduling.run.ai/v2alpha2/podgroups", namespaced=True)
PRIORITY_CLASSES = Resource(
    "PriorityClass", "/apis/scheduling.k8s.io/v1/priorityclasses", namespaced=False
)
KARTAS = Resource("Karta", "/apis/run.ai/v1alpha1/kartas", namespaced=False, optional=True)
WATCHED = (NODES, PODS, QUEUES, POD_GROUPS, PRIORITY_CLASSES, KARTAS)

Objects = Mapping[str, Mapping[str, Any]]


@dataclass(frozen=True)
class ClusterView:
    """The cluster as one cycle sees it; objects keyed "namespace/name" (or "name")."""

    nodes: Objects
    pods: Objects
    queues: Objects
    pod_groups: Objects
    priority_classes: Objects
    kartas: Objects
    revision: int


class ClusterCache:
    """Informers for every watched resource, and a signal for the scheduling loop."""

    def __init__(self, kube: Kube, watch_seconds: int = 300) -> None:
        self.changed = asyncio.Event()
        self.revision = 0
        self._informers = {
            resource.kind: Informer(kube, resource, self._note_change, watch_seconds)
            for resource in WATCHED
        }

    def _note_change(self, _kind: str) -> None:
        self.revision += 1
        self.changed.set()

    async def run(self) -> None:
        """Run every informer until cancelled."""
        async with asyncio.TaskGroup() as group:
            for informer in self._informers.values():
                group.create_task(informer.run(), name=f"informer-{informer.resource.kind}")

    @property
    def synced(self) -> bool:
        return all(informer.synced.is_set() for informer in self._informers.values())

    async def wait_synced(self) -> None:
        for informer in self._informers.values():
            await informer.synced.wait()

    @property
    def relists(self) -> int:
        return sum(informer.relists for informer in self._informers.values())

    def view(self) -> ClusterView:
        def copy(resource: Resource) -> Objects:
            return MappingProxyType(dict(self._informers[resource.kind].store.objects))

        return ClusterView(
            nodes=copy(NODES),
            pods=copy(PODS),
            queues=copy(QUEUES),
            pod_groups=copy(POD_GROUPS),
            priority_classes=copy(PRIORITY_CLASSES),
            kartas=copy(KARTAS),
            revision=self.revision,
        )
