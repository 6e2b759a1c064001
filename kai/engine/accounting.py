"""Queue accounting for a snapshot: what each queue holds and asks for, and the fair shares that follow.

Status is derived from the pods every time, never accumulated, so it cannot drift
from reality (KAI#1048). The cycle uses it to seed allocation; the simulator and
the live operator use it to report queue status after decisions are applied.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from fractions import Fraction

from kai.engine.capacity import total_allocatable
from kai.engine.fairshare import QueueShare, QueueUsage, compute_fair_shares
from kai.engine.gangs import pod_resources
from kai.engine.model import Node, Pod, PodGroup, PodPhase, Snapshot
from kai.engine.resources import Resources, ResourceSum

DEFAULT_DEVICE_MIB = 100


def accounting_device_memory(snapshot: Snapshot) -> int:
    """Device memory a pending `gpu-memory` request is measured against: the smallest GPU's (§10.1)."""
    return min((n.gpu_memory_mib for n in snapshot.nodes if n.gpus), default=DEFAULT_DEVICE_MIB)


def divisible_total(snapshot: Snapshot) -> Resources:
    """Ready nodes' allocatable minus what other schedulers' pods hold there (kai-semantics §10.1)."""
    ready = {node.name for node in snapshot.nodes if node.ready}
    total = total_allocatable(snapshot.nodes)
    for pod in snapshot.pods:
        if not pod.scheduler_is_ours and pod.phase.occupies_node and pod.node in ready:
            gpus = Fraction(pod.gpu.whole + pod.gpu.scalar_gpus)
            total = total - Resources(gpus, pod.request.cpu, pod.request.memory)
    return total


def leaf_usage(snapshot: Snapshot) -> dict[str, QueueUsage]:
    groups = {group.key: group for group in snapshot.pod_groups}
    nodes = {node.name: node for node in snapshot.nodes}
    memory_mib = accounting_device_memory(snapshot)
    allocated: dict[str, ResourceSum] = defaultdict(ResourceSum)
    allocated_np: dict[str, ResourceSum] = defaultdict(ResourceSum)
    pending: dict[str, ResourceSum] = defaultdict(ResourceSum)
    releasing: dict[str, ResourceSum] = defaultdict(ResourceSum)
    for pod in snapshot.pods:
        group = groups.get(pod.group)
        if group is None or not pod.scheduler_is_ours:
            continue
        if pod.phase.is_active_allocated:
            amount = pod_resources(pod, _device_memory(nodes, pod, memory_mib))
            allocated[group.queue].add(amount)
            if not group.preemptible:
                allocated_np[group.queue].add(amount)
        elif pod.phase is PodPhase.PENDING:
            pending[group.queue].add(pod_resources(pod, memory_mib))
        elif pod.phase is PodPhase.RELEASING:
            releasing[group.queue].add(pod_resources(pod, _device_memory(nodes, pod, memory_mib)))
    return {
        name: QueueUsage(
            _total(allocated, name),
            _total(allocated_np, name),
            _total(pending, name),
            releasing=_total(releasing, name),
        )
        for name in set(allocated) | set(pending) | set(releasing)
    }


def _total(sums: Mapping[str, ResourceSum], queue: str) -> Resources:
    found = sums.get(queue)
    return Resources() if found is None else found.total()


def queue_shares(snapshot: Snapshot) -> dict[str, QueueShare]:
    return compute_fair_shares(divisible_total(snapshot), snapshot.queues, leaf_usage(snapshot))


def pods_by_group(snapshot: Snapshot) -> dict[str, list[Pod]]:
    groups: Mapping[str, PodGroup] = {group.key: group for group in snapshot.pod_groups}
    result: dict[str, list[Pod]] = defaultdict(list)
    for pod in snapshot.pods:
        if pod.scheduler_is_ours and pod.group in groups:
            result[pod.group].append(pod)
    return result


def _device_memory(nodes: Mapping[str, Node], pod: Pod, default: int) -> int:
    node = nodes.get(pod.node or "")
    return node.gpu_memory_mib if node is not None else default
