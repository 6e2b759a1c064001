"""Free capacity per node: whole GPUs as a count, shared devices as memory bins."""

from __future__ import annotations

import random
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from fractions import Fraction

from kai.engine.capacity import GROUP_NAMESPACE, initial_capacity, new_group_id
from kai.engine.cycle import run_cycle
from kai.engine.model import EngineConfig
from tests.unit.engine.builders import GI, group, node, pod, queue, snapshot


def test_running_pods_of_any_scheduler_take_capacity() -> None:
    capacity = initial_capacity(
        [node("n1", gpus=8, cpu=10_000, memory=100 * GI, pods=10)],
        [
            pod("a", "g", gpus=3, cpu=2000, memory=10 * GI, node_name="n1"),
            pod("b", "g", gpus=1, cpu=500, memory=GI, node_name="n1", ours=False),
            pod("pending", "g", gpus=4),
        ],
    )
    cap = capacity["n1"]
    assert (cap.whole_gpus, cap.cpu, cap.memory, cap.pods) == (4, 7500, 89 * GI, 8)


def test_a_shared_device_leaves_the_whole_count_and_holds_memory() -> None:
    capacity = initial_capacity(
        [node("n1", gpus=2, gpu_memory_mib=40_000)],
        [
            pod("a", "g", portion=Fraction(1, 2), node_name="n1", gpu_groups=("dev-1",)),
            pod("b", "g", memory_mib=10_000, node_name="n1", gpu_groups=("dev-1",)),
        ],
    )
    cap = capacity["n1"]
    assert cap.whole_gpus == 1
    assert cap.shared == {"dev-1": 30_000}


def test_a_whole_gpu_pod_with_a_group_label_holds_its_device_and_opens_none() -> None:
    # A reservation pod whose sharing pods are gone: one device, not one plus an open one.
    capacity = initial_capacity(
        [node("n1", gpus=2, gpu_memory_mib=40_000)],
        [pod("reservation", "g", gpus=1, node_name="n1", gpu_groups=("dev-1",), ours=False)],
    )
    cap = capacity["n1"]
    assert cap.whole_gpus == 1
    assert cap.shared == {}


def test_unnamed_running_fractions_are_put_on_devices_deterministically() -> None:
    pods = [pod(f"f{i}", "g", portion=Fraction(1, 2), node_name="n1") for i in range(3)]
    first = initial_capacity([node("n1", gpus=4, gpu_memory_mib=40_000)], pods)["n1"]
    second = initial_capacity([node("n1", gpus=4, gpu_memory_mib=40_000)], list(reversed(pods)))[
        "n1"
    ]
    assert first.whole_gpus == 2 and sorted(first.shared.values()) == [20_000, 40_000]
    assert first.shared == second.shared


def test_fractions_fill_the_fullest_device_that_fits_before_opening_one() -> None:
    cap = initial_capacity(
        [node("n1", gpus=3, gpu_memory_mib=40_000)],
        [
            pod("a", "g", memory_mib=30_000, node_name="n1", gpu_groups=("full",)),
            pod("b", "g", memory_mib=10_000, node_name="n1", gpu_groups=("half",)),
        ],
    )["n1"]
    quarter = pod("q", "g", memory_mib=10_000)
    assert cap.take(quarter) == ("full",)
    big = pod("big", "g", memory_mib=35_000)
    taken = cap.take(big)
    assert taken == (new_group_id("n1", 0),) and cap.whole_gpus == 0
    assert not cap.fits(pod("more", "g", memory_mib=35_000))


def test_a_device_opened_for_sharing_gets_a_new_id_every_cycle() -> None:
    """An id an earlier cycle used may still name a reservation pod that is being deleted."""

    def device_for(now: datetime) -> tuple[str, ...]:
        snap = snapshot(
            [node("n1", gpus=1, gpu_memory_mib=40_000)],
            [pod("half", "g", portion=Fraction(1, 2))],
            [group("g", "q")],
            [queue("q")],
        )
        (binding,) = run_cycle(replace(snap, now=now), EngineConfig(time_limit_seconds=0)).bindings
        return binding.gpu_groups

    first = datetime(2026, 6, 1, tzinfo=UTC)
    assert device_for(first) == device_for(first)  # the same snapshot, the same decision
    assert device_for(first) != device_for(first + timedelta(seconds=1))


def test_a_group_id_is_the_uuid5_of_its_node_cycle_and_index() -> None:
    """The id is worked out by hand for speed; it must be exactly uuid5's."""
    for node_name, index, cycle in (("n1", 0, ""), ("node-00042", 7, "2026-01-01T00:00:00+00:00")):
        expected = str(uuid.uuid5(GROUP_NAMESPACE, f"{node_name}:{cycle}:{index}"))
        assert new_group_id(node_name, index, cycle) == expected


def test_a_fraction_fits_exactly_where_the_node_would_choose_devices_for_it() -> None:
    """`fits` counts devices with room without ranking them; it must agree with the ranking."""
    rng = random.Random(7)
    for _ in range(300):
        held = [
            rng.choice((5_000, 10_000, 20_000, 30_000, 40_000)) for _ in range(rng.randint(0, 4))
        ]
        running = [
            pod(f"r{i}", "g", memory_mib=mib, node_name="n1", gpu_groups=(f"dev-{i}",))
            for i, mib in enumerate(held)
        ]
        whole = rng.randint(0, 2)
        cap = initial_capacity(
            [node("n1", gpus=len(held) + whole, gpu_memory_mib=40_000)], running
        )["n1"]
        ask = pod(
            "p",
            "g",
            portion=Fraction(rng.choice((1, 2, 3, 4)), 4),
            devices=rng.randint(1, 3),
        )
        assert cap.fits(ask) == (cap.shared_candidates(ask) is not None), (held, whole, ask.gpu)
