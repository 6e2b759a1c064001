"""Glue between the cycle and the solver: build the collapsed model, warm-start it, solve, decode, repair.

The repair step gives the greedy pass whatever the decoded answer left: gangs the
solver did not admit get a second chance in leftover capacity, and gangs that the
decoder could not seat (per-node CPU or memory, which the model checks per class)
are retried the same way. The result is then validated by the caller.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from kai.engine import scalars
from kai.engine.budget import QueueBudget
from kai.engine.capacity import NodeCapacity
from kai.engine.eligibility import EligibilityIndex
from kai.engine.gangs import GangRequest, pod_resources
from kai.engine.greedy import AllocationOutcome, index_after
from kai.engine.job_order import gang_order_key
from kai.engine.model import REPRODUCIBLE_WALL_FACTOR, EngineConfig, Queue
from kai.engine.resources import exact_sum
from kai.engine.scalars import Scalars
from kai.engine.solver.cap_refusals import refused_only_by_caps
from kai.engine.solver.decode import decode
from kai.engine.solver.isolated import solve_in_child
from kai.engine.solver.model import AllocationModel, ModelInput
from kai.engine.solver.shapes import NodeClass, Shape, build_classes, modelled, shape_of
from kai.engine.solver.solve import (
    GREEDY_PROVED,
    add_greedy_hint,
    in_process,
    selection_of,
    solve,
)
from kai.engine.solver.topology_terms import (
    domain_choices,
    domain_key,
    member_of,
    rules_for_model,
    topology_nodes,
)
from kai.engine.topology import GroupRules, TopologyIndex

GreedyRunner = Callable[
    [Mapping[str, NodeCapacity], list[GangRequest], QueueBudget], AllocationOutcome
]


@dataclass(frozen=True)
class Optimized:
    outcome: AllocationOutcome
    status: str
    gpu_bound: Fraction


def optimize(
    gangs: Sequence[GangRequest],
    capacity: Mapping[str, NodeCapacity],
    queues: Mapping[str, Queue],
    budget: QueueBudget,
    eligible_for: EligibilityIndex,
    greedy: AllocationOutcome,
    config: EngineConfig,
    memory_mib: int,
    run_greedy: GreedyRunner,
    topology: TopologyIndex | None = None,
    greedy_only: Collection[str] = (),
) -> Optimized | None:
    """`greedy_only`: gangs the model leaves out (inter-pod affinity concerns them, which
    it does not see); like the pods it cannot model, the repair places them after the
    decoded answer."""
    rules_of = {g.key: rules_for_model(g, topology) for g in gangs}
    modelled_gangs = sorted(
        (
            g
            for g in gangs
            if all(modelled(p) for p in (*g.core, *g.elastic))
            and rules_of[g.key] is not False
            and g.key not in greedy_only
        ),
        key=gang_order_key,
    )
    if refused_only_by_caps(modelled_gangs, greedy, memory_mib):
        return Optimized(greedy, GREEDY_PROVED, gpu_upper_bound(gangs, capacity, memory_mib))
    held: list[tuple[GangRequest, GroupRules]] = []
    for g in modelled_gangs:
        found = rules_of[g.key]
        if isinstance(found, GroupRules):
            held.append((g, found))
    holding = _Holding(capacity)
    eligibility_sets: list[frozenset[str]] = []
    set_index: dict[frozenset[str], int] = {}
    shapes: list[Shape] = []
    shape_ids: dict[Shape, int] = {}
    shape_index: dict[str, int] = {}
    for gang in modelled_gangs:
        rules = rules_of[gang.key]
        for pod in (*gang.core, *gang.elastic):
            names = eligible_for.nodes_for(pod)
            if pod.scalars:
                names = holding(names, pod.scalars)
            member = ""
            if isinstance(rules, GroupRules):
                member = member_of(gang, pod)
                inside = topology_nodes(rules, pod)
                names = names if inside is None else names & inside
            if names not in set_index:
                set_index[names] = len(eligibility_sets)
                eligibility_sets.append(names)
            shape = shape_of(pod, set_index[names], member)
            if shape not in shape_ids:
                shape_ids[shape] = len(shapes)
                shapes.append(shape)
            shape_index[pod.key] = shape_ids[shape]
    used = [rule.tree.topology.name for _, rules in held for rule in rules.rules.values()]
    classes = build_classes(
        capacity,
        eligibility_sets,
        lambda cap: cap.pods > 0,
        domain_key(topology, used),
        {name for shape in shapes for name, _ in shape.scalars},
    )
    class_of_node: dict[str, NodeClass] = {n: c for c in classes for n in c.nodes}
    kai_placement = Counter(
        (class_of_node[p.node].index, shape_index[p.pod.key])
        for p in greedy.placements.values()
        if p.node in class_of_node and p.pod.key in shape_index
    )
    allocation = AllocationModel(
        ModelInput(
            modelled_gangs,
            classes,
            shapes,
            shape_index,
            queues,
            budget,
            config.placement_strategy,
            config.device_placement,
            memory_mib,
            greedy.offers,
            greedy.accepted_in_order(
                greedy.offers, {p.key: g.key for g in modelled_gangs for p in g.elastic}
            ),
            kai_placement,
            domain_choices(held, classes, shape_index, topology) if topology else (),
        )
    )
    add_greedy_hint(allocation, greedy, capacity, class_of_node)
    answer = solve(
        allocation,
        config.time_limit_seconds,
        config.solver_workers,
        config.random_seed,
        solve_in_child if config.isolate_solver else in_process,
        REPRODUCIBLE_WALL_FACTOR if config.reproducible else 1.0,
    )
    if answer is None:
        return None
    bound = gpu_upper_bound(gangs, capacity, memory_mib)
    if answer.status == GREEDY_PROVED or all(
        answer.value(var) == value for var, value in selection_of(allocation, greedy)
    ):
        # Greedy's own choice, or proved as good where it counts most: decoded, the answer
        # would be greedy's at best (a tie keeps greedy's).
        return Optimized(greedy, answer.status, bound)
    offered = set(greedy.offered)
    order = [*greedy.offered, *(g.key for g in modelled_gangs if g.key not in offered)]
    kai_nodes = {key: placement.node for key, placement in greedy.placements.items()}
    decoded = decode(allocation, answer, capacity, order, kai_nodes)
    outcome = AllocationOutcome(dict(decoded.placements), list(decoded.admitted), {})
    # Repair: leftover capacity goes to gangs the decoded answer did not place.
    ledger = budget.copy()
    index = index_after(capacity, config, decoded.placements.values())
    admitted = set(decoded.admitted)
    ledger.add_many(
        (gang.group, pod_resources(pod, memory_mib))
        for gang in gangs
        for pod in (
            *(gang.core if gang.key in admitted else ()),
            *gang.elastic,
        )
        if pod.key in decoded.placements
    )
    leftovers = [
        GangRequest(
            g.group,
            () if g.key in admitted else g.core,
            tuple(p for p in g.elastic if p.key not in decoded.placements),
            g.active,
            g.pending,
            0,
            growth=g.growth,
        )
        for g in gangs
        if g.key not in admitted or any(p.key not in decoded.placements for p in g.elastic)
    ]
    repaired = run_greedy(index.capacity, leftovers, ledger)
    outcome.placements.update(repaired.placements)
    outcome.admitted.extend(repaired.admitted)
    outcome.refusals.update(repaired.refusals)
    return Optimized(outcome, answer.status, bound)


class _Holding:
    """The nodes of a set whose allocatable holds a pod's scalar resources at all: a node
    without an RDMA device never takes a pod that asks for one, so the model's node classes
    keep the two kinds of node apart (whether one is free is the decoder's check)."""

    def __init__(self, capacity: Mapping[str, NodeCapacity]) -> None:
        self._capacity = capacity
        self._known: dict[tuple[frozenset[str], Scalars], frozenset[str]] = {}

    def __call__(self, names: frozenset[str], asks: Scalars) -> frozenset[str]:
        found = self._known.get((names, asks))
        if found is None:
            found = self._known[names, asks] = frozenset(
                name
                for name in names
                if scalars.shortage(asks, dict(self._capacity[name].node.scalars)) is None
            )
        return found


def gpu_upper_bound(
    gangs: Sequence[GangRequest], capacity: Mapping[str, NodeCapacity], memory_mib: int
) -> Fraction:
    """No answer can place more GPUs than are free, nor more than the gangs ask for.

    A `gpu-memory` pod counts its MiB against the smallest device (`memory_mib`), so on a
    bigger device it counts for more GPUs than the share of the device it takes: at most
    `1 - memory_mib / largest device` more per GPU it counts for. Other pods count exactly
    the devices they take, so the free devices plus that surplus of the `gpu-memory` pods
    bound what can be placed.
    """
    free: list[Fraction] = []
    largest = memory_mib
    for cap in capacity.values():
        if not cap.node.ready or cap.node.unschedulable:
            continue
        device = cap.node.gpu_memory_mib
        shared = exact_sum(Fraction(device - used, device) for used in cap.shared.values())
        if cap.whole_gpus > 0 or shared > 0:
            free += (Fraction(cap.whole_gpus), shared)
            largest = max(largest, device)
    asked: list[Fraction] = []
    by_memory: list[Fraction] = []
    for pod in (p for g in gangs for p in (*g.core, *g.elastic)):
        gpus = pod_resources(pod, memory_mib).gpu
        asked.append(gpus)
        if pod.gpu.memory_mib:
            by_memory.append(gpus)
    surplus = exact_sum(by_memory) * (1 - Fraction(memory_mib, largest))
    return min(exact_sum(free) + surplus, exact_sum(asked))
