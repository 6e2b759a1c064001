"""Collapse the cluster for the solver: pods into shapes and nodes into classes.

Two pending pods with the same requests and the same set of eligible nodes are
interchangeable for capacity, so the solver counts pods per *shape* instead of
deciding each pod. Two nodes with the same free capacity, device state and
eligibility are interchangeable too, so the solver counts nodes per *class*. A
cluster of 1,000 nodes and 10,000 pods becomes a few dozen of each: this is what
lets one exact model cover the whole cycle within its time budget.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from kai.engine.capacity import NodeCapacity
from kai.engine.model import GpuRequest, Pod
from kai.engine.scalars import Scalars


@dataclass(frozen=True, slots=True)
class Shape:
    cpu: Fraction
    memory: Fraction
    whole: int
    portion: Fraction
    memory_mib: int
    eligibility: int  # index into the list of distinct eligible-node sets
    member: str = ""
    """For a topology-constrained gang, the gang and the pod's sub-group: its pods are kept
    apart from everyone else's, so the model can hold them to one domain."""
    scalars: Scalars = ()
    """The scalar resources the pod asks for (`kai.engine.scalars`). The model counts them
    per node class as it counts CPU and memory (the class's total, and what its roomiest
    node has free); the decoder checks each node's. Kept in the shape so that a pod that
    asks for none is never dealt a seat meant for one that does."""

    @property
    def fractional(self) -> bool:
        return self.portion > 0 or self.memory_mib > 0

    def device_mib(self, device_memory_mib: int) -> int:
        return GpuRequest(0, self.portion, self.memory_mib, 1).memory_on(device_memory_mib)


@dataclass(frozen=True)
class NodeClass:
    index: int
    nodes: tuple[str, ...]  # sorted names; all identical for the solver
    cpu: int  # free on the roomiest member: bounds what one node can take
    memory: int
    pods: int
    cpu_total: int  # free over all members: the class-wide budget
    memory_total: int
    pods_total: int
    whole_gpus: int
    total_gpus: int
    device_memory_mib: int
    residuals: tuple[int, ...]  # free MiB of each existing shared device, ascending
    eligibility: frozenset[int]  # eligibility sets this class belongs to
    scalars_total: Scalars = ()
    """Free over all members, of each scalar resource some modelled pod asks for: a class
    of eight nodes that each offer a host port once can take eight pods that ask for it,
    not one per GPU."""
    scalars_most: Scalars = ()
    """What the roomiest member has free of each: bounds what one node can take."""

    @property
    def size(self) -> int:
        return len(self.nodes)

    def device_free(self, capacity: NodeCapacity) -> list[tuple[int, str]]:
        """A node's existing shared devices as (free MiB, group), in the order of `residuals`."""
        return sorted(
            (self.device_memory_mib - used, group) for group, used in capacity.shared.items()
        )


def shape_of(pod: Pod, eligibility: int, member: str = "") -> Shape:
    return Shape(
        pod.request.cpu,
        pod.request.memory,
        pod.gpu.whole,
        pod.gpu.portion,
        pod.gpu.memory_mib,
        eligibility,
        member,
        pod.scalars,
    )


def modelled(pod: Pod) -> bool:
    """Multi-device fractional pods are left to the greedy pass; every other pod is modelled."""
    return not (pod.gpu.is_fractional and pod.gpu.devices > 1)


def build_classes(
    capacity: Mapping[str, NodeCapacity],
    eligibility_sets: Sequence[frozenset[str]],
    usable: Callable[[NodeCapacity], bool],
    domains: Callable[[str], tuple[object, ...]] = lambda name: (),
    scalar_names: Collection[str] = (),
) -> list[NodeClass]:
    """Group nodes whose GPU state and eligibility are identical (and, with `domains`,
    that sit in the same topology domains: a class never straddles two racks).

    Free CPU, memory, pod slots and the scalar resources in `scalar_names` differ between
    partly used nodes of one type; they are kept as class totals (and the roomiest
    member's values) rather than splitting the class, since GPUs, not CPU, decide packing
    on GPU nodes. The decoder checks each node's own.
    """
    membership: dict[str, list[int]] = {}
    for index, names in enumerate(eligibility_sets):
        for name in names:
            membership.setdefault(name, []).append(index)
    groups: dict[
        tuple[tuple[int, ...], tuple[object, ...], tuple[int, ...], tuple[object, ...]], list[str]
    ] = {}
    for name in sorted(capacity):
        cap = capacity[name]
        if name not in membership or not usable(cap):
            continue
        memory = cap.node.gpu_memory_mib
        key = (
            tuple(membership[name]),
            (cap.whole_gpus, cap.node.gpus, memory),
            tuple(sorted(memory - used for used in cap.shared.values())),
            domains(name),
        )
        groups.setdefault(key, []).append(name)
    classes: list[NodeClass] = []
    for (_, _, residuals, _), members in groups.items():
        first = capacity[members[0]]
        caps = [capacity[name] for name in members]
        classes.append(
            NodeClass(
                len(classes),
                tuple(members),
                max(c.cpu for c in caps),
                max(c.memory for c in caps),
                max(c.pods for c in caps),
                sum(max(0, c.cpu) for c in caps),
                sum(max(0, c.memory) for c in caps),
                sum(max(0, c.pods) for c in caps),
                first.whole_gpus,
                first.node.gpus,
                first.node.gpu_memory_mib,
                residuals,
                frozenset(membership[members[0]]),
                *_scalars_of(caps, scalar_names),
            )
        )
    return classes


def _scalars_of(caps: Sequence[NodeCapacity], names: Collection[str]) -> tuple[Scalars, Scalars]:
    """The members' free amounts of these scalar resources: summed, and the largest."""
    total: list[tuple[str, int]] = []
    most: list[tuple[str, int]] = []
    for name in sorted(names):
        free = [max(0, cap.scalars.get(name, 0)) for cap in caps]
        if any(free):
            total.append((name, sum(free)))
            most.append((name, max(free)))
    return tuple(total), tuple(most)
