"""Between two answers as good in KAI's order, GPUs and pods, the one leaving the free GPUs
least fragmented for the workload wins, then the one leaving idle devices together: on the
openb trace the solver's answer won such ties while scattering the idle GPUs, no 8-GPU node
stayed empty, and later big pods failed (91.6% allocated against its own greedy pass's
94.2%). With spreading asked for, the tie stays the solver's."""

from __future__ import annotations

import dataclasses

from kai.engine.capacity import initial_capacity
from kai.engine.cycle import _Leftover, _verdict
from kai.engine.fragmentation import Fragmentation, workload_of
from kai.engine.greedy import AllocationOutcome, PodPlacement
from kai.engine.model import EngineConfig, PlacementStrategy, Pod, PodPhase
from tests.unit.engine.builders import node, pod

NODES = [node("n1", gpus=4), node("n2", gpus=4)]
A, B = pod("a", "ga", gpus=1), pod("b", "gb", gpus=1)


OFFERS = [("ns/ga", 0), ("ns/gb", 0)]  # what the greedy pass tried, in KAI's order


def _outcome(*placed: tuple[Pod, str]) -> AllocationOutcome:
    return AllocationOutcome(
        placements={p.key: PodPlacement(p, where, ()) for p, where in placed},
        admitted=[p.group for p, _ in placed],
        offers=list(OFFERS),
    )


TOGETHER = _outcome((A, "n1"), (B, "n1"))  # idle devices 2 and 4: 2**2 + 4**2 = 20
APART = _outcome((A, "n1"), (B, "n2"))  # idle devices 3 and 3: 3**2 + 3**2 = 18


def _better(
    first: AllocationOutcome,
    second: AllocationOutcome,
    config: EngineConfig,
    fragmentation: Fragmentation | None = None,
    running: tuple[Pod, ...] = (),
) -> bool:
    leftover = _Leftover(initial_capacity(NODES, running), config, fragmentation)
    return _verdict(first, second, 40_000, {}, leftover).use_solver


def test_with_bin_packing_the_answer_that_scatters_idle_devices_loses_the_tie() -> None:
    config = EngineConfig()
    assert not _better(APART, TOGETHER, config)
    assert _better(TOGETHER, APART, config)


def test_with_spreading_the_tie_is_the_solvers() -> None:
    config = EngineConfig(placement_strategy=PlacementStrategy.SPREAD)
    assert _better(APART, TOGETHER, config) and _better(TOGETHER, APART, config)


def test_an_answer_better_in_kais_order_wins_however_it_leaves_the_devices() -> None:
    only_a = _outcome((A, "n1"))  # leaves 3 and 4 idle: 25, more than APART's 18
    assert _better(APART, only_a, EngineConfig())
    assert not _better(only_a, APART, EngineConfig())


def test_the_workloads_fragmentation_decides_before_how_together_idle_devices_are() -> None:
    """n1 runs a 2-GPU pod. Put the 1-GPU pod b on n1 and the idle devices are 1 and 4 (17
    squared), on n2 2 and 3 (13); but for a workload of 2-GPU pods n1's last device is
    stranded (1 device of fragmentation), while 2 and 3 idle devices strand none."""
    running = (dataclasses.replace(pod("r", "gr", gpus=2), phase=PodPhase.BOUND, node="n1"),)
    fragmentation = Fragmentation(workload_of([pod("w", "gw", gpus=2)]))
    on_n1 = _outcome((B, "n1"))
    on_n2 = _outcome((B, "n2"))
    assert _better(on_n1, on_n2, EngineConfig(), None, running)  # without a workload
    assert _better(on_n2, on_n1, EngineConfig(), fragmentation, running)
    assert not _better(on_n1, on_n2, EngineConfig(), fragmentation, running)
