"""A synthetic GPU cluster built from a fixed seed, as engine objects, for benchmarks.

Benchmarks need clusters of thousands of nodes and tens of thousands of pods that
look like real ones (mixed GPU products, a department/project queue tree, nodes
already partly used, gangs of many sizes, fractional pods, a few pinned products)
and that are identical on every run. Building `kai.engine.model` objects directly,
without manifests, keeps generation much cheaper than the cycle being measured.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from fractions import Fraction

from kai.api.constants import (
    BUILD_PREEMPTIBLE_PRIORITY_CLASS,
    BUILD_PRIORITY_CLASS,
    GPU_MEMORY_NODE_LABEL,
    INFERENCE_PRIORITY_CLASS,
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

GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
GPU_COUNT_LABEL = "nvidia.com/gpu.count"
GIB = 2**30
MILLICORES = 1000
GPU_MEMORY_STEP_MIB = 100  # KAI floors a node's device memory to a multiple of this
MAX_PODS_PER_NODE = 110
NOW = datetime(2025, 1, 1, tzinfo=UTC)  # fixed, so two runs build equal snapshots

WHOLE_GPU_SIZES = (1, 2, 3, 4, 6, 8)
WHOLE_GPU_WEIGHTS = (4, 3, 1, 3, 1, 3)
GANG_SIZES = (1, 2, 4, 8, 12, 16, 24, 32)
GANG_SIZE_WEIGHTS = (2, 2, 2, 2, 1, 1, 1, 1)
GPU_PORTIONS = (Fraction(1, 4), Fraction(1, 2), Fraction(3, 4))
GPU_MEMORY_ASKS_MIB = (10240, 20480, 40960)


@dataclass(frozen=True)
class NodeType:
    """One kind of GPU server: its product label, device memory and host size."""

    product: str
    device_memory_mib: int  # as the GPU operator labels it; the engine floors it
    cpu_cores: int
    memory_gib: int
    weight: int  # relative share of the fleet


NODE_TYPES = (
    NodeType("NVIDIA-A100-SXM4-80GB", 81920, 128, 1536, 5),
    NodeType("NVIDIA-H100-80GB-HBM3", 81559, 192, 2048, 3),
    NodeType("NVIDIA-L40S", 46068, 96, 1024, 2),
)


@dataclass(frozen=True)
class ClusterSpec:
    """What to build. The shares are targets; the generator keeps the fractional share exact-ish."""

    nodes: int
    pods: int  # pending pods
    seed: int = 1
    gpus_per_node: int = 8
    fractional_share: float = 0.2  # of pending pods, asking for part of one device
    used_node_share: float = 0.3  # of nodes, already running pods of ours
    selector_share: float = 0.1  # of pending gangs, pinned to one GPU product by nodeSelector
    elastic_share: float = 0.2  # of pending gangs of 2+ pods, with minMember below their size

    def __post_init__(self) -> None:
        if self.nodes < 1 or self.pods < 0 or self.gpus_per_node < 1:
            raise ValueError(
                f"ClusterSpec: nodes must be >= 1, pods >= 0 and gpus_per_node >= 1; got "
                f"nodes={self.nodes}, pods={self.pods}, gpus_per_node={self.gpus_per_node}"
            )


def synthetic_cluster(spec: ClusterSpec) -> Snapshot:
    """The same snapshot for the same spec, every time."""
    rng = random.Random(spec.seed)
    nodes = _nodes(spec, rng)
    queues = _queues(spec, rng)
    leaves = [q.name for q in queues if q.parent is not None]
    running_groups, running_pods = _running(spec, nodes, queues, leaves, rng)
    pending_groups, pending_pods = _pending(spec, leaves, rng)
    return Snapshot(
        nodes=tuple(nodes),
        pods=(*running_pods, *pending_pods),
        pod_groups=(*running_groups, *pending_groups),
        queues=tuple(queues),
        now=NOW,
    )


def _nodes(spec: ClusterSpec, rng: random.Random) -> list[Node]:
    types = rng.choices(NODE_TYPES, [t.weight for t in NODE_TYPES], k=spec.nodes)
    return [
        Node(
            name=f"node-{index:05d}",
            labels=(
                (GPU_PRODUCT_LABEL, kind.product),
                (GPU_MEMORY_NODE_LABEL, str(kind.device_memory_mib)),
                (GPU_COUNT_LABEL, str(spec.gpus_per_node)),
            ),
            allocatable=Resources.of(
                spec.gpus_per_node, kind.cpu_cores * MILLICORES, kind.memory_gib * GIB
            ),
            max_pods=MAX_PODS_PER_NODE,
            gpu_memory_mib=kind.device_memory_mib // GPU_MEMORY_STEP_MIB * GPU_MEMORY_STEP_MIB,
        )
        for index, kind in enumerate(types)
    ]


def _queues(spec: ClusterSpec, rng: random.Random) -> list[Queue]:
    """Departments over projects; GPU quotas sum to 80% of the cluster, a third of projects capped."""
    unlimited = QueueResource(quota=UNLIMITED, limit=UNLIMITED)
    cluster_gpus = spec.nodes * spec.gpus_per_node
    departments = rng.randint(2, 5)
    queues: list[Queue] = []
    for dept, dept_quota in enumerate(_split(cluster_gpus * 4 // 5, departments, rng)):
        dept_name = f"dept-{dept}"
        queues.append(
            Queue(
                dept_name,
                None,
                gpu=QueueResource(quota=Fraction(dept_quota)),
                cpu=unlimited,
                memory=unlimited,
            )
        )
        projects = rng.randint(2, 5)
        for project, quota in enumerate(_split(dept_quota * 9 // 10, projects, rng)):
            limit = Fraction(quota * 3 // 2) if rng.random() < 1 / 3 else UNLIMITED
            gpu = QueueResource(Fraction(quota), limit, Fraction(rng.choice((1, 1, 2, 3))))
            queues.append(
                Queue(
                    f"{dept_name}-proj-{project}",
                    dept_name,
                    gpu=gpu,
                    cpu=unlimited,
                    memory=unlimited,
                )
            )
    return queues


def _split(total: int, parts: int, rng: random.Random) -> list[int]:
    """`total` cut into `parts` whole random shares that sum to at most `total`."""
    weights = [rng.uniform(1.0, 3.0) for _ in range(parts)]
    scale = sum(weights)
    return [int(total * w / scale) for w in weights]


def _running(
    spec: ClusterSpec,
    nodes: Sequence[Node],
    queues: Sequence[Queue],
    leaves: Sequence[str],
    rng: random.Random,
) -> tuple[list[PodGroup], list[Pod]]:
    """Preemptible gangs already bound, within every queue limit: one whole-GPU pod per used node,
    and on some of those nodes a half-GPU pod on a named shared device, so devices start part-full.
    """
    by_name = {q.name: q for q in queues}
    held: dict[str, Fraction] = {}
    used = [node for node in nodes if rng.random() < spec.used_node_share]
    groups: list[PodGroup] = []
    pods: list[Pod] = []

    def admit(name: str, leaf: str, size: int, gpus: Fraction) -> PodGroup | None:
        chain = _ancestry(by_name, leaf)
        if any(
            q.gpu.limit != UNLIMITED and held.get(q.name, 0) + gpus > q.gpu.limit for q in chain
        ):
            return None
        for queue in chain:
            held[queue.name] = held.get(queue.name, Fraction(0)) + gpus
        created = NOW - timedelta(hours=rng.randint(1, 48))
        group = _group(name, leaf, size, TRAIN_PRIORITY_CLASS, created)
        groups.append(group)
        return group

    start = 0
    while start < len(used):
        members = used[start : start + rng.randint(1, 4)]
        start += len(members)
        leaf = rng.choice(leaves)
        per_pod = rng.randint(1, spec.gpus_per_node - 1)  # leaves a device free for sharing
        request = _whole_request(per_pod, rng)
        if not all(request.fits_in(node.allocatable) for node in members):
            continue
        group = admit(
            f"run-{len(groups):05d}", leaf, len(members), Fraction(per_pod * len(members))
        )
        if group is None:
            continue
        for index, node in enumerate(members):
            pods.append(
                _pod(
                    group,
                    index,
                    request,
                    GpuRequest(whole=per_pod),
                    Placement(),
                    PodPhase.BOUND,
                    node.name,
                )
            )
            if rng.random() >= 1 / 3:
                continue
            half, half_request = GpuRequest(portion=Fraction(1, 2)), _fractional_host_request(rng)
            if not (request + half_request).fits_in(node.allocatable):
                continue
            serving = admit(f"run-{len(groups):05d}", leaf, 1, half.portion)
            if serving is not None:
                shared = _pod(
                    serving, 0, half_request, half, Placement(), PodPhase.BOUND, node.name
                )
                pods.append(dataclasses.replace(shared, gpu_groups=(f"{node.name}-shared-0",)))
    return groups, pods


def _pending(
    spec: ClusterSpec, leaves: Sequence[str], rng: random.Random
) -> tuple[list[PodGroup], list[Pod]]:
    """Gangs of 1-32 pending pods until `spec.pods` exist; fractional gangs fill the target share."""
    groups: list[PodGroup] = []
    pods: list[Pod] = []
    fractional_pods = 0
    while len(pods) < spec.pods:
        size = min(spec.pods - len(pods), rng.choices(GANG_SIZES, GANG_SIZE_WEIGHTS)[0])
        # Deciding by the running deficit (not a coin per gang) keeps the share near its target
        # even though gang sizes vary thirty-fold.
        fractional = fractional_pods < spec.fractional_share * (len(pods) + size)
        if fractional:
            fractional_pods += size
            gpu, request = _fractional_request(rng)
            priority_class = rng.choice((INFERENCE_PRIORITY_CLASS, TRAIN_PRIORITY_CLASS))
        else:
            whole = rng.choices(WHOLE_GPU_SIZES, WHOLE_GPU_WEIGHTS)[0]
            gpu, request = GpuRequest(whole=whole), _whole_request(whole, rng)
            priority_class = rng.choices(
                (TRAIN_PRIORITY_CLASS, BUILD_PREEMPTIBLE_PRIORITY_CLASS, BUILD_PRIORITY_CLASS),
                (15, 3, 2),
            )[0]
        placement = Placement()
        if rng.random() < spec.selector_share:
            product = rng.choice(NODE_TYPES).product
            placement = Placement(node_selector=((GPU_PRODUCT_LABEL, product),))
        min_member = size
        if size > 1 and rng.random() < spec.elastic_share:
            min_member = size // 2
        group = _group(
            f"job-{len(groups):05d}",
            rng.choice(leaves),
            min_member,
            priority_class,
            NOW - timedelta(seconds=rng.randint(1, 86400)),
        )
        groups.append(group)
        pods.extend(
            _pod(group, index, request, gpu, placement, PodPhase.PENDING, None)
            for index in range(size)
        )
    return groups, pods


def _whole_request(gpus: int, rng: random.Random) -> Resources:
    cores = gpus * rng.choice((8, 12, 16))
    return Resources.of(gpus, cores * MILLICORES, gpus * rng.choice((64, 96, 128)) * GIB)


def _fractional_request(rng: random.Random) -> tuple[GpuRequest, Resources]:
    if rng.random() < 1 / 3:
        gpu = GpuRequest(memory_mib=rng.choice(GPU_MEMORY_ASKS_MIB))
    else:
        gpu = GpuRequest(portion=rng.choice(GPU_PORTIONS))
    return gpu, _fractional_host_request(rng)


def _fractional_host_request(rng: random.Random) -> Resources:
    return Resources.of(0, rng.choice((2, 4, 8)) * MILLICORES, rng.choice((16, 32, 64)) * GIB)


def _group(
    name: str, leaf: str, min_member: int, priority_class: str, created: datetime
) -> PodGroup:
    priority = default_priority_classes()[priority_class]
    return PodGroup(
        namespace=f"ns-{leaf}",
        name=name,
        queue=leaf,
        min_member=min_member,
        priority=priority,
        preemptible=priority < NON_PREEMPTIBLE_PRIORITY_THRESHOLD,
        created=created,
        uid=f"uid-{leaf}-{name}",
        priority_class=priority_class,
    )


def _pod(
    group: PodGroup,
    index: int,
    request: Resources,
    gpu: GpuRequest,
    placement: Placement,
    phase: PodPhase,
    node: str | None,
) -> Pod:
    name = f"{group.name}-{index}"
    return Pod(
        namespace=group.namespace,
        name=name,
        uid=f"{group.uid}-{index}",
        group=group.key,
        subgroup=None,
        phase=phase,
        node=node,
        request=request,
        gpu=gpu,
        placement=placement,
        created=group.created,
    )


def _ancestry(queues: dict[str, Queue], leaf: str) -> list[Queue]:
    chain: list[Queue] = []
    name: str | None = leaf
    while name is not None:
        chain.append(queues[name])
        name = queues[name].parent
    return chain
