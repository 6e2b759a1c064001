"""A synthetic GPU cluster with every GPU in use, and gangs waiting that only evictions can place.

The eviction benchmark needs the situation reclaim and preempt exist for: some
queues ("borrowers") run far above their deserved quota on a full cluster, others
("starved") run below it and have gangs pending within what they deserve, and some
borrowers have pending gangs that outrank their own running work. Everything is
drawn from one seed, so two runs build equal snapshots. Node types and the
constants of a node come from `bench.synthetic`.
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from fractions import Fraction

from bench.synthetic import GIB, GPU_MEMORY_STEP_MIB, MAX_PODS_PER_NODE, MILLICORES, NODE_TYPES, NOW
from kai.api.constants import (
    BUILD_PREEMPTIBLE_PRIORITY_CLASS,
    TRAIN_PRIORITY_CLASS,
    default_priority_classes,
)
from kai.engine.model import (
    NON_PREEMPTIBLE_PRIORITY_THRESHOLD,
    UNLIMITED,
    GpuRequest,
    Node,
    Placement,
    Pod,
    PodGroup,
    PodPhase,
    Queue,
    QueueResource,
    Snapshot,
)
from kai.engine.resources import Resources

POD_GPUS = (1, 2, 4, 8)
POD_GPU_WEIGHTS = (3, 3, 2, 1)
CORES_PER_GPU = 8
MEMORY_GIB_PER_GPU = 64
MIN_RUNTIME_SECONDS = 600.0  # on a third of the departments: young work is protected


@dataclass(frozen=True)
class FullClusterSpec:
    nodes: int
    queues: int = 20  # leaf queues
    seed: int = 1
    gpus_per_node: int = 8

    def __post_init__(self) -> None:
        if self.nodes < 1 or self.queues < 2 or self.gpus_per_node < 1:
            raise ValueError(
                f"FullClusterSpec: nodes must be >= 1, queues >= 2 and gpus_per_node >= 1; got "
                f"nodes={self.nodes}, queues={self.queues}, gpus_per_node={self.gpus_per_node}"
            )


def full_cluster(spec: FullClusterSpec) -> Snapshot:
    """The same snapshot for the same spec, every time."""
    rng = random.Random(spec.seed)
    nodes = _nodes(spec, rng)
    queues, borrowers, starved = _queues(spec, rng)
    groups, pods = _running(spec, nodes, queues, borrowers, starved, rng)
    pending_groups, pending_pods = _pending(spec, queues, borrowers, starved, groups, pods, rng)
    return Snapshot(
        nodes=tuple(nodes),
        pods=(*pods, *pending_pods),
        pod_groups=(*groups, *pending_groups),
        queues=tuple(queues),
        now=NOW,
    )


def _nodes(spec: FullClusterSpec, rng: random.Random) -> list[Node]:
    kinds = rng.choices(NODE_TYPES, [t.weight for t in NODE_TYPES], k=spec.nodes)
    return [
        Node(
            name=f"node-{index:05d}",
            labels=(("nvidia.com/gpu.product", kind.product),),
            allocatable=Resources.of(
                spec.gpus_per_node, kind.cpu_cores * MILLICORES, kind.memory_gib * GIB
            ),
            max_pods=MAX_PODS_PER_NODE,
            gpu_memory_mib=kind.device_memory_mib // GPU_MEMORY_STEP_MIB * GPU_MEMORY_STEP_MIB,
        )
        for index, kind in enumerate(kinds)
    ]


def _queues(spec: FullClusterSpec, rng: random.Random) -> tuple[list[Queue], list[str], list[str]]:
    """Departments over projects; deserved quotas sum to 80% of the GPUs; half the projects borrow."""
    unlimited = QueueResource(quota=UNLIMITED, limit=UNLIMITED)
    cluster_gpus = spec.nodes * spec.gpus_per_node
    departments = max(2, spec.queues // 5)
    per_department = [spec.queues // departments] * departments
    for extra in range(spec.queues - sum(per_department)):
        per_department[extra] += 1
    queues: list[Queue] = []
    leaves: list[str] = []
    dept_quotas = _split(cluster_gpus * 4 // 5, departments, rng)
    for dept, (quota, projects) in enumerate(zip(dept_quotas, per_department, strict=True)):
        name = f"dept-{dept}"
        protected = dept % 3 == 0
        queues.append(
            Queue(
                name,
                None,
                gpu=QueueResource(Fraction(quota)),
                cpu=unlimited,
                memory=unlimited,
                preempt_min_runtime_seconds=MIN_RUNTIME_SECONDS if protected else None,
                reclaim_min_runtime_seconds=MIN_RUNTIME_SECONDS if protected else None,
            )
        )
        for project, share in enumerate(_split(quota, projects, rng)):
            leaf = f"{name}-proj-{project}"
            gpu = QueueResource(Fraction(share), UNLIMITED, Fraction(rng.choice((1, 2))))
            queues.append(Queue(leaf, name, gpu=gpu, cpu=unlimited, memory=unlimited))
            leaves.append(leaf)
    shuffled = sorted(leaves, key=lambda _: rng.random())
    half = len(shuffled) // 2
    return queues, sorted(shuffled[:half]), sorted(shuffled[half:])


def _split(total: int, parts: int, rng: random.Random) -> list[int]:
    weights = [rng.uniform(1.0, 3.0) for _ in range(parts)]
    scale = sum(weights)
    return [int(total * w / scale) for w in weights]


def _running(
    spec: FullClusterSpec,
    nodes: list[Node],
    queues: list[Queue],
    borrowers: list[str],
    starved: list[str],
    rng: random.Random,
) -> tuple[list[PodGroup], list[Pod]]:
    """Fill every GPU with preemptible gangs: borrowers hold most, starved queues a little."""
    deserved = {q.name: q.gpu.quota for q in queues}
    held: dict[str, int] = dict.fromkeys(borrowers + starved, 0)
    groups: list[PodGroup] = []
    pods: list[Pod] = []
    open_gang: list[tuple[PodGroup, int]] = []  # the gang being filled and how many pods it wants
    for node in nodes:
        free = spec.gpus_per_node
        while free:
            size = rng.choices(POD_GPUS, POD_GPU_WEIGHTS)[0]
            while size > free:
                size //= 2
            if not open_gang or open_gang[0][1] == 0:
                queue = _running_queue(borrowers, starved, held, deserved, rng)
                want = rng.choice((1, 1, 2, 4))
                class_name = rng.choices(
                    (TRAIN_PRIORITY_CLASS, BUILD_PREEMPTIBLE_PRIORITY_CLASS), (4, 1)
                )[0]
                started = NOW - timedelta(seconds=rng.randint(60, 48 * 3600))
                group = _group(f"run-{len(groups):05d}", queue, want, class_name, started)
                groups.append(group)
                open_gang[:] = [(group, want)]
            group, want = open_gang[0]
            held[group.queue] += size
            pods.append(_pod(group, want - 1, size, node.name))
            open_gang[0] = (group, want - 1)
            free -= size
    # Gangs cut short by the end of the cluster keep what they got as their minimum.
    counts: dict[str, int] = {}
    for pod in pods:
        counts[pod.group] = counts.get(pod.group, 0) + 1
    groups = [
        dataclasses.replace(group, min_member=min(group.min_member, counts[group.key]))
        for group in groups
    ]
    return groups, pods


def _running_queue(
    borrowers: list[str],
    starved: list[str],
    held: dict[str, int],
    deserved: dict[str, Fraction],
    rng: random.Random,
) -> str:
    """A borrower most of the time; a starved queue only while it holds under half its quota."""
    hungry = [q for q in starved if held[q] < deserved[q] / 2]
    if hungry and rng.random() < 0.25:
        return rng.choice(hungry)
    return rng.choice(borrowers)


def _pending(
    spec: FullClusterSpec,
    queues: list[Queue],
    borrowers: list[str],
    starved: list[str],
    groups: list[PodGroup],
    pods: list[Pod],
    rng: random.Random,
) -> tuple[list[PodGroup], list[Pod]]:
    """Reclaimers: gangs in starved queues within their quota. Preemptors: higher-priority gangs
    in a third of the borrowers."""
    deserved = {q.name: q.gpu.quota for q in queues}
    queue_of = {group.key: group.queue for group in groups}
    held: dict[str, int] = {}
    for pod in pods:
        queue = queue_of[pod.group]
        held[queue] = held.get(queue, 0) + pod.gpu.whole
    new_groups: list[PodGroup] = []
    new_pods: list[Pod] = []

    def add(queue: str, room: int, class_name: str) -> None:
        size = rng.choice([s for s in POD_GPUS if s <= room] or [1])
        count = max(1, min(rng.choice((1, 2, 4)), room // size))
        created = NOW - timedelta(seconds=rng.randint(60, 3600))
        group = _group(f"job-{len(new_groups):05d}", queue, count, class_name, created)
        group = dataclasses.replace(group, last_start=None)
        new_groups.append(group)
        new_pods.extend(_pending_pod(group, index, size) for index in range(count))

    for queue in starved:
        room = int(deserved[queue]) - held.get(queue, 0)
        for _ in range(rng.choice((1, 2))):
            if room >= 1:
                add(queue, room, TRAIN_PRIORITY_CLASS)
                room -= sum(p.gpu.whole for p in new_pods if p.group == new_groups[-1].key)
    for queue in borrowers[: max(1, len(borrowers) // 3)]:
        add(queue, spec.gpus_per_node, BUILD_PREEMPTIBLE_PRIORITY_CLASS)
    return new_groups, new_pods


def _group(name: str, queue: str, min_member: int, class_name: str, started: datetime) -> PodGroup:
    priority = default_priority_classes()[class_name]
    namespace = f"ns-{queue}"
    return PodGroup(
        namespace=namespace,
        name=name,
        queue=queue,
        min_member=min_member,
        priority=priority,
        preemptible=priority < NON_PREEMPTIBLE_PRIORITY_THRESHOLD,
        created=started,
        uid=f"uid-{namespace}-{name}",
        priority_class=class_name,
        last_start=started,
    )


def _pod(group: PodGroup, index: int, gpus: int, node: str) -> Pod:
    return _make_pod(group, f"{group.name}-{index}", gpus, PodPhase.BOUND, node)


def _pending_pod(group: PodGroup, index: int, gpus: int) -> Pod:
    return _make_pod(group, f"{group.name}-{index}", gpus, PodPhase.PENDING, None)


def _make_pod(group: PodGroup, name: str, gpus: int, phase: PodPhase, node: str | None) -> Pod:
    return Pod(
        namespace=group.namespace,
        name=name,
        uid=f"{group.uid}-{name}",
        group=group.key,
        subgroup=None,
        phase=phase,
        node=node,
        request=Resources.of(
            gpus, gpus * CORES_PER_GPU * MILLICORES, gpus * MEMORY_GIB_PER_GPU * GIB
        ),
        gpu=GpuRequest(whole=gpus),
        placement=Placement(),
        created=group.created,
    )
