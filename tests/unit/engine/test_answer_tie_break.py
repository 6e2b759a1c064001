"""Between two answers as good in KAI's order, GPUs and pods, the one leaving idle devices
together wins: on the openb trace the solver's answer won such ties while scattering the
idle GPUs, no 8-GPU node stayed empty, and later big pods failed (91.6% allocated against
its own greedy pass's 94.2%). With spreading asked for, the tie stays the solver's."""

from __future__ import annotations

from kai.engine.capacity import initial_capacity
from kai.engine.cycle import _Leftover, _verdict
from kai.engine.greedy import AllocationOutcome, PodPlacement
from kai.engine.model import EngineConfig, PlacementStrategy, Pod
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


def _better(first: AllocationOutcome, second: AllocationOutcome, config: EngineConfig) -> bool:
    leftover = _Leftover(initial_capacity(NODES, []), config)
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
