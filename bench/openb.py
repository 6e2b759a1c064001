"""The openb trace's files and the FGD paper's protocol over them: reading, tuning, arrival
order, and the allocation curve read off the way the published results were.

Kept apart from `bench/trace.py`, which runs the engine through the protocol: this part
knows nothing of kai, so the protocol can be checked on its own against the paper's
definitions (see that module's docstring for the protocol itself).
"""

from __future__ import annotations

import csv
import dataclasses
import random
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

TRACE_DIR = Path(__file__).resolve().parent / "traces" / "openb"
DEFAULT_NODES = TRACE_DIR / "openb_node_list_gpu_node.csv"
DEFAULT_PODS = TRACE_DIR / "openb_pod_list_default.csv"
DEFAULT_PUBLISHED = TRACE_DIR / "published_alloc_by_policy.csv"
NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
"""The pod columns read; `gpu_spec` is read too where present (some openb lists leave it out)."""

MILLI = 1000  # GPU milli per device, the trace's unit
ARRIVED_POINTS = (50, 80, 90, 100, 110, 120, 130)


@dataclass(frozen=True)
class TraceNode:
    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int
    model: str


@dataclass(frozen=True)
class TracePod:
    name: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int
    gpu_milli: int  # per device: 1000 is a whole GPU, less is a share of one
    gpu_spec: tuple[str, ...] = ()  # GPU models it may run on; empty: any

    @property
    def gpu_request_milli(self) -> int:
        return self.num_gpu * self.gpu_milli

    @property
    def is_share(self) -> bool:
        return self.num_gpu > 0 and 0 < self.gpu_milli < MILLI


# -- reading the trace ---------------------------------------------------------------------


def read_nodes(path: Path) -> list[TraceNode]:
    return [
        TraceNode(
            row["sn"], int(row["cpu_milli"]), int(row["memory_mib"]), int(row["gpu"]), row["model"]
        )
        for row in _rows(path, NODE_COLUMNS)
    ]


def read_pods(path: Path) -> list[TracePod]:
    pods = [
        TracePod(
            row["name"],
            int(row["cpu_milli"]),
            int(row["memory_mib"]),
            int(row["num_gpu"]),
            int(row["gpu_milli"]),
            tuple(model for model in (row.get("gpu_spec") or "").split("|") if model),
        )
        for row in _rows(path, POD_COLUMNS)
    ]
    odd = next((pod for pod in pods if not 0 <= pod.gpu_milli <= MILLI), None)
    if odd is not None:
        raise ValueError(
            f"{path}: pod {odd.name}: gpu_milli must be 0-{MILLI}, got {odd.gpu_milli}"
        )
    return pods


def _rows(path: Path, columns: Sequence[str]) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        missing = [name for name in columns if name not in (reader.fieldnames or ())]
        if missing:
            raise ValueError(f"{path}: missing columns {', '.join(missing)}")
        return list(reader)


def read_published(path: Path, trace: str, tune: float) -> dict[str, dict[str, float]]:
    """Each published policy's allocation ratio at the arrived points: the mean over its seeds."""
    values: dict[str, list[dict[str, str]]] = {}
    for row in _rows(path, ("workload", "sc_policy", "tune", "seed")):
        if row["workload"] == trace and float(row["tune"]) == tune:
            values.setdefault(row["sc_policy"], []).append(row)
    return {
        policy: {
            str(point): round(statistics.mean(float(row[str(point)]) for row in rows), 2)
            for point in ARRIVED_POINTS
            if all(row.get(str(point)) for row in rows)
        }
        for policy, rows in sorted(values.items())
    }


# -- the protocol: tuning, arrival order, reading the curve ----------------------------------


def tuned(pods: Sequence[TracePod], target_milli: float, rng: random.Random) -> list[TracePod]:
    """The pods with drawn copies added (or random pods removed) until their GPUs meet the target.

    Tuning up stops at the first draw that would pass the target, as the paper's
    simulator does; tuning down removes pods until the total is within it.
    """
    pods = list(pods)
    total = sum(pod.gpu_request_milli for pod in pods)
    if total > target_milli:
        while total > target_milli:
            total -= pods.pop(rng.randrange(len(pods))).gpu_request_milli
        return pods
    if not any(pod.gpu_request_milli for pod in pods):
        raise ValueError("no pod asks for a GPU: the list cannot be tuned to a GPU target")
    originals = tuple(pods)
    while True:
        drawn = rng.choice(originals)
        if total + drawn.gpu_request_milli > target_milli:
            return pods
        pods.append(
            dataclasses.replace(drawn, name=f"{drawn.name}-tuned-{len(pods) - len(originals)}")
        )
        total += drawn.gpu_request_milli


def arrivals(pods: Sequence[TracePod], cluster_gpus: int, tune: float, seed: int) -> list[TracePod]:
    """The protocol's arrival order for one seed: tuned to `tune` x the cluster's GPUs, shuffled."""
    rng = random.Random(seed)
    order = tuned(pods, tune * cluster_gpus * MILLI, rng)
    rng.shuffle(order)
    return order


@dataclass(frozen=True)
class Sample:
    arrived_milli: int  # GPUs asked for by the pods arrived so far, failed ones included
    allocated_milli: int  # GPUs held by bound pods


def allocated_at(
    samples: Sequence[Sample], cluster_gpus: int, points: Iterable[int] = ARRIVED_POINTS
) -> dict[str, float | None]:
    """The allocation ratio (%) at each arrived point (%), as the published CSV reads its samples.

    Each sample's arrived % is rounded to a whole point and its allocation % to two
    decimals; a point's value is the mean of its samples, or of those one point either
    side when it has none (None when those are missing too).
    """
    result: dict[str, float | None] = {}
    for point in points:
        near = [
            round(s.allocated_milli / cluster_gpus / 10, 2)
            for s in read_at(samples, cluster_gpus, point)
        ]
        result[str(point)] = round(statistics.mean(near), 2) if near else None
    return result


def read_at(samples: Sequence[Sample], cluster_gpus: int, point: int) -> list[Sample]:
    """The samples an arrived point is read from: those whose arrived % rounds to it, or,
    if none does, those that round to one point either side."""
    arrived = [round(s.arrived_milli / cluster_gpus / 10) for s in samples]
    near = [s for x, s in zip(arrived, samples, strict=True) if x == point]
    return near or [s for x, s in zip(arrived, samples, strict=True) if abs(x - point) <= 1]
