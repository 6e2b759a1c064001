"""Small constructors of engine objects for unit tests: defaults that read well, keywords for the rest."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any

from kai.engine.model import (
    GpuRequest,
    Node,
    Placement,
    Pod,
    PodGroup,
    PodPhase,
    Queue,
    QueueResource,
    Snapshot,
    SubGroup,
    Taint,
)
from kai.engine.resources import Resources
from kai.engine.scalars import MILLI, Scalars
from kai.engine.snapshot_changes import changes_between

GI = 2**30
NOW = datetime(2026, 6, 1, tzinfo=UTC)
ANYWHERE = Placement()
UNLIMITED_RESOURCE = QueueResource(Fraction(-1), Fraction(-1), Fraction(1))


def node(
    name: str,
    gpus: int = 8,
    cpu: int = 64_000,
    memory: int = 512 * GI,
    pods: int = 110,
    gpu_memory_mib: int = 40_000,
    labels: dict[str, str] | None = None,
    taints: tuple[Taint, ...] = (),
    ready: bool = True,
    unschedulable: bool = False,
    scalars: dict[str, int] | None = None,
    mig: str | None = None,
) -> Node:
    """`scalars`: allocatable scalar resources in whole units (an RDMA device: 1). `mig`:
    the node's MIG strategy (None: not MIG-enabled); its MIG slices among `scalars` count
    their compute slices as GPUs of the cluster (`mig-3g.40gb`: 3), AMD devices one each."""
    return Node(
        name,
        tuple(sorted((labels or {}).items())),
        Resources.of(gpus, cpu, memory),
        pods,
        gpu_memory_mib,
        unschedulable=unschedulable,
        ready=ready,
        taints=taints,
        scalars=in_thousandths(scalars),
        mig=mig,
        scalar_gpus=_counted_gpus(scalars),
    )


def pod(
    name: str,
    group: str,
    gpus: int = 0,
    cpu: int = 1000,
    memory: int = GI,
    portion: Fraction = Fraction(0),
    memory_mib: int = 0,
    devices: int = 1,
    node_name: str | None = None,
    subgroup: str | None = None,
    placement: Placement = ANYWHERE,
    gpu_groups: tuple[str, ...] = (),
    namespace: str = "ns",
    ours: bool = True,
    phase: PodPhase | None = None,
    scalars: dict[str, int] | None = None,
) -> Pod:
    """`scalars`: requests of scalar resources in whole units; MIG slices among them count
    their compute slices against quotas, AMD devices one each."""
    return Pod(
        namespace,
        name,
        f"uid-{name}",
        f"{namespace}/{group}",
        subgroup,
        phase or (PodPhase.BOUND if node_name else PodPhase.PENDING),
        node_name,
        Resources.of(0, cpu, memory),
        GpuRequest(gpus, portion, memory_mib, devices, _counted_gpus(scalars)),
        placement,
        created=NOW,
        gpu_groups=gpu_groups,
        scheduler_is_ours=ours,
        scalars=in_thousandths(scalars),
    )


def in_thousandths(units: dict[str, int] | None) -> Scalars:
    return tuple(sorted((name, amount * MILLI) for name, amount in (units or {}).items()))


def group(
    name: str,
    queue: str,
    min_member: int = 1,
    priority: int = 50,
    preemptible: bool = True,
    subgroups: tuple[SubGroup, ...] = (),
    namespace: str = "ns",
) -> PodGroup:
    return PodGroup(namespace, name, queue, min_member, priority, preemptible, subgroups, NOW)


def queue(
    name: str,
    parent: str | None = None,
    gpu_quota: int = -1,
    gpu_limit: int = -1,
    weight: int = 1,
    priority: int = 100,
) -> Queue:
    return Queue(
        name,
        parent,
        priority,
        gpu=QueueResource(Fraction(gpu_quota), Fraction(gpu_limit), Fraction(weight)),
        cpu=UNLIMITED_RESOURCE,
        memory=UNLIMITED_RESOURCE,
    )


def snapshot(
    nodes: list[Node], pods: list[Pod], groups: list[PodGroup], queues: list[Queue]
) -> Snapshot:
    return Snapshot(tuple(nodes), tuple(pods), tuple(groups), tuple(queues), NOW)


def with_groups(snap: Snapshot, prefix: str, **fields: Any) -> Snapshot:
    """`snap` with `fields` set on every PodGroup whose name starts with `prefix`."""
    groups = tuple(
        dataclasses.replace(g, **fields) if g.name.startswith(prefix) else g
        for g in snap.pod_groups
    )
    return dataclasses.replace(snap, pod_groups=groups)


def told(before: Snapshot, after: Snapshot) -> Snapshot:
    """`after` with the exact account of what changed since `before`, as an adapter that
    builds snapshots tells it (`kai.engine.snapshot_changes`)."""
    return dataclasses.replace(after, changes=changes_between(before, after))


def _counted_gpus(units: dict[str, int] | None) -> int:
    """GPUs MIG slices (`nvidia.com/mig-3g.40gb`: 3 each) and AMD devices count as."""
    units = units or {}
    return units.get("amd.com/gpu", 0) + sum(
        int(name.removeprefix("nvidia.com/mig-").split("g.")[0]) * count
        for name, count in units.items()
        if name.startswith("nvidia.com/mig-")
    )
