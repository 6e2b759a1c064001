"""Topology-constrained gangs through the whole cycle: required and preferred levels, aliases,
sub-groups, pinned domains, explanations, and the validator's own check."""

from __future__ import annotations

import dataclasses
import random

import pytest

from kai.engine.cycle import CycleResult, run_cycle
from kai.engine.model import (
    EngineConfig,
    Node,
    Placement,
    Pod,
    PodGroup,
    Snapshot,
    SubGroup,
    Topology,
    TopologyConstraint,
    TopologyLevel,
)
from kai.engine.topology import INVALID_TOPOLOGY, UNSCHEDULABLE
from kai.engine.validator import ProposedBinding, validate
from kai.simulate.scenario import load_scenario
from tests.unit.engine.builders import NOW, group, node, pod, queue, snapshot

FAST = EngineConfig(time_limit_seconds=0.5, solver_workers=1)
GREEDY = EngineConfig(time_limit_seconds=0)
RACK, ZONE = "example.com/rack", "example.com/zone"
TOPOLOGY = Topology("dc", (TopologyLevel(ZONE, "zone"), TopologyLevel(RACK, "rack")))


def rack_node(name: str, zone: str, rack: str, gpus: int = 4) -> Node:
    return node(name, gpus=gpus, labels={ZONE: zone, RACK: rack})


def constrained(
    name: str,
    size: int,
    required: str | None = None,
    preferred: str | None = None,
    topology: str = "dc",
    subgroups: tuple[SubGroup, ...] = (),
) -> PodGroup:
    return dataclasses.replace(
        group(name, "q", min_member=size, subgroups=subgroups),
        topology=TopologyConstraint(topology, required, preferred),
    )


def cluster(
    nodes: list[Node],
    pods: list[Pod],
    groups: list[PodGroup],
    topologies: tuple[Topology, ...] = (TOPOLOGY,),
) -> Snapshot:
    return dataclasses.replace(
        snapshot(nodes, pods, groups, [queue("q")]), topologies=tuple(topologies)
    )


def placed(result: CycleResult, prefix: str) -> dict[str, str]:
    return {b.pod: b.node for b in result.bindings if b.pod.startswith(f"ns/{prefix}")}


def racks_of(nodes: dict[str, str], by_name: dict[str, Node]) -> set[str | None]:
    return {by_name[n].label(RACK) for n in nodes.values()}


TWO_RACKS = [
    rack_node("a1", "z1", "r1"),
    rack_node("a2", "z1", "r1"),
    rack_node("b1", "z1", "r2"),
    rack_node("b2", "z1", "r2"),
]


@pytest.mark.parametrize("config", [GREEDY, FAST], ids=["greedy", "cp-sat"])
def test_a_required_rack_keeps_the_gang_in_the_rack_that_has_room(config: EngineConfig) -> None:
    # r1 has 4 free GPUs left after a running 4-GPU pod; the gang needs 6: only r2 holds it.
    busy = pod("busy", "busy", gpus=4, node_name="a1")
    gang = [pod(f"g{i}", "g", gpus=3) for i in range(2)]
    snap = cluster(
        TWO_RACKS, [busy, *gang], [group("busy", "q"), constrained("g", 2, required="rack")]
    )
    result = run_cycle(snap, config)
    nodes = placed(result, "g")
    assert len(nodes) == 2
    assert set(nodes.values()) == {"b1", "b2"}


def test_without_the_constraint_the_same_gang_would_straddle_racks() -> None:
    """The control for the test above: the constraint is what keeps the gang together."""
    busy = pod("busy", "busy", gpus=4, node_name="b1")
    gang = [pod(f"g{i}", "g", gpus=3) for i in range(3)]
    free = cluster(TWO_RACKS, [busy, *gang], [group("busy", "q"), group("g", "q", min_member=3)])
    by_name = {n.name: n for n in TWO_RACKS}
    assert len(racks_of(placed(run_cycle(free, GREEDY), "g"), by_name)) == 2
    bound = cluster(
        TWO_RACKS, [busy, *gang], [group("busy", "q"), constrained("g", 3, required="rack")]
    )
    result = run_cycle(bound, GREEDY)
    assert placed(result, "g") == {}
    decision = result.groups["ns/g"]
    assert decision.reason == UNSCHEDULABLE
    # r1 is empty (8 GPUs, room for 2 of the 3-GPU pods); r2 has a1's 4 GPUs free.
    assert "rack" in decision.message and "3 pods and 9 GPUs in one" in decision.message
    assert "z1.r1: room for 2 of 3 pods, 8 GPUs free" in decision.message


def test_the_fullest_rack_that_fits_is_chosen() -> None:
    busy = pod("busy", "busy", gpus=2, node_name="b1")
    gang = [pod(f"g{i}", "g", gpus=2) for i in range(2)]
    snap = cluster(
        TWO_RACKS, [busy, *gang], [group("busy", "q"), constrained("g", 2, required="rack")]
    )
    nodes = placed(run_cycle(snap, GREEDY), "g")
    by_name = {n.name: n for n in TWO_RACKS}
    assert racks_of(nodes, by_name) == {"r2"}  # 6 free of 8, the fuller rack, still fits 4


def test_a_level_may_be_named_by_its_node_label_or_its_alias() -> None:
    gang = [pod(f"g{i}", "g", gpus=4) for i in range(2)]
    for level in ("rack", RACK):
        snap = cluster(TWO_RACKS, gang, [constrained("g", 2, required=level)])
        nodes = placed(run_cycle(snap, GREEDY), "g")
        assert len(racks_of(nodes, {n.name: n for n in TWO_RACKS})) == 1


def test_a_missing_topology_or_level_keeps_the_gang_pending_with_the_name() -> None:
    gang = [pod("g0", "g", gpus=1)]
    snap = cluster(TWO_RACKS, gang, [constrained("g", 1, required="rack", topology="nope")])
    decision = run_cycle(snap, GREEDY).groups["ns/g"]
    assert decision.reason == INVALID_TOPOLOGY and "'nope'" in decision.message
    snap = cluster(TWO_RACKS, gang, [constrained("g", 1, required="row")])
    decision = run_cycle(snap, GREEDY).groups["ns/g"]
    assert decision.reason == INVALID_TOPOLOGY and "'row'" in decision.message


def test_nodes_without_every_level_label_are_outside_the_topology() -> None:
    nodes = [node("bare", gpus=8), rack_node("a1", "z1", "r1", gpus=2)]
    gang = [pod(f"g{i}", "g", gpus=2) for i in range(2)]
    result = run_cycle(cluster(nodes, gang, [constrained("g", 2, required="rack")]), GREEDY)
    assert placed(result, "g") == {}
    result = run_cycle(cluster(nodes, gang, [constrained("g", 2, preferred="rack")]), GREEDY)
    assert placed(result, "g") == {}  # preferred only still needs the Topology's nodes


def test_a_preferred_rack_is_used_when_it_fits_and_given_up_when_it_does_not() -> None:
    by_name = {n.name: n for n in TWO_RACKS}
    fits = [pod(f"g{i}", "g", gpus=4) for i in range(2)]
    nodes = placed(
        run_cycle(cluster(TWO_RACKS, fits, [constrained("g", 2, preferred="rack")]), GREEDY), "g"
    )
    assert len(racks_of(nodes, by_name)) == 1
    big = [pod(f"g{i}", "g", gpus=4) for i in range(3)]
    nodes = placed(
        run_cycle(cluster(TWO_RACKS, big, [constrained("g", 3, preferred="rack")]), GREEDY), "g"
    )
    assert len(nodes) == 3 and len(racks_of(nodes, by_name)) == 2


def test_running_pods_pin_the_required_domain() -> None:
    # The gang runs one pod in r1; its new pods must join r1 though r2 is emptier.
    running = pod("g0", "g", gpus=1, node_name="a1")
    more = [pod(f"g{i}", "g", gpus=1) for i in range(1, 4)]
    snap = cluster(TWO_RACKS, [running, *more], [constrained("g", 1, required="rack")])
    nodes = placed(run_cycle(snap, GREEDY), "g")
    assert len(nodes) == 3 and set(nodes.values()) <= {"a1", "a2"}
    # With r1 full, they wait rather than leave it.
    fill = pod("fill", "fill", gpus=4, node_name="a2")
    full = [running, *more, pod("h", "h", gpus=3, node_name="a1")]
    snap = cluster(
        TWO_RACKS,
        [*full, fill],
        [constrained("g", 1, required="rack"), group("fill", "q"), group("h", "q")],
    )
    assert placed(run_cycle(snap, GREEDY), "g") == {}


def test_sub_groups_each_take_a_rack_inside_the_groups_zone() -> None:
    nodes = [
        rack_node("a1", "z1", "r1"),
        rack_node("b1", "z1", "r2"),
        rack_node("c1", "z2", "r3"),
        rack_node("d1", "z2", "r4", gpus=8),
    ]
    subgroups = tuple(
        SubGroup(name, 2, topology=TopologyConstraint("dc", "rack")) for name in ("x", "y")
    )
    gang = [pod(f"{s}{i}", "g", gpus=2, subgroup=s) for s in "xy" for i in range(2)]
    snap = cluster(nodes, gang, [constrained("g", 4, required="zone", subgroups=subgroups)])
    result = run_cycle(snap, GREEDY)
    seats = placed(result, "")
    by_name = {n.name: n for n in nodes}
    assert len(seats) == 4
    assert {by_name[n].label(ZONE) for n in seats.values()} == {"z1"} or {
        by_name[n].label(ZONE) for n in seats.values()
    } == {"z2"}
    for s in "xy":
        assert len({by_name[seats[f"ns/{s}{i}"]].label(RACK) for i in range(2)}) == 1


def test_the_validator_rejects_a_gang_split_across_required_racks() -> None:
    gang = [pod(f"g{i}", "g", gpus=4) for i in range(2)]
    snap = cluster(TWO_RACKS, gang, [constrained("g", 2, required="rack")])
    split = [ProposedBinding("ns/g0", "a1", ()), ProposedBinding("ns/g1", "b1", ())]
    assert any("span 2 domains" in p for p in validate(snap, split))
    together = [ProposedBinding("ns/g0", "a1", ()), ProposedBinding("ns/g1", "a2", ())]
    assert validate(snap, together) == []
    gone = dataclasses.replace(snap, topologies=())
    assert any("missing topology" in p for p in validate(gone, together))


def test_preemption_for_a_required_rack_evicts_inside_one_rack_only() -> None:
    # Every GPU runs a low-priority one-GPU pod, the cheapest victims on a1 and b1 (two
    # racks: an unconstrained gang evicts there); a high-priority gang needs 6 GPUs in one rack.
    low = [
        pod(f"low-{n.name}-{i}", f"low-{n.name}-{i}", gpus=1, node_name=n.name)
        for n in TWO_RACKS
        for i in range(4)
    ]
    gang = [pod(f"g{i}", "g", gpus=3) for i in range(2)]
    groups = [group(p.name, "q", priority=10) for p in low]
    high = dataclasses.replace(
        constrained("g", 2, required="rack"), priority=100, preemptible=False
    )
    result = run_cycle(cluster(TWO_RACKS, [*low, *gang], [*groups, high]), FAST)
    evicted_nodes = {next(p.node for p in low if p.key == e.pod) for e in result.evictions}
    assert len(result.evictions) == 6
    by_name = {n.name: n for n in TWO_RACKS}
    assert len({by_name[n].label(RACK) for n in evicted_nodes if n}) == 1


def test_no_eviction_when_no_rack_could_ever_hold_the_gang() -> None:
    low = [pod(f"low-{n.name}", f"low-{n.name}", gpus=4, node_name=n.name) for n in TWO_RACKS]
    gang = [pod(f"g{i}", "g", gpus=4) for i in range(3)]  # 12 GPUs in one 8-GPU rack: never
    groups = [group(p.name, "q", priority=10) for p in low]
    high = dataclasses.replace(
        constrained("g", 3, required="rack"), priority=100, preemptible=False
    )
    result = run_cycle(cluster(TWO_RACKS, [*low, *gang], [*groups, high]), FAST)
    assert result.evictions == ()
    assert result.groups["ns/g"].scheduled is False


def joint_cluster() -> Snapshot:
    """Gang a (first in KAI's order) fits either rack; KAI's fullest-first search puts it on
    h100 rack r1, the only rack gang b (h100 only) can use, and b waits. One joint choice
    places both: a on r2, b on r1."""
    nodes = [
        node(f"h{i}", gpus=4, labels={ZONE: "z1", RACK: "r1", "gpu": "h100"}) for i in range(3)
    ] + [node(f"a{i}", gpus=4, labels={ZONE: "z1", RACK: "r2", "gpu": "a100"}) for i in range(3)]
    busy = pod("busy", "busy", gpus=4, node_name="h0")
    h100 = Placement(node_selector=(("gpu", "h100"),))
    first = [pod(f"a-{i}", "a", gpus=4) for i in range(2)]
    second = [pod(f"b-{i}", "b", gpus=4, placement=h100) for i in range(2)]
    groups = [
        group("busy", "q"),
        dataclasses.replace(constrained("a", 2, required="rack"), priority=60),
        constrained("b", 2, required="rack"),
    ]
    return cluster(nodes, [busy, *first, *second], groups)


def test_the_joint_model_places_gangs_the_domain_by_domain_search_cannot() -> None:
    snap = joint_cluster()
    greedy = run_cycle(snap, GREEDY)
    assert set(placed(greedy, "a").values()) <= {"h1", "h2"} and placed(greedy, "b") == {}
    joint = run_cycle(snap, FAST)
    assert joint.report.answer == "cp-sat"
    assert set(placed(joint, "a").values()) <= {"a0", "a1", "a2"}
    assert set(placed(joint, "b").values()) == {"h1", "h2"}
    assert (
        validate(snap, [ProposedBinding(b.pod, b.node, b.gpu_groups) for b in joint.bindings]) == []
    )


@pytest.mark.parametrize("seed", range(12))
def test_random_constrained_gangs_the_solver_answer_is_always_valid(seed: int) -> None:
    """Both passes on random racks and gangs: the solver's answer never breaks a level
    (the validator would count it) and never does worse than greedy in KAI's order."""
    rng = random.Random(seed)
    nodes = [
        rack_node(f"n{z}{r}{i}", f"z{z}", f"r{r}", gpus=rng.choice([2, 4, 8]))
        for z in range(2)
        for r in range(2)
        for i in range(rng.randint(1, 3))
    ]
    pods, groups = [], [group("busy", "q")]
    for n in nodes:
        if rng.random() < 0.4:
            pods.append(
                pod(f"busy-{n.name}", "busy", gpus=rng.randint(1, n.gpus), node_name=n.name)
            )
    for g in range(rng.randint(2, 6)):
        size = rng.randint(1, 4)
        level = rng.choice(["rack", "zone", None])
        preferred = rng.choice(["rack", None]) if level != "rack" else None
        pods += [pod(f"g{g}-{i}", f"g{g}", gpus=rng.choice([1, 2, 4])) for i in range(size)]
        made = dataclasses.replace(
            constrained(
                f"g{g}",
                size,
                required=level,
                preferred=preferred or ("rack" if level is None else None),
            ),
            priority=rng.randint(40, 60),
        )
        groups.append(made)
    snap = cluster(nodes, pods, groups)
    greedy, joint = run_cycle(snap, GREEDY), run_cycle(snap, FAST)
    assert joint.report.validator_violations == 0
    for result in (greedy, joint):
        proposed = [ProposedBinding(b.pod, b.node, b.gpu_groups) for b in result.bindings]
        assert validate(snap, proposed) == []
    assert joint.accepted >= greedy.accepted


def test_a_required_gang_preempts_into_a_fully_packed_rack() -> None:
    """KAI#1591 (kai-semantics §12): KAI filters domains by free room before it looks at
    victims, so a topology-required gang never preempts into a packed rack. kai measures
    each domain on the room the victims leave: 44 one-GPU pods leave and the 11-pod gang
    of four-GPU pods waits for them, whole, in the rack."""
    nodes = [rack_node(f"n{i}", "z1", "r1", gpus=4) for i in range(11)]
    low = [
        pod(f"low-{i}-{j}", f"low-{i}-{j}", gpus=1, node_name=f"n{i}")
        for i in range(11)
        for j in range(4)
    ]
    gang = [pod(f"g{i}", "g", gpus=4) for i in range(11)]
    groups = [group(p.name, "q", priority=10) for p in low]
    high = dataclasses.replace(
        constrained("g", 11, required="rack"), priority=100, preemptible=False
    )
    result = run_cycle(cluster(nodes, [*low, *gang], [*groups, high]), FAST)
    assert len(result.evictions) == 44 and len(result.pipelined) == 11


def test_a_segmented_pytorchjob_keeps_each_segment_in_one_rack() -> None:
    """docs/topology/segments.md through kai simulate's loader: 4 workers in segments of 2,
    each segment required on one rack. Each rack has three 1-GPU nodes: placed in order
    alone, workers 2 and 3 would land on r1's last node and r2's first."""
    rack_label = "example.com/rack"
    nodes = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {rack_label: rack}},
            "status": {
                "allocatable": {
                    "cpu": "16",
                    "memory": "64Gi",
                    "pods": "110",
                    "nvidia.com/gpu": gpus,
                }
            },
        }
        for name, rack, gpus in (
            ("r1-a", "r1", "1"),
            ("r1-b", "r1", "1"),
            ("r1-c", "r1", "1"),
            ("r2-a", "r2", "1"),
            ("r2-b", "r2", "1"),
            ("r2-c", "r2", "1"),
        )
    ]
    worker = {
        "metadata": {
            "annotations": {
                "kai.scheduler/segment-size": "2",
                "kai.scheduler/topology": "racks",
                "kai.scheduler/segment-topology-required-placement": rack_label,
            }
        },
        "spec": {
            "schedulerName": "kai-scheduler",
            "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
        },
    }
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {
            "name": "pt",
            "namespace": "ml",
            "uid": "uid-pt",
            "labels": {"kai.scheduler/queue": "q"},
        },
        "spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 4, "template": worker}}},
    }
    documents = [
        *nodes,
        {
            "apiVersion": "kai.scheduler/v1alpha1",
            "kind": "Topology",
            "metadata": {"name": "racks"},
            "spec": {"levels": [{"nodeLabel": rack_label}]},
        },
        {
            "apiVersion": "scheduling.run.ai/v2",
            "kind": "Queue",
            "metadata": {"name": "q"},
            "spec": {
                "resources": {k: {"quota": -1, "limit": -1} for k in ("gpu", "cpu", "memory")}
            },
        },
        job,
    ]
    snap = load_scenario([("cluster.yaml", d) for d in documents], NOW)
    result = run_cycle(snap, FAST)
    by_pod = {b.pod: b.node for b in result.bindings}
    assert len(by_pod) == 4
    for segment in (("ml/pt-worker-0", "ml/pt-worker-1"), ("ml/pt-worker-2", "ml/pt-worker-3")):
        assert len({by_pod[p].split("-")[0] for p in segment}) == 1, by_pod
