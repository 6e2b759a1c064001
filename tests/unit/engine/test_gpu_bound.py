"""The engine's bound on the GPUs a cycle can place is a bound, in the units placements count.

A `gpu-memory` pod counts its MiB against the smallest device in the cluster, so on a
bigger device it counts for more GPUs than the share of the device it takes. The bound
counted free devices as whole GPUs and reported less than the greedy pass now places on
the 1,000-node synthetic benchmark (6,859.5 against 6,863.7); the cycle's report hid it by
never reporting less than greedy's answer.
"""

from __future__ import annotations

import pytest

from kai.engine import cycle
from kai.engine.accounting import pods_by_group
from kai.engine.capacity import initial_capacity
from kai.engine.cycle import run_cycle
from kai.engine.gangs import build_gang_requests
from kai.engine.model import EngineConfig
from kai.engine.solver import optimize as solver_glue
from kai.engine.solver.optimize import gpu_upper_bound
from tests.unit.engine.builders import group, node, pod, queue, snapshot

NODES = [node("big", gpus=1, gpu_memory_mib=80_000), node("small", gpus=1)]  # 40,000 MiB
PODS = [pod(f"m{i}", f"g{i}", memory_mib=40_000) for i in range(3)]
SNAPSHOT = snapshot(NODES, PODS, [group(f"g{i}", "q") for i in range(3)], [queue("q")])


def test_three_pods_of_a_small_device_each_count_one_gpu_and_all_three_fit() -> None:
    result = run_cycle(SNAPSHOT, EngineConfig(time_limit_seconds=2, solver_workers=1))
    assert len(result.bindings) == 3  # two on the big device, one on the small
    assert result.report.gpus_engine == 3  # each counted as 40,000 / 40,000 of a GPU


def test_the_bound_counts_a_free_mib_as_a_gpu_memory_pod_would() -> None:
    gangs = build_gang_requests(SNAPSHOT.pod_groups, pods_by_group(SNAPSHOT))
    capacity = initial_capacity(NODES, [])
    # two free devices, counted as 2 before; the three pods count 1.5 devices more than they
    # could take (each 40,000 MiB of a device up to 80,000): 3.5, and they ask for 3
    assert gpu_upper_bound(gangs, capacity, 40_000) == 3
    whole = [pod(f"w{i}", f"w{i}", gpus=1) for i in range(3)]
    without_memory_pods = snapshot(NODES, whole, [group(f"w{i}", "q") for i in range(3)], [])
    gangs = build_gang_requests(without_memory_pods.pod_groups, pods_by_group(without_memory_pods))
    assert gpu_upper_bound(gangs, capacity, 40_000) == 2  # whole GPUs: one per device


def test_a_solver_that_finds_no_answer_reports_so_with_a_true_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # At 5,000 nodes the real solver's presolve takes its first stage's whole budget and it
    # returns nothing; standing in for that here: the cycle keeps the greedy answer, says
    # the solver found none (not that it never ran), and still bounds what could be placed.
    monkeypatch.setattr(solver_glue, "optimize", lambda *args, **kwargs: None)
    cramped = [node("n", gpus=8, cpu=1000)]  # one core: one of the pods fits, by cpu
    pods = [pod(f"p{i}", f"p{i}", gpus=1, cpu=1000) for i in range(2)]
    state = snapshot(cramped, pods, [group(f"p{i}", "q") for i in range(2)], [queue("q")])
    result = cycle.run_cycle(state, EngineConfig(time_limit_seconds=1, solver_workers=1))
    assert len(result.bindings) == 1
    assert result.report.status == cycle.NO_ANSWER
    assert result.report.answer == "greedy"
    assert result.report.gpus_bound == 2  # what the pods ask, less than the 8 GPUs free
