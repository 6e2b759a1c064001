"""Scalar resources (an RDMA device, ephemeral storage) decide where a pod may go, in every
path that seats one: the greedy pass, the CP-SAT model's decoding, both victim searches and
the validator."""

from __future__ import annotations

from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from kai.api.parse import parse_pod
from kai.engine.accounting import divisible_total
from kai.engine.cycle import run_cycle
from kai.engine.evictions.budget import SearchBudget
from kai.engine.evictions.decisions import Action
from kai.engine.evictions.greedy_search import greedy_search
from kai.engine.evictions.rules import victim_options
from kai.engine.evictions.victim_model import cp_sat_search
from kai.engine.evictions.victim_order import VictimOrder
from kai.engine.model import EngineConfig, Snapshot
from kai.engine.scalars import in_units, shortage_message
from kai.engine.validator import ProposedBinding, validate
from tests.unit.engine.builders import group, node, pod, queue, snapshot
from tests.unit.evictions.helpers import eviction_state, preemptor

RDMA = "rdma/hca"
AMD = "amd.com/gpu"
GREEDY = EngineConfig(time_limit_seconds=0)
SOLVER = EngineConfig(time_limit_seconds=2.0, solver_workers=1)


def test_a_pod_goes_only_where_its_resource_is_free_and_the_next_is_told_why() -> None:
    """n0 is the fuller node (KAI's bin-packing's first choice) but has no RDMA device."""
    snap = snapshot(
        [node("n0", gpus=8), node("n1", gpus=8, scalars={RDMA: 1})],
        [
            pod("busy-0", "busy", 4, node_name="n0"),
            pod("a-0", "a", 1, scalars={RDMA: 1}),
            pod("b-0", "b", 1, scalars={RDMA: 1}),
            pod("plain-0", "plain", 1),
        ],
        [group(name, "q") for name in ("busy", "a", "b", "plain")],
        [queue("q")],
    )
    for config in (GREEDY, SOLVER):
        result = run_cycle(snap, config)
        bound = {binding.pod: binding.node for binding in result.bindings}
        [took] = [key for key in ("ns/a-0", "ns/b-0") if key in bound]
        assert (bound[took], sorted(bound)) == ("n1", sorted([took, "ns/plain-0"]))
        [waiting] = [key for key in ("ns/a", "ns/b") if result.groups[key].reason]
        assert result.groups[waiting].message == (
            f"pod {waiting}-0 fits no node after this cycle's placements ahead of it in queue "
            f"order: 2 node(s): insufficient {RDMA} (needs 1, free 0)"
        )


def test_a_gang_that_asks_for_more_devices_than_are_free_is_told_the_sum() -> None:
    """Each worker fits the node with the one RDMA device; the two together fit nowhere."""
    snap = snapshot(
        [node("n0", gpus=8, scalars={RDMA: 1}), node("n1", gpus=8)],
        [pod(f"w-{i}", "w", 1, scalars={RDMA: 1}) for i in range(2)],
        [group("w", "q", min_member=2)],
        [queue("q")],
    )
    for config in (GREEDY, SOLVER):
        result = run_cycle(snap, config)
        assert result.bindings == ()
        assert result.groups["ns/w"].message == (
            f"gang of 2 pods needs 2 {RDMA} together; 1 free after this cycle's placements "
            "ahead of it in queue order"
        )


def test_the_solver_still_packs_gangs_that_ask_for_one() -> None:
    """A gang of 4, 4, 3, 3, 3, 3 GPUs fits two 10-GPU nodes only as CP-SAT packs it (the
    greedy pass strands a 3); two of the 3-GPU pods ask for the one RDMA device of a node."""
    sizes = (4, 4, 3, 3, 3, 3)
    gang = [
        pod(f"g-{i}", "g", gpus, scalars={RDMA: 1} if i in (2, 3) else None)
        for i, gpus in enumerate(sizes)
    ]
    snap = snapshot(
        [
            node("a", gpus=10, scalars={RDMA: 1}),
            node("b", gpus=10, scalars={RDMA: 1}),
            node("c", gpus=2),
            node("d", gpus=2),
        ],
        gang,
        [group("g", "q", min_member=6)],
        [queue("q")],
    )
    result = run_cycle(snap, SOLVER)
    bound = {binding.pod: binding.node for binding in result.bindings}
    assert result.report.answer == "cp-sat"
    assert sorted(bound[f"ns/g-{i}"] for i in (2, 3)) == ["a", "b"]
    assert {bound[f"ns/g-{i}"] for i in range(6)} == {"a", "b"}
    assert run_cycle(snap, GREEDY).bindings == ()  # greedy alone strands a 3


def test_the_model_does_not_promise_a_class_more_devices_than_its_nodes_have() -> None:
    """Two 10-GPU nodes with one RDMA device each are one node class to the model. The
    first gang in KAI's order asks for a GPU and a device on each of three pods, which two
    nodes cannot give; the second (4, 4, 3, 3, 3, 3 GPUs) fits them only as CP-SAT packs it.
    Counting no devices, the model admitted the first gang (3 GPUs, over the class's 20),
    which decoding then dropped, and kept the second out for it: nothing was bound."""
    first = [pod(f"first-{i}", "first", 1, scalars={RDMA: 1}) for i in range(3)]
    second = [pod(f"second-{i}", "second", gpus) for i, gpus in enumerate((4, 4, 3, 3, 3, 3))]
    snap = snapshot(
        [node("a", gpus=10, scalars={RDMA: 1}), node("b", gpus=10, scalars={RDMA: 1})],
        [*first, *second],
        [group("first", "q", min_member=3, priority=100), group("second", "q", min_member=6)],
        [queue("q")],
    )
    result = run_cycle(snap, SOLVER)
    assert result.report.answer == "cp-sat"
    assert {binding.pod for binding in result.bindings} == {p.key for p in second}
    assert run_cycle(snap, GREEDY).bindings == ()


def test_the_model_counts_terabytes_of_storage_over_many_nodes() -> None:
    """In thousandths of a byte, 64 TiB of ephemeral storage on each of 200 nodes is past
    2**63 summed over their class: the model counts it in what the pods ask in common
    (1 TiB here), else it could not be built and the cycle failed. The 16-GPU pod fits no
    node, so greedy's answer leaves work and the model is built."""
    storage = "ephemeral-storage"
    nodes = [node(f"n{i:03}", gpus=8, scalars={storage: 64 * 2**40}) for i in range(200)]
    pods = [pod(f"p{i}-0", f"p{i}", 1, scalars={storage: 2**40}) for i in range(300)]
    groups = [group(f"p{i}", "q") for i in range(300)]
    snap = snapshot(
        nodes,
        [*pods, pod("big-0", "big", 16)],
        [*groups, group("big", "q")],
        [queue("q")],
    )
    result = run_cycle(snap, SOLVER)
    assert result.report.status in ("OPTIMAL", "FEASIBLE", "greedy-proved")
    assert {binding.pod for binding in result.bindings} == {p.key for p in pods}


def _held_device() -> Snapshot:
    """n0 has three idle GPUs and its RDMA device held by a low-priority pod; n1 has no
    device and four low-priority pods. The urgent pod asks for a GPU and the device."""
    return snapshot(
        [node("n0", gpus=4, scalars={RDMA: 1}), node("n1", gpus=4)],
        [
            pod("holder-0", "holder", 1, node_name="n0", scalars={RDMA: 1}),
            *(pod(f"low{i}-0", f"low{i}", 1, node_name="n1") for i in range(4)),
            pod("urgent-0", "urgent", 1, scalars={RDMA: 1}),
        ],
        [
            group("holder", "q"),
            *(group(f"low{i}", "q") for i in range(4)),
            group("urgent", "q", priority=100),
        ],
        [queue("q")],
    )


def test_both_victim_searches_free_the_device_not_just_a_gpu() -> None:
    state = eviction_state(_held_device())
    who = preemptor(state, "ns/urgent")
    options = victim_options(state, Action.PREEMPT, who)
    greedy = greedy_search(state, Action.PREEMPT, who, options, SearchBudget(1.0))
    answer = cp_sat_search(
        state, Action.PREEMPT, who, options, VictimOrder(state, options), None, SearchBudget(1.0), 1
    )
    for found in (greedy, answer.scenario):
        assert found is not None
        assert sorted(found.evicted) == ["ns/holder"]
        assert [node for _, node, _ in found.seats] == ["n0"]


def test_the_cycle_preempts_for_the_device() -> None:
    for config in (GREEDY, SOLVER):
        result = run_cycle(_held_device(), config)
        assert [eviction.pod for eviction in result.evictions] == ["ns/holder-0"]


def test_the_validator_counts_what_a_new_pod_asks_for() -> None:
    """Over the node's device: refused. A pod that asks for none on a node another scheduler
    over-committed: not the engine's doing, and allowed."""
    snap = snapshot(
        [node("n0", gpus=4, scalars={RDMA: 1}), node("n1", gpus=4, scalars={RDMA: 1})],
        [
            pod("a-0", "a", 1, node_name="n0", scalars={RDMA: 1}),
            pod("b-0", "b", 1, scalars={RDMA: 1}),
            pod("over-0", "over", 1, node_name="n1", scalars={RDMA: 2}),
            pod("plain-0", "plain", 1),
        ],
        [group(name, "q") for name in ("a", "b", "over", "plain")],
        [queue("q")],
    )
    assert validate(snap, [ProposedBinding("ns/b-0", "n0", ())]) == [
        f"node n0: {RDMA} 2000 thousandths requested of 1000"
    ]
    assert validate(snap, [ProposedBinding("ns/plain-0", "n1", ())]) == []


def test_an_amd_device_goes_where_one_is_free_and_counts_as_a_gpu() -> None:
    """As KAI counts `amd.com/gpu` with `nvidia.com/gpu` against quotas; placed as a scalar
    resource, it never lands on a node of NVIDIA devices (which KAI's one count allows)."""
    manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "team"},
        "spec": {
            "schedulerName": "kai-scheduler",
            "containers": [{"name": "c", "resources": {"limits": {AMD: "2"}}}],
        },
    }
    parsed = parse_pod(manifest, "team/pg")
    assert parsed.gpu.scalar_gpus == 2
    assert parsed.gpu.gpus_on(40_000) == Fraction(2)
    snap = snapshot(
        [node("nvidia", gpus=8), node("amd", gpus=0, scalars={AMD: 8})],
        [pod("one-0", "one", scalars={AMD: 1}), pod("two-0", "two", scalars={AMD: 2})],
        [group("one", "q"), group("two", "q")],
        [queue("q", gpu_limit=2)],
    )
    assert divisible_total(snap).gpu == 16
    result = run_cycle(snap, GREEDY)
    assert [(b.pod, b.node, b.gpus) for b in result.bindings] == [("ns/one-0", "amd", Fraction(1))]
    assert result.groups["ns/two"].reason == "OverLimit"


def test_amounts_are_worded_in_the_resources_units() -> None:
    assert in_units(RDMA, 2000) == "2"
    assert in_units(RDMA, 500) == "0.5"
    assert in_units("ephemeral-storage", 200 * 2**30 * 1000) == "200Gi"
    assert in_units("hugepages-2Mi", 3 * 2**20 * 1000) == "3Mi"
    assert in_units("ephemeral-storage", 1_500_000) == "1500"
    assert shortage_message(((RDMA, 1000),), {}) == f"insufficient {RDMA} (needs 1, free 0)"
    assert shortage_message(((RDMA, 1000),), {RDMA: 1000}) is None


@st.composite
def _clusters(draw: st.DrawFn) -> Snapshot:
    """Up to four nodes, some with RDMA devices; pods on them and pending, some asking for
    devices, at random priorities (so that some preempt)."""
    nodes = [
        node(
            f"n{i}",
            gpus=2,
            scalars={RDMA: devices} if (devices := draw(st.integers(0, 2))) else None,
        )
        for i in range(draw(st.integers(1, 4)))
    ]
    pods, groups = [], []
    for index in range(draw(st.integers(0, 6))):
        where = draw(st.sampled_from([None, *(n.name for n in nodes)]))
        asks = draw(st.integers(0, 2))
        pods.append(
            pod(
                f"g{index}-0",
                f"g{index}",
                draw(st.integers(0, 1)),
                node_name=where,
                scalars={RDMA: asks} if asks else None,
            )
        )
        groups.append(group(f"g{index}", "q", priority=draw(st.sampled_from([50, 100]))))
    size = draw(st.integers(1, 3))
    pods += [
        pod(f"gang-{i}", "gang", 1, scalars={RDMA: 1} if draw(st.booleans()) else None)
        for i in range(size)
    ]
    groups.append(group("gang", "q", min_member=size, priority=100))
    return snapshot(nodes, pods, groups, [queue("q")])


@settings(max_examples=150, deadline=None)
@given(_clusters())
def test_no_answer_asks_a_node_for_more_than_it_has(snap: Snapshot) -> None:
    """Counted here once more: on every node a binding goes to, the devices its pods ask
    for, bound before or now, are at most the node's (the cycle also validates). An evicted
    pod still holds its device in the cycle that evicts it."""
    allocatable = {n.name: dict(n.scalars).get(RDMA, 0) for n in snap.nodes}
    pods = {p.key: p for p in snap.pods}
    for config in (GREEDY, SOLVER):
        result = run_cycle(snap, config)
        on = {p.key: p.node for p in snap.pods if p.node}
        on.update({b.pod: b.node for b in result.bindings})
        for target in {b.node for b in result.bindings if dict(pods[b.pod].scalars)}:
            used = sum(
                dict(pods[key].scalars).get(RDMA, 0) for key, at in on.items() if at == target
            )
            assert used <= allocatable[target], (target, used, result.bindings)
