"""The tie-break after the fragmentation score: a pod that asks for more cores per GPU than
the cluster has goes where free cores and GPUs are in its proportion; others pack first."""

from __future__ import annotations

from fractions import Fraction

from kai.engine.capacity import initial_capacity
from kai.engine.cpu_balance import CpuBalance
from kai.engine.fragmentation import Fragmentation, workload_of
from kai.engine.model import PlacementStrategy
from kai.engine.node_index import NodeIndex
from tests.unit.engine.builders import node, pod

HALF = Fraction(1, 2)


def _cluster() -> tuple[NodeIndex, CpuBalance]:
    """n-busy: 8 GPUs and 64 cores, 4 GPUs and 48 cores taken (a quarter of its cores free,
    half its GPUs); n-empty: 8 GPUs and 128 cores, all free. 12 cores per GPU in all."""
    nodes = [node("n-busy", gpus=8, cpu=64_000), node("n-empty", gpus=8, cpu=128_000)]
    running = [pod("r", "r", gpus=4, cpu=48_000, node_name="n-busy")]
    capacity = initial_capacity(nodes, running)
    # The workload's pods ask 1 core for half a GPU: both nodes keep room for them wherever a
    # pod below goes, so every placement scores the same and only the tie-break decides.
    measure = Fragmentation(workload_of([pod("w", "w", portion=HALF, cpu=1000)] * 10))
    index = NodeIndex(capacity, PlacementStrategy.BINPACK, fragmentation=measure)
    return index, CpuBalance(nodes)


def test_a_pod_asking_more_cores_per_gpu_than_the_cluster_goes_where_cores_are_in_proportion() -> (
    None
):
    index, balance = _cluster()
    hungry = pod("hungry", "g", portion=HALF, cpu=12_000)  # 24 cores per GPU
    assert balance.asks_for_cores(hungry)
    # packing alone would take n-busy (4 idle GPUs against 8); there its cores would go first
    busy, empty = index.capacity["n-busy"], index.capacity["n-empty"]
    assert balance.mismatch(empty, hungry) < balance.mismatch(busy, hungry)
    assert index.find(hungry, lambda name: True, alone=True) == "n-empty"


def test_a_pod_asking_few_cores_per_gpu_is_packed_first() -> None:
    index, balance = _cluster()
    light = pod("light", "g", portion=HALF, cpu=1000)  # 2 cores per GPU
    assert not balance.asks_for_cores(light)
    assert index.find(light, lambda name: True, alone=True) == "n-busy"


def test_pods_without_gpus_never_ask_for_cores_first() -> None:
    _, balance = _cluster()
    assert not balance.asks_for_cores(pod("cpu-only", "g", cpu=64_000))


def test_the_mismatch_is_the_cosine_of_the_normalised_ask_and_free_resources() -> None:
    index, balance = _cluster()
    # n-empty is all free: (1, 1); a whole GPU with 16 cores asks (1/8, 1/8) of it
    whole = pod("whole", "g", gpus=1, cpu=16_000)
    assert balance.mismatch(index.capacity["n-empty"], whole) == -1.0
    # n-busy frees (1/4, 1/2) of its own; the pod asks (1/4, 1/8) of it:
    # cos = (1/16 + 1/16) / (sqrt(5/64) * sqrt(5/16)) = 0.8
    assert balance.mismatch(index.capacity["n-busy"], whole) == -0.8
