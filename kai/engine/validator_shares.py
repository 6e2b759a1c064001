"""The validator's own queue accounting and fair-share division.

A second implementation, by design, of `kai.engine.accounting` and
`kai.engine.fairshare`: what each queue holds and asks for, the cluster total that is
divided, and KAI's proportion-plugin division of it (deserved quota first, then the
surplus by priority bucket and over-quota weight with whole-unit flooring, then the
flooring remainders one unit at a time). The eviction audit checks reclaim against
these numbers, so an error in the engine's division shows up as a disagreement
instead of being taken on trust. A differential test keeps the two in agreement.

Plain dictionaries of exact Fractions, one resource at a time; nothing shared with
the engine but its data types.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from fractions import Fraction
from math import floor

from kai.engine.model import UNLIMITED, PodPhase, Queue, Snapshot
from kai.engine.resources import RESOURCE_NAMES, ResourceName, Resources

FALLBACK_DEVICE_MIB = 100
"""Device memory a pending `gpu-memory` pod is measured against when no node has GPUs."""


@dataclass(frozen=True)
class Entitlement:
    """One queue's entitlement: its effective deserved quota and its fair share."""

    deserved: Resources
    fair_share: Resources


def pending_device_memory(snapshot: Snapshot) -> int:
    """A pending `gpu-memory` request counts against the smallest GPU in the cluster (§10.1)."""
    sizes = [node.gpu_memory_mib for node in snapshot.nodes if int(node.allocatable.gpu) > 0]
    return min(sizes) if sizes else FALLBACK_DEVICE_MIB


def entitlements(snapshot: Snapshot) -> dict[str, Entitlement]:
    """Deserved quota and fair share of every queue reachable from a top-level queue."""
    children = _children(snapshot.queues)
    requested = _requested(snapshot, children)
    total = _divisible(snapshot)
    deserved: dict[str, dict[ResourceName, Fraction]] = defaultdict(dict)
    fair: dict[str, dict[ResourceName, Fraction]] = defaultdict(dict)
    for resource in RESOURCE_NAMES:
        level: list[tuple[Fraction, list[Queue]]] = [(total[resource], children.get(None, []))]
        while level:
            amount, siblings = level.pop()
            granted = _split(amount, siblings, resource, requested)
            for queue in siblings:
                spec = queue.resource(resource)
                deserved[queue.name][resource] = amount if spec.quota == UNLIMITED else spec.quota
                fair[queue.name][resource] = granted[queue.name]
                below = children.get(queue.name, [])
                if below:
                    level.append((granted[queue.name], below))
    return {name: Entitlement(_resources(deserved[name]), _resources(fair[name])) for name in fair}


def _resources(values: Mapping[ResourceName, Fraction]) -> Resources:
    return Resources(values["gpu"], values["cpu"], values["memory"])


def _children(queues: Sequence[Queue]) -> dict[str | None, list[Queue]]:
    """Children of each queue in name order, keeping only what hangs from a parentless root."""
    by_parent: dict[str | None, list[Queue]] = defaultdict(list)
    for queue in queues:
        by_parent[queue.parent].append(queue)
    kept: dict[str | None, list[Queue]] = {}
    seen: set[str] = set()
    todo: list[str | None] = [None]
    while todo:
        parent = todo.pop()
        kids = sorted(by_parent.get(parent, []), key=lambda q: q.name)
        kids = [kid for kid in kids if kid.name not in seen]
        if kids:
            kept[parent] = kids
        for kid in kids:
            seen.add(kid.name)
            todo.append(kid.name)
    return kept


def _requested(
    snapshot: Snapshot, children: Mapping[str | None, list[Queue]]
) -> dict[str, dict[ResourceName, Fraction]]:
    """Allocated plus pending of each queue's subtree, as the proportion plugin counts them."""
    parent_of = {q.name: q.parent for kids in children.values() for q in kids}
    groups = {group.key: group for group in snapshot.pod_groups}
    node_memory = {node.name: node.gpu_memory_mib for node in snapshot.nodes}
    pending_mib = pending_device_memory(snapshot)
    totals: dict[str, dict[ResourceName, Fraction]] = defaultdict(
        lambda: {name: Fraction(0) for name in RESOURCE_NAMES}
    )
    # Each pod's amounts are gathered under its own queue and summed once, then added up
    # the tree: a sum per queue and resource, not one per pod and ancestor.
    columns: dict[str, tuple[list[Fraction | int], ...]] = defaultdict(lambda: ([], [], []))
    for pod in snapshot.pods:
        group = groups.get(pod.group)
        if group is None or not pod.scheduler_is_ours or group.queue not in parent_of:
            continue
        if pod.phase is PodPhase.BOUND:
            mib = node_memory.get(pod.node or "", pending_mib)
        elif pod.phase is PodPhase.PENDING:
            mib = pending_mib
        else:
            continue
        gpus: Fraction | int
        if pod.gpu.whole or pod.gpu.scalar_gpus:
            gpus = pod.gpu.whole + pod.gpu.scalar_gpus  # a MIG slice counts its compute slices
        else:
            gpus = Fraction(pod.gpu.memory_mib, mib) if pod.gpu.memory_mib else pod.gpu.portion
            if pod.gpu.devices != 1:
                gpus *= pod.gpu.devices
        gpu, cpu, memory = columns[group.queue]
        gpu.append(gpus)
        cpu.append(pod.request.cpu)
        memory.append(pod.request.memory)
    for leaf, (gpu, cpu, memory) in columns.items():
        amounts: dict[ResourceName, Fraction] = {
            "gpu": exact_sum(gpu),
            "cpu": exact_sum(cpu),
            "memory": exact_sum(memory),
        }
        name: str | None = leaf
        while name is not None:
            row = totals[name]
            for resource, amount in amounts.items():
                row[resource] += amount
            name = parent_of.get(name)
    return totals


def exact_sum(values: Sequence[Fraction | int]) -> Fraction:
    """The exact sum; whole amounts (most of them) add as ints, only the rest as Fractions."""
    whole, rest = 0, Fraction(0)
    for value in values:
        if value.denominator == 1:
            whole += value.numerator
        else:
            rest += value
    return rest + whole


def _divisible(snapshot: Snapshot) -> dict[ResourceName, Fraction]:
    """Ready nodes' allocatable, less what other schedulers' pods hold on them."""
    ready = {node.name for node in snapshot.nodes if node.ready}
    total = {name: Fraction(0) for name in RESOURCE_NAMES}
    for node in snapshot.nodes:
        if node.ready:
            for name in RESOURCE_NAMES:
                total[name] += node.allocatable.get(name)
            total["gpu"] += node.scalar_gpus  # MIG slices count their compute slices
    for pod in snapshot.pods:
        if pod.scheduler_is_ours or pod.node not in ready:
            continue
        if pod.phase in (PodPhase.BOUND, PodPhase.RELEASING):
            total["gpu"] -= pod.gpu.whole + pod.gpu.scalar_gpus
            total["cpu"] -= pod.request.cpu
            total["memory"] -= pod.request.memory
    return total


def _split(
    amount: Fraction,
    siblings: Sequence[Queue],
    resource: ResourceName,
    requested: Mapping[str, Mapping[ResourceName, Fraction]],
) -> dict[str, Fraction]:
    """One resource of a parent divided among its children (the three phases of §10.2)."""
    fair = {queue.name: Fraction(0) for queue in siblings}
    cap: dict[str, Fraction] = {}
    for queue in siblings:
        asked = requested[queue.name][resource] if queue.name in requested else Fraction(0)
        limit = queue.resource(resource).limit
        cap[queue.name] = asked if limit == UNLIMITED else min(asked, limit)

    def still_needs(name: str) -> Fraction:
        return max(Fraction(0), cap[name] - fair[name])

    left = amount
    for queue in siblings:  # phase 1: deserved quota, up to what the queue can use
        quota = queue.resource(resource).quota
        grant = min(amount if quota == UNLIMITED else quota, cap[queue.name])
        fair[queue.name] += grant
        left -= grant
    for priority in sorted({queue.priority for queue in siblings}, reverse=True):
        if left <= 0:
            break
        bucket = [queue for queue in siblings if queue.priority == priority]
        lost: dict[str, Fraction] = {}
        while True:  # phase 2: weighted rounds, offers floored unless they cover the need
            hungry = [q for q in bucket if still_needs(q.name) > 0]
            weights = {q.name: q.resource(resource).over_quota_weight for q in hungry}
            weight_sum = sum(weights.values(), Fraction(0))
            if weight_sum == 0:
                break
            pot = left
            spare = False
            for queue in hungry:
                if weights[queue.name] == 0:
                    continue
                offer = pot * weights[queue.name] / weight_sum
                need = still_needs(queue.name)
                if need <= offer:
                    grant = need
                    lost.pop(queue.name, None)
                    spare = spare or need < offer
                else:
                    grant = Fraction(floor(offer))
                    if offer > grant:
                        lost[queue.name] = offer - grant
                fair[queue.name] += grant
                left -= grant
            if not spare or left <= 0:
                break
        ages = {queue.name: _age(queue) for queue in bucket}
        for name in sorted(lost, key=lambda n: (-lost[n], ages[n])):  # phase 3: remainders
            if left <= 0:
                break
            grant = min(Fraction(1), left)
            fair[name] += grant
            left -= grant
    return fair


def _age(queue: Queue) -> tuple[bool, datetime, str]:
    """Older first, a queue without a timestamp before all (Go's zero time), then by name."""
    return (queue.created is not None, queue.created or datetime.min, queue.name)
