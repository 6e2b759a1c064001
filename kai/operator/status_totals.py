"""The resource totals of Queue and PodGroup status, as KAI's controllers sum them, kept from pass to pass.

Why kept: the status pass runs after every cycle, and summing every pod of the cluster
into its group, then every group into its queue, was most of a live cycle on a busy
cluster (8,000 bound pods: one more pod cost kai 1.2 CPU seconds, four tenths of it in
the status pass). A snapshot keeps the objects of what did not change (the operator's
parse memo), so what changed is found by identity, as the engine's memo finds it: the
pods of the last snapshot that are not in this one have left, the pods of this one that
were not in the last have arrived, and only their groups are summed again. A group's
total is its pods' amounts added up exactly, so a kept total is the total summed anew
(a test holds the two equal over runs of changing snapshots).

What the totals mean is KAI's (pkg/podgroupcontroller, pkg/queuecontroller): a
PodGroup's `requested` is what its pods in phase Pending or Running ask for, its
`allocated` what its bound, unfinished pods hold (being-deleted ones included while
they run), `allocatedNonPreemptible` the same for a non-preemptible group; a Queue's
own totals are the sums over its PodGroups.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from operator import attrgetter

from kai.api.constants import NVIDIA_GPU_RESOURCE
from kai.engine.accounting import accounting_device_memory
from kai.engine.gangs import pod_resources
from kai.engine.model import UNLIMITED, Node, Pod, PodGroup, PodPhase, Snapshot
from kai.engine.resources import Resources, ResourceSum
from kai.engine.snapshot_changes import Changes, SnapshotChanges, brought

_NOTHING = Resources()
_FINISHED = (PodPhase.SUCCEEDED, PodPhase.FAILED)
_MB = 10**6


def resource_list(value: Resources) -> dict[str, str]:
    """A ResourceList of Kubernetes quantities: GPUs as a decimal count of devices, CPU in
    millicores (`m`), memory in megabytes (`M`), exact (bytes when not whole megabytes)."""
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
    """The resource totals of a PodGroup's or a Queue's status."""

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


class TotalsSum:
    """StatusTotals added up (and taken out) exactly and fast, a `ResourceSum` per total:
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

    def remove(self, totals: StatusTotals) -> None:
        self.allocated.remove(totals.allocated)
        self.allocated_non_preemptible.remove(totals.allocated_non_preemptible)
        self.requested.remove(totals.requested)

    def total(self) -> StatusTotals:
        return StatusTotals(
            self.allocated.total(), self.allocated_non_preemptible.total(), self.requested.total()
        )


class KeptTotals:
    """Each PodGroup's totals and each Queue's own, brought up to date by what changed.

    `update` takes the next snapshot and says which groups' totals may have changed: the
    groups of the pods that arrived or left (by identity), and those whose PodGroup
    object changed (its queue or preemptibility). A change of a node or of the device
    size fractions are counted against sums everything again. Not thread-safe: one
    status writer, one of these.
    """

    def __init__(self) -> None:
        self._start_over(None, ())

    def _start_over(self, default_memory: int | None, nodes: tuple[Node, ...]) -> None:
        self._default_memory, self._nodes = default_memory, nodes
        self._pods: dict[int, Pod] = {}  # id -> pod, of the last snapshot (kept alive)
        # The last snapshot's tuples, which the next one's account of changes must name.
        self._seen_pods: tuple[Pod, ...] | None = None
        self._seen_groups: tuple[PodGroup, ...] | None = None
        self._members: dict[str, dict[int, Pod]] = {}  # group key -> its pods
        self._groups: dict[str, PodGroup] = {}
        self._totals: dict[str, StatusTotals] = {}
        self._queue_of: dict[str, str] = {}  # group key -> the queue its totals went into
        self._queues: dict[str, TotalsSum] = {}

    @property
    def groups(self) -> Mapping[str, StatusTotals]:
        """The totals by group key, for the groups with a pod that counts (read only)."""
        return self._totals

    def queues(self) -> dict[str, StatusTotals]:
        """Each queue's own totals: the sums over its PodGroups."""
        return {name: sums.total() for name, sums in self._queues.items()}

    def update(self, after: Snapshot) -> set[str]:
        """Bring the totals to `after`; the keys of the groups whose totals may have changed."""
        default_memory = accounting_device_memory(after)
        if default_memory != self._default_memory or not _same(after.nodes, self._nodes):
            self._start_over(default_memory, after.nodes)  # every share may count anew
        changes = after.changes or SnapshotChanges()
        dirty = brought(self._groups, after.pod_groups, changes.pod_groups, self._seen_groups, _key)
        self._seen_groups = after.pod_groups
        left, arrived = self._bring_pods(after.pods, changes.pods)
        for pod_id, pod in left:
            dirty.add(pod.group)
            members = self._members[pod.group]
            del members[pod_id]
            if not members:
                del self._members[pod.group]
        for pod_id, pod in arrived:
            dirty.add(pod.group)
            self._members.setdefault(pod.group, {})[pod_id] = pod
        device_memory = _DeviceMemory(after, default_memory)
        for key in dirty:
            self._recount(key, device_memory)
        return dirty

    def _bring_pods(
        self, pods: tuple[Pod, ...], told: Changes[Pod] | None
    ) -> tuple[list[tuple[int, Pod]], list[tuple[int, Pod]]]:
        """The pods to `pods`; those that left and those that arrived, by identity."""
        known, seen = self._pods, self._seen_pods
        self._seen_pods = pods
        if told is not None and told.holds_for_ids(seen, pods, known):
            left = [(id(then), then) for then, _ in told.changed.values() if then is not None]
            arrived = [(id(now), now) for _, now in told.changed.values() if now is not None]
            for pod_id, _ in left:
                del known[pod_id]
            known.update(arrived)
            return left, arrived
        by_id = dict(zip(map(id, pods), pods, strict=True))
        left = [(pod_id, known[pod_id]) for pod_id in known.keys() - by_id.keys()]
        arrived = [(pod_id, by_id[pod_id]) for pod_id in by_id.keys() - known.keys()]
        self._pods = by_id
        return left, arrived

    def _recount(self, key: str, device_memory: _DeviceMemory) -> None:
        old = self._totals.pop(key, None)
        if old is not None:
            self._queues[self._queue_of.pop(key)].remove(old)
        group = self._groups.get(key)
        members = self._members.get(key)
        if group is None or not members:
            return
        new = _totals(members.values(), group.preemptible, device_memory)
        if new is None:
            return
        self._totals[key] = new
        self._queue_of[key] = group.queue
        sums = self._queues.get(group.queue)
        if sums is None:
            sums = self._queues[group.queue] = TotalsSum()
        sums.add(new)


class _DeviceMemory:
    """The device size a pod's GPU share is counted against: its node's, else the cluster's."""

    def __init__(self, after: Snapshot, default: int) -> None:
        self._nodes: dict[str, int] | None = None
        self._after = after
        self.default = default

    def of(self, pod: Pod) -> int:
        if pod.node is None:
            return self.default
        if self._nodes is None:  # most passes count only whole-GPU pods: no node is asked
            self._nodes = {node.name: node.gpu_memory_mib for node in self._after.nodes}
        return self._nodes.get(pod.node, self.default)


def _totals(
    pods: Iterable[Pod], preemptible: bool, device_memory: _DeviceMemory
) -> StatusTotals | None:
    """A group's totals from its pods; None when none of them counts (all finished)."""
    sums: TotalsSum | None = None
    first: StatusTotals | None = None
    for pod in pods:
        if pod.phase in _FINISHED:
            continue
        amount = (
            pod.whole_request
            if pod.whole_request is not None
            else pod_resources(pod, device_memory.of(pod))
        )
        # Bound, or being deleted while it still runs on its node: KAI's pod phase is
        # Running (or Pending with PodScheduled) either way.
        on_node = pod.phase is PodPhase.BOUND or (
            pod.phase is PodPhase.RELEASING and pod.node is not None
        )
        allocated = amount if on_node else _NOTHING
        totals = StatusTotals(allocated, _NOTHING if preemptible else allocated, amount)
        if first is None:  # a group of one pod (every plain pod's) takes its amount as it is
            first = totals
            continue
        if sums is None:
            sums = TotalsSum()
            sums.add(first)
        sums.add(totals)
    return sums.total() if sums is not None else first


def _same(nodes: tuple[Node, ...], earlier: tuple[Node, ...]) -> bool:
    return len(nodes) == len(earlier) and all(a is b for a, b in zip(nodes, earlier, strict=True))


_key = attrgetter("key")
