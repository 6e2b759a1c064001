"""Small clusters worked out by hand for the eviction rule tests: fair shares and usage are in the docstrings."""

from __future__ import annotations

import dataclasses
import random
from datetime import timedelta
from fractions import Fraction
from typing import Any

from kai.engine.model import Pod, PodGroup, Queue, QueueResource, Snapshot
from tests.unit.engine.builders import NOW, UNLIMITED_RESOURCE, group, node, pod, queue, snapshot


def running(
    name: str, queue_name: str, gpus: int, node_name: str, **fields: Any
) -> tuple[PodGroup, Pod]:
    g = dataclasses.replace(group(name, queue_name), **fields)
    return g, pod(name, name, gpus, cpu=0, memory=0, node_name=node_name)


def inside_deserved_cluster() -> Snapshot:
    """keeper holds its deserved 4; borrower (deserved 0) holds 4; claimant (deserved 4) waits for 4."""
    groups: list[PodGroup] = []
    pods: list[Pod] = []
    for i in range(4):
        g, p = running(f"keep-{i}", "keeper", 1, "n0", priority=40)
        groups.append(g)
        pods.append(p)
        g, p = running(f"borrow-{i}", "borrower", 1, "n1", priority=75)
        groups.append(g)
        pods.append(p)
    groups.append(group("claim", "claimant", min_member=4))
    pods += [pod(f"claim-{i}", "claim", 1, cpu=0, memory=0) for i in range(4)]
    queues = [
        queue("keeper", gpu_quota=4),
        queue("borrower", gpu_quota=0),
        queue("claimant", gpu_quota=4),
    ]
    return snapshot([node("n0", gpus=4), node("n1", gpus=4)], pods, groups, queues)


def chunk_cluster() -> Snapshot:
    """10 GPUs. Fair shares: a 4 (deserved 4), b 4 (deserved 2, holds 6), c 2 (deserved 0, holds 4)."""
    groups: list[PodGroup] = []
    pods: list[Pod] = []
    for i in range(6):
        g, p = running(f"b-{i}", "b", 1, f"n{i // 2}")
        groups.append(g)
        pods.append(p)
    for i in range(4):
        g, p = running(f"c-{i}", "c", 1, f"n{3 + i // 2}")
        groups.append(g)
        pods.append(p)
    groups.append(group("gang", "a", min_member=2))
    pods += [pod(f"gang-{i}", "gang", 2, cpu=0, memory=0) for i in range(2)]
    queues = [queue("a", gpu_quota=4), queue("b", gpu_quota=2), queue("c", gpu_quota=0)]
    return snapshot([node(f"n{i}", gpus=2) for i in range(5)], pods, groups, queues)


def departments(cpu_ask: int) -> Snapshot:
    """dept-1 holds its CPU fair share through p2's protected jobs; dept-2 holds all 8 GPUs."""

    def dq(name: str, gpu: int, cpu: int, parent: str | None = None, **fields: Any) -> Queue:
        q = Queue(
            name,
            parent,
            gpu=QueueResource(Fraction(gpu), Fraction(-1), Fraction(1)),
            cpu=QueueResource(Fraction(cpu), Fraction(-1), Fraction(1)),
            memory=UNLIMITED_RESOURCE,
        )
        return dataclasses.replace(q, **fields)

    queues = [
        dq("dept-1", 4, 16_000),
        dq("dept-2", 2, 16_000),
        dq("p1", 0, 0, "dept-1"),
        dq("p2", 0, 0, "dept-1", reclaim_min_runtime_seconds=3600.0),
        dq("p3", 0, 0, "dept-2"),
    ]
    groups: list[PodGroup] = []
    pods: list[Pod] = []
    for i in range(2):
        g = dataclasses.replace(group(f"cpu-{i}", "p2"), last_start=NOW - timedelta(minutes=1))
        groups.append(g)
        pods.append(pod(f"cpu-{i}", f"cpu-{i}", 0, cpu=8000, memory=0, node_name=f"n{i}"))
    for i in range(8):
        groups.append(group(f"gpu-{i}", "p3"))
        pods.append(pod(f"gpu-{i}", f"gpu-{i}", 1, cpu=2000, memory=0, node_name=f"n{i // 4}"))
    groups.append(group("want", "p1"))
    pods.append(pod("want-0", "want", 1, cpu=cpu_ask, memory=0))
    nodes = [node(f"n{i}", gpus=4, cpu=16_000) for i in range(2)]
    return snapshot(nodes, pods, groups, queues)


def priority_cluster() -> Snapshot:
    groups: list[PodGroup] = []
    pods: list[Pod] = []
    for name, priority in (("low", 50), ("peer", 75), ("np", 60)):
        g, p = running(name, "team", 2, "n0", priority=priority, preemptible=name != "np")
        groups.append(g)
        pods.append(p)
    young = dataclasses.replace(
        group("young", "team", priority=50), last_start=NOW - timedelta(minutes=1)
    )
    elastic = dataclasses.replace(
        group("elastic", "team", min_member=1, priority=50), last_start=NOW - timedelta(minutes=1)
    )
    groups += [young, elastic, group("urgent", "team", priority=75)]
    pods += [
        pod("young", "young", 1, cpu=0, memory=0, node_name="n1"),
        pod("elastic-0", "elastic", 1, cpu=0, memory=0, node_name="n1"),
        pod("elastic-1", "elastic", 1, cpu=0, memory=0, node_name="n1"),
        pod("urgent-0", "urgent", 2, cpu=0, memory=0),
    ]
    team = dataclasses.replace(queue("team", gpu_quota=8), preempt_min_runtime_seconds=600.0)
    return snapshot([node("n0", gpus=6), node("n1", gpus=3)], pods, groups, [team])


def fragmented() -> Snapshot:
    """n0: a, b (1 GPU, priority 10) and c (2, priority 40); n1: d (2, priority 20), e, f (1, 40).

    KAI's order takes b, a, d (lowest priorities first, newest first), then f and e (priority
    40, newest first), and only then does a node have the 4 GPUs the urgent pod needs. The
    greedy search trims that to d, e, f (dropping the largest and latest first); evicting a,
    b and c frees n0 with as few GPUs and pods and takes less from priority 40.
    """
    running = {
        "a": ("n0", 1, 10),
        "b": ("n0", 1, 10),
        "c": ("n0", 2, 40),
        "d": ("n1", 2, 20),
        "e": ("n1", 1, 40),
        "f": ("n1", 1, 40),
    }
    pods = [pod(name, name, gpus, node_name=where) for name, (where, gpus, _) in running.items()]
    groups = [group(name, "team", priority=priority) for name, (_, _, priority) in running.items()]
    pods.append(pod("urgent-0", "urgent", 4))
    groups.append(group("urgent", "team", priority=75))
    return snapshot([node("n0", gpus=4), node("n1", gpus=4)], pods, groups, [queue("team")])


NODES, GPUS, CORES = 6, 4, 8_000


def _department_queue(
    name: str, gpu: int, cpu: int, parent: str | None = None, protected: bool = False
) -> Queue:
    """`protected`: its gangs, all started a minute ago, may not be reclaimed for an hour."""
    return Queue(
        name,
        parent,
        gpu=QueueResource(Fraction(gpu), Fraction(-1), Fraction(1)),
        cpu=QueueResource(Fraction(cpu), Fraction(-1), Fraction(1)),
        memory=UNLIMITED_RESOURCE,
        reclaim_min_runtime_seconds=3600.0 if protected else None,
    )


Profile = tuple[tuple[int, int], ...]
PROFILES: tuple[Profile, ...] = (
    ((0, 4000), (1, 6000)),  # mostly cores
    ((2, 1000), (1, 1000)),  # mostly GPUs
    ((1, 2000), (2, 4000)),
)
"""The pods a department runs, (GPUs, millicores): departments that hold mostly one
resource and reclaim the other are where the saturation rule refuses."""


def random_departments(seed: int, elastic: bool = False) -> Snapshot:
    """Three or four departments of one or two teams of one or two projects, the cluster's
    GPUs and cores held by running gangs of every project, more pending (with `elastic`,
    some with pods above their minimum, some running gangs growing), and `want`."""
    rng = random.Random(seed)
    departments = rng.choice((3, 4))
    queues: list[Queue] = []
    runs: list[tuple[str, Profile]] = []  # project, its pods' shapes
    gpu_quotas = _split(rng, NODES * GPUS, departments)
    core_quotas = _split(rng, NODES * CORES // 1000, departments)
    for d, (gpus, cores) in enumerate(zip(gpu_quotas, core_quotas, strict=True)):
        queues.append(_department_queue(f"dept-{d}", gpus, cores * 1000))
        profile = rng.choice(PROFILES)
        for t in range(rng.choice((1, 2))):
            team = f"dept-{d}-t{t}"
            queues.append(_department_queue(team, 0, 0, f"dept-{d}"))
            for p in range(rng.choice((1, 2))):
                name = f"{team}-p{p}"
                runs.append((name, profile))
                queues.append(_department_queue(name, 0, 0, team, protected=rng.random() < 0.7))
    free = {f"n{i}": [GPUS, CORES] for i in range(NODES)}
    groups: list[PodGroup] = []
    pods: list[Pod] = []
    for g in range(rng.randint(8, 16)):
        name = f"run-{g}"
        project, profile = rng.choice(runs)
        asks = [rng.choice(profile) for _ in range(rng.choice((1, 1, 2)))]
        seats = []
        for gpus, cpu in asks:
            seat = next((n for n, (g_, c) in free.items() if g_ >= gpus and c >= cpu), None)
            if seat is None:
                break
            free[seat][0] -= gpus
            free[seat][1] -= cpu
            seats.append(seat)
        if len(seats) < len(asks):
            continue  # the cluster is full: a gang runs whole or not at all
        started = group(name, project, min_member=len(asks))
        groups.append(dataclasses.replace(started, last_start=NOW - timedelta(minutes=1)))
        pods += [
            pod(f"{name}-{i}", name, gpus, cpu=cpu, memory=0, node_name=seat)
            for i, ((gpus, cpu), seat) in enumerate(zip(asks, seats, strict=True))
        ]
        if elastic and g % 3 == 0:  # a running gang that asks to grow: pods past its minimum
            gpus, cpu = asks[0]
            pods += [pod(f"{name}-more-{i}", name, gpus + i, cpu=cpu, memory=0) for i in (0, 2)]
    for g in range(rng.randint(10, 20)):  # more than fits: allocation fills the rest first
        name = f"more-{g}"
        project, profile = rng.choice(runs)
        groups.append(group(name, project))
        gpus, cpu = rng.choice(profile)
        pods += [
            pod(f"{name}-{i}", name, gpus + 1, cpu=cpu, memory=0)
            for i in range(rng.choice((1, 1, 2, 3)) if elastic else 1)
        ]
    want = rng.choice((1, 2))
    groups.append(group("want", rng.choice(runs)[0], min_member=want))
    gpus, cpu = rng.randint(1, 2), rng.choice((0, 2, 4, 6)) * 1000
    pods += [pod(f"want-{i}", "want", gpus, cpu=cpu, memory=0) for i in range(want)]
    nodes = [node(name, gpus=GPUS, cpu=CORES) for name in free]
    return snapshot(nodes, pods, groups, queues)


def _split(rng: random.Random, total: int, parts: int) -> list[int]:
    """`total` in `parts` random whole amounts: the departments' quotas share it all out."""
    cuts = sorted(rng.sample(range(1, total), parts - 1))
    return [b - a for a, b in zip([0, *cuts], [*cuts, total], strict=True)]
