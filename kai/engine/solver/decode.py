"""Turn the solver's counts into pod-to-node placements.

The solver says how many nodes of each class take each packing pattern and how
many pods of each shape go to each class. Decoding deals patterns out to the
class's nodes, then pods of the admitted gangs to the pattern slots, checking each
node's CPU, memory and pod count as it goes (the model checks those per class). A
core pod that finds no slot drops its whole gang; the caller repairs with the
greedy pass and the validator re-checks everything.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from kai.engine.capacity import NodeCapacity
from kai.engine.greedy import PodPlacement
from kai.engine.model import Pod
from kai.engine.solver.model import AllocationModel
from kai.engine.solver.shapes import NodeClass
from kai.engine.solver.solve import SolverAnswer


@dataclass
class Decoded:
    placements: dict[str, PodPlacement]
    admitted: list[str]
    dropped: list[str]  # gangs the solver admitted whose pods could not all be seated


def decode(
    allocation: AllocationModel,
    answer: SolverAnswer,
    capacity: Mapping[str, NodeCapacity],
    gang_order: Sequence[str],
    kai_nodes: Mapping[str, str] | None = None,
) -> Decoded:
    """`kai_nodes` (pod key -> the node the greedy pass chose) lets a pod keep KAI's node
    wherever the solver's counts allow: among interchangeable pods of one shape, those KAI
    put in a class go to that class first, and onto their own node first."""
    data = allocation.data
    kai_nodes = kai_nodes or {}
    pools: dict[int, list[Pod]] = defaultdict(list)
    admitted: list[str] = []
    gangs = {g.key: g for g in data.gangs}
    for key in gang_order:
        gang = gangs.get(key)
        if gang is None:
            continue
        var = allocation.admit.get(key)
        if var is not None and answer.value(var):
            admitted.append(key)
            for pod in gang.core:
                pools[data.shape_index[pod.key]].append(pod)
        taken: dict[int, int] = defaultdict(int)
        for pod in gang.elastic:
            shape = data.shape_index[pod.key]
            elastic_var = allocation.elastic.get((key, shape))
            if elastic_var is not None and taken[shape] < answer.value(elastic_var):
                taken[shape] += 1
                pools[shape].append(pod)
    work = {name: cap.copy() for name, cap in capacity.items()}
    placements: dict[str, PodPlacement] = {}
    unseated: list[Pod] = []
    for node_class in data.classes:
        per_class: dict[int, list[Pod]] = {}
        members = set(node_class.nodes)
        for shape, var in allocation.counts_of_class.get(node_class.index, {}).items():
            if answer.value(var):
                n = answer.value(var)
                pool = sorted(pools[shape], key=lambda p: kai_nodes.get(p.key) not in members)
                per_class[shape], pools[shape] = pool[:n], pool[n:]
        _seat_class(
            allocation, answer, node_class, per_class, work, placements, unseated, kai_nodes
        )
    for leftover in pools.values():
        unseated.extend(leftover)
    core_keys = {pod.key for gang in data.gangs for pod in gang.core}
    rank = {key: position for position, key in enumerate(gang_order)}
    unseated.sort(key=lambda p: (rank.get(p.group, len(rank)), p.key not in core_keys, p.key))
    unseated = _seat_anywhere(allocation, unseated, work, placements, kai_nodes)
    failed = {pod.group for pod in unseated if pod.key in core_keys}
    kept = {k: p for k, p in placements.items() if p.pod.group not in failed}
    return Decoded(kept, [g for g in admitted if g not in failed], sorted(failed))


def _seat_anywhere(
    allocation: AllocationModel,
    pods: Sequence[Pod],
    work: dict[str, NodeCapacity],
    placements: dict[str, PodPlacement],
    kai_nodes: Mapping[str, str],
) -> list[Pod]:
    """Seat pods their class could not hold on any node they may use, KAI's node first;
    the pods still without a node are returned.

    The model checks CPU, memory and pod slots per class, so a class's counts can ask a
    node for more than it has while another class has the room; without this, one such pod
    dropped its whole gang, and on the 1,000-node benchmark seven gangs the solver had
    admitted (the fourteenth attempt in KAI's order among them) were lost that way, so its
    answer came out below greedy's. A topology-bound pod stays within its class, which
    lies within one domain.
    """
    data = allocation.data
    nodes_of: dict[int, list[str]] = {}
    left: list[Pod] = []
    for pod in pods:
        shape = data.shapes[data.shape_index[pod.key]]
        if shape.member:
            left.append(pod)
            continue
        if shape.eligibility not in nodes_of:
            nodes_of[shape.eligibility] = [
                name for c in data.classes if shape.eligibility in c.eligibility for name in c.nodes
            ]
        own = kai_nodes.get(pod.key)
        ranked = [own, *nodes_of[shape.eligibility]] if own in work else nodes_of[shape.eligibility]
        _seat_first_fit(pod, ranked, work, placements, left)
    return left


def _seat_first_fit(
    pod: Pod,
    candidates: Iterable[str],
    work: dict[str, NodeCapacity],
    placements: dict[str, PodPlacement],
    unseated: list[Pod],
) -> None:
    """Seat the pod on the first candidate node it fits, or add it to `unseated`."""
    home = next((n for n in candidates if work[n].fits(pod)), None)
    if home is None:
        unseated.append(pod)
    else:
        placements[pod.key] = PodPlacement(pod, home, work[home].take(pod))


def _seat_class(
    allocation: AllocationModel,
    answer: SolverAnswer,
    node_class: NodeClass,
    per_class: Mapping[int, list[Pod]],
    work: dict[str, NodeCapacity],
    placements: dict[str, PodPlacement],
    unseated: list[Pod],
    kai_nodes: Mapping[str, str],
) -> None:
    shapes = allocation.data.shapes
    patterns = allocation.patterns.get(node_class.index)
    memory = node_class.device_memory_mib
    whole: dict[int, list[Pod]] = defaultdict(list)
    fractional: dict[int, list[Pod]] = defaultdict(list)
    cpu_only: list[Pod] = []
    for shape_id, pods in sorted(per_class.items()):
        shape = shapes[shape_id]
        if shape.whole:
            whole[shape.whole].extend(pods)
        elif shape.fractional:
            fractional[shape.device_mib(memory)].extend(pods)
        else:
            cpu_only.extend(pods)
    nodes = _roomiest_first(node_class, work)
    slots: dict[str, list[int]] = {name: [] for name in nodes}  # whole sizes per node
    new_devices: list[str] = []  # one entry per device to open, naming its node
    if patterns is not None and patterns.node_patterns is not None:
        expanded = [
            pattern
            for pattern, var in zip(patterns.node_patterns, patterns.node_vars, strict=True)
            for _ in range(answer.value(var))
        ]
        expanded.sort(key=lambda p: tuple(-n for n in p))
        for name, pattern in zip(nodes, expanded, strict=False):
            for n, (kind, k) in zip(pattern, patterns.node_items, strict=True):
                if kind == "whole":
                    slots[name].extend([k] * n)
                else:
                    new_devices.extend([name] * n)
    # Whole-GPU pods: into the slots the patterns opened, largest CPU asks first.
    for size, pods in sorted(whole.items(), reverse=True):
        for pod in sorted(pods, key=lambda p: (-p.request.cpu, -p.request.memory, p.key)):
            own = kai_nodes.get(pod.key)
            ranked = [own, *nodes] if own in slots else nodes
            home = next(
                (n for n in ranked if n and size in slots[n] and work[n].fits(pod)), None
            ) or next((n for n in nodes if work[n].fits(pod)), None)
            if home is None:
                unseated.append(pod)
                continue
            if size in slots[home]:
                slots[home].remove(size)
            placements[pod.key] = PodPlacement(pod, home, work[home].take(pod))
    _seat_fractions(
        allocation, answer, node_class, fractional, new_devices, work, placements, unseated
    )
    for pod in sorted(cpu_only, key=lambda p: (-p.request.cpu, -p.request.memory, p.key)):
        _seat_first_fit(pod, nodes, work, placements, unseated)


def _roomiest_first(node_class: NodeClass, work: Mapping[str, NodeCapacity]) -> list[str]:
    """The class's nodes, most free CPU and memory first: the nodes of a class hold the same
    GPUs but not the same CPU, so the fullest patterns go where their pods' CPU fits best."""
    return sorted(node_class.nodes, key=lambda n: (-work[n].cpu, -work[n].memory, n))


def _seat_fractions(
    allocation: AllocationModel,
    answer: SolverAnswer,
    node_class: NodeClass,
    fractional: dict[int, list[Pod]],
    new_devices: list[str],
    work: dict[str, NodeCapacity],
    placements: dict[str, PodPlacement],
    unseated: list[Pod],
) -> None:
    patterns = allocation.patterns.get(node_class.index)
    if not fractional or patterns is None:
        unseated.extend(p for pods in fractional.values() for p in pods)
        return
    queues = {size: sorted(pods, key=lambda p: p.key) for size, pods in fractional.items()}
    # Existing devices first: each slot's patterns go to the class's nodes in order.
    slot_groups = {n: [g for _, g in node_class.device_free(work[n])] for n in node_class.nodes}
    for slot, (slot_patterns, slot_vars) in enumerate(
        zip(patterns.existing_patterns, patterns.existing_vars, strict=True)
    ):
        expanded = [
            p for p, v in zip(slot_patterns, slot_vars, strict=True) for _ in range(answer.value(v))
        ]
        for name, pattern in zip(_roomiest_first(node_class, work), expanded, strict=False):
            group = slot_groups[name][slot] if slot < len(slot_groups[name]) else ""
            _fill_device(name, group, pattern, patterns.device_sizes, queues, work, placements)
    if patterns.device_patterns is not None:
        expanded = [
            p
            for p, v in zip(patterns.device_patterns, patterns.device_vars, strict=True)
            for _ in range(answer.value(v))
        ]
        for name, pattern in zip(new_devices, expanded, strict=False):
            _fill_device(name, "", pattern, patterns.device_sizes, queues, work, placements)
    for pods in queues.values():  # totals-only mode, or leftovers: best effort on any device
        for pod in pods:
            _seat_first_fit(pod, node_class.nodes, work, placements, unseated)
        pods.clear()


def _fill_device(
    node: str,
    group: str,
    pattern: tuple[int, ...],
    sizes: list[int],
    queues: dict[int, list[Pod]],
    work: dict[str, NodeCapacity],
    placements: dict[str, PodPlacement],
) -> None:
    """Seat the pattern's pods on one device of `node`: of each size, the first waiting pods
    whose CPU and memory the node still has. One that does not fit here stays in line for
    another device (dropping it dropped its whole gang while its device stayed empty)."""
    cap = work[node]
    for count, size in zip(pattern, sizes, strict=True):
        waiting = queues.get(size, [])
        for _ in range(count):
            free = (
                cap.node.gpu_memory_mib - cap.shared.get(group, 0)
                if group
                else cap.node.gpu_memory_mib
            )
            fits_device = (group in cap.shared and free >= size) or (
                not group and cap.whole_gpus >= 1
            )
            if not fits_device:
                return
            position = next((i for i, pod in enumerate(waiting) if cap.fits_base(pod)), None)
            if position is None:
                break
            pod = waiting.pop(position)
            taken = cap.take(pod, [group])
            group = taken[0]
            placements[pod.key] = PodPlacement(pod, node, taken)
