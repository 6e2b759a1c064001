"""The trace benchmark's packing bound: what any placement of the arrived pods could allocate.

Every expected value is worked out by hand: the best packing of a handful of asks
onto a few devices, where a bound that ignored how shares fit together (the asks or
the devices, whichever is less) would say more.
"""

from __future__ import annotations

import random

import pytest

from bench.openb import ARRIVED_POINTS, TraceNode, TracePod, allocated_at, arrivals
from bench.packing_bound import packing_bound_at, packing_bound_milli
from bench.trace import TraceCluster, run_trace
from kai.engine.model import EngineConfig, EvictionConfig


def nodes(*models_and_gpus: tuple[str, int]) -> list[TraceNode]:
    return [
        TraceNode(f"node-{i}", 64000, 262144, gpus, model)
        for i, (model, gpus) in enumerate(models_and_gpus)
    ]


def share(milli: int, *models: str, devices: int = 1) -> TracePod:
    return TracePod(f"share-{milli}", 1000, 1024, devices, milli, tuple(models))


def whole(gpus: int = 1, *models: str) -> TracePod:
    return TracePod(f"whole-{gpus}", 1000, 1024, gpus, 1000, tuple(models))


def test_shares_over_half_a_gpu_take_a_device_each() -> None:
    # 1,800 milli asked of 2,000: no two 600s share a device, so 1,200 at most.
    assert packing_bound_milli([share(600)] * 3, nodes(("T4", 2))) == 1200


def test_what_a_share_leaves_is_used_only_by_shares_that_fit_in_it() -> None:
    # Four 400s pair up on the two devices; the 300 fits beside no pair.
    assert packing_bound_milli([share(400)] * 4 + [share(300)], nodes(("T4", 2))) == 1600


def test_shares_of_different_sizes_fill_a_device_together() -> None:
    # Neither size fills the device alone: only a mixed pattern reaches 1,000.
    assert packing_bound_milli([share(700), share(300)], nodes(("T4", 1))) == 1000


def test_many_small_shares_fill_a_device() -> None:
    assert packing_bound_milli([share(10)] * 150, nodes(("T4", 1))) == 1000


def test_whole_gpus_take_devices_the_shares_then_lack() -> None:
    # 2 whole GPUs and one 700 share on 3 devices; the second 700 has no device left.
    pods = [whole(2), share(700), share(700)]
    assert packing_bound_milli(pods, nodes(("T4", 3))) == 2700


def test_a_share_on_several_devices_asks_its_portion_of_each() -> None:
    # Two pods of 2 x 600 on 3 devices: three 600s fit, one per device.
    assert packing_bound_milli([share(600, devices=2)] * 2, nodes(("T4", 3))) == 1800


def test_a_pod_constrained_to_gpu_models_is_held_only_by_their_devices() -> None:
    cluster = nodes(("T4", 1), ("G2", 1))
    assert packing_bound_milli([whole(1, "T4"), whole(1, "T4")], cluster) == 1000
    assert packing_bound_milli([whole(1, "T4"), whole(1, "T4"), share(500)], cluster) == 1500
    assert packing_bound_milli([whole(1, "A100")], cluster) == 0  # no such device


def test_pods_that_ask_no_gpu_hold_none() -> None:
    cpu_only = TracePod("cpu", 4000, 8192, 0, 0)
    assert packing_bound_milli([cpu_only] * 10, nodes(("T4", 1))) == 0


@pytest.mark.parametrize("batch", [1, 2])
def test_the_bound_is_never_below_what_the_engine_allocated(batch: int) -> None:
    """The engine's own placements are one placement of the arrived pods: never above the bound."""
    rng = random.Random(7)
    kinds = [share(810), share(470), share(230), share(160), share(650), whole(1), whole(1, "G2")]
    cluster = nodes(("T4", 8), ("G2", 8), ("T4", 8), ("G2", 4), ("T4", 4), ("T4", 8))
    pods = [rng.choice(kinds) for _ in range(60)]
    order = arrivals(pods, sum(n.gpus for n in cluster), 1.3, 42)
    config = EngineConfig(
        time_limit_seconds=0, evictions=EvictionConfig(max_consolidation_preemptees=0)
    )
    run = run_trace(TraceCluster(cluster), order, batch, config)
    engine = allocated_at(run.samples, 40)
    bound = packing_bound_at(order, run.samples, cluster)
    read = [(point, engine[point], bound[point]) for point in map(str, ARRIVED_POINTS)]
    compared = [(point, e, b) for point, e, b in read if e is not None and b is not None]
    assert len(compared) >= 4, read
    for point, engine_pct, bound_pct in compared:
        assert engine_pct <= bound_pct, point
    assert packing_bound_milli(order, cluster) < 40_000  # 810s strand what they leave
