"""An independent re-check of every allocation before it leaves the engine.

The solver, the decoder and the greedy pass share capacity code; this module does
not. It recomputes node usage, device memory, gang sizes and queue totals from the
snapshot and the proposed bindings alone, with plain loops. Any violation it finds
is a bug in the engine: the cycle falls back to a checked answer and tests fail.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction

from kai.engine.eligibility import node_accepts
from kai.engine.model import UNLIMITED, Pod, PodPhase, Snapshot


@dataclass(frozen=True)
class ProposedBinding:
    pod: str
    node: str
    gpu_groups: tuple[str, ...]


def validate(snapshot: Snapshot, bindings: Iterable[ProposedBinding]) -> list[str]:
    """Every rule a binding set breaks, one line each; empty when it is sound."""
    pods = {pod.key: pod for pod in snapshot.pods}
    nodes = {node.name: node for node in snapshot.nodes}
    new: list[tuple[Pod, ProposedBinding]] = []
    problems: list[str] = []
    for binding in bindings:
        pod = pods.get(binding.pod)
        node = nodes.get(binding.node)
        if pod is None or node is None:
            problems.append(f"binding {binding.pod} -> {binding.node}: unknown pod or node")
            continue
        if pod.phase is not PodPhase.PENDING:
            problems.append(f"pod {pod.key} is not pending ({pod.phase.value})")
        if not node_accepts(node, pod.placement):
            problems.append(f"pod {pod.key} may not run on node {node.name}")
        new.append((pod, binding))
    problems += _check_nodes(snapshot, new)
    problems += _check_gangs(snapshot, new)
    problems += _check_queues(snapshot, new)
    return problems


def _check_nodes(snapshot: Snapshot, new: list[tuple[Pod, ProposedBinding]]) -> list[str]:
    problems: list[str] = []
    occupants: dict[str, list[tuple[Pod, tuple[str, ...]]]] = defaultdict(list)
    for pod in snapshot.pods:
        if pod.phase.occupies_node and pod.node is not None:
            occupants[pod.node].append((pod, pod.gpu_groups))
    for pod, binding in new:
        occupants[binding.node].append((pod, binding.gpu_groups))
    group_home: dict[str, str] = {}
    for node in snapshot.nodes:
        residents = occupants.get(node.name, [])
        cpu = sum((p.request.cpu for p, _ in residents), Fraction(0))
        memory = sum((p.request.memory for p, _ in residents), Fraction(0))
        whole = sum(p.gpu.whole for p, _ in residents)
        device_use: dict[str, int] = defaultdict(int)
        unnamed_fraction_mib = 0
        for pod, groups in residents:
            if not pod.gpu.is_fractional:
                continue
            mib = pod.gpu.memory_on(node.gpu_memory_mib)
            if not groups:
                unnamed_fraction_mib += mib * pod.gpu.devices
            if groups and len(set(groups)) != pod.gpu.devices:
                problems.append(
                    f"pod {pod.key} needs {pod.gpu.devices} distinct shared devices, got {groups}"
                )
            for group in groups:
                device_use[group] += mib
                if group_home.setdefault(group, node.name) != node.name:
                    problems.append(f"shared device {group} is on two nodes")
        devices = whole + len(device_use)
        if cpu > node.allocatable.cpu:
            problems.append(f"node {node.name}: cpu {cpu}m requested of {node.allocatable.cpu}m")
        if memory > node.allocatable.memory:
            problems.append(
                f"node {node.name}: memory {memory} requested of {node.allocatable.memory}"
            )
        if len(residents) > node.max_pods:
            problems.append(f"node {node.name}: {len(residents)} pods of {node.max_pods}")
        if devices * node.gpu_memory_mib + unnamed_fraction_mib > node.gpus * node.gpu_memory_mib:
            problems.append(f"node {node.name}: {devices} GPUs in use of {node.gpus}")
        for group, used in device_use.items():
            if used > node.gpu_memory_mib:
                problems.append(
                    f"node {node.name}: shared device {group} holds {used} MiB of {node.gpu_memory_mib}"
                )
    return problems


def _check_gangs(snapshot: Snapshot, new: list[tuple[Pod, ProposedBinding]]) -> list[str]:
    problems: list[str] = []
    groups = {group.key: group for group in snapshot.pod_groups}
    running: dict[str, list[Pod]] = defaultdict(list)
    for pod in snapshot.pods:
        if pod.phase.is_active_allocated:
            running[pod.group].append(pod)
    touched: dict[str, list[Pod]] = defaultdict(list)
    for pod, _ in new:
        touched[pod.group].append(pod)
    for key, added in touched.items():
        group = groups.get(key)
        if group is None:
            problems.append(f"pods bound for unknown PodGroup {key}")
            continue
        members = running[key] + added
        if len(members) < group.min_member:
            problems.append(
                f"PodGroup {key}: {len(members)} pods placed, minMember {group.min_member}"
            )
        for subgroup in group.subgroups:
            names = _descendants(group.subgroups, subgroup.name)
            count = sum(1 for pod in members if pod.subgroup in names)
            if count < subgroup.min_member:
                problems.append(
                    f"PodGroup {key} sub-group {subgroup.name}: {count} pods, minMember {subgroup.min_member}"
                )
    return problems


def _descendants(subgroups: Iterable[object], name: str) -> set[str | None]:
    result: set[str | None] = {name}
    items = list(subgroups)
    grew = True
    while grew:
        grew = False
        for item in items:
            parent, child = getattr(item, "parent", None), getattr(item, "name", None)
            if parent in result and child not in result:
                result.add(child)
                grew = True
    return result


def _check_queues(snapshot: Snapshot, new: list[tuple[Pod, ProposedBinding]]) -> list[str]:
    queues = {queue.name: queue for queue in snapshot.queues}
    groups = {group.key: group for group in snapshot.pod_groups}
    nodes = {node.name: node for node in snapshot.nodes}

    def usage(pod: Pod, node_name: str) -> tuple[Fraction, Fraction, Fraction]:
        memory_mib = nodes[node_name].gpu_memory_mib
        gpus = pod.gpu.gpus_on(memory_mib) if pod.gpu.is_fractional else Fraction(pod.gpu.whole)
        return gpus, pod.request.cpu, pod.request.memory

    totals: dict[str, list[Fraction]] = defaultdict(lambda: [Fraction(0)] * 3)
    totals_np: dict[str, list[Fraction]] = defaultdict(lambda: [Fraction(0)] * 3)
    grew: dict[str, list[bool]] = defaultdict(lambda: [False] * 3)
    grew_np: dict[str, list[bool]] = defaultdict(lambda: [False] * 3)
    entries = [
        (p, p.node, False) for p in snapshot.pods if p.phase.is_active_allocated and p.node in nodes
    ]
    entries += [(p, b.node, True) for p, b in new]
    for pod, node_name, is_new in entries:
        group = groups.get(pod.group)
        if group is None or node_name is None:
            continue
        amounts = usage(pod, node_name)
        for queue_name in _ancestry(queues, group.queue):
            for i, amount in enumerate(amounts):
                totals[queue_name][i] += amount
                grew[queue_name][i] |= is_new and amount > 0
                if not group.preemptible:
                    totals_np[queue_name][i] += amount
                    grew_np[queue_name][i] |= is_new and amount > 0
    problems: list[str] = []
    for name, values in totals.items():
        queue = queues[name]
        for i, resource in enumerate(("gpu", "cpu", "memory")):
            spec = queue.resource(resource)
            if grew[name][i] and spec.limit != UNLIMITED and values[i] > spec.limit:
                problems.append(f"queue {name}: {resource} {values[i]} above limit {spec.limit}")
            if grew_np[name][i] and spec.quota != UNLIMITED and totals_np[name][i] > spec.quota:
                problems.append(
                    f"queue {name}: non-preemptible {resource} {totals_np[name][i]} above quota {spec.quota}"
                )
    return problems


def _ancestry(queues: Mapping[str, object], leaf: str) -> list[str]:
    chain: list[str] = []
    name: str | None = leaf
    while name is not None and name in queues and name not in chain:
        chain.append(name)
        name = getattr(queues[name], "parent", None)
    return chain
