"""The openb trace benchmark: the protocol's tuning and bookkeeping, and what the engine is given.

Expected values are worked out by hand from tiny clusters, or are the published
means the openb README states; none is output the code under test produced.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections import Counter
from fractions import Fraction
from pathlib import Path

import pytest
from immutables import Map

from bench.openb import (
    DEFAULT_PODS,
    DEFAULT_PUBLISHED,
    MILLI,
    Sample,
    TraceNode,
    TracePod,
    allocated_at,
    arrivals,
    read_pods,
    read_published,
)
from bench.trace import (
    START,
    TraceCluster,
    carried_out,
    overcommitted,
    parse_seeds,
    run_trace,
)
from kai.engine.cycle import CycleResult, SolverReport
from kai.engine.evictions.decisions import Action, Eviction, PipelinedPod
from kai.engine.model import EngineConfig, EvictionConfig, PodPhase, Snapshot

GREEDY = EngineConfig(
    time_limit_seconds=0, evictions=EvictionConfig(max_consolidation_preemptees=0)
)
SOLVER = EngineConfig(
    time_limit_seconds=0.5, evictions=EvictionConfig(max_consolidation_preemptees=0)
)
OPENB_GPUS = 6212


def node(name: str, gpus: int, model: str = "T4") -> TraceNode:
    return TraceNode(name, cpu_milli=32000, memory_mib=131072, gpus=gpus, model=model)


def pod(name: str, num_gpu: int = 1, gpu_milli: int = 1000, *models: str) -> TracePod:
    return TracePod(name, 2000, 4096, num_gpu, gpu_milli if num_gpu else 0, tuple(models))


def placed(snapshot: Snapshot | None) -> dict[str, str]:
    """Pod name in the trace (after the arrival number) -> the node it is bound to."""
    assert snapshot is not None
    return {p.name.split("-", 1)[1]: p.node or "" for p in snapshot.pods}


# -- tuning and arrival order ------------------------------------------------------------------


@pytest.fixture(scope="module")
def openb_pods() -> list[TracePod]:
    return read_pods(DEFAULT_PODS)


def test_tuning_is_the_same_for_a_seed_and_differs_between_seeds(
    openb_pods: list[TracePod],
) -> None:
    first = arrivals(openb_pods, OPENB_GPUS, 1.3, 42)
    assert arrivals(openb_pods, OPENB_GPUS, 1.3, 42) == first
    other = arrivals(openb_pods, OPENB_GPUS, 1.3, 43)
    assert [p.name for p in other] != [p.name for p in first]


@pytest.mark.parametrize("seed", [42, 51])
def test_tuning_up_keeps_every_pod_and_adds_draws_until_the_next_would_pass_the_target(
    openb_pods: list[TracePod], seed: int
) -> None:
    order = arrivals(openb_pods, OPENB_GPUS, 1.3, seed)
    target = 1.3 * OPENB_GPUS * MILLI
    total = sum(p.gpu_request_milli for p in order)
    largest = max(p.gpu_request_milli for p in openb_pods)
    assert target - largest < total <= target
    names = Counter(p.name for p in order)
    assert all(names[p.name] == 1 for p in openb_pods)  # each original once
    by_name = {p.name: p for p in openb_pods}
    drawn = [p for p in order if p.name not in by_name]
    assert len(drawn) == len(order) - len(openb_pods) > 1000
    for copy in drawn:  # a draw is an original pod under a new name
        original = by_name[copy.name.split("-tuned-")[0]]
        assert dataclasses.replace(copy, name=original.name) == original
    assert [p.name for p in order[:50]] != [p.name for p in openb_pods[:50]]  # shuffled


def test_tuning_down_removes_pods_until_the_total_is_within_the_target(
    openb_pods: list[TracePod],
) -> None:
    order = arrivals(openb_pods, OPENB_GPUS, 0.5, 42)
    total = sum(p.gpu_request_milli for p in order)
    assert 0.5 * OPENB_GPUS * MILLI - 8 * MILLI < total <= 0.5 * OPENB_GPUS * MILLI
    assert {p.name for p in order} < {p.name for p in openb_pods}


# -- reading the allocation curve ----------------------------------------------------------------


def test_a_point_is_the_mean_of_the_samples_whose_arrived_percent_rounds_to_it() -> None:
    # 10 GPUs: 1 milli is 0.01 % of the cluster.
    samples = [
        Sample(4940, 4000),  # arrived 49.4 % -> 49
        Sample(5040, 4500),  # 50.4 % -> 50
        Sample(5050, 4600),  # 50.5 % -> 50 (half to even, as the published script rounds)
        Sample(5060, 4800),  # 50.6 % -> 51
        Sample(7930, 7000),  # 79.3 % -> 79: 80 has no sample, so 79-81 are averaged
        Sample(8120, 7100),  # 81.2 % -> 81
        Sample(8333, 7777),  # 83.33 % -> 83
    ]
    curve = allocated_at(samples, 10, points=(50, 80, 90))
    assert curve == {"50": 45.5, "80": 70.5, "90": None}


def test_allocation_percent_is_rounded_to_two_decimals_before_the_mean() -> None:
    # 3 GPUs: 1000/3000 = 33.333 % -> 33.33; 2000/3000 = 66.667 % -> 66.67.
    samples = [Sample(3000, 1000), Sample(3000, 2000)]
    assert allocated_at(samples, 3, points=(100,)) == {"100": 50.0}


# -- the run: what arrives, what fits, what fails ------------------------------------------------


# Two nodes of 2 GPUs. In this order: 3 GPUs fit no node; 2 GPUs fill one node; two shares of
# 0.7 cannot share a device, so each opens one of the other node's GPUs; then a whole GPU fits
# nowhere, and a CPU-only pod still fits.
TINY_NODES = [node("node-a", 2), node("node-b", 2)]
TINY_PODS = [
    pod("three", 3),
    pod("two", 2),
    pod("share-1", 1, 700),
    pod("share-2", 1, 700),
    pod("one", 1),
    pod("cpu", 0),
]


@pytest.mark.parametrize("config", [GREEDY, SOLVER], ids=["greedy", "solver"])
def test_online_allocation_on_a_tiny_cluster_is_what_it_is_by_hand(config: EngineConfig) -> None:
    run = run_trace(TraceCluster(TINY_NODES), TINY_PODS, 1, config)
    # Arrived: 3, 2, 0.7, 0.7, 1, 0 GPUs, failed pods included.
    assert [s.arrived_milli for s in run.samples] == [0, 3000, 5000, 5700, 6400, 7400, 7400]
    assert [s.allocated_milli for s in run.samples] == [0, 0, 2000, 2700, 3400, 3400, 3400]
    assert run.failed == 2
    where = placed(run.final)
    assert set(where) == {"two", "share-1", "share-2", "cpu"}
    assert where["share-1"] == where["share-2"] != where["two"]
    # 3.4 of 4 GPUs once 185 % has arrived.
    assert allocated_at(run.samples, 4, points=(185,)) == {"185": 85.0}


def test_in_batch_mode_what_the_cycle_did_not_bind_has_failed() -> None:
    run = run_trace(TraceCluster(TINY_NODES), TINY_PODS, len(TINY_PODS), GREEDY)
    assert run.samples == [Sample(0, 0), Sample(7400, 3400)]
    assert run.failed == 2
    assert len(run.cycle_seconds) == 1
    assert run.final is not None
    assert all(p.phase is PodPhase.BOUND for p in run.final.pods)
    assert len(run.final.pod_groups) == 4  # the failed pods' groups leave with them


def test_shares_of_one_device_add_up_to_at_most_one_gpu() -> None:
    pods = [pod("half", 1, 500), pod("third", 1, 300), pod("fifth", 1, 200), pod("tenth", 1, 100)]
    run = run_trace(TraceCluster([node("solo", 1)]), pods, 1, GREEDY)
    assert run.final is not None
    assert set(placed(run.final)) == {"half", "third", "fifth"}
    [device] = {p.gpu_groups for p in run.final.pods}
    assert len(device) == 1
    assert sum(p.gpu.portion for p in run.final.pods) == 1
    assert run.samples[-1].allocated_milli == MILLI


def test_a_share_is_parsed_as_a_gpu_fraction_and_whole_gpus_as_devices() -> None:
    cluster = TraceCluster([node("solo", 8)])
    share, _ = cluster.arriving(pod("s", 1, 460), 0)
    assert share.gpu.portion == Fraction(46, 100)
    assert share.gpu.whole == 0
    whole, group = cluster.arriving(pod("w", 4), 1)
    assert whole.gpu.whole == 4
    assert whole.request.cpu == 2000
    assert whole.request.memory == 4096 * 2**20
    assert whole.group == group.key
    assert group.min_member == 1
    assert cluster.nodes[0].label("nvidia.com/gpu.product") == "T4"


@pytest.mark.parametrize("config", [GREEDY, SOLVER], ids=["greedy", "solver"])
def test_a_pod_constrained_to_gpu_models_never_lands_on_another(config: EngineConfig) -> None:
    nodes = [node("x-1", 4, "X"), node("x-2", 4, "X"), node("y-1", 1, "Y")]
    pods = [
        pod("y-whole", 1, 1000, "Y"),
        pod("y-share", 1, 500, "Y", "Z"),  # Y's only GPU is taken: fails though X is free
        pod("y-or-x", 2, 1000, "Y", "X"),
        pod("any", 1),
        pod("x-share", 1, 300, "X"),
    ]
    run = run_trace(TraceCluster(nodes), pods, 1, config)
    where = placed(run.final)
    assert where["y-whole"] == "y-1"
    assert "y-share" not in where
    assert where["y-or-x"].startswith("x-")
    assert where["x-share"].startswith("x-")
    assert run.failed == 1


def test_pod_lists_are_read_with_gpu_models_split_and_the_column_optional(tmp_path: Path) -> None:
    with_spec = tmp_path / "with.csv"
    with_spec.write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos\n"
        "p0,1000,2048,1,500,V100M16|V100M32,LS\n"
        "p1,8000,4096,2,1000,,BE\n",
        encoding="utf-8",
    )
    without = tmp_path / "without.csv"
    without.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np2,0,0,0,0\n", "utf-8")
    assert read_pods(with_spec) == [
        TracePod("p0", 1000, 2048, 1, 500, ("V100M16", "V100M32")),
        TracePod("p1", 8000, 4096, 2, 1000, ()),
    ]
    assert read_pods(without) == [TracePod("p2", 0, 0, 0, 0, ())]
    broken = tmp_path / "broken.csv"
    broken.write_text("name,cpu_milli,num_gpu\np,1,1\n", "utf-8")
    with pytest.raises(ValueError, match="memory_mib, gpu_milli"):
        read_pods(broken)


# -- consolidation plans ---------------------------------------------------------------------


def _moved(victim_to: str, big_to: str) -> Snapshot:
    """A 1-GPU pod on node-a moved to `victim_to` to make room for a 2-GPU pod on `big_to`."""
    cluster = TraceCluster([node("node-a", 2), node("node-b", 1)])
    victim, victim_group = cluster.arriving(pod("victim", 1), 0)
    big, big_group = cluster.arriving(pod("big", 2), 1)
    victim = dataclasses.replace(victim, phase=PodPhase.BOUND, node="node-a")
    state = Snapshot(
        cluster.nodes, (victim, big), (victim_group, big_group), (cluster.queue,), START
    )
    plan = CycleResult(
        bindings=(),
        groups=Map(),
        queues={},
        report=SolverReport("greedy", "not-run", Fraction(0), Fraction(0), Fraction(0), 0),
        evictions=(
            Eviction(victim.key, victim.group, "node-a", Action.CONSOLIDATE, "Moved", big.group),
        ),
        pipelined=(
            PipelinedPod(victim.key, victim.group, victim_to, ()),
            PipelinedPod(big.key, big.group, big_to, ()),
        ),
    )
    return carried_out(state, plan)


def test_a_consolidation_plan_is_carried_out_as_planned() -> None:
    state = _moved(victim_to="node-b", big_to="node-a")
    assert {p.name.split("-", 1)[1]: (p.phase, p.node) for p in state.pods} == {
        "victim": (PodPhase.BOUND, "node-b"),
        "big": (PodPhase.BOUND, "node-a"),
    }


def test_a_consolidation_plan_that_overfills_a_node_is_refused() -> None:
    with pytest.raises(AssertionError, match="node-a: GPUs"):
        _moved(victim_to="node-a", big_to="node-a")


def test_an_overfull_node_is_reported() -> None:
    cluster = TraceCluster([node("node-a", 1)])
    pods = []
    for index in range(2):
        arrived, _ = cluster.arriving(pod(f"p{index}", 1, 600), index)
        pods.append(
            dataclasses.replace(arrived, phase=PodPhase.BOUND, node="node-a", gpu_groups=("dev",))
        )
    state = Snapshot(cluster.nodes, tuple(pods), (), (cluster.queue,), START)
    assert overcommitted(state) == ["node-a: device dev"]
    assert overcommitted(dataclasses.replace(state, pods=state.pods[:1])) == []


# -- published results, seeds ------------------------------------------------------------------


def test_published_results_are_the_means_the_openb_readme_states() -> None:
    published = read_published(DEFAULT_PUBLISHED, "openb_pod_list_default", 1.3)
    assert published["06-FGD"]["100"] == 95.23
    assert published["06-FGD"]["130"] == 95.39
    assert published["05-BestFit"]["100"] == 92.86
    assert published["05-BestFit"]["130"] == 93.08
    assert set(published["01-Random"]) == {"50", "80", "90", "100", "110", "120", "130"}
    assert read_published(DEFAULT_PUBLISHED, "openb_pod_list_gpushare100", 1.3) == {}


def test_seeds_are_read_as_ranges_and_lists() -> None:
    assert parse_seeds("42-51") == list(range(42, 52))
    assert parse_seeds("42,43") == [42, 43]
    assert parse_seeds("42-44,50") == [42, 43, 44, 50]
    for bad in ("51-42", "x", "42-"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_seeds(bad)


@pytest.mark.parametrize(
    ("stem", "gpu_pods", "shares", "multi_gpu", "constrained"),
    [
        ("gpushare100", 7064, 7064, 0, 0),
        ("multigpu50", 7973, 3078, 984, 0),
        ("gpuspec33", 7064, 3078, 75, 2388),
    ],
)
def test_the_other_shipped_pod_lists_are_what_their_readme_says(
    stem: str, gpu_pods: int, shares: int, multi_gpu: int, constrained: int
) -> None:
    pods = read_pods(DEFAULT_PODS.with_name(f"openb_pod_list_{stem}.csv"))
    asking = [pod for pod in pods if pod.num_gpu]
    assert len(asking) == gpu_pods
    assert sum(1 for pod in asking if pod.num_gpu == 1 and pod.gpu_milli < 1000) == shares
    assert sum(1 for pod in asking if pod.num_gpu > 1) == multi_gpu
    assert sum(1 for pod in asking if pod.gpu_spec) == constrained


def test_a_batch_whose_solver_answer_ties_greedys_counts_a_tie() -> None:
    # Three whole-GPU pods on two one-GPU nodes: the greedy pass places two (so the model
    # is built: a cycle greedy placed whole does not build it), the solver no more.
    pods = [pod("a"), pod("b"), pod("c")]
    run = run_trace(TraceCluster([node("n1", 1), node("n2", 1)]), pods, 3, SOLVER)
    assert run.answers == {"greedy": 1}
    assert run.ties == 1
    assert run_trace(TraceCluster([node("n1", 1), node("n2", 1)]), pods, 3, GREEDY).ties == 0
