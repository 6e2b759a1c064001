"""The watch cache: every object the scheduler reads, kept current by informers.

A cycle never lists anything. It takes a `ClusterView`, a point-in-time copy of
the stores made without yielding to the event loop, so no watch event can land
halfway through and the cycle reasons about one consistent cluster.
"""

from __future__ import annotations

import asyncio
import functools
from dataclasses import dataclass, field
from types import MappingProxyType

from kai.api.changes import ChangeLog, LoggedObjects
from kai.api.dependencies import ClusterObjects
from kai.api.pods import waits_for_scheduler
from kai.api.shards import KeptCut, Shard
from kai.api.volumes import VolumeObjects
from kai.kube.cache import Objects, WatchCache
from kai.kube.client import Kube
from kai.kube.informer import Change, Resource
from kai.operator.sharding import shard_view

NODES = Resource("Node", "/api/v1/nodes", namespaced=False)
PODS = Resource("Pod", "/api/v1/pods", namespaced=True)
QUEUES = Resource("Queue", "/apis/scheduling.run.ai/v2/queues", namespaced=False)
POD_GROUPS = Resource("PodGroup", "/apis/scheduling.run.ai/v2alpha2/podgroups", namespaced=True)
PRIORITY_CLASSES = Resource(
    "PriorityClass", "/apis/scheduling.k8s.io/v1/priorityclasses", namespaced=False
)
KARTAS = Resource("Karta", "/apis/run.ai/v1alpha1/kartas", namespaced=False, optional=True)
TOPOLOGIES = Resource(
    "Topology", "/apis/kai.scheduler/v1alpha1/topologies", namespaced=False, optional=True
)
"""Optional as KAI's Karta is: a cluster without the CRD has no topology constraints to keep."""
CLAIMS = Resource("PersistentVolumeClaim", "/api/v1/persistentvolumeclaims", namespaced=True)
VOLUMES = Resource("PersistentVolume", "/api/v1/persistentvolumes", namespaced=False)
STORAGE_CLASSES = Resource(
    "StorageClass", "/apis/storage.k8s.io/v1/storageclasses", namespaced=False
)
"""What a pod's volume claims say of where it may run (`kai.api.volumes`)."""
CONFIG_MAPS = Resource("ConfigMap", "/api/v1/configmaps", namespaced=True, names_only=True)
"""Which ConfigMaps exist, for the pods that require some (`kai.api.config_maps`)."""
NAMESPACES = Resource("Namespace", "/api/v1/namespaces", namespaced=False)
"""The namespaces' labels, for the inter-pod terms that select by them (`kai.api.namespaces`)."""
WATCHED = (
    NODES,
    PODS,
    QUEUES,
    POD_GROUPS,
    PRIORITY_CLASSES,
    KARTAS,
    TOPOLOGIES,
    CLAIMS,
    VOLUMES,
    STORAGE_CLASSES,
    CONFIG_MAPS,
    NAMESPACES,
)


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
    topologies: Objects = field(default_factory=lambda: MappingProxyType({}))
    claims: Objects = field(default_factory=lambda: MappingProxyType({}))
    volumes: Objects = field(default_factory=lambda: MappingProxyType({}))
    storage_classes: Objects = field(default_factory=lambda: MappingProxyType({}))
    config_maps: Objects = field(default_factory=lambda: MappingProxyType({}))
    namespaces: Objects = field(default_factory=lambda: MappingProxyType({}))

    @functools.cached_property
    def volume_objects(self) -> VolumeObjects:
        """The claims, volumes and StorageClasses, for the pods' claims: one object per
        view, as the snapshot and the binder read what it works out (`static`)."""
        return VolumeObjects(self.claims, self.volumes, self.storage_classes)

    def dependencies(self) -> ClusterObjects:
        """What pods depend on besides themselves (`kai.api.dependencies`)."""
        return ClusterObjects(self.volume_objects, self.config_maps, self.namespaces)


class ClusterCache(WatchCache):
    """The informers for every resource the scheduler reads, copied out as one view.

    With a `shard`, `view` is that shard's cut (`kai.operator.sharding`): the watches
    stay cluster-wide, because a pod's shard follows from its PodGroup and its node.
    """

    def __init__(self, kube: Kube, watch_seconds: int = 300, shard: Shard | None = None) -> None:
        super().__init__(kube, WATCHED, watch_seconds)
        self._shard = shard
        self._verdicts = KeptCut()  # a cycle cuts the cache three times
        self._view: ClusterView | None = None
        self._logs = {resource.kind: ChangeLog() for resource in WATCHED}
        self.pod_arrived = asyncio.Event()
        """Set when a new pod waiting for this scheduler comes (the reader clears it): the
        loop starts a cycle for it at once, where other changes wait to settle."""

    def _note_change(self, change: Change) -> None:
        super()._note_change(change)
        log = self._logs[change.kind]
        if change.key is None:
            log.reset()
        else:
            log.note(change.key)
        arrived = change.arrived
        if change.kind == PODS.kind and arrived is not None and waits_for_scheduler(arrived):
            self.pod_arrived.set()

    def view(self) -> ClusterView:
        """The shard's view of the cache; the same object again while the cache has not
        changed since it was taken (a cycle takes three, each copying and cutting every
        store: a change bumps the revision, see `WatchCache`)."""
        last = self._view
        if last is not None and last.revision == self.revision:
            return last
        whole = self.whole_view()
        self._view = (
            whole if self._shard is None else shard_view(whole, self._shard, self._verdicts)
        )
        return self._view

    def whole_view(self) -> ClusterView:
        """Every store copied as it is now, each copy knowing its place in the store's
        change log, so that its readers compare only what changed (`StoreChanges`)."""
        return ClusterView(
            nodes=self._logged(NODES),
            pods=self._logged(PODS),
            queues=self._logged(QUEUES),
            pod_groups=self._logged(POD_GROUPS),
            priority_classes=self._logged(PRIORITY_CLASSES),
            kartas=self._logged(KARTAS),
            revision=self.revision,
            topologies=self._logged(TOPOLOGIES),
            claims=self._logged(CLAIMS),
            volumes=self._logged(VOLUMES),
            storage_classes=self._logged(STORAGE_CLASSES),
            config_maps=self._logged(CONFIG_MAPS),
            namespaces=self._logged(NAMESPACES),
        )

    def _logged(self, resource: Resource) -> Objects:
        log = self._logs[resource.kind]
        return LoggedObjects(self.current(resource), log, log.end)
