"""Random small clusters for the stability property test, as the manifests `kai simulate` reads.

A cluster is drawn as plain specs (nodes, a queue tree of two or three levels, jobs) and
turned into Kubernetes objects, so that the property test runs the simulator's own path
(`load_scenario`, then `simulate`) and any failing example can be written out as a
scenario YAML and replayed with `kai simulate FILE --rounds 8`.

Jobs that start running are placed on the nodes here, first fit, whole devices and
shared devices (`runai-gpu-group`) included; a job that does not fit starts pending.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from typing import Any

import yaml
from hypothesis import strategies as st

NOW = datetime(2026, 6, 1, tzinfo=UTC)
NAMESPACE = "ml"
FRACTIONS = (Fraction(1, 4), Fraction(1, 2))


@dataclass(frozen=True)
class QueueSpec:
    name: str
    parent: str | None
    quota: int  # -1: unlimited
    limit: int  # -1: unlimited
    weight: int
    priority: int


@dataclass(frozen=True)
class JobSpec:
    name: str
    queue: str
    pods: int
    min_member: int
    gpus: int  # whole devices per pod; 0 when fractional
    fraction: Fraction  # gpu-fraction per pod; 0 when whole
    priority_class: str  # train | build
    preemptibility: str | None  # explicit spec.preemptibility, else derived from the class
    running: int  # pods that start running (0: pending; else at least min_member)
    age: int  # minutes before NOW the job was created: orders jobs of equal priority


@dataclass(frozen=True)
class Cluster:
    nodes: tuple[int, ...]  # GPUs per node
    queues: tuple[QueueSpec, ...]
    jobs: tuple[JobSpec, ...]

    @property
    def leaves(self) -> list[str]:
        parents = {q.parent for q in self.queues}
        return [q.name for q in self.queues if q.name not in parents]


@dataclass
class _Device:
    used: Fraction = Fraction(0)
    shared: bool = False


@dataclass
class _Node:
    name: str
    devices: list[_Device] = field(default_factory=list)

    def place_whole(self, gpus: int) -> bool:
        free = [d for d in self.devices if d.used == 0]
        if len(free) < gpus:
            return False
        for device in free[:gpus]:
            device.used = Fraction(1)
        return True

    def place_fraction(self, fraction: Fraction) -> int | None:
        candidates = [i for i, d in enumerate(self.devices) if d.shared and d.used + fraction <= 1]
        candidates += [i for i, d in enumerate(self.devices) if d.used == 0]
        if not candidates:
            return None
        index = candidates[0]
        self.devices[index].shared = True
        self.devices[index].used += fraction
        return index


@st.composite
def queue_trees(
    draw: st.DrawFn, priorities: bool = True, unlimited_quotas: bool = True, limits: bool = True
) -> tuple[QueueSpec, ...]:
    """Two or three levels: departments, their teams, and sometimes teams split once more."""
    quotas = st.sampled_from(
        [0, 0, 1, 2, 2, 3, 4, -1] if unlimited_quotas else [0, 0, 1, 2, 2, 3, 4]
    )
    queues: list[QueueSpec] = []

    def add(name: str, parent: str | None) -> None:
        quota = draw(quotas)
        limit = draw(st.sampled_from([-1, -1, -1, 2, 4, 6])) if limits else -1
        if limit != -1 and (quota == -1 or limit < quota):
            limit = -1
        queues.append(
            QueueSpec(
                name,
                parent,
                quota,
                limit,
                draw(st.sampled_from([1, 1, 2, 0, 3])),
                draw(st.sampled_from([100, 100, 100, 200])) if priorities else 100,
            )
        )

    for d in range(draw(st.integers(1, 2))):
        dept = f"d{d}"
        add(dept, None)
        for t in range(draw(st.integers(1, 2))):
            team = f"{dept}t{t}"
            add(team, dept)
            if draw(st.integers(0, 3)) == 0:
                for s in range(2):
                    add(f"{team}s{s}", team)
    return tuple(queues)


@st.composite
def clusters(
    draw: st.DrawFn,
    *,
    elastic: bool = True,
    limits: bool = True,
    queue_priorities: bool = True,
    unlimited_quotas: bool = True,
) -> Cluster:
    """A cluster of 1-2 nodes, a 2-3 level queue tree and 2-7 jobs, two in three running.

    `elastic=False` leaves out elastic jobs (every job's minMember is all its pods);
    `limits=False` gives no queue a GPU limit;
    `queue_priorities=False` gives every queue the default priority;
    `unlimited_quotas=False` gives every queue a finite GPU quota (never -1).
    """
    nodes = tuple(draw(st.lists(st.integers(1, 8), min_size=1, max_size=2)))
    queues = draw(queue_trees(queue_priorities, unlimited_quotas, limits))
    parents = {q.parent for q in queues}
    leaves = [q.name for q in queues if q.name not in parents]
    jobs: list[JobSpec] = []
    for j in range(draw(st.integers(2, 7))):
        kinds = ["single", "gang", "elastic"] if elastic else ["single", "gang"]
        kind = draw(st.sampled_from(kinds))
        if kind == "single":
            size, min_member = 1, 1
        elif kind == "gang":
            size = draw(st.integers(2, 3))
            min_member = size
        else:
            size = draw(st.integers(2, 4))
            min_member = draw(st.integers(1, size - 1))
        fractional = draw(st.integers(0, 3)) == 0
        fraction = draw(st.sampled_from(FRACTIONS)) if fractional else Fraction(0)
        gpus = 0 if fractional else draw(st.sampled_from([1, 1, 2, 4]))
        running = 0
        if draw(st.integers(0, 2)):
            running = draw(st.integers(min_member, size))
        # Running work leans to the first leaf, so that other queues have something to reclaim.
        queue = leaves[0] if running and draw(st.booleans()) else draw(st.sampled_from(leaves))
        priority_class = draw(st.sampled_from(["train", "train", "build"]))
        preemptibility = draw(st.sampled_from([None, None, None, "preemptible", "non-preemptible"]))
        jobs.append(
            JobSpec(
                f"j{j}",
                queue,
                size,
                min_member,
                gpus,
                fraction,
                priority_class,
                preemptibility,
                running,
                draw(st.integers(0, 5)),
            )
        )
    return Cluster(nodes, queues, tuple(jobs))


def manifests(cluster: Cluster) -> list[dict[str, Any]]:
    """The cluster as Kubernetes objects; running jobs placed first fit, or left pending."""
    nodes = [
        _Node(f"node{i}", [_Device() for _ in range(gpus)]) for i, gpus in enumerate(cluster.nodes)
    ]
    items: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": node.name},
            "status": {
                "allocatable": {
                    "cpu": "64",
                    "memory": "512Gi",
                    "pods": "110",
                    "nvidia.com/gpu": str(len(node.devices)),
                }
            },
        }
        for node in nodes
    ]
    for q in cluster.queues:
        spec: dict[str, Any] = {
            "priority": q.priority,
            "resources": {
                "gpu": {"quota": q.quota, "limit": q.limit, "overQuotaWeight": q.weight},
                "cpu": {"quota": -1, "limit": -1},
                "memory": {"quota": -1, "limit": -1},
            },
        }
        if q.parent:
            spec["parentQueue"] = q.parent
        items.append(
            {
                "apiVersion": "scheduling.run.ai/v2",
                "kind": "Queue",
                "metadata": {"name": q.name},
                "spec": spec,
            }
        )
    for job in cluster.jobs:
        created = _timestamp(NOW - timedelta(minutes=10 + job.age))
        spec = {"minMember": job.min_member, "queue": job.queue}
        spec["priorityClassName"] = job.priority_class
        if job.preemptibility:
            spec["preemptibility"] = job.preemptibility
        items.append(
            {
                "apiVersion": "scheduling.run.ai/v2alpha2",
                "kind": "PodGroup",
                "metadata": {
                    "name": job.name,
                    "namespace": NAMESPACE,
                    "creationTimestamp": created,
                },
                "spec": spec,
            }
        )
        placed = _place(nodes, job) if job.running else None
        for i in range(job.pods):
            where = placed[i] if placed is not None and i < len(placed) else None
            items.append(_pod(job, i, created, where))
    return items


def to_yaml(cluster: Cluster, comment: str = "") -> str:
    header = "".join(f"# {line}\n" if line else "#\n" for line in comment.splitlines())
    body = yaml.safe_dump(
        {"apiVersion": "v1", "kind": "List", "items": manifests(cluster)},
        sort_keys=False,
        default_flow_style=None,
        width=200,
    )
    return header + body


def _place(nodes: list[_Node], job: JobSpec) -> list[tuple[str, int | None]] | None:
    """First fit for the job's running pods; None (and nothing taken) when they do not all fit."""
    saved = [[(_Device(d.used, d.shared)) for d in node.devices] for node in nodes]
    where: list[tuple[str, int | None]] = []
    for _ in range(job.running):
        for node in nodes:
            if job.fraction:
                index = node.place_fraction(job.fraction)
                if index is not None:
                    where.append((node.name, index))
                    break
            elif node.place_whole(job.gpus):
                where.append((node.name, None))
                break
        else:
            for node, devices in zip(nodes, saved, strict=True):
                node.devices = devices
            return None
    return where


def _pod(
    job: JobSpec, index: int, created: str, where: tuple[str, int | None] | None
) -> dict[str, Any]:
    annotations = {"pod-group-name": job.name}
    labels: dict[str, str] = {}
    requests: dict[str, str] = {"cpu": "1", "memory": "1Gi"}
    limits: dict[str, str] = {}
    if job.fraction:
        annotations["gpu-fraction"] = str(float(job.fraction))
    else:
        requests["nvidia.com/gpu"] = limits["nvidia.com/gpu"] = str(job.gpus)
    metadata: dict[str, Any] = {
        "name": f"{job.name}-{index}",
        "namespace": NAMESPACE,
        "creationTimestamp": created,
        "annotations": annotations,
    }
    spec: dict[str, Any] = {
        "schedulerName": "kai-scheduler",
        "containers": [{"name": "c", "resources": {"requests": requests, "limits": limits}}],
    }
    pod: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}
    if where is not None:
        node, device = where
        spec["nodeName"] = node
        if device is not None:
            labels["runai-gpu-group"] = f"{node}-gpu{device}"
        pod["status"] = {"phase": "Running"}
    if labels:
        metadata["labels"] = labels
    if not limits:
        del spec["containers"][0]["resources"]["limits"]
    return pod


def _timestamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
