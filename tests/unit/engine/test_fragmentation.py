"""The fragmentation measure, worked by hand, and the placements it changes from KAI's
fullest-node rule: a pod placed alone goes where it strands the least GPU for the workload."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kai.engine.capacity import initial_capacity
from kai.engine.cycle import run_cycle
from kai.engine.fragmentation import SCORE_STEPS, Fragmentation, score, workload_of
from kai.engine.model import EngineConfig, Node, Placement, PlacementStrategy, Pod, PodGroup
from kai.engine.node_index import NodeIndex
from tests.unit.engine.builders import GI, NOW, group, node, pod, queue, snapshot

MIB = 1000  # device memory in these tests: a share of p takes p * 1000 MiB


def _running(name: str, on: str, **request: object) -> Pod:
    return pod(name, f"g-{name}", node_name=on, **request)  # type: ignore[arg-type]


def test_a_kind_that_needs_more_whole_devices_than_are_free_strands_them_all() -> None:
    n1 = node("n1", gpus=8)
    cap = initial_capacity([n1], [_running("r", "n1", gpus=5)])["n1"]
    measure = Fragmentation(workload_of([pod("one", "w", gpus=1), pod("four", "w", gpus=4)]))
    # 3 idle devices: the 4-GPU half of the workload can use none of them, the 1-GPU half all
    assert measure.of(cap) == pytest.approx(1.5)


def test_a_partly_used_device_strands_its_room_for_whole_gpus_and_for_bigger_shares() -> None:
    n1 = node("n1", gpus=2, gpu_memory_mib=MIB)
    cap = initial_capacity([n1], [_running("r", "n1", portion=Fraction(7, 10), gpu_groups=("d",))])[
        "n1"
    ]
    half = pod("half", "w", portion=Fraction(1, 2))
    measure = Fragmentation(workload_of([half, pod("whole", "w", gpus=1)]))
    # the shared device has 0.3 free: too little for a half, of no use to a whole GPU
    assert measure.of(cap) == pytest.approx(0.3)


def test_cpu_that_is_gone_strands_the_gpus_left_beside_it() -> None:
    n1 = node("n1", gpus=4, cpu=16_000)
    cap = initial_capacity([n1], [_running("r", "n1", gpus=2, cpu=14_000)])["n1"]
    measure = Fragmentation(workload_of([pod("w", "w", gpus=1, cpu=4000)]))
    assert measure.of(cap) == pytest.approx(2.0)
    cpu_only = Fragmentation(workload_of([pod("c", "w", cpu=1000)]))
    assert cpu_only.of(cap) == pytest.approx(2.0)  # a pod without GPUs uses none of them


T4 = Placement(node_selector=(("nvidia.com/gpu.product", "T4"),))


def _product(name: str, product: str, gpus: int) -> Node:
    return node(name, gpus=gpus, labels={"nvidia.com/gpu.product": product})


def test_a_node_a_kind_may_not_use_strands_all_its_free_gpus_for_that_kind() -> None:
    """FGD's rule: half the workload may go only to T4 nodes, so on a G2 node with 4 idle
    devices half the workload can use none of them; on a T4 node every kind can use all."""
    capacity = initial_capacity([_product("t4", "T4", 4), _product("g2", "G2", 4)], [])
    workload = [pod("anywhere", "w", gpus=1), pod("t4-only", "w", gpus=1, placement=T4)]
    measure = Fragmentation(workload_of(workload))
    assert measure.of(capacity["g2"]) == pytest.approx(2.0)
    assert measure.of(capacity["t4"]) == 0


def test_a_pod_that_may_go_anywhere_leaves_the_nodes_constrained_pods_need_to_them() -> None:
    """A 1-GPU pod that may go anywhere, then two that may go only to T4 nodes. KAI's
    binpack puts the first on the T4 node (2 idle GPUs against 4), and the second T4 pod
    finds no room. Counted as FGD does, the G2 node strands its 4 GPUs for two thirds of
    the workload and the pod's GPU taken there removes some of that: it goes to the G2
    node, and all three are placed."""
    nodes = [_product("t4", "T4", 2), _product("g2", "G2", 4)]
    pods = [pod("anywhere", "anywhere", gpus=1)]
    pods += [pod(f"t4-{i}", f"t4-{i}", gpus=1, placement=T4) for i in range(2)]
    groups = _in_order([group(p.group.split("/")[1], "q") for p in pods])
    greedy = run_cycle(
        snapshot(nodes, pods, groups, [queue("q")]), EngineConfig(time_limit_seconds=0)
    )
    assert {b.pod: b.node for b in greedy.bindings} == {
        "ns/anywhere": "g2",
        "ns/t4-0": "t4",
        "ns/t4-1": "t4",
    }


def test_a_fraction_takes_the_device_where_it_strands_nothing_not_the_fullest() -> None:
    """KAI's gpupack puts a quarter on the fullest device with room (0.7 used), leaving 0.05
    that no quarter can use; the measure picks the device at 0.2, leaving 0.3 and 0.55."""
    n1 = node("n1", gpus=3, gpu_memory_mib=MIB)
    running = [
        _running("a", "n1", portion=Fraction(7, 10), gpu_groups=("full",)),
        _running("b", "n1", portion=Fraction(2, 10), gpu_groups=("light",)),
    ]
    cap = initial_capacity([n1], running)["n1"]
    quarter = pod("q", "w", portion=Fraction(1, 4))
    measure = Fragmentation(workload_of([quarter]))
    assert cap.shared_candidates(quarter) == ["full"]
    assert measure.best_devices(cap, quarter) == ("light",)
    assert measure.after(cap, quarter, ("full",)) == pytest.approx(0.05)
    assert measure.after(cap, quarter, ("light",)) == 0


def _in_order(groups: list[PodGroup]) -> list[PodGroup]:
    return [
        dataclasses.replace(g, created=NOW + timedelta(seconds=i)) for i, g in enumerate(groups)
    ]


def test_a_pod_alone_goes_where_it_strands_least_not_to_the_fullest_node() -> None:
    """A 1-GPU pod with 6 cores, then five with 4 cores. KAI's binpack puts the first on n1
    (fewest idle GPUs) and takes all but 2 of its cores: n1's last GPU is stranded and the
    fifth small pod finds no room (5 of 6 placed). Measured against the workload, n1 would
    strand a GPU and n2 nothing, so the first goes to n2, and all six are placed."""
    nodes = [node("n1", gpus=2, cpu=8000), node("n2", gpus=4, cpu=64_000)]
    pods = [pod("big", "big", gpus=1, cpu=6000)]
    pods += [pod(f"small{i}", f"small{i}", gpus=1, cpu=4000) for i in range(5)]
    groups = _in_order([group(p.group.split("/")[1], "q") for p in pods])
    snap = snapshot(nodes, pods, groups, [queue("q")])
    greedy = run_cycle(snap, EngineConfig(time_limit_seconds=0))
    assert {b.pod: b.node for b in greedy.bindings}["ns/big"] == "n2"
    assert len(greedy.bindings) == 6
    assert all(decision.scheduled for decision in greedy.groups.values())


def test_a_gangs_members_are_placed_in_kais_order_not_by_the_measure() -> None:
    """The same nodes, and a gang of two of the 6-core pods: alone, the first would go to n2
    (n1 would strand a GPU); as a gang member it goes where KAI's binpack puts it, n1."""
    nodes = [node("n1", gpus=2, cpu=8000), node("n2", gpus=4, cpu=64_000)]
    pods = [pod(f"m{i}", "gang", gpus=1, cpu=6000) for i in range(2)]
    snap = snapshot(nodes, pods, [group("gang", "q", min_member=2)], [queue("q")])
    greedy = run_cycle(snap, EngineConfig(time_limit_seconds=0))
    assert {b.pod: b.node for b in greedy.bindings} == {"ns/m0": "n1", "ns/m1": "n2"}


_KINDS = [
    pod("k-whole", "w", gpus=1, cpu=4000),
    pod("k-two", "w", gpus=2, cpu=8000),
    pod("k-half", "w", portion=Fraction(1, 2), cpu=2000),
    pod("k-tenth", "w", portion=Fraction(1, 10), cpu=1000),
    pod("k-mem", "w", memory_mib=300, cpu=1000),
    pod("k-cpu", "w", cpu=30_000),
    pod("k-elsewhere", "w", gpus=1, cpu=4000, placement=T4),  # n1 is no T4 node
]


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_a_measure_carried_across_cycles_answers_as_a_new_one(data: st.DataObject) -> None:
    """Each cycle's measure is built on the last's sums, updated by the kinds whose count
    changed; with counts for weights it must answer exactly as one built from scratch."""
    n1 = node("n1", gpus=4, cpu=16_000, gpu_memory_mib=MIB)
    running = [
        _running(
            f"r{i}", "n1", portion=Fraction(data.draw(st.integers(1, 9)), 10), gpu_groups=(f"d{i}",)
        )
        for i in range(data.draw(st.integers(0, 3)))
    ]
    start = initial_capacity([n1], running)["n1"]
    counts = {p.name: data.draw(st.integers(0, 3)) for p in _KINDS}
    carried: Fragmentation | None = None
    for _ in range(data.draw(st.integers(1, 6))):
        for name in data.draw(st.lists(st.sampled_from([p.name for p in _KINDS]), max_size=3)):
            counts[name] = max(0, counts[name] + data.draw(st.sampled_from([-1, 1, 2])))
        workload = workload_of(p for p in _KINDS for _ in range(counts[p.name]))
        fresh = Fragmentation(workload)
        carried = Fragmentation(workload) if carried is None else carried.reweighted(workload)
        cap = start.copy()
        for placed in data.draw(st.lists(st.sampled_from(_KINDS), max_size=4)):
            assert carried.of(cap) == fresh.of(cap)
            assert carried.growth(cap, placed) == fresh.growth(cap, placed)
            if fresh.growth(cap, placed) is not None:
                cap.take(placed, fresh.best_devices(cap, placed))


def test_growths_a_fraction_of_a_score_step_apart_tie_and_the_fuller_node_wins() -> None:
    """A 1-GPU pod of 3 cores and 8 GiB, beside rare kinds: one in twenty pods needs 10 cores,
    one in two hundred 60 GiB. On n1 (2 idle GPUs, 12 cores free) the pod leaves too few
    cores for the first: its last GPU is stranded for a twentieth of the workload (0.05
    devices). On n2 (4 idle GPUs, 64 GiB free) it leaves too little memory for the second:
    3 GPUs for a two-hundredth (0.015). Ranked exactly, n2 would win and the pods spread;
    both growths score the same, and the tie goes to packing: n1, with fewer idle GPUs."""
    placed = pod("p", "w", gpus=1, cpu=3000, memory=8 * GI)
    workload = [placed] * 189
    workload += [pod("cores", "w", gpus=1, cpu=10_000)] * 10
    workload += [pod("memory", "w", gpus=1, memory=60 * GI)]
    measure = Fragmentation(workload_of(workload))
    nodes = [node("n1", gpus=8), node("n2", gpus=4, memory=64 * GI)]
    running = [pod("r", "r", gpus=6, cpu=52_000, node_name="n1")]
    capacity = initial_capacity(nodes, running)
    n1, n2 = measure.growth(capacity["n1"], placed), measure.growth(capacity["n2"], placed)
    assert n1 is not None and n2 is not None
    assert n1.by == pytest.approx(0.05)
    assert n2.by == pytest.approx(0.015)
    assert n1.rank == n2.rank
    index = NodeIndex(capacity, PlacementStrategy.BINPACK, fragmentation=measure)
    assert index.find(placed, lambda name: True, alone=True) == "n1"


def test_the_score_falls_with_the_growth_and_a_growth_a_step_apart_decides() -> None:
    assert score(0.0) == SCORE_STEPS // 2
    assert score(-0.05) == SCORE_STEPS // 2  # a placement that removes a little: same step
    assert score(0.05) == SCORE_STEPS // 2 - 1  # one that adds a little: the step below
    assert score(0.5) < score(0.2) < score(0.05)
    assert score(-8.0) <= SCORE_STEPS and score(1e6) == 0


def test_a_known_capacity_is_answered_by_its_state_and_a_copy_written_since_is_read_anew() -> None:
    n1 = node("n1", gpus=8)
    template = initial_capacity([n1], [_running("r", "n1", gpus=5)])["n1"]
    measure = Fragmentation(workload_of([pod("one", "w", gpus=1), pod("four", "w", gpus=4)]))
    measure.know([template])
    written = template.copy()  # same node, same state until written
    assert measure.state_number(written) == measure.state_number(template)
    written.take(pod("two", "w", gpus=2))
    assert measure.state_number(written) != measure.state_number(template)
    assert measure.of(written) == pytest.approx(0.5)  # 1 idle device: the 4-GPU half strands it
    assert measure.of(template) == pytest.approx(1.5)
